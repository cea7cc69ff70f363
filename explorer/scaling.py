"""Strong and weak scaling sweeps over GPU counts, efficiency against a named baseline.

Strong scaling keeps the global batch fixed while GPUs are added (the same work per step,
split further); weak scaling keeps the work per GPU fixed: the global batch grows in
proportion to the GPU count (Gustafson 1988; Narayanan et al. 2021, arXiv:2104.04473, Table 1,
is a weak-scaling study). At each count the fastest fitting layout of a small family is taken
(tp a power of two within the scale-up domain, pp dividing what is left, dp the rest, EP for
MoE over powers of two): a stand-in for the real mesh search, which can be passed instead as
``candidates``. Efficiency is always tokens/s per GPU relative to the sweep's smallest GPU
count that fits, and says so in ``denominator``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, Estimate, EstimateAssumptions, estimate
from explorer.limits import SCALING_BUDGET_S
from explorer.specs import ClusterSpec, Layout, ModelSpec, Recompute, TrainingWorkload

ScalingKind = Literal["strong", "weak"]
Candidates = Callable[[ModelSpec, ClusterSpec, int, TrainingWorkload], Iterable[Layout]]


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutFamily:
    """The small layout family the sweep searches at each GPU count."""

    recomputes: tuple[Recompute, ...] = ("none", "selective", "full")
    """Recompute settings tried."""
    zero: Literal[0, 1, 2, 3] = 1
    """ZeRO stage (1: Megatron's distributed optimizer)."""
    micro_batch_size: int = 1
    """Sequences per micro-batch."""
    max_tp: int | None = None
    """Largest TP degree; None means the scale-up domain size."""


DEFAULT_FAMILY = LayoutFamily()
"""Every recompute setting, ZeRO-1, micro-batch 1, TP up to the domain."""


def _powers_of_two(limit: int) -> Iterator[int]:
    value = 1
    while value <= limit:
        yield value
        value *= 2


def _divisors(n: int) -> Iterator[int]:
    return (d for d in range(1, n + 1) if n % d == 0)


def family_layouts(
    model: ModelSpec,
    cluster: ClusterSpec,
    num_gpus: int,
    workload: TrainingWorkload,
    family: LayoutFamily,
) -> Iterator[Layout]:
    """Layouts of ``family`` on exactly ``num_gpus`` GPUs whose batch divides evenly.

    Rules: tp a power of two dividing the GPUs, at most the domain (TP needs the fast links);
    pp divides the rest and at most the layers; dp x micro-batch divides the global batch
    (whole micro-batches); for MoE, ep a power of two dividing the experts and dp x tp.
    """
    max_tp = family.max_tp or cluster.domain_size
    for tp in (t for t in _powers_of_two(max_tp) if num_gpus % t == 0):
        for pp in _divisors(num_gpus // tp):
            dp = num_gpus // (tp * pp)
            if pp > model.num_hidden_layers:
                continue
            if workload.global_batch_size % (dp * family.micro_batch_size):
                continue
            for ep in _expert_degrees(model, dp * tp):
                for recompute in family.recomputes:
                    yield Layout(
                        tp=tp,
                        pp=pp,
                        dp=dp,
                        ep=ep,
                        zero=family.zero,
                        recompute=recompute,
                        micro_batch_size=family.micro_batch_size,
                    )


def _expert_degrees(model: ModelSpec, ranks: int) -> Iterator[int]:
    """EP degrees tried: 1 for dense models, powers of two dividing experts and ranks."""
    if not model.is_moe:
        yield 1
        return
    for ep in _powers_of_two(min(ranks, model.n_routed_experts)):
        if ranks % ep == 0 and model.n_routed_experts % ep == 0:
            yield ep


def cluster_of(cluster: ClusterSpec, num_gpus: int) -> ClusterSpec:
    """``cluster``'s node type with enough nodes for ``num_gpus``."""
    return replace(cluster, num_nodes=max(1, -(-num_gpus // cluster.gpus_per_node)))


def best_estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    layouts: Iterable[Layout],
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    deadline: float = math.inf,
) -> Estimate | None:
    """The fastest (most tokens/s) layout that fits in memory; None when none fits.

    Layouts that cannot run (ValueError: schedule rules, EP folding) are skipped; past
    ``deadline`` (time.perf_counter) a ValueError says the sweep ran out of its budget.
    """
    best: Estimate | None = None
    for layout in layouts:
        if time.perf_counter() > deadline:
            raise ValueError(
                f"the scaling sweep stopped at its time budget of {SCALING_BUDGET_S:g} s; "
                "ask for fewer or smaller GPU counts"
            )
        try:
            found = estimate(model, cluster, layout, workload, assumptions)
        except ValueError:
            continue
        if found.fits and (best is None or found.tokens_per_s > best.tokens_per_s):
            best = found
    return best


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingPoint:
    """One GPU count of a sweep: the batch it ran, its best layout, its efficiency."""

    num_gpus: int
    """GPUs at this point."""
    global_batch_size: int
    """Sequences per step at this point (fixed for strong scaling, grows for weak)."""
    estimate: Estimate | None
    """The fastest fitting layout's estimate; None when no layout of the family fits."""
    efficiency: float | None
    """Tokens/s per GPU over the baseline's (the sweep's ``denominator``); None without fit."""

    @property
    def layout(self) -> Layout | None:
        """The chosen layout; None when nothing fits."""
        return self.estimate.layout if self.estimate else None

    def row(self) -> dict[str, object]:
        """A flat record for tables (None where nothing fits)."""
        est, layout = self.estimate, self.layout
        return {
            "num_gpus": self.num_gpus,
            "global_batch_size": self.global_batch_size,
            "tp": layout.tp if layout else None,
            "pp": layout.pp if layout else None,
            "dp": layout.dp if layout else None,
            "ep": layout.ep if layout else None,
            "recompute": layout.recompute if layout else None,
            "step_time_s": est.step_time_s if est else None,
            "tokens_per_s": est.tokens_per_s if est else None,
            "tokens_per_s_per_gpu": est.tokens_per_s_per_gpu if est else None,
            "mfu": est.mfu if est else None,
            "efficiency": self.efficiency,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingSweep:
    """A strong or weak scaling sweep, its baseline and its points in GPU order."""

    kind: ScalingKind
    """strong: fixed global batch; weak: global batch proportional to GPUs."""
    model: str
    """Model name."""
    baseline_gpus: int | None
    """Smallest GPU count of the sweep with a fitting layout (the efficiency baseline)."""
    points: tuple[ScalingPoint, ...]

    @property
    def denominator(self) -> str:
        """What efficiency is relative to, in words."""
        if self.baseline_gpus is None:
            return "no GPU count of the sweep fits the model"
        return f"tokens/s per GPU relative to {self.baseline_gpus} GPUs"

    def rows(self) -> list[dict[str, object]]:
        """One record per point (for a pandas DataFrame or JSON)."""
        return [p.row() for p in self.points]


def _batch_at(kind: ScalingKind, workload: TrainingWorkload, first: int, num_gpus: int) -> int:
    """Global batch at ``num_gpus``: fixed (strong) or scaled with the GPU count (weak)."""
    if kind == "strong":
        return workload.global_batch_size
    return max(1, workload.global_batch_size * num_gpus // first)


def scaling_sweep(
    kind: ScalingKind,
    model: ModelSpec,
    cluster: ClusterSpec,
    gpu_counts: Iterable[int],
    workload: TrainingWorkload,
    family: LayoutFamily = DEFAULT_FAMILY,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    candidates: Candidates | None = None,
    budget_s: float = SCALING_BUDGET_S,
) -> ScalingSweep:
    """Best layout and throughput at each GPU count; efficiency against the first that fits.
    The whole sweep stops with a sentence past ``budget_s`` seconds (issue 15).

    ``workload``'s global batch is the batch at the smallest count (weak scaling scales it).
    ``candidates`` replaces the built-in layout family (e.g. the mesh search).
    Source: module docstring.
    """
    counts = sorted(set(gpu_counts))
    if not counts or counts[0] < 1:
        raise ValueError(f"GPU counts must be positive, got {counts}")
    found = []
    deadline = time.perf_counter() + budget_s
    for n in counts:
        batch = _batch_at(kind, workload, counts[0], n)
        sized = replace(workload, global_batch_size=batch)
        nodes = cluster_of(cluster, n)
        layouts = (
            candidates(model, nodes, n, sized)
            if candidates
            else family_layouts(model, nodes, n, sized, family)
        )
        best = best_estimate(model, nodes, layouts, sized, assumptions, deadline)
        found.append((n, batch, best))
    return _with_efficiency(kind, model.name, found)


def _with_efficiency(
    kind: ScalingKind, name: str, found: list[tuple[int, int, Estimate | None]]
) -> ScalingSweep:
    baseline = next(((n, e) for n, _, e in found if e is not None), None)
    points = tuple(
        ScalingPoint(
            num_gpus=n,
            global_batch_size=batch,
            estimate=est,
            efficiency=(
                est.tokens_per_s_per_gpu / baseline[1].tokens_per_s_per_gpu
                if est is not None and baseline is not None
                else None
            ),
        )
        for n, batch, est in found
    )
    return ScalingSweep(
        kind=kind, model=name, baseline_gpus=baseline[0] if baseline else None, points=points
    )


def strong_scaling(
    model: ModelSpec,
    cluster: ClusterSpec,
    gpu_counts: Iterable[int],
    workload: TrainingWorkload,
    family: LayoutFamily = DEFAULT_FAMILY,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    candidates: Candidates | None = None,
) -> ScalingSweep:
    """Strong scaling: the same global batch on more GPUs (see ``scaling_sweep``)."""
    return scaling_sweep(
        "strong", model, cluster, gpu_counts, workload, family, assumptions, candidates
    )


def weak_scaling(
    model: ModelSpec,
    cluster: ClusterSpec,
    gpu_counts: Iterable[int],
    workload: TrainingWorkload,
    family: LayoutFamily = DEFAULT_FAMILY,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    candidates: Candidates | None = None,
) -> ScalingSweep:
    """Weak scaling: the global batch grows with the GPUs (see ``scaling_sweep``)."""
    return scaling_sweep(
        "weak", model, cluster, gpu_counts, workload, family, assumptions, candidates
    )
