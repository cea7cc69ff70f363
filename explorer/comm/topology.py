"""Process groups on the topology: which ranks share a scale-up domain, what links they see.

Rank numbering: a layout's ranks are numbered 0..world-1 in mixed radix over the mesh axes,
innermost (fastest-varying) first, in ``Layout.mesh_order`` (default tp, cp, ep, dp, pp). Rank r
sits in scale-up domain r // K (K = ``ClusterSpec.domain_size``: 8 on an HGX board, 72 in an
NVL72 rack). Source: Megatron-Core ``parallel_state.RankGenerator`` (order "tp-cp-ep-dp-pp").
Under segmented allocation (``ClusterSpec.segment_allocation``) K is the job's segment instead:
a segment of whole nodes sits in one domain and the next segment in another
(``placement_domain_size``), so 256 GPUs on NVL72 racks run as four 64-GPU segments.

Expert parallelism is folded, as Megatron-Core does: the dense layers use the axes tp, cp, dp,
pp (ep has size 1 there); the expert layers re-cut the same tp x cp x dp ranks of each pipeline
stage into etp (expert tensor parallel), ep and edp (expert data parallel) in the same order,
with ``tp`` read as etp, ``dp`` as edp and ``cp`` folded into edp. With the default order and
etp = 1, an EP group is EP consecutive ranks in the order (tp, cp, dp): with tp = 8 and ep = 8
it is the TP group. Source: Megatron-Core ``parallel_state.initialize_model_parallel``
(``expert_decoder_rank_generator``: tp=expert_tensor_parallel_size, ep, dp=expert_dp, cp=1).

Links. A group whose ranks all sit in one domain talks over the scale-up links (NVLink /
NVSwitch: every GPU has its full bandwidth to the switch, whatever the other groups do). A group
spanning D domains with r ranks in each runs hierarchically (see ``collectives``): r ranks per
domain split the data over the fast links, then each exchanges its 1/r share with its peers in
the other domains through its own NIC. NIC sharing: all groups of one axis run their collective
at the same time, but every GPU belongs to exactly one group of each axis and has one NIC's
share of the node's scale-out bandwidth (``scale_out_bytes_per_s`` per GPU, divided by the
fabric's oversubscription), so groups of one axis never share a NIC; collectives of different
axes are charged one after another, so they do not share either. A node with fewer NICs than
GPUs is described by a lower per-GPU figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from explorer.comm.fabrics import Fabric, load_fabric
from explorer.mesh.dims import MeshDims
from explorer.specs import ClusterSpec, Layout, MeasuredBusbw

GroupName = Literal["tp", "cp", "ep", "dp", "pp", "dp_cp", "etp", "edp"]
"""Process groups: the mesh axes, dp_cp (ranks holding the same dense weights: gradient
reduction and ZeRO sharding), etp and edp (expert tensor and expert data parallel)."""

_DENSE_AXES = {"dp_cp": ("cp", "dp")}
_EXPERT_GROUPS = {"ep": ("ep",), "etp": ("etp",), "edp": ("edp",)}


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class GroupPlacement:
    """Where one process group's ranks sit and which links its collectives use. Compared and
    hashed by identity (placements are cached per layout shape), so timing caches keyed on
    one stay cheap."""

    group: GroupName
    """Which process group."""
    size: int
    """Ranks in the group (1 means no communication)."""
    ranks_per_domain: int
    """Ranks of the group that share a scale-up domain (worst group of the axis)."""
    num_domains: int
    """Scale-up domains the group spans (worst group of the axis)."""
    fast_bytes_per_s: float
    """Scale-up link bandwidth per GPU, one direction, bytes/s (link peak)."""
    fabric_bytes_per_s: float
    """Scale-out bandwidth per GPU, one direction, after oversubscription, bytes/s (peak)."""
    fast_latency_s: float
    """Latency of one message on the scale-up links, s."""
    fabric_latency_s: float
    """Latency of one message across the fabric, s (shown; the collective model takes NCCL's
    protocol latencies from the fabric models)."""
    scale_up_fabric: Fabric | None = None
    """Model of the fast links (``presets/fabrics``); None means NVLink 4."""
    scale_out_fabric: Fabric | None = None
    """Model of the scale-out fabric; None means InfiniBand NDR."""
    nvls: bool = False
    """Whether all-reduces inside a domain may use NVLink SHARP."""
    sharp: bool = False
    """Whether all-reduces across domains may use InfiniBand SHARP."""
    measured: tuple[MeasuredBusbw, ...] = ()
    """The cluster's measured sweeps (``ClusterSpec.measured_busbw``)."""

    @property
    def crosses_domains(self) -> bool:
        """Whether any collective of this group leaves its scale-up domain."""
        return self.num_domains > 1

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Peak bus bandwidth per rank of a ring over the group, bytes/s.

        Inside a domain the fast links; across domains the r ranks of each domain drive r NICs
        in parallel, so the bus bandwidth is r x the per-GPU fabric figure, capped by the fast
        links. Source: NCCL tests PERFORMANCE.md (bus bandwidth); the NIC rule of this module.
        """
        if not self.crosses_domains:
            return self.fast_bytes_per_s
        return min(self.fast_bytes_per_s, self.ranks_per_domain * self.fabric_bytes_per_s)

    @property
    def latency_s(self) -> float:
        """Latency of the slowest hop a message of this group takes, s."""
        return self.fabric_latency_s if self.crosses_domains else self.fast_latency_s


def dense_sizes(layout: Layout) -> dict[str, int]:
    """Degree of each mesh axis in the dense layers (ep folded: size 1; ``MeshDims``)."""
    return MeshDims.of(layout).dense_sizes()


def expert_sizes(layout: Layout) -> dict[str, int]:
    """Degree of each axis in the expert layers: etp x ep x edp = tp x cp x dp per stage.

    Source: Megatron-Core ``initialize_model_parallel`` (expert_data_parallel_size).
    """
    return MeshDims.of(layout).expert_sizes()  # ValueError where ep x etp does not fold


def expert_order(mesh_order: tuple[str, ...]) -> tuple[str, ...]:
    """The expert layers' axis order: tp read as etp, dp as edp, cp folded into edp."""
    rename = {"tp": "etp", "dp": "edp", "ep": "ep", "pp": "pp"}
    return tuple(rename[a] for a in mesh_order if a != "cp")


@lru_cache(maxsize=4096)
def _span(sizes: tuple[int, ...], members: tuple[bool, ...], domain_size: int) -> tuple[int, int]:
    """(fewest ranks per domain, most domains) over all groups formed by the member axes.

    ``sizes`` are in placement order, innermost first; a group varies the member axes and
    fixes the others. Exact for any sizes (counts every rank), cached per shape.
    """
    aligned = _aligned_span(sizes, members, domain_size)
    if aligned is not None:
        return aligned
    world = math.prod(sizes)
    outermost = max(i for i, member in enumerate(members) if member) if any(members) else 0
    period = math.prod(sizes[: outermost + 1])
    if period % domain_size == 0:
        # Groups and domains both repeat every ``period`` ranks: the first period is the rest.
        sizes, members, world = sizes[: outermost + 1], members[: outermost + 1], period
    ranks = np.arange(world)
    grid = ranks.reshape(sizes[::-1])  # C order: the innermost axis varies fastest
    # Each rank's group id: the rank with its member axes' coordinates zeroed.
    corner = grid[tuple(slice(0, 1) if member else slice(None) for member in members[::-1])]
    group_id = np.broadcast_to(corner, grid.shape).reshape(-1)
    if world % domain_size == 0:
        # Domains are runs of ``domain_size`` ranks: count each group once per run it is in.
        rows = np.sort(group_id.reshape(-1, domain_size), axis=1)
        first = np.ones(rows.shape, dtype=bool)
        first[:, 1:] = rows[:, 1:] != rows[:, :-1]
        per_group_domains = np.bincount(rows[first])
    else:
        pairs = np.unique(group_id * world + ranks // domain_size)
        per_group_domains = np.bincount(pairs // world)
    per_group_domains = per_group_domains[per_group_domains > 0]
    group_size = int(np.prod([s for s, m in zip(sizes, members, strict=True) if m]))
    most = int(per_group_domains.max())
    return max(1, group_size // most), most


def _aligned_span(
    sizes: tuple[int, ...], members: tuple[bool, ...], domain_size: int
) -> tuple[int, int] | None:
    """``_span`` without counting ranks where domains are whole blocks of one axis: the domain
    is stride_k x q ranks, axis k the one it ends in and q dividing its size (or it holds the
    world). Every group then spans the same domains: within one, the member axes inside it
    (axis k's q values if it is a member); across them, axis k's size / q blocks if it is a
    member and every member axis outside. None where the domain cuts an axis unevenly (the
    count over ranks decides)."""

    def members_of(axes: range) -> int:
        return math.prod(sizes[i] for i in axes if members[i])

    stride = 1
    for k, size in enumerate(sizes):
        if domain_size < stride * size:  # the domain ends inside axis k
            q, rest = divmod(domain_size, stride)
            if rest or size % q:
                return None
            inside = members_of(range(k)) * (q if members[k] else 1)
            across = (size // q if members[k] else 1) * members_of(range(k + 1, len(sizes)))
            return inside, across
        stride *= size
    return members_of(range(len(sizes))), 1  # one domain holds every rank


def placement_domain_size(cluster: ClusterSpec, world: int) -> int:
    """Consecutive ranks of a ``world``-GPU job that share a scale-up domain.

    Without segmented allocation the cluster's domain. With it (Slurm topology/block,
    ``--segment``) the job's nodes come in equal segments, each inside one domain: the job's
    node count where it fits in a domain, else the largest divisor of it that does. Source:
    Megatron-Bridge scripts/performance/utils/executors.py (GB200 NVL72: --segment = nodes up
    to 18 nodes, else the largest divisor of the node count <= 18); Slurm topology/block.
    """
    domain, per_node = cluster.domain_size, cluster.gpus_per_node
    if not cluster.segment_allocation or domain <= per_node:
        return domain
    nodes, domain_nodes = math.ceil(world / per_node), domain // per_node
    if nodes <= domain_nodes:
        return nodes * per_node
    segment = max(d for d in range(1, domain_nodes + 1) if nodes % d == 0)
    return segment * per_node


@lru_cache(maxsize=16384)
def _placement(
    group: GroupName,
    order: tuple[str, ...],
    sizes: tuple[tuple[str, int], ...],
    axes: tuple[str, ...],
    cluster: ClusterSpec,
) -> GroupPlacement:
    size_of = dict(sizes)
    ordered = tuple(size_of[a] for a in order)
    members = tuple(a in axes for a in order)
    size = math.prod(size_of[a] for a in axes)
    domain = placement_domain_size(cluster, math.prod(ordered))
    per_domain, domains = _span(ordered, members, domain)
    up, out, nvls, sharp = placement_links(cluster)
    return GroupPlacement(
        group=group,
        size=size,
        ranks_per_domain=min(per_domain, size),
        num_domains=domains,
        fast_bytes_per_s=cluster.fast_bytes_per_s,
        fabric_bytes_per_s=cluster.fabric_bytes_per_s,
        fast_latency_s=cluster.intra_node_latency_s,
        fabric_latency_s=cluster.inter_node_latency_s,
        scale_up_fabric=up,
        scale_out_fabric=out,
        nvls=nvls,
        sharp=sharp,
        measured=cluster.measured_busbw,
    )


@lru_cache(maxsize=256)
def placement_links(cluster: ClusterSpec) -> tuple[Fabric, Fabric, bool, bool]:
    """(scale-up fabric, scale-out fabric, NVLS, SHARP) of a ``GroupPlacement`` on ``cluster``:
    NVLS where the scale-up fabric offers it unless the cluster turns it off, SHARP where the
    cluster asks and the fabric offers it (explorer.comm.fabrics)."""
    up, out = load_fabric(cluster.gpu.scale_up_fabric), load_fabric(cluster.scale_out_fabric)
    nvls = up.nvls_share > 0 and cluster.nvls is not False
    return up, out, nvls, cluster.sharp and out.sharp_latency_s is not None


def place_group(group: GroupName, cluster: ClusterSpec, layout: Layout) -> GroupPlacement:
    """Placement of one process group of ``layout`` on ``cluster``.

    Source: the rank numbering and folding rules of this module's docstring.
    """
    if group in _EXPERT_GROUPS:
        order = expert_order(layout.mesh_order)
        sizes = tuple(expert_sizes(layout).items())
        return _placement(group, order, sizes, _EXPERT_GROUPS[group], cluster)
    axes = _DENSE_AXES.get(group, (group,))
    return _placement(group, layout.mesh_order, tuple(dense_sizes(layout).items()), axes, cluster)


def place_groups(cluster: ClusterSpec, layout: Layout) -> dict[str, GroupPlacement]:
    """Placement of every process group: tp, cp, ep, dp, pp, dp_cp, etp, edp."""
    names: tuple[GroupName, ...] = ("tp", "cp", "ep", "dp", "pp", "dp_cp", "etp", "edp")
    return {name: place_group(name, cluster, layout) for name in names}
