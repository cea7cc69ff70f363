"""Memory: bytes per GPU by category for every pipeline stage, against the GPU's capacity."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from explorer.scenario import Scenario
from explorer.ui import cached, inputs
from explorer.ui.charts.colors import memory_label
from explorer.ui.format import gib, percent
from explorer.ui.pages import chart, expected_error, header, number_columns, opened, run_page
from explorer.units import GiB

if TYPE_CHECKING:
    from explorer.memory import StageMemory, TrainingMemory


def _layers(stage: StageMemory) -> str:
    """Block indices as ranges: ``0-19`` or ``0-3, 56-60`` (DualPipe)."""
    if not stage.layers:
        return "none"
    runs: list[list[int]] = []
    for index in stage.layers:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)


def _stage_table(memory: TrainingMemory) -> pd.DataFrame:
    rows = []
    for stage in memory.stages:
        row: dict[str, object] = {"stage": stage.stage, "layers": _layers(stage)}
        row |= {
            f"{memory_label(c)} (GiB)": value / GiB
            for c, value in stage.breakdown.as_dict().items()
        }
        row["total (GiB)"] = stage.total_bytes / GiB
        row["micro-batches in flight"] = stage.microbatches_in_flight
        rows.append(row)
    return pd.DataFrame(rows).set_index("stage")


def _parts(stage: StageMemory) -> pd.DataFrame:
    """The named buffers behind the activations, temporary and communication categories."""
    acts = stage.activation_parts
    rows = [
        ("Activations", "transformer blocks", acts.blocks),
        ("Activations", "embedding", acts.embedding),
        ("Activations", "LM head and logits", acts.head),
        ("Activations", "multi-token prediction", acts.mtp),
        ("Activations", "recompute working set", acts.recompute_working),
        *(("Temporary buffers", name, value) for name, value in stage.temporary_parts),
        *(("Communication buffers", name, value) for name, value in stage.communication_parts),
    ]
    return pd.DataFrame(
        [
            {"category": c, "part": part, "GiB": value / GiB, "bytes": value}
            for c, part, value in rows
            if value
        ]
    )


def _axes(case: inputs.TrainingCase) -> None:
    st.markdown("#### What each parallel axis splits and what it replicates")
    roles = cached.axis_roles(case.model, case.layout, case.workload)
    st.table(
        pd.DataFrame(roles, columns=["axis", "degree", "splits", "replicates"]).set_index("axis")
    )


def render(scenario: Scenario) -> None:
    case = inputs.training_case(scenario)
    header("Memory per GPU", scenario, case.model.name, case.cluster.gpu.name)
    memory = cached.training_memory(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions
    )
    peak = memory.stages[memory.peak_stage]
    free = memory.gpu_bytes - memory.peak_bytes
    cols = st.columns(4)
    cols[0].metric("Peak per GPU", gib(memory.peak_bytes), help="The most loaded stage's GPU.")
    cols[1].metric("GPU capacity", gib(memory.gpu_bytes), help=case.cluster.gpu.name)
    cols[2].metric("Free at peak" if free >= 0 else "Over capacity", gib(abs(free)))
    cols[3].metric("Peak stage", f"{memory.peak_stage} of {len(memory.stages)}")
    expected_error("memory")
    if memory.fits:
        share = percent(memory.peak_bytes / memory.gpu_bytes, 0)
        st.success(
            f"Fits: the peak stage uses {share} of {case.cluster.gpu.name}'s memory, "
            "headroom included."
        )
    else:
        st.error(
            f"Does not fit: stage {memory.peak_stage} needs {gib(memory.peak_bytes)}, "
            f"{gib(-free)} more than the {gib(memory.gpu_bytes)} of one GPU."
        )
    if memory.warnings:
        st.warning(
            "\n".join(f"- {w[0].upper()}{w[1:]}" for w in memory.warnings),
            icon=":material/warning:",
        )
    figure = cached.memory_chart(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions
    )
    chart(figure, "memory_chart")
    st.markdown(f"#### Inside the peak stage ({memory.peak_stage})")
    st.dataframe(
        _parts(peak),
        hide_index=True,
        width="stretch",
        column_config={
            "GiB": st.column_config.NumberColumn(format="%.2f"),
            "bytes": st.column_config.NumberColumn(format="localized"),
        },
    )
    _axes(case)
    if box := opened("Every stage, by category (GiB = 2^30 bytes)", "memory_stages"):
        table = _stage_table(memory)
        box.dataframe(table, width="stretch", column_config=number_columns(table.columns))
    if box := opened("Assumptions and conventions", "memory_assumptions"):
        box.markdown("\n".join(f"- {note}" for note in memory.notes))
        box.dataframe(
            pd.Series(memory.assumptions.as_dict(), name="value").astype(str).to_frame(),
            width="stretch",
        )


if __name__ == "__main__":
    run_page("memory")
