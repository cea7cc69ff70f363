"""One collective's time on one kind of link of a group: the fabric models, measured sweeps.

Bus bandwidth of a link = its line rate per GPU (after oversubscription, for the fabric) x the
fabric's large-message share x the user's multiplier (``LinkEfficiency``). Sources: the
fabric presets (``explorer.comm.fabrics``); the formulas per function.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Final

from explorer.comm.fabrics import (
    Fabric,
    interpolated_share,
    load_fabric,
    monotone_busbw,
    protocol_s,
    ramp,
)
from explorer.comm.topology import GroupPlacement
from explorer.specs import MeasuredBusbw

DEFAULT_SCALE_UP: Final = "nvlink4"
"""Scale-up fabric of a placement that names none (``GpuSpec.scale_up_fabric``'s default)."""
DEFAULT_SCALE_OUT: Final = "infiniband-ndr"
"""Scale-out fabric of a placement that names none (``ClusterSpec.scale_out_fabric``'s)."""


def scale_up_of(group: GroupPlacement) -> Fabric:
    """The group's scale-up fabric model."""
    return group.scale_up_fabric or load_fabric(DEFAULT_SCALE_UP)


def scale_out_of(group: GroupPlacement) -> Fabric:
    """The group's scale-out fabric model."""
    return group.scale_out_fabric or load_fabric(DEFAULT_SCALE_OUT)


def intra_ring_s(
    size_bytes: float, wire_bytes: float, steps: int, group: GroupPlacement, scale: float
) -> float:
    """A ring collective moving ``wire_bytes`` bus bytes per rank in ``steps`` steps on the
    fast links, s.

    With a published sweep: bus bytes / (bus bandwidth x the sweep's share at this size), plus
    NCCL's LL step latency for each step beyond the sweep's own (larger rings); NCCL's LL
    protocol where it is faster (small messages, when the sweep forced another algorithm).
    Without one: NCCL's fastest protocol. Source: explorer.comm.fabrics; NVIDIA/nccl tuning.cc.
    """
    fabric = group.scale_up_fabric or load_fabric(DEFAULT_SCALE_UP)
    busbw = group.fast_bytes_per_s * fabric.large_message_share * scale
    if not fabric.ramp_sizes_bytes:
        return protocol_s(fabric.ring, wire_bytes, steps, busbw)
    ll = fabric.ring[0]
    extra = max(0, steps - fabric.ramp_steps) * ll.step_latency_s
    published = wire_bytes / (busbw * ramp(fabric, size_bytes)) + extra
    small = (
        ll.base_latency_s + steps * ll.step_latency_s + wire_bytes / (busbw * ll.bandwidth_share)
    )
    return min(published, small)


def nvls_s(size_bytes: float, group: GroupPlacement, scale: float) -> float:
    """An NVLink SHARP all-reduce of ``size_bytes`` inside a domain, s (infinity without NVLS).

    The switch reduces and multicasts: each GPU sends and receives the buffer once, at the
    fabric's NVLS algorithm bandwidth, whatever the group size; the sweep's share by size.
    Source: NVIDIA/nccl-tests#212 (NVLS algbw ~275 GB/s on 8 H100, busbw ~480 GB/s); NCCL
    tuning.cc (NVLS latency does not grow with the rank count).
    """
    fabric = group.scale_up_fabric or load_fabric(DEFAULT_SCALE_UP)
    if not group.nvls or fabric.nvls_share <= 0:
        return math.inf
    algbw = group.fast_bytes_per_s * fabric.nvls_share * scale
    return size_bytes / (algbw * ramp(fabric, size_bytes))


def intra_all_reduce_s(size_bytes: float, n: int, group: GroupPlacement, scale: float) -> float:
    """All-reduce (or the reduce-scatter + all-gather of a hierarchical one: the same bus bytes
    and steps) of ``size_bytes`` over n ranks of one domain, s: ring or NVLS, the faster."""
    if n <= 1:
        return 0.0
    ring = intra_ring_s(size_bytes, 2 * (n - 1) / n * size_bytes, 2 * (n - 1), group, scale)
    if not group.nvls:
        return ring
    return min(ring, nvls_s(size_bytes, group, scale))


def _fabric_busbw(group: GroupPlacement, fabric: Fabric, scale: float) -> float:
    return group.fabric_bytes_per_s * fabric.large_message_share * scale


@lru_cache(maxsize=1 << 14)
def _network_s(fabric: Fabric, tree: bool, wire_bytes: float, steps: int, busbw: float) -> float:
    """``protocol_s`` over the fabric's ring (or tree) protocols, cached on cheap keys (the
    fabric hashes by identity): the search asks for the same calls many times."""
    return protocol_s(fabric.tree if tree else fabric.ring, wire_bytes, steps, busbw)


def fabric_ring_s(wire_bytes: float, steps: int, group: GroupPlacement, scale: float) -> float:
    """A ring (or grouped point-to-point) step sequence across domains, each GPU on its own
    NIC, s: NCCL's fastest protocol. Source: NVIDIA/nccl tuning.cc (ring, NET latencies)."""
    fabric = group.scale_out_fabric or load_fabric(DEFAULT_SCALE_OUT)
    return _network_s(fabric, False, wire_bytes, steps, _fabric_busbw(group, fabric, scale))


def fabric_all_reduce_s(shard_bytes: float, d: int, group: GroupPlacement, scale: float) -> float:
    """All-reduce of a ``shard_bytes`` shard among d domain peers on the fabric, s.

    The fastest of NCCL's ring (2(d-1)/d of the shard, 2(d-1) steps), double binary tree
    (twice the shard, 2 log2 d levels) and, where the fabric and cluster have it, SHARP (the
    switch reduces: the shard once each way). Sources: NVIDIA/nccl tuning.cc (ring, tree,
    CollNet latencies and shares); NCCL 2.4 blog (double binary trees); Graham et al. 2016,
    "Scalable Hierarchical Aggregation Protocol (SHArP)", COMHPC (in-network reduction).
    """
    if d <= 1 or shard_bytes <= 0:
        return 0.0
    fabric = group.scale_out_fabric or load_fabric(DEFAULT_SCALE_OUT)
    busbw = _fabric_busbw(group, fabric, scale)
    best = _network_s(fabric, False, 2 * (d - 1) / d * shard_bytes, 2 * (d - 1), busbw)
    if fabric.tree:
        levels = 2 * math.ceil(math.log2(d))
        best = min(best, _network_s(fabric, True, 2 * shard_bytes, levels, busbw))
    if group.sharp and fabric.sharp_latency_s is not None:
        best = min(best, fabric.sharp_latency_s + shard_bytes / busbw)
    return best


def flat_ring_s(
    size_bytes: float,
    wire_bytes: float,
    steps: tuple[int, int],
    group: GroupPlacement,
    scales: tuple[float, float],
) -> float:
    """One ring through every rank of a group that spans domains, s: NCCL's default across
    nodes. Its links run at once, so the slowest sets the bus bandwidth: the fast links (at
    this size's share of the sweep) or the domain's r NICs together, r x the per-GPU NIC
    figure. ``steps`` is (all steps, steps that cross the fabric); the fabric's protocols set
    the latencies (the NVLink LL step latency for steps that stay inside). ``scales`` are
    (scale-up, scale-out) multipliers. Sources: NVIDIA/nccl tuning.cc (ring latency:
    intra steps x intraLat + inter steps x interLat); NVIDIA/nccl#812 (DGX A100, 8 x 200 Gb/s:
    192 GB/s all-reduce busbw across nodes, the NICs' sum)."""
    up, out = scale_up_of(group), scale_out_of(group)
    fast = group.fast_bytes_per_s * up.large_message_share * scales[0] * ramp(up, size_bytes)
    nics = group.ranks_per_domain * group.fabric_bytes_per_s * out.large_message_share
    busbw = min(fast, nics * scales[1])
    inside = (steps[0] - steps[1]) * up.ring[0].step_latency_s
    return inside + _network_s(out, False, wire_bytes, steps[1], busbw)


def all_to_all_link_s(
    size_bytes: float,
    intra_bytes: float,
    inter_bytes: float,
    group: GroupPlacement,
    scales: tuple[float, float],
) -> float:
    """An all-to-all of a ``size_bytes`` buffer sending ``intra_bytes`` per rank on the fast
    links and ``inter_bytes`` through the NIC at once, s: the slower of the two, one latency
    each (every peer posted together). ``scales`` are (scale-up, scale-out) multipliers.
    Source: DeepEP README (NVLink and RDMA forwarding overlap); NCCL grouped send/receive."""
    intra = intra_ring_s(size_bytes, intra_bytes, 1, group, scales[0]) if intra_bytes > 0 else 0.0
    inter = fabric_ring_s(inter_bytes, 1, group, scales[1]) if inter_bytes > 0 else 0.0
    return max(intra, inter)


def send_link_s(size_bytes: float, group: GroupPlacement, scale: float) -> float:
    """One message of ``size_bytes`` to a neighbour, s: NCCL's fastest protocol for one step on
    the fabric (across domains) or the fast links. Source: NVIDIA/nccl tuning.cc."""
    if group.crosses_domains:
        return fabric_ring_s(size_bytes, 1, group, scale)
    fabric = scale_up_of(group)
    busbw = group.fast_bytes_per_s * fabric.large_message_share * scale
    return _network_s(fabric, False, size_bytes, 1, busbw)


def _bus_factor(kind: str, n: int) -> float:
    """Bus bytes per byte of buffer (nccl-tests PERFORMANCE.md)."""
    if kind == "all-reduce":
        return 2 * (n - 1) / n
    return 1.0 if kind == "point-to-point" else (n - 1) / n


@lru_cache(maxsize=256)
def _sweep(measured: MeasuredBusbw) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """(sizes, monotone shares, best busbw) of a measured sweep."""
    values = monotone_busbw(measured.sizes_bytes, measured.busbw_bytes_per_s)
    return measured.sizes_bytes, tuple(v / values[-1] for v in values), values[-1]


def measured_s(kind: str, size_bytes: float, group: GroupPlacement, scale: float) -> float | None:
    """Seconds of a collective from the cluster's measured sweeps, or None when none matches
    its kind and placement (inside a domain or across). The sweep of the nearest group size is
    used: bus bandwidth is defined not to depend on the rank count (nccl-tests
    PERFORMANCE.md); bus bytes / measured busbw at this size (``interpolated_share``)."""
    found = [
        m for m in group.measured if m.kind == kind and m.crosses_domains == group.crosses_domains
    ]
    if not found:
        return None
    near = min(found, key=lambda m: abs(math.log(m.group_size / group.size)))
    sizes, shares, best = _sweep(near)
    busbw = best * interpolated_share(sizes, shares, size_bytes) * scale
    return _bus_factor(kind, group.size) * size_bytes / busbw
