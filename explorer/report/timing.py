"""The training report's schedule and communication sections (seconds, from the estimate)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from explorer.estimate import Estimate, bottleneck_part
from explorer.report.tables import Section, Table
from explorer.report.training import TrainingCase, layers_text, stage_time_rows
from explorer.units import MiB

AXIS_NAMES = {
    "tp": "TP (tensor)",
    "cp": "CP (context)",
    "ep": "EP (experts)",
    "dp": "DP (data, ZeRO)",
    "pp": "PP (pipeline)",
}
"""Mesh axis -> its name in tables."""


# ------------------------------------------------------------------------------ schedule


def schedule_table(case: TrainingCase) -> Table:
    """Per pipeline rank: blocks held, activation sets in flight, busy and idle seconds."""
    est = case.estimate
    busy = est.pipeline.busy_s
    rows = [
        {
            "stage": stage.stage,
            "layers": layers_text(stage.layers),
            "micro-batches in flight": stage.microbatches_in_flight,
            "busy (s)": busy[i] if i < len(busy) else None,
            "idle (s)": est.pipeline.makespan_s - busy[i] if i < len(busy) else None,
        }
        for i, stage in enumerate(est.memory.stages)
    ]
    note = "In flight: most activation sets held at once, in stage-equivalent micro-batches."
    return Table("Per stage", pd.DataFrame(rows), {"micro-batches in flight": "{:g}"}, note)


def schedule_section(case: TrainingCase) -> Section:
    """Schedule, micro-batches, bubble fraction and activations in flight per stage."""
    est, lay = case.estimate, case.layout
    peak_inflight = max(s.microbatches_in_flight for s in est.memory.stages)
    times = Table(
        "Seconds per micro-batch of each part (exposed per-micro-batch communication included)",
        stage_time_rows(est.stages),
        note="A part is a pipeline rank, or under DualPipe one of the P model stages.",
    )
    return Section(
        "schedule",
        "Pipeline schedule",
        paragraphs=(
            f"{lay.schedule} with P = {lay.pp} stages, M = {est.microbatches} micro-batches "
            f"per step, V = {lay.virtual_stages} chunks per stage: bubble "
            f"{est.bubble_fraction:.1%} of the pipelined {est.pipeline.makespan_s:,.2f} s "
            f"({est.pipeline.method}); at most {peak_inflight:g} micro-batches of activations "
            f"in flight on one stage.",
        ),
        tables=(schedule_table(case), times),
        figures=("schedule",) if lay.pp > 1 else (),
    )


def schedule_results(case: TrainingCase) -> dict[str, Any]:
    est = case.estimate
    return {
        "schedule": case.layout.schedule,
        "stages": case.layout.pp,
        "microbatches": est.microbatches,
        "virtual": case.layout.virtual_stages,
        "bubble_fraction": est.bubble_fraction,
        "makespan_s": est.pipeline.makespan_s,
        "method": est.pipeline.method,
        "peak_inflight": [s.microbatches_in_flight for s in est.memory.stages],
        "busy_s": list(est.pipeline.busy_s),
    }


# ------------------------------------------------------------------------------ communication


def _share_table(title: str, label: str, exposed: dict[str, float], step_s: float) -> Table:
    frame = pd.DataFrame(
        {
            label: list(exposed),
            "exposed per step (s)": list(exposed.values()),
            "share of step": [v / step_s if step_s else 0.0 for v in exposed.values()],
        }
    )
    return Table(title, frame, {"exposed per step (s)": "{:,.3f}", "share of step": "{:.1%}"})


def collectives_table(est: Estimate) -> Table:
    """Every collective of the part that paces the pipeline, with time and exposure."""
    part = bottleneck_part(est.stages)
    rows = [
        {
            "axis": c.axis,
            "collective": c.kind,
            "what": c.what,
            "phase": c.phase,
            "calls": c.count,
            "MiB per call": c.size_bytes / MiB,
            "time (s)": c.time_s,
            "exposed (s)": c.exposed_s,
        }
        for c in part.collectives
    ]
    note = (
        "forward/backward rows: per micro-batch; step rows: once per step. Exposed = time not "
        "hidden behind compute."
    )
    formats = {"calls": "{:,.4g}", "time (s)": "{:,.4f}", "exposed (s)": "{:,.4f}"}
    return Table(f"Collectives of part {part.stage} (it paces the pipeline)", pd.DataFrame(rows),
                 formats, note)  # fmt: skip


def communication_section(case: TrainingCase) -> Section:
    """Exposed seconds per step by collective and by axis, and the pacing part's collectives."""
    est = case.estimate
    step = est.step_time_s
    by_axis = {AXIS_NAMES.get(a, a): s for a, s in est.exposed_comm_by_axis_s.items()}
    total = sum(est.exposed_comm_s.values())
    return Section(
        "communication",
        "Communication",
        paragraphs=(
            f"{total:,.2f} s of each {step:,.2f} s step is communication that compute does not "
            f"hide ({total / step if step else 0:.1%}), counted on the part that paces the "
            "pipeline plus the slowest rank's per-step tail.",
        ),
        tables=(
            _share_table("Exposed time by collective", "collective", est.exposed_comm_s, step),
            _share_table("Exposed time by axis", "axis", by_axis, step),
            collectives_table(est),
        ),
        figures=("communication",),
    )


def communication_results(est: Estimate) -> dict[str, Any]:
    return {
        "exposed_comm_s": dict(est.exposed_comm_s),
        "exposed_comm_by_axis_s": dict(est.exposed_comm_by_axis_s),
    }
