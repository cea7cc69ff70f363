"""Plan serving on N GPUs: every layout estimated or rejected, the frontier, and the answers
in sentences."""

from __future__ import annotations

import time
from dataclasses import dataclass

from explorer.limits import SERVING_BUDGET_S
from explorer.memory.serving import ServingLayout
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.drafts import Speculation
from explorer.serving.estimate import ServingEstimate, estimate_serving, fitted
from explorer.serving.frontier import DEFAULT_CONCURRENCIES, ParetoPoint, pareto_points
from explorer.serving.latency import Bound, Roofline
from explorer.serving.layouts import layout_problem, serving_layouts, with_redundant_experts
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload
from explorer.units import GiB


@dataclass(frozen=True, slots=True)
class ServingPlan:
    """Every layout for a number of GPUs: valid ones estimated, invalid ones with reasons."""

    layouts: tuple[ServingEstimate, ...]
    """Valid layouts, fitting first, then by output tokens/s."""
    rejected: tuple[tuple[ServingLayout, str], ...]
    pareto: tuple[ParetoPoint, ...]


def plan_serving(
    model: ModelSpec,
    cluster: ClusterSpec,
    num_gpus: int,
    workload: ServingWorkload,
    assumptions: ServingAssumptions | None = None,
    concurrencies: tuple[int, ...] = DEFAULT_CONCURRENCIES,
    budget_s: float = SERVING_BUDGET_S,
    speculation: Speculation | None = None,
    overlap_options: tuple[bool, ...] | None = None,
) -> ServingPlan:
    """Every layout of ``num_gpus``: estimates at the workload, rejects, and the frontier
    (``speculation`` and ``overlap_options`` as in ``pareto_points``).

    Raises ValueError (one sentence) when estimating the layouts passes ``budget_s`` seconds.
    """
    if num_gpus > cluster.world_size:
        raise ValueError(f"{num_gpus} GPUs requested but the cluster has {cluster.world_size}")
    a = assumptions or ServingAssumptions()
    deadline = time.perf_counter() + budget_s
    valid, rejected = [], []
    for plain in serving_layouts(num_gpus):
        layout = with_redundant_experts(model, plain, a)
        if reason := layout_problem(model, cluster, layout, a):
            rejected.append((layout, reason))
        else:
            valid.append(layout)
    estimates = []
    for lay in valid:
        _within_budget(deadline, budget_s, len(valid))
        estimates.append(estimate_serving(model, cluster, lay, workload, a, speculation))
    estimates.sort(key=lambda e: (not e.fits, -(e.tokens_per_s or 0.0)))
    sweep = (*concurrencies, workload.concurrency)
    pareto = pareto_points(model, cluster, valid, workload, sweep, a, speculation, overlap_options)
    return ServingPlan(tuple(estimates), tuple(rejected), tuple(pareto))


def _within_budget(deadline: float, budget_s: float, layouts: int) -> None:
    if time.perf_counter() > deadline:
        raise ValueError(
            f"the serving plan stopped after {budget_s:g} s, its time budget, before estimating "
            f"all {layouts:,} layouts; plan fewer GPUs"
        )


def _share(part_s: float, roofline: Roofline) -> str:
    return f"{100 * part_s / roofline.total_s:.0f}%"


def serving_answers(plan: ServingPlan) -> tuple[str, ...]:
    """The questions asked before serving, answered in sentences from a plan's numbers."""
    fitting = [e for e in plan.layouts if e.fits]
    if not fitting:
        first = plan.layouts[0].reason if plan.layouts else "no layout is valid"
        return (f"No layout fits at this concurrency: {first}.",)
    small = min(fitting, key=lambda e: (e.layout.gpus_per_replica, fitted(e.itl_s)))
    fast = max(fitting, key=lambda e: fitted(e.tokens_per_s))
    quick = min(fitting, key=lambda e: fitted(e.itl_s))
    m = small.memory
    counts = {kind: sum(e.prefill.bound == kind for e in fitting) for kind in _BOUNDS}
    decode = {kind: sum(e.decode.bound == kind for e in fitting) for kind in _BOUNDS}
    comm = _share(quick.decode.communication_s, quick.decode)
    reads = _share(quick.decode.memory_s, quick.decode)
    return (
        f"The smallest replica that fits is {small.layout.gpus_per_replica} GPUs "
        f"({small.layout.label}): weights {m.weights / GiB:.1f} GiB, KV cache "
        f"{m.kv_cache / GiB:.1f} GiB, workspace {m.activations / GiB:.1f} GiB per GPU; it holds "
        f"up to {small.max_concurrency} sequences.",
        f"At {fast.concurrency} sequences per replica, most output tokens/s: "
        f"{fast.layout.label} ({fitted(fast.tokens_per_s):,.0f}); lowest inter-token latency: "
        f"{quick.layout.label} ({fitted(quick.itl_s) * 1e3:.1f} ms).",
        *_tp_trade(fitting),
        f"On {quick.layout.label} communication takes {comm} of a decode step and weights "
        f"and KV reads {reads}.",
        f"Prefill is bound by compute/memory/communication on {counts['compute']}/"
        f"{counts['memory']}/{counts['communication']} fitting layouts; decode on "
        f"{decode['compute']}/{decode['memory']}/{decode['communication']}.",
    )


def _tp_trade(fitting: list[ServingEstimate]) -> tuple[str, ...]:
    """Whether doubling TP (no PP, no EP) shortens decode enough to pay for its all-reduces."""
    by_tp = {e.layout.tp: e for e in fitting if e.layout.pp == e.layout.ep == 1}
    pairs = [(by_tp[t], by_tp[2 * t]) for t in sorted(by_tp) if 2 * t in by_tp]
    if not pairs:
        return ()
    low, high = (e.decode for e in pairs[-1])
    t1, t2 = pairs[-1][0].layout.tp, pairs[-1][1].layout.tp
    verdict = "shortens" if high.total_s < low.total_s else "lengthens"
    return (
        f"TP {t1} to {t2} cuts a decode step's reads from {low.memory_s * 1e3:.2f} to "
        f"{high.memory_s * 1e3:.2f} ms while communication goes from "
        f"{low.communication_s * 1e3:.2f} to {high.communication_s * 1e3:.2f} ms: "
        f"it {verdict} the step.",
    )


_BOUNDS: tuple[Bound, ...] = ("compute", "memory", "communication")
