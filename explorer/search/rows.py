"""Table rows: an estimate as a flat record, a rejection as a record, and their DataFrames.

Column names carry units (``_s``, ``_bytes``); memory categories appear as ``mem_<category>_bytes``
of the peak stage (docs/ARCHITECTURE.md); exposed communication as ``exposed_<kind>_s`` per
collective kind and ``exposed_<axis>_s`` per mesh axis. ``spare_bytes`` is the GPU memory left
above the peak (the tie-break of the ranking); ``headroom`` is the allocator reserve inside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any

import pandas as pd

from explorer.comm import COLLECTIVE_KINDS
from explorer.cost import cost_per_million_tokens
from explorer.estimate import Estimate
from explorer.estimate.stages import step_tails_s
from explorer.memory.training import CATEGORIES
from explorer.mesh import Candidate, Rejection
from explorer.specs import MESH_ORDER

LAYOUT_COLUMNS = (
    "tp", "pp", "dp", "cp", "ep", "etp", "zero", "mbs", "recompute", "schedule", "virtual",
)  # fmt: skip
"""The layout's fields, in the order tables show them (CLI JSON keys)."""

MEMORY_COLUMNS = tuple(f"mem_{name}_bytes" for name in CATEGORIES)
KIND_COLUMNS = tuple(f"exposed_{kind.replace('-', '_')}_s" for kind in COLLECTIVE_KINDS)
AXIS_COLUMNS = tuple(f"exposed_{axis}_s" for axis in MESH_ORDER)
TIME_COLUMNS = ("compute_s", "exposed_comm_s", "optimizer_s", "bubble_s")
"""Step-time components, each zero or more; they sum to ``step_time_s`` (``time_components``)."""

REJECTED_COLUMNS = (*LAYOUT_COLUMNS, "kind", "reason", "num_layouts", "peak_bytes", "step_time_s")


_LAYOUT_FIELDS = attrgetter(*LAYOUT_COLUMNS)


def candidate_fields(c: Candidate) -> dict[str, Any]:
    """The layout fields of a candidate (None where its subtree leaves them open)."""
    return dict(zip(LAYOUT_COLUMNS, _LAYOUT_FIELDS(c), strict=True))


def _layout_fields(e: Estimate) -> dict[str, Any]:
    lay = e.layout
    return {
        "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "cp": lay.cp, "ep": lay.ep, "etp": lay.etp,
        "zero": lay.zero, "mbs": lay.micro_batch_size, "recompute": lay.recompute,
        "schedule": lay.schedule, "virtual": lay.virtual_stages,
    }  # fmt: skip


def _peak_breakdown(e: Estimate) -> dict[str, float]:
    peak = next(s for s in e.memory.stages if s.stage == e.memory.peak_stage)
    return {f"mem_{k}_bytes": v for k, v in peak.breakdown.as_dict().items()}


def _exposed(e: Estimate) -> dict[str, float]:
    by_kind = {f"exposed_{k.replace('-', '_')}_s": v for k, v in e.exposed_comm_s.items()}
    by_axis = {f"exposed_{k}_s": v for k, v in e.exposed_comm_by_axis_s.items()}
    return {**dict.fromkeys(KIND_COLUMNS + AXIS_COLUMNS, 0.0), **by_kind, **by_axis}


def _rank_compute_s(e: Estimate) -> list[float]:
    """Compute seconds per step of each pipeline rank (DualPipe ranks run half the
    micro-batches through each of their two parts)."""
    parts = [s.compute.forward_s + s.compute.backward_s for s in e.stages]
    if e.layout.schedule != "dualpipe" or e.layout.pp == 1:
        return [e.microbatches * c for c in parts]
    return [e.microbatches / 2 * (c + parts[-1 - r]) for r, c in enumerate(parts)]


def _rank_optimizer_s(e: Estimate) -> list[float]:
    parts = [s.optimizer_s for s in e.stages]
    if e.layout.schedule != "dualpipe" or e.layout.pp == 1:
        return parts
    return [o + parts[-1 - r] for r, o in enumerate(parts)]


def time_components(e: Estimate) -> dict[str, float]:
    """Compute, exposed communication, optimizer and bubble seconds; they sum to the step.

    Seen from the busiest pipeline rank: its compute, its exposed per-micro-batch
    communication plus the slowest tail's per-step communication, the slowest tail's
    optimizer step, and the bubble: the rank's idle time within the pipelined part.
    Source: explorer.estimate (step = makespan + slowest tail).
    """
    busy = list(e.pipeline.busy_s)
    r = max(range(len(busy)), key=busy.__getitem__)
    compute = min(_rank_compute_s(e)[r], busy[r])
    tails = step_tails_s(e.stages, e.layout)
    t = max(range(len(tails)), key=tails.__getitem__)
    optimizer = min(_rank_optimizer_s(e)[t], e.tail_s)
    return {
        "compute_s": compute,
        "exposed_comm_s": busy[r] - compute + e.tail_s - optimizer,
        "optimizer_s": optimizer,
        "bubble_s": max(0.0, e.pipeline.makespan_s - busy[r]),
    }


def estimate_row(e: Estimate) -> dict[str, Any]:
    """One ranked layout as a flat record (layout, throughput, time, memory, communication)."""
    return {
        **_layout_fields(e),
        "microbatches": e.microbatches,
        "step_time_s": e.step_time_s,
        "tokens_per_s": e.tokens_per_s,
        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
        "mfu": e.mfu,
        "hfu": e.hfu,
        "bubble_fraction": e.bubble_fraction,
        **time_components(e),
        "peak_bytes": e.memory.peak_bytes,
        "peak_stage": e.memory.peak_stage,
        "gpu_bytes": e.memory.gpu_bytes,
        "spare_bytes": e.memory.gpu_bytes - e.memory.peak_bytes,
        **_peak_breakdown(e),
        **_exposed(e),
        "pipeline_method": e.pipeline.method,
        "warnings": tuple(e.warnings),
        "num_warnings": len(e.warnings),
    }


def layouts_frame(estimates: Iterable[Estimate]) -> pd.DataFrame:
    """Ranked layouts, best first, one row each (index 0 is the best)."""
    rows = [estimate_row(e) for e in estimates]
    frame = pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(_empty_columns()))
    frame.index.name = "rank"
    return frame


def _empty_columns() -> tuple[str, ...]:
    return (
        *LAYOUT_COLUMNS, "microbatches", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu",
        "mfu", "hfu", "bubble_fraction", *TIME_COLUMNS, "peak_bytes", "peak_stage",
        "gpu_bytes", "spare_bytes", *MEMORY_COLUMNS, *KIND_COLUMNS, *AXIS_COLUMNS,
        "pipeline_method", "warnings", "num_warnings",
    )  # fmt: skip


def rejection_row(r: Rejection, extra: Mapping[str, float] | None = None) -> dict[str, Any]:
    """A rejected subtree as a record: its fields (None = any), kind, reason and size."""
    values = {"peak_bytes": float("nan"), "step_time_s": float("nan"), **(extra or {})}
    return {
        **candidate_fields(r.candidate),
        "kind": r.kind,
        "reason": r.reason,
        "num_layouts": r.num_layouts,
        **values,
    }


def rejected_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rejected layouts and subtrees; filter on ``kind`` (a categorical column)."""
    frame = pd.DataFrame(rows, columns=list(REJECTED_COLUMNS))
    frame["kind"] = frame["kind"].astype("category")
    return frame


def with_cost_column(
    frame: pd.DataFrame, num_gpus: int, price_per_gpu_hour: float | None
) -> pd.DataFrame:
    """The ranked layouts with ``cost_per_million_tokens_usd`` (NaN without a price).

    Every layout of a search occupies the same ``num_gpus``, so the column ranks as throughput
    does; it tells what a million training tokens cost at that price (explorer.cost).
    """
    out = frame.copy()
    if price_per_gpu_hour is None or out.empty:
        out["cost_per_million_tokens_usd"] = float("nan")
        return out
    out["cost_per_million_tokens_usd"] = [
        cost_per_million_tokens(num_gpus, price_per_gpu_hour, t) if t > 0 else float("nan")
        for t in out["tokens_per_s"]
    ]
    return out
