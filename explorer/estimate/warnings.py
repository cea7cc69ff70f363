"""Communication warnings of a layout, one sentence each (memory warnings live in memory)."""

from __future__ import annotations

from collections.abc import Mapping

from explorer.comm import GroupPlacement
from explorer.specs import ClusterSpec, Layout

_CROSSING = {
    "tp": "tensor-parallel all-reduces of every layer use the inter-node fabric",
    "cp": "context-parallel K/V exchanges of every layer use the inter-node fabric",
    "ep": "expert all-to-alls of every MoE layer use the inter-node fabric",
    "etp": "expert tensor-parallel traffic uses the inter-node fabric",
}


def group_crosses(group: GroupPlacement) -> str | None:
    """A sentence when a per-layer group (TP, CP, EP, ETP) leaves its scale-up domain."""
    # Per-layer collectives (TP, CP, EP) are the ones the fast links exist for.
    if not group.crosses_domains or group.group not in _CROSSING:
        return None
    name = group.group.upper()
    return (
        f"{name} group of {group.size} GPUs spans {group.num_domains} scale-up domains "
        f"({group.ranks_per_domain} per domain): {_CROSSING[group.group]}"
    )


def cluster_too_small(cluster: ClusterSpec, layout: Layout) -> str | None:
    """A sentence when the layout needs more GPUs than the cluster has."""
    # The placement numbers ranks past the cluster's end; the estimate still runs.
    if layout.world_size <= cluster.world_size:
        return None
    return f"the layout needs {layout.world_size} GPUs, the cluster has {cluster.world_size}"


def comm_warnings(
    groups: Mapping[str, GroupPlacement],
    cluster: ClusterSpec,
    layout: Layout,
    existing: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """Warnings about group placement and cluster size, skipping what ``existing`` says.

    The memory model already warns when TP exceeds the domain size; this one also catches a
    mesh order that pushes a small TP group across domains.
    """
    tp_said = any(w.startswith("TP group of") for w in existing)
    found = [cluster_too_small(cluster, layout)]
    for name, group in groups.items():
        if name == "tp" and tp_said:
            continue
        found.append(group_crosses(group))
    return tuple(w for w in found if w)
