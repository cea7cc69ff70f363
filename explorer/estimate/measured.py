"""A measured run against the estimate: the error, the part that explains it, one correction.

The step splits into parts that sum to the estimated step exactly: on the pipeline rank that
paces the step (the busiest one), its busy time is shared out between compute (forward,
input-gradient and weight-gradient passes), recompute, exposed per-micro-batch communication by
mesh axis (``comm.tp``, ``comm.cp``, ``comm.ep``, ``comm.pp``, ``comm.dp`` for ZeRO-3 gathers)
and activation offload, in proportion to its parts' per-micro-batch times; ``bubble`` is the
rest of the pipelined part (makespan minus busy); the tail of the rank with the slowest tail is
its exposed per-step communication (``comm.dp`` and ZeRO-1/2 gathers, by axis) plus
``optimizer``. Each part, scaled alone by k = 1 + gap / part, would close the gap between the
measured and the estimated step; a candidate is plausible when that k keeps its kernel or link
within physical bounds (below). The one named is the plausible candidate that needs the least
change (smallest |ln k|). Memory: the same over the peak stage's categories, headroom left out
(it is the reserve a person keeps free, not memory a run uses).

A correction sets one named assumption (``compute.gemm_efficiency_scale``,
``comm.links.scale_up``, ``comm.links.scale_out``, ``compute.hbm_efficiency``) to the value at
which the re-estimated step equals the measured one, found by bisection on the core itself, so
it holds whatever else the knob moves. Where it cannot: the knob also moves other parts (the
GEMM scale moves the bubble and recompute with compute; HBM efficiency moves memory-bound
kernels with the optimizer step), it saturates (GEMMs capped at ``compute.max_efficiency``,
link scales within (0, 2]) or the term does not scale with it (attention and memory-bound
kernels under the GEMM scale; latency-bound or hidden collectives under a link scale): then the
corrected step is the nearest the knob reaches and ``reached`` is False.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from explorer.estimate.core import Estimate
from explorer.estimate.stages import EstimateAssumptions, StageTime
from explorer.specs import MESH_ORDER

AXES = tuple(MESH_ORDER)
"""Mesh axes whose exposed communication is a part of its own (``comm.<axis>``)."""
MODEL_STATES = ("parameters", "gradients", "master_weights", "optimizer_states")
"""Memory categories fixed by counts, byte widths and sharding (explorer.memory.training)."""
AGREE = 1e-3
"""Relative gap below which the measurement agrees with the estimate (nothing to attribute):
0.1%, the same as ``SOLVE_TOLERANCE``, so a corrected estimate reads as agreeing (a step
measured twice differs by more than that)."""
WIDTH_TOLERANCE = 0.05
"""How near a power of two a model-state factor must be to read as a byte width or sharding
degree off (bf16 vs fp32 gradients: 2; ZeRO over 8 ranks missed: 8)."""
LINK_SCALE_MAX = 2.0
"""Upper bound of a link-efficiency multiplier (explorer.comm.collectives.LinkEfficiency)."""
GEMM_SCALE_BOUNDS = (1e-3, 1e3)
"""Range the GEMM efficiency multiplier is searched over (its field only asks for > 0)."""
SOLVE_STEPS = 60
"""Bisection steps of a correction (each halves the log-range: 2^-60 of it is far below 1%)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One part that, scaled alone, would close the gap."""

    component: str
    """Part name: compute, recompute, comm.<axis>, offload, bubble, optimizer, or a memory
    category."""
    estimated: float
    """The part in the estimate: seconds per step (step time) or bytes (memory)."""
    factor: float
    """k: the part times k closes the gap (1 + gap / part)."""
    plausible: bool
    """Whether k keeps the part within physical bounds."""
    why: str
    """The bound checked, in words."""
    correction_key: str | None
    """The named assumption that scales this part, or None when there is none."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """A measured figure against the estimate's, with the candidates that explain the gap."""

    measured: float
    """Measured step, s; or measured peak, bytes."""
    estimated: float
    """The estimate's step, s; or its peak stage without headroom, bytes."""
    candidates: tuple[Candidate, ...]
    """Every non-zero part, largest first; empty when the two agree."""

    @property
    def error(self) -> float:
        """Signed error of the estimate: estimated / measured - 1 (negative: too optimistic)."""
        return self.estimated / self.measured - 1

    @property
    def explained_by(self) -> Candidate | None:
        """The plausible candidate that needs the least change, or None."""
        plausible = [c for c in self.candidates if c.plausible]
        return min(plausible, key=lambda c: abs(math.log(c.factor)), default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Correction:
    """One named assumption set so that the re-estimated step meets the measured one."""

    key: str
    """Override key (``--assume KEY=VALUE``, the scenario's assumptions)."""
    value: float
    """Its value after the correction."""
    before: float
    """Its value before."""
    step_time_s: float
    """The re-estimated step with the correction, s."""
    reached: bool
    """Whether the knob reaches the measured step within ``SOLVE_TOLERANCE``."""


SOLVE_TOLERANCE = 1e-3
"""Relative step-time error under which a correction counts as reaching the measured step."""


def _rank_parts(est: Estimate, rank: int) -> tuple[StageTime, ...]:
    """The parts rank ``rank`` runs: itself, or under DualPipe stages r and P-1-r."""
    stages, layout = est.stages, est.layout
    if layout.schedule == "dualpipe" and layout.pp > 1:
        return (stages[rank], stages[len(stages) - 1 - rank])
    return (stages[rank],)


def _by_axis(collectives: list, per_step: bool) -> dict[str, float]:
    out: dict[str, float] = dict.fromkeys(AXES, 0.0)
    for c in collectives:
        if (c.phase == "step") == per_step:
            out[c.axis] += c.exposed_s
    return out


def step_parts(est: Estimate) -> dict[str, float]:
    """Seconds per step of each part (module docstring); they sum to ``est.step_time_s``."""
    busy = est.pipeline.busy_s
    pacing = max(range(len(busy)), key=busy.__getitem__)
    ranks = _rank_parts(est, pacing)
    cycle = {
        "compute": sum(s.compute.forward_s + s.compute.backward_input_s + s.weight_s
                       for s in ranks),
        "recompute": sum(s.compute.recompute_s for s in ranks),
        "offload": sum(2 * s.offload_s for s in ranks),  # once forward, once backward
    }  # fmt: skip
    comm = _by_axis([c for s in ranks for c in s.collectives], per_step=False)
    cycle |= {f"comm.{a}": v for a, v in comm.items()}
    total = sum(cycle.values())
    parts = {k: busy[pacing] * v / total if total else 0.0 for k, v in cycle.items()}
    parts["bubble"] = max(0.0, est.pipeline.makespan_s - busy[pacing])
    tails = [sum(s.step_comm_s + s.optimizer_s for s in _rank_parts(est, r))
             for r in range(len(busy))]  # fmt: skip
    slow = _rank_parts(est, max(range(len(tails)), key=tails.__getitem__))
    for axis, v in _by_axis([c for s in slow for c in s.collectives], per_step=True).items():
        parts[f"comm.{axis}"] += v
    parts["optimizer"] = sum(s.optimizer_s for s in slow)
    return parts


def step_correction_key(est: Estimate, component: str) -> str | None:
    """The named assumption that scales ``component`` of a step, or None."""
    if component == "compute":
        return "compute.gemm_efficiency_scale"
    if component == "optimizer":
        return "compute.hbm_efficiency"
    if component.startswith("comm."):
        axis = component.split(".", 1)[1]
        group = est.groups.get("dp_cp" if axis == "dp" else axis)
        crosses = group is not None and group.crosses_domains
        return "comm.links.scale_out" if crosses else "comm.links.scale_up"
    return None


def with_value(holder: object, key: str, value: float) -> object:
    """``holder`` (nested frozen dataclasses) with the field ``key`` (``group.field``) set."""
    head, _, rest = key.partition(".")
    if not rest:
        return replace(holder, **{head: value})  # type: ignore[type-var]
    return replace(holder, **{head: with_value(getattr(holder, head), rest, value)})  # type: ignore[type-var]


def _current(assumptions: EstimateAssumptions, key: str) -> float:
    holder: object = assumptions
    for name in key.split("."):
        holder = getattr(holder, name)
    return float(holder)  # type: ignore[arg-type]


def _step_bound(est: Estimate, component: str, k: float) -> tuple[bool, str]:
    """(plausible, why) for scaling one part of the step by k."""
    a = est.assumptions
    if component in ("compute", "recompute"):
        eff = max(s.compute.dense_efficiency for s in est.stages)
        new = eff / k
        return new <= 1.0, f"GEMM efficiency {eff:.3f} -> {new:.3f} of peak (at most 1)"
    if component == "optimizer":
        new = a.compute.hbm_efficiency / k
        return new <= 1.0, f"HBM efficiency {a.compute.hbm_efficiency:.3f} -> {new:.3f} (at most 1)"
    if component.startswith("comm."):
        key = step_correction_key(est, component) or "comm.links.scale_up"
        new = _current(a, key) / k
        return new <= LINK_SCALE_MAX, (
            f"{key} {_current(a, key):.3f} -> {new:.3f} of the published bus bandwidth "
            f"(at most {LINK_SCALE_MAX:g})"
        )
    return True, "no physical bound on this part beyond being positive"


def _candidates(
    parts: Mapping[str, float], gap: float, bound: Callable[[str, float], tuple[bool, str]],
    keys: Callable[[str], str | None],
) -> tuple[Candidate, ...]:  # fmt: skip
    out = []
    for name, part in sorted(parts.items(), key=lambda kv: -kv[1]):
        if part <= 0:
            continue
        k = 1 + gap / part
        ok, why = bound(name, k) if k > 0 else (False, "it would need a negative time or size")
        out.append(Candidate(component=name, estimated=part, factor=k, plausible=ok, why=why,
                             correction_key=keys(name)))  # fmt: skip
    return tuple(out)


def compare_step(est: Estimate, measured_s: float) -> Comparison:
    """The estimate's step against a measured one, with every part that would close the gap.

    Source: module docstring (parts of the step; k = 1 + gap / part).
    """
    if not (math.isfinite(measured_s) and measured_s > 0):
        raise ValueError(
            f"the measured step must be a positive number of seconds, got {measured_s}"
        )
    gap = measured_s - est.step_time_s
    if abs(gap) <= AGREE * measured_s:
        return Comparison(measured=measured_s, estimated=est.step_time_s, candidates=())
    found = _candidates(
        step_parts(est), gap, lambda c, k: _step_bound(est, c, k),
        lambda c: step_correction_key(est, c),
    )  # fmt: skip
    return Comparison(measured=measured_s, estimated=est.step_time_s, candidates=found)


def _memory_bound(category: str, k: float) -> tuple[bool, str]:
    if category not in MODEL_STATES:
        return True, "a buffer or workspace size: no bound beyond being positive"
    n = round(math.log2(k))
    ok = abs(k / 2.0**n - 1) <= WIDTH_TOLERANCE
    return ok, (
        f"model states are fixed by counts, byte widths and sharding: k must be a power of two "
        f"within {WIDTH_TOLERANCE:.0%} (nearest 2^{n})"
    )


def compare_memory(est: Estimate, measured_bytes: float) -> Comparison:
    """The peak stage's memory (headroom left out) against a measured peak, by category.

    Source: module docstring; memory categories of docs/ARCHITECTURE.md (explorer.memory).
    """
    if not (math.isfinite(measured_bytes) and measured_bytes > 0):
        raise ValueError(
            f"the measured peak must be a positive number of bytes, got {measured_bytes}"
        )
    stage = est.memory.stages[est.memory.peak_stage]
    parts = {k: float(v) for k, v in stage.breakdown.as_dict().items() if k != "headroom"}
    estimated = sum(parts.values())
    gap = measured_bytes - estimated
    if abs(gap) <= AGREE * measured_bytes:
        return Comparison(measured=measured_bytes, estimated=estimated, candidates=())
    found = _candidates(parts, gap, _memory_bound, lambda _: None)
    return Comparison(measured=measured_bytes, estimated=estimated, candidates=found)


def _bounds(key: str, est: Estimate) -> tuple[float, float]:
    if key.startswith("comm.links."):
        return 1e-6, LINK_SCALE_MAX
    if key == "compute.hbm_efficiency":
        return 1e-6, 1.0
    return GEMM_SCALE_BOUNDS


def correct(
    key: str,
    measured_s: float,
    est: Estimate,
    estimate_with: Callable[[EstimateAssumptions], Estimate],
) -> tuple[Correction, Estimate]:
    """``key`` set so that ``estimate_with`` its assumptions gives ``measured_s``, and that
    estimate. The step falls as the knob rises (faster kernels or links), so a bisection in
    log space finds it; beyond the knob's range the nearest end is kept (``reached`` False).

    Source: module docstring (what a correction can and cannot reproduce).
    """
    if key not in CORRECTION_KEYS:
        raise ValueError(f"no correction named {key!r}; choose one of {', '.join(CORRECTION_KEYS)}")
    before = _current(est.assumptions, key)
    lo, hi = _bounds(key, est)

    def at(value: float) -> Estimate:
        return estimate_with(with_value(est.assumptions, key, value))  # type: ignore[arg-type]

    slow, fast = at(lo), at(hi)
    if slow.step_time_s <= measured_s:
        value, found = lo, slow
    elif fast.step_time_s >= measured_s:
        value, found = hi, fast
    else:
        for _ in range(SOLVE_STEPS):
            mid = math.sqrt(lo * hi)
            found = at(mid)
            if abs(found.step_time_s / measured_s - 1) <= SOLVE_TOLERANCE / 10:
                break
            lo, hi = (mid, hi) if found.step_time_s > measured_s else (lo, mid)
        value = mid
    reached = abs(found.step_time_s / measured_s - 1) <= SOLVE_TOLERANCE
    fix = Correction(key=key, value=value, before=before, step_time_s=found.step_time_s,
                     reached=reached)  # fmt: skip
    return fix, found


CORRECTION_KEYS = (
    "compute.gemm_efficiency_scale",
    "comm.links.scale_up",
    "comm.links.scale_out",
    "compute.hbm_efficiency",
)
"""The named assumptions a measured step may correct (explorer.compute.assumptions,
explorer.comm.collectives.LinkEfficiency)."""


def candidate_dict(c: Candidate, unit: str) -> dict[str, object]:
    """A candidate as JSON (``unit`` "s" or "bytes" names its ``estimated_*`` key)."""
    return {
        "component": c.component,
        f"estimated_{unit}": c.estimated,
        "factor": c.factor,
        "plausible": c.plausible,
        "why": c.why,
        "correction_key": c.correction_key,
    }


def comparison_dict(found: Comparison, unit: str) -> dict[str, object]:
    """A comparison as JSON: measured, estimated, signed error, candidates, the one named."""
    named = found.explained_by
    return {
        f"measured_{unit}": found.measured,
        f"estimated_{unit}": found.estimated,
        "error": found.error,
        "explained_by": named.component if named else None,
        "factor": named.factor if named else None,
        "attribution": [candidate_dict(c, unit) for c in found.candidates],
    }
