"""Why a ranked layout ranks where it does: what limits it, what its neighbours would change,
and a side-by-side comparison of two layouts.

Limits are the step-time components of the row (``explorer.search.rows``) with the compute
split into the ideal (every FLOP at the dense peak) and the loss to kernel efficiency and stage
imbalance, and exposed communication split by mesh axis; memory enters as the share of the GPU
the peak stage uses. Neighbours change one knob (a degree doubled or halved with DP making up
the GPU count, the ZeRO stage, micro-batch, recompute or schedule); each is taken from the
ranked rows when it is there, else estimated (``explorer.estimate``), else named with the rule
it breaks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from explorer.estimate import Estimate, estimate
from explorer.mesh import check, from_layout
from explorer.search.core import SearchResult
from explorer.search.rows import LAYOUT_COLUMNS, estimate_row
from explorer.specs import RECOMPUTES, SCHEDULES, Layout
from explorer.units import GiB

_AXES = {"tp": "TP", "cp": "CP", "ep": "EP", "dp": "DP", "pp": "PP"}


@dataclass(frozen=True, slots=True)
class Explanation:
    """What limits one ranked layout, and what changing one knob would do."""

    rank: int
    """Row of ``SearchResult.layouts`` explained (0 is the best)."""
    layout: Layout
    limits: pd.DataFrame
    """factor, seconds, share (of the step; of the GPU for memory), note; largest first."""
    what_if: pd.DataFrame
    """One row per neighbour: change, status, step_time_s, step_change, peak_change_bytes,
    peak_stage, bubble_change, text."""


def limits(e: Estimate) -> pd.DataFrame:
    """Factors of one estimate's step, largest share first (memory as a share of the GPU)."""
    row = estimate_row(e)
    step = row["step_time_s"]
    ideal = e.hardware_flops_per_token * e.tokens_per_step / (e.num_gpus * e.peak_flops_per_s)
    ideal = min(ideal, row["compute_s"])
    items = [
        ("compute at the dense peak", ideal, "hardware FLOPs / (GPUs x peak)"),
        ("kernel efficiency and stage imbalance", row["compute_s"] - ideal, "busiest rank"),
        ("pipeline bubble", row["bubble_s"], f"{e.bubble_fraction:.1%} of the pipeline idle"),
        ("optimizer step", row["optimizer_s"], "slowest rank"),
    ]
    items += [
        (f"exposed {name} communication", e.exposed_comm_by_axis_s.get(axis, 0.0), "per step")
        for axis, name in _AXES.items()
    ]
    frame = pd.DataFrame(items, columns=["factor", "seconds", "note"])
    frame["share"] = frame["seconds"] / step
    spare = f"{row['spare_bytes'] / GiB:.1f} GiB spare on stage {row['peak_stage']}"
    memory = {"factor": "memory", "seconds": float("nan"), "note": spare}
    memory["share"] = row["peak_bytes"] / row["gpu_bytes"]
    frame = pd.concat([frame, pd.DataFrame([memory])], ignore_index=True)
    frame = frame[frame["seconds"].fillna(1.0) > 0]
    return frame.sort_values("share", ascending=False, ignore_index=True)[
        ["factor", "seconds", "share", "note"]
    ]


def _degree(layout: Layout, axis: str, factor: float) -> Layout | None:
    """``layout`` with one degree scaled and DP making up the GPU count, or None."""
    now = getattr(layout, axis)
    value = now * factor
    dp = layout.dp if axis == "ep" else layout.dp * now / value
    if value < 1 or dp < 1 or value != int(value) or dp != int(dp):
        return None

    def pick(name: str) -> int:
        return int(value) if name == axis else getattr(layout, name)

    changes = {name: pick(name) for name in ("tp", "pp", "cp", "ep")}
    return _variant(layout, dp=int(dp), **changes)


def _variant(layout: Layout, **changes: Any) -> Layout | None:
    """``layout`` with ``changes``, or None where its memory recipe does not allow them (a
    layout string for another pp, recompute modules without selective recompute, ...)."""
    try:
        return replace(layout, **changes)
    except ValueError:
        return None


def neighbours(layout: Layout, moe: bool = True) -> Iterator[tuple[str, Layout]]:
    """(description, layout) for every one-knob change of ``layout`` (EP only when ``moe``)."""
    axes = ("tp", "pp", "cp", "ep") if moe else ("tp", "pp", "cp")
    for axis, factor in ((a, f) for a in axes for f in (2, 0.5)):
        other = _degree(layout, axis, factor)
        if other is not None:
            yield f"{axis.upper()} {getattr(layout, axis)} to {getattr(other, axis)}", other
    for zero in (layout.zero - 1, layout.zero + 1):
        if 0 <= zero <= 3:
            yield f"ZeRO {layout.zero} to {zero}", replace(layout, zero=zero)  # type: ignore[arg-type]
    for mbs in (layout.micro_batch_size * 2, layout.micro_batch_size // 2):
        if mbs >= 1 and mbs != layout.micro_batch_size:
            yield (
                f"micro-batch {layout.micro_batch_size} to {mbs}",
                replace(layout, micro_batch_size=mbs),
            )
    for rc in RECOMPUTES:
        other = _variant(layout, recompute=rc) if rc != layout.recompute else None
        if other is not None:
            yield f"recompute {layout.recompute} to {rc}", other
    yield from _schedules(layout)


def _schedules(layout: Layout) -> Iterator[tuple[str, Layout]]:
    if layout.pp == 1:
        return
    now = f"{layout.schedule}" + (f" V{layout.virtual_stages}" if layout.virtual_stages > 1 else "")
    for name in SCHEDULES:
        virtual = 2 if name == "interleaved" else 1
        other = _variant(layout, schedule=name, virtual_stages=virtual)
        if (name, virtual) != (layout.schedule, layout.virtual_stages) and other is not None:
            label = name + (" V2" if virtual > 1 else "")
            yield f"{now} to {label}", other


def _find(result: SearchResult, layout: Layout) -> Estimate | None:
    return next((e for e in result.estimates if e.layout == layout), None)


def _outcome(result: SearchResult, layout: Layout) -> tuple[str, Estimate | None]:
    """How a neighbour fares: ranked, estimated (fits or not), or the rule it breaks."""
    found = _find(result, layout)
    if found is not None:
        return f"ranked #{result.estimates.index(found) + 1}", found
    p = result.problem
    broken = check(p, from_layout(layout))
    if broken:
        return f"rejected ({broken[0][0]}): {broken[0][1]}", None
    try:
        e = estimate(p.model, p.cluster, layout, p.workload, result.assumptions)
    except ValueError as error:
        return f"rejected: {error}", None
    return ("estimated" if e.fits else "does not fit"), e


def _delta_row(base: Estimate, change: str, outcome: tuple[str, Estimate | None]) -> dict[str, Any]:
    status, other = outcome
    row: dict[str, Any] = {"change": change, "status": status, "text": f"{change}: {status}"}
    if other is None:
        return row
    step = other.step_time_s / base.step_time_s - 1
    peak = other.memory.peak_bytes - base.memory.peak_bytes
    bubble = other.bubble_fraction - base.bubble_fraction
    row |= {
        "step_time_s": other.step_time_s,
        "step_change": step,
        "peak_change_bytes": peak,
        "peak_stage": other.memory.peak_stage,
        "bubble_change": bubble,
        "text": (
            f"{change}: {peak / GiB:+.1f} GiB on stage {other.memory.peak_stage}, "
            f"{100 * bubble:+.1f} pts bubble, step {step:+.1%} ({status})"
        ),
    }
    return row


def explain(result: SearchResult, rank: int = 0) -> Explanation:
    """What limits ranked row ``rank`` and what each one-knob change would do.

    Raises ValueError when the search ranked fewer rows.
    """
    if not 0 <= rank < len(result.estimates):
        raise ValueError(f"rank must be between 0 and {len(result.estimates) - 1}, got {rank}")
    base = result.estimates[rank]
    moe = result.problem.model.is_moe
    rows = [_delta_row(base, c, _outcome(result, lay)) for c, lay in neighbours(base.layout, moe)]
    what_if = pd.DataFrame(rows)
    return Explanation(rank=rank, layout=base.layout, limits=limits(base), what_if=what_if)


def _as_row(item: Estimate | Mapping[str, Any] | pd.Series) -> dict[str, Any]:
    if isinstance(item, Estimate):
        return estimate_row(item)
    return item.to_dict() if isinstance(item, pd.Series) else dict(item)


def compare(
    a: Estimate | Mapping[str, Any] | pd.Series, b: Estimate | Mapping[str, Any] | pd.Series
) -> pd.DataFrame:
    """Two layouts side by side: every shared metric of ``a`` and ``b`` with b - a and b / a - 1.

    ``a`` and ``b`` are estimates or rows of ``SearchResult.layouts`` (Series or mappings).
    Layout fields come first (no deltas), then numbers.
    """
    left, right = _as_row(a), _as_row(b)
    names = [k for k in left if k in right and k != "warnings"]
    frame = pd.DataFrame(
        {"a": [left[k] for k in names], "b": [right[k] for k in names]}, index=names
    )
    frame.index.name = "metric"
    numeric = [k for k in names if k not in LAYOUT_COLUMNS and _is_number(left[k])]
    delta = {k: right[k] - left[k] for k in numeric}
    relative = {k: (right[k] / left[k] - 1) if left[k] else float("nan") for k in numeric}
    frame["delta"] = pd.Series(delta, dtype=float)
    frame["relative"] = pd.Series(relative, dtype=float)
    return frame


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
