"""Communication and compute warnings of a layout, one sentence each (memory warnings live in
memory)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from explorer.comm import GroupPlacement
from explorer.compute import ComputeAssumptions, PassTimes
from explorer.specs import ClusterSpec, GpuSpec, Layout

ATTENTION_SHARE = 0.3
"""Share of the forward compute above which the attention core's kernel efficiency matters
enough to name it."""

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


def attention_efficiency_unset(
    passes: Iterable[PassTimes], compute: ComputeAssumptions, gpu: GpuSpec | None = None
) -> str | None:
    """A sentence when the attention core is a large share of the compute and its kernel
    efficiency is left at the GEMMs' (``ComputeAssumptions.attention_efficiency`` unset and
    no published attention figures for ``gpu``)."""
    # Long sequences: FlashAttention-2 reaches ~35-40% of H100's peak, FlashAttention-3 ~65%
    # at head dim 128 (Shah et al. 2024, arXiv:2407.08608, Fig. 5).
    if compute.attention_efficiency is not None:
        return None
    if gpu is not None and gpu.kernels is not None and gpu.kernels.attention is not None:
        return None
    found = list(passes)
    forward = sum(p.forward_s for p in found)
    share = sum(p.attention_forward_s for p in found) / forward if forward else 0.0
    if share < ATTENTION_SHARE:
        return None
    return (
        f"the attention core is {share:.0%} of the forward compute and runs at the GEMMs' "
        "efficiency by default; set compute.attention_efficiency for your kernel "
        "(FlashAttention-2 reaches ~35-40% of H100 peak, FlashAttention-3 ~65%)"
    )
