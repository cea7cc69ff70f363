"""Alpha-beta costs of collectives, seconds, on a group's links.

Model: a message of S bytes over a link of bandwidth B and latency alpha takes alpha + S / B
(Hockney; Thakur, Rabenseifner and Gropp 2005, "Optimization of collective communication
operations in MPICH", IJHPCA 19(1), sec. 2). S is always the full buffer of one rank: the
reduced buffer of an all-reduce, the gathered output of an all-gather, the input of a
reduce-scatter, the send buffer of an all-to-all. Bandwidth factors are NCCL's bus-bandwidth
factors: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n (NVIDIA nccl-tests,
doc/PERFORMANCE.md). Achievable bandwidth is the link peak times a named efficiency
(``LinkEfficiency``). Groups that span scale-up domains run hierarchically (intra-domain
reduce-scatter, inter-domain all-reduce, intra-domain all-gather; the Ultra-Scale Playbook,
Tazi et al. 2025, "Data parallelism" and NCCL's tree/ring hierarchy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from explorer.comm.topology import GroupPlacement

CollectiveKind = Literal[
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "point-to-point"
]
COLLECTIVE_KINDS: tuple[CollectiveKind, ...] = (
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "point-to-point",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkEfficiency:
    """Achievable share of link peak bandwidth for NCCL collectives (bus bandwidth)."""

    scale_up: float = 0.8
    """Share of NVLink peak that NCCL reaches. Source: nccl-tests all_reduce_perf busbw on
    DGX A100, about 230-240 GB/s of 300 GB/s per direction (NVIDIA nccl-tests PERFORMANCE.md
    and DGX A100 user guide figures), i.e. ~0.8."""
    scale_out: float = 0.8
    """Share of the NIC's line rate that NCCL reaches across nodes. An assumption: InfiniBand
    NDR/HDR reach ~90% of line rate in ib_write_bw, NCCL's multi-node busbw ~80%."""

    def __post_init__(self) -> None:
        for name in ("scale_up", "scale_out"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} efficiency must be in (0, 1], got {value!r}")


DEFAULT_LINK_EFFICIENCY = LinkEfficiency()
"""The defaults above."""


def ring_all_reduce_s(size_bytes: float, n: int, bytes_per_s: float, latency_s: float) -> float:
    """All-reduce of ``size_bytes`` on a ring of n ranks, s.

    Source: Thakur et al. 2005 sec. 4.4 (ring = reduce-scatter + all-gather):
    2(n-1) alpha + 2 (n-1)/n S / B.
    """
    if n <= 1 or size_bytes <= 0:
        return 0.0
    return 2 * (n - 1) * latency_s + 2 * (n - 1) / n * size_bytes / bytes_per_s


def tree_all_reduce_s(size_bytes: float, n: int, bytes_per_s: float, latency_s: float) -> float:
    """All-reduce on NCCL's double binary tree of n ranks (pipelined reduce + broadcast), s.

    Source: Sanders, Speck and Traeff 2009 (two-tree broadcast); NCCL 2.4 blog "Massively
    scale your deep learning training with NCCL 2.4": 2 log2(n) alpha + 2 S / B.
    """
    if n <= 1 or size_bytes <= 0:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * latency_s + 2 * size_bytes / bytes_per_s


def ring_all_gather_s(size_bytes: float, n: int, bytes_per_s: float, latency_s: float) -> float:
    """All-gather of a ``size_bytes`` output on a ring of n ranks, s.

    Source: Thakur et al. 2005 sec. 4.1: (n-1) alpha + (n-1)/n S / B.
    """
    if n <= 1 or size_bytes <= 0:
        return 0.0
    return (n - 1) * latency_s + (n - 1) / n * size_bytes / bytes_per_s


def ring_reduce_scatter_s(size_bytes: float, n: int, bytes_per_s: float, latency_s: float) -> float:
    """Reduce-scatter of a ``size_bytes`` input on a ring of n ranks, s (mirror of all-gather).

    Source: Thakur et al. 2005 sec. 4.5: (n-1) alpha + (n-1)/n S / B.
    """
    return ring_all_gather_s(size_bytes, n, bytes_per_s, latency_s)


def all_to_all_s(size_bytes: float, n: int, bytes_per_s: float, latency_s: float) -> float:
    """All-to-all of a ``size_bytes`` send buffer among n ranks on one kind of link, s.

    Each rank keeps 1/n and sends (n-1)/n. Thakur et al. 2005 sec. 4.3 charge (n-1) alpha for
    pairwise exchange; NCCL (grouped ncclSend/ncclRecv) and DeepEP post every peer at once, so
    one alpha is charged.
    """
    if n <= 1 or size_bytes <= 0:
        return 0.0
    return latency_s + (n - 1) / n * size_bytes / bytes_per_s


def point_to_point_s(size_bytes: float, bytes_per_s: float, latency_s: float) -> float:
    """One message of ``size_bytes`` to a peer, s. Source: Hockney's model, alpha + S / B."""
    if size_bytes <= 0:
        return 0.0
    return latency_s + size_bytes / bytes_per_s


def _fast(group: GroupPlacement, eff: LinkEfficiency) -> tuple[float, float]:
    return group.fast_bytes_per_s * eff.scale_up, group.fast_latency_s


def _fabric(group: GroupPlacement, eff: LinkEfficiency) -> tuple[float, float]:
    return group.fabric_bytes_per_s * eff.scale_out, group.fabric_latency_s


def all_reduce_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """All-reduce over ``group``, s: inside a domain the faster of ring and tree (NCCL's
    tuner picks tree or NVLS for small messages, e.g. decode-time TP all-reduces, where the
    ring's 2(n-1) latency terms dominate); across domains hierarchical.

    Across D domains with r ranks each: reduce-scatter over r (fast links), all-reduce of the
    S/r shard among D peers on the fabric (the faster of ring and tree, as NCCL picks),
    all-gather over r. Source: module docstring (hierarchical all-reduce).
    """
    if group.size <= 1:
        return 0.0
    fast_bw, fast_lat = _fast(group, eff)
    if not group.crosses_domains:
        return min(
            ring_all_reduce_s(size_bytes, group.size, fast_bw, fast_lat),
            tree_all_reduce_s(size_bytes, group.size, fast_bw, fast_lat),
        )
    r, d = group.ranks_per_domain, group.num_domains
    fabric_bw, fabric_lat = _fabric(group, eff)
    shard = size_bytes / r
    inter = min(
        ring_all_reduce_s(shard, d, fabric_bw, fabric_lat),
        tree_all_reduce_s(shard, d, fabric_bw, fabric_lat),
    )
    intra = 2 * ring_all_gather_s(size_bytes, r, fast_bw, fast_lat)
    return intra + inter


def all_gather_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """All-gather of a ``size_bytes`` output over ``group``, s (hierarchical across domains).

    Across domains: all-gather of S/r among the D domain peers on the fabric, then of S over
    the r ranks of the domain. Source: module docstring.
    """
    if group.size <= 1:
        return 0.0
    fast_bw, fast_lat = _fast(group, eff)
    if not group.crosses_domains:
        return ring_all_gather_s(size_bytes, group.size, fast_bw, fast_lat)
    r, d = group.ranks_per_domain, group.num_domains
    fabric_bw, fabric_lat = _fabric(group, eff)
    inter = ring_all_gather_s(size_bytes / r, d, fabric_bw, fabric_lat)
    return inter + ring_all_gather_s(size_bytes, r, fast_bw, fast_lat)


def reduce_scatter_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """Reduce-scatter of a ``size_bytes`` input over ``group``, s (mirror of all-gather)."""
    return all_gather_s(size_bytes, group, eff)


def all_to_all_group_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """All-to-all of a ``size_bytes`` send buffer over ``group``, s.

    Of a rank's buffer, (g - r)/g leaves the domain through its NIC and (r - 1)/g stays on the
    fast links; both proceed at once, so the slower sets the time. Source: module docstring;
    DeepEP (deepseek-ai/DeepEP README: NVLink and RDMA forwarding run concurrently).
    """
    g = group.size
    if g <= 1 or size_bytes <= 0:
        return 0.0
    fast_bw, fast_lat = _fast(group, eff)
    if not group.crosses_domains:
        return all_to_all_s(size_bytes, g, fast_bw, fast_lat)
    fabric_bw, fabric_lat = _fabric(group, eff)
    r = group.ranks_per_domain
    inter = (g - r) / g * size_bytes / fabric_bw
    intra = (r - 1) / g * size_bytes / fast_bw
    return fabric_lat + max(inter, intra)


def remote_domains_per_token(top_k: int, num_domains: int, max_domains: int | None) -> float:
    """Expected scale-up domains other than its own that one token's top-k experts sit in.

    Experts spread evenly over D domains, picked independently: D (1 - (1 - 1/D)^k) distinct
    domains, capped by node-limited routing (DeepSeek-V3 report sec. 2.1.2), of which a share
    (D - 1)/D is remote.
    """
    d = num_domains
    if d <= 1:
        return 0.0
    distinct = d * (1 - (1 - 1 / d) ** top_k)
    if max_domains is not None:
        distinct = min(distinct, float(max_domains))
    return distinct * (d - 1) / d


def deduplicated_all_to_all_s(
    size_bytes: float,
    top_k: int,
    group: GroupPlacement,
    eff: LinkEfficiency,
    max_domains: int | None,
) -> float:
    """A DeepEP-style dispatch of a buffer of ``top_k`` copies per token over ``group``, s.

    Each token crosses the fabric once per remote domain (``remote_domains_per_token``), then
    an NVLink forward fans the copies out inside the domain; both run at once (DeepEP README).
    """
    if group.size <= 1 or size_bytes <= 0:
        return 0.0
    if not group.crosses_domains:
        return all_to_all_group_s(size_bytes, group, eff)
    fast_bw, _ = _fast(group, eff)
    fabric_bw, fabric_lat = _fabric(group, eff)
    per_copy = size_bytes / top_k
    remote = remote_domains_per_token(top_k, group.num_domains, max_domains)
    inter = remote * per_copy / fabric_bw
    intra = (group.ranks_per_domain - 1) / group.ranks_per_domain * size_bytes / fast_bw
    return fabric_lat + max(inter, intra)


def send_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """One point-to-point message to the neighbouring rank of ``group``, s.

    The neighbour is across the fabric when the group spans domains (pipeline stages usually
    do); each GPU uses its own NIC.
    """
    if group.size <= 1:
        return 0.0
    bw, lat = _fabric(group, eff) if group.crosses_domains else _fast(group, eff)
    return point_to_point_s(size_bytes, bw, lat)


def collective_s(
    kind: CollectiveKind, size_bytes: float, group: GroupPlacement, eff: LinkEfficiency
) -> float:
    """Seconds of one collective of ``kind`` on ``size_bytes`` over ``group``."""
    if kind == "all-reduce":
        return all_reduce_s(size_bytes, group, eff)
    if kind == "all-gather":
        return all_gather_s(size_bytes, group, eff)
    if kind == "reduce-scatter":
        return reduce_scatter_s(size_bytes, group, eff)
    if kind == "all-to-all":
        return all_to_all_group_s(size_bytes, group, eff)
    return send_s(size_bytes, group, eff)
