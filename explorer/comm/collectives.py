"""Costs of collectives, seconds, on a group's links, by message size.

S is always the full buffer of one rank: the reduced buffer of an all-reduce, the gathered
output of an all-gather, the input of a reduce-scatter, the send buffer of an all-to-all (the
size column of nccl-tests). Bus bytes per rank are NCCL's bus-bandwidth factors times S:
all-reduce 2(n-1)/n, all-gather, reduce-scatter and all-to-all (n-1)/n (NVIDIA nccl-tests,
doc/PERFORMANCE.md). On each kind of link (``explorer.comm.fabrics``) a collective takes NCCL's
fastest algorithm and protocol: latency + bus bytes / bus bandwidth (Hockney's alpha-beta
model, as NCCL's own tuner, src/graph/tuning.cc), where the bus bandwidth is the fabric's
published large-message share of the line rate and, where a published sweep exists, the share
of it reached at that size (``fabrics.ramp``). NVLink SHARP all-reduces inside a domain when the
cluster has it; InfiniBand SHARP reduces across domains in the switches. Groups that span
scale-up domains run hierarchically (intra-domain reduce-scatter, inter-domain all-reduce,
intra-domain all-gather; the Ultra-Scale Playbook, Tazi et al. 2025, "Data parallelism", and
NCCL's NVLS-tree / tree hierarchy). A measured sweep of the cluster (``ClusterSpec.
measured_busbw``) replaces the model for the collectives it matches. The pure alpha-beta forms
(``ring_all_reduce_s`` and the others) are kept as the textbook reference (Thakur, Rabenseifner
and Gropp 2005, "Optimization of collective communication operations in MPICH", IJHPCA 19(1)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from explorer.comm.links import (
    all_to_all_link_s,
    fabric_all_reduce_s,
    fabric_ring_s,
    flat_ring_s,
    intra_all_reduce_s,
    intra_ring_s,
    measured_s,
    send_link_s,
)
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
    """Multipliers on the bus bandwidth the fabric models give (1 keeps the published figures).

    What NCCL reaches by message size comes from ``presets/fabrics`` (the scale-up fabric of the
    GPU, the scale-out fabric of the cluster); these scale it for a cluster measured to be
    slower (below 1) or faster (above 1) than those published figures.
    """

    scale_up: float = 1.0
    """Multiplier on the scale-up links' achievable bus bandwidth (NVLink, Infinity Fabric)."""
    scale_out: float = 1.0
    """Multiplier on the scale-out fabric's achievable bus bandwidth (InfiniBand, RoCE)."""

    def __post_init__(self) -> None:
        for name in ("scale_up", "scale_out"):
            value = getattr(self, name)
            if not 0 < value <= 2:
                raise ValueError(f"{name} link efficiency must be in (0, 2], got {value!r}")


DEFAULT_LINK_EFFICIENCY = LinkEfficiency()
"""The defaults above: the published figures as they are."""


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


def all_reduce_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """All-reduce over ``group``, s: inside a domain the faster of the ring and NVLS; across
    domains the faster of one ring through every rank and the hierarchical form.

    Hierarchical, across D domains with r ranks each: reduce-scatter over r (fast links; NVLS
    where the cluster has it), all-reduce of the S/r shard among D peers on the fabric (the
    fastest of ring, tree and SHARP, as NCCL picks), all-gather over r (NCCL's NVLS-tree and
    tree). Source: module docstring; ``links.flat_ring_s`` for the ring.
    """
    if group.size <= 1 or size_bytes <= 0:
        return 0.0
    if not group.crosses_domains:
        return intra_all_reduce_s(size_bytes, group.size, group, eff.scale_up)
    n, r, d = group.size, group.ranks_per_domain, group.num_domains
    inter = fabric_all_reduce_s(size_bytes / r, d, group, eff.scale_out)
    hierarchical = intra_all_reduce_s(size_bytes, r, group, eff.scale_up) + inter
    steps, scales = (2 * (n - 1), 2 * (d - 1)), (eff.scale_up, eff.scale_out)
    ring = flat_ring_s(size_bytes, 2 * (n - 1) / n * size_bytes, steps, group, scales)
    return min(hierarchical, ring)


def all_gather_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """All-gather of a ``size_bytes`` output over ``group``, s.

    Across domains the faster of one ring through every rank (NCCL's ring) and the
    hierarchical form: all-gather of S/r among the D domain peers on the fabric, then of S
    over the r ranks of the domain. Source: module docstring.
    """
    n = group.size
    if n <= 1 or size_bytes <= 0:
        return 0.0
    if not group.crosses_domains:
        return intra_ring_s(size_bytes, (n - 1) / n * size_bytes, n - 1, group, eff.scale_up)
    r, d = group.ranks_per_domain, group.num_domains
    shard = size_bytes / r
    inter = fabric_ring_s((d - 1) / d * shard, d - 1, group, eff.scale_out)
    intra = intra_ring_s(size_bytes, (r - 1) / r * size_bytes, r - 1, group, eff.scale_up)
    hierarchical = inter + (intra if r > 1 else 0.0)
    steps, scales = (n - 1, d - 1), (eff.scale_up, eff.scale_out)
    ring = flat_ring_s(size_bytes, (n - 1) / n * size_bytes, steps, group, scales)
    return min(hierarchical, ring)


def reduce_scatter_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """Reduce-scatter of a ``size_bytes`` input over ``group``, s (mirror of all-gather)."""
    return all_gather_s(size_bytes, group, eff)


def all_to_all_group_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """All-to-all of a ``size_bytes`` send buffer over ``group``, s.

    Of a rank's buffer, (g - r)/g leaves the domain through its NIC and (r - 1)/g stays on the
    fast links; both proceed at once, so the slower sets the time. Every peer is posted at
    once (NCCL's grouped send/receive, DeepEP), so one latency. Source: module docstring;
    DeepEP (deepseek-ai/DeepEP README: NVLink and RDMA forwarding run concurrently).
    """
    g = group.size
    if g <= 1 or size_bytes <= 0:
        return 0.0
    r = group.ranks_per_domain if group.crosses_domains else g
    inter = (g - r) / g * size_bytes
    scales = (eff.scale_up, eff.scale_out)
    return all_to_all_link_s(size_bytes, (r - 1) / g * size_bytes, inter, group, scales)


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
    remote = remote_domains_per_token(top_k, group.num_domains, max_domains)
    inter = remote * size_bytes / top_k
    r = group.ranks_per_domain
    scales = (eff.scale_up, eff.scale_out)
    return all_to_all_link_s(size_bytes, (r - 1) / r * size_bytes, inter, group, scales)


def send_s(size_bytes: float, group: GroupPlacement, eff: LinkEfficiency) -> float:
    """One point-to-point message to the neighbouring rank of ``group``, s.

    The neighbour is across the fabric when the group spans domains (pipeline stages usually
    do); each GPU uses its own NIC.
    """
    if group.size <= 1 or size_bytes <= 0:
        return 0.0
    return send_link_s(size_bytes, group, eff.scale_out if group.crosses_domains else eff.scale_up)


def collective_s(
    kind: CollectiveKind, size_bytes: float, group: GroupPlacement, eff: LinkEfficiency
) -> float:
    """Seconds of one collective of ``kind`` on ``size_bytes`` over ``group``: a measured
    sweep of the cluster where one matches, else the fabric model."""
    return _collective_s(kind, size_bytes, group, eff.scale_up, eff.scale_out)


@lru_cache(maxsize=1 << 16)
def _collective_s(
    kind: CollectiveKind, size_bytes: float, group: GroupPlacement, up: float, out: float
) -> float:
    """``collective_s`` cached on cheap keys (placements hash by identity, multipliers are
    floats): a search times the same calls on the same cached placements for many layouts."""
    eff = LinkEfficiency(scale_up=up, scale_out=out)
    if group.measured and group.size > 1 and size_bytes > 0:
        scale = out if group.crosses_domains else up
        found = measured_s(kind, size_bytes, group, scale)
        if found is not None:
            return found
    if kind == "all-reduce":
        return all_reduce_s(size_bytes, group, eff)
    if kind == "all-gather":
        return all_gather_s(size_bytes, group, eff)
    if kind == "reduce-scatter":
        return reduce_scatter_s(size_bytes, group, eff)
    if kind == "all-to-all":
        return all_to_all_group_s(size_bytes, group, eff)
    return send_s(size_bytes, group, eff)
