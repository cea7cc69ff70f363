"""What would make a layout fit: the smallest changes to it, each one estimated.

A layout that does not fit gets a short list of single changes on the same GPUs (the world size
stays DP x TP x PP x CP, so a new TP, PP or CP degree takes its factor from DP): one more
doubling of PP, CP, TP or EP, a higher ZeRO stage, recompute, a smaller micro-batch. Each change
is run through the same core (``estimate``, memory and step time), so every suggestion carries
its own peak memory and step time, never a rule of thumb. When no single change fits, pairs of
them are tried. Changes that make an invalid layout (a degree that does not divide the layers,
heads or sequence) are dropped with the core's own check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Literal

from explorer.estimate.core import DEFAULT_ESTIMATE_ASSUMPTIONS, EstimateAssumptions, estimate
from explorer.specs import ClusterSpec, Layout, ModelSpec, TrainingWorkload

__all__ = ["FitStatus", "Fix", "fit_status", "memory_fixes"]

FitStatus = Literal["fits", "tight", "over"]
"""fits: free memory at the peak is at least the reserve; tight: it fits, inside the reserve;
over: the peak stage needs more than the GPU has."""


def fit_status(peak_bytes: float, gpu_bytes: float, reserve_bytes: float) -> FitStatus:
    """Whether a peak fits one GPU with ``reserve_bytes`` left free (the person's margin for
    what no estimate sees: fragmentation, a longer batch, a framework's own buffers)."""
    free_bytes = gpu_bytes - peak_bytes
    if free_bytes < 0:
        return "over"
    return "tight" if free_bytes < reserve_bytes else "fits"


Change = Callable[[Layout, ModelSpec, ClusterSpec], tuple[str, Layout] | None]
"""One kind of change: (what it does in words, the new layout), or None where it cannot apply."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    """One suggested change and what the core estimates for the layout it makes."""

    change: str
    """What changes, in words ("PP 4 -> 8, DP 16 -> 8")."""
    layout: Layout
    peak_bytes: float
    """Peak memory per GPU of the changed layout."""
    gpu_bytes: float
    step_time_s: float

    @property
    def free_bytes(self) -> float:
        """Memory left on the peak stage's GPU (negative: over capacity)."""
        return self.gpu_bytes - self.peak_bytes


def _from_dp(name: str) -> Change:
    """Double parallel degree ``name`` (pp, cp or tp), halving DP to keep the GPU count."""

    def change(layout: Layout, model: ModelSpec, cluster: ClusterSpec) -> tuple[str, Layout] | None:
        degree = getattr(layout, name)
        if layout.dp % 2:
            return None
        if name == "tp" and degree * 2 > cluster.domain_size:
            return (
                None  # TP beyond the scale-up domain would run per-layer collectives on the fabric
            )
        new = replace(layout, **{name: degree * 2, "dp": layout.dp // 2})
        if name == "pp":
            new = replace(new, stage_layers=None)
        text = f"{name.upper()} {degree} → {degree * 2}, DP {layout.dp} → {layout.dp // 2}"
        return text, new

    return change


def _more_ep(layout: Layout, model: ModelSpec, cluster: ClusterSpec) -> tuple[str, Layout] | None:
    """Double EP inside the same ranks (MoE only): EP x ETP must divide DP x CP x TP."""
    folded = layout.dp * layout.cp * layout.tp
    if not model.is_moe or folded % (layout.ep * 2 * layout.etp):
        return None
    return f"EP {layout.ep} → {layout.ep * 2}", replace(layout, ep=layout.ep * 2)


def _zero(stage: int) -> Change:
    def change(layout: Layout, model: ModelSpec, cluster: ClusterSpec) -> tuple[str, Layout] | None:
        if layout.zero >= stage or layout.dp * layout.cp == 1:
            return None  # nothing to shard over with one data-parallel rank
        return f"ZeRO {layout.zero} → {stage}", replace(layout, zero=stage)  # type: ignore[arg-type]

    return change


def _recompute(kind: str) -> Change:
    order = ("none", "selective", "full")

    def change(layout: Layout, model: ModelSpec, cluster: ClusterSpec) -> tuple[str, Layout] | None:
        if order.index(layout.recompute) >= order.index(kind):
            return None
        return f"recompute {layout.recompute} → {kind}", replace(layout, recompute=kind)  # type: ignore[arg-type]

    return change


def _half_micro_batch(
    layout: Layout, model: ModelSpec, cluster: ClusterSpec
) -> tuple[str, Layout] | None:
    """Half the micro-batch: fewer activations per micro-batch, more micro-batches per step."""
    if layout.micro_batch_size < 2:
        return None
    half = layout.micro_batch_size // 2
    return f"micro-batch {layout.micro_batch_size} → {half}", replace(layout, micro_batch_size=half)


CHANGES: tuple[Change, ...] = (
    _half_micro_batch,
    _recompute("selective"),
    _zero(1),
    _zero(2),
    _zero(3),
    _from_dp("pp"),
    _from_dp("cp"),
    _from_dp("tp"),
    _more_ep,
    _recompute("full"),
)
"""Every kind of change tried, cheapest in step time first as a rule (the estimates decide)."""


def _candidates(
    layout: Layout, model: ModelSpec, cluster: ClusterSpec, depth: int
) -> Iterator[tuple[str, Layout]]:
    """Every combination of ``depth`` distinct kinds of change that applies, in order."""
    for kinds in combinations(CHANGES, depth):
        texts, new = [], layout
        for kind in kinds:
            step = kind(new, model, cluster)
            if step is None:
                break
            texts.append(step[0])
            new = step[1]
        else:
            yield "; ".join(texts), new


def memory_fixes(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    *,
    limit: int = 5,
) -> tuple[Fix, ...]:
    """Up to ``limit`` changes that make ``layout`` fit, fastest step first; single changes
    when any fits, else pairs of them. Empty when nothing tried fits (or it already fits)."""
    for depth in (1, 2):
        fixes = []
        for text, new in _candidates(layout, model, cluster, depth):
            try:
                est = estimate(model, cluster, new, workload, assumptions)
            except ValueError:
                continue  # the change makes a layout the core rejects: not a suggestion
            if est.memory.fits:
                fixes.append(
                    Fix(
                        change=text,
                        layout=new,
                        peak_bytes=est.memory.peak_bytes,
                        gpu_bytes=est.memory.gpu_bytes,
                        step_time_s=est.step_time_s,
                    )
                )
        if fixes:
            return tuple(sorted(fixes, key=lambda f: f.step_time_s)[:limit])
    return ()
