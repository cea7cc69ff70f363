"""Memory: bytes per GPU by category for every pipeline stage, against the GPU's capacity."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.charts.colors import memory_label
from explorer.estimate.fixes import fit_status
from explorer.scenario import LayoutInputs, Scenario
from explorer.specs import Layout
from explorer.ui import cached, inputs, measured_input, sidebar
from explorer.ui.format import gib, percent, seconds
from explorer.ui.pages import (
    expected_error,
    header,
    light_chart,
    markdown_table,
    number_columns,
    opened,
    run_page,
)
from explorer.ui.state import key
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


def breakdown_rows(stage: StageMemory) -> list[tuple[str, str, float]]:
    """(category, part, bytes) of everything on the stage's GPU at its peak: the model states,
    the named buffers behind activations, temporary and communication, the runtime and the
    headroom. Their sum is the stage's total (a test checks it over presets and layouts)."""
    b, acts = stage.breakdown, stage.activation_parts
    states = ("parameters", "gradients", "master_weights", "optimizer_states")
    rows = [("Model states", memory_label(name), getattr(b, name)) for name in states]
    rows += [
        ("Activations", "transformer blocks", acts.blocks),
        ("Activations", "embedding", acts.embedding),
        ("Activations", "LM head and logits", acts.head),
        ("Activations", "multi-token prediction", acts.mtp),
        ("Activations", "recompute working set", acts.recompute_working),
        *(("Temporary buffers", name, value) for name, value in stage.temporary_parts),
        *(("Communication buffers", name, value) for name, value in stage.communication_parts),
        ("Runtime", "CUDA context and library workspaces", b.runtime),
        ("Headroom", "allocator reserve (an assumption)", b.headroom),
    ]
    return [row for row in rows if row[2] or row[0] == "Model states"]


def _parts(stage: StageMemory) -> pd.DataFrame:
    rows = [*breakdown_rows(stage), ("Total", "the stage's peak", stage.total_bytes)]
    return pd.DataFrame(
        [
            {"category": c, "part": part, "GiB": value / GiB, "bytes": value}
            for c, part, value in rows
        ]
    )


def _axes(case: inputs.TrainingCase) -> None:
    if not (box := opened("What each parallel axis splits and what it replicates", "memory_axes")):
        return
    roles = cached.axis_roles(case.model, case.layout, case.workload)
    box.table(
        pd.DataFrame(roles, columns=["axis", "degree", "splits", "replicates"]).set_index("axis")
    )


def _verdict(memory: TrainingMemory, gpu_name: str, reserve_bytes: float) -> None:
    """The page's answer, once: fits (green), fits inside the reserve (amber), or not (red)."""
    free = memory.gpu_bytes - memory.peak_bytes
    share = percent(memory.peak_bytes / memory.gpu_bytes, 0)
    status = fit_status(memory.peak_bytes, memory.gpu_bytes, reserve_bytes)
    if status == "fits":
        st.success(
            f"**Fits**: the peak stage uses {share} of {gpu_name}'s memory, "
            f"{gib(free)} free (headroom included).",
            icon=":material/check_circle:",
        )
    elif status == "tight":
        st.warning(
            f"**Fits, near the edge**: {gib(free)} free at the peak stage, less than your "
            f"{gib(reserve_bytes)} reserve ({share} of {gpu_name}'s memory).",
            icon=":material/warning:",
        )
    else:
        st.error(
            f"**Does not fit**: stage {memory.peak_stage} needs {gib(memory.peak_bytes)}, "
            f"{gib(-free)} more than the {gib(memory.gpu_bytes)} of one GPU.",
            icon=":material/block:",
        )


def reserve_input(container: DeltaGenerator | None = None) -> None:
    """The reserve a person keeps free per GPU (a scenario input: in the link)."""
    (container or st).number_input(
        "Reserve (GiB)",
        min_value=0.0,
        max_value=1024.0,
        step=0.5,
        key=key("reserve"),
        help="Free memory per GPU you want left at the peak (fragmentation, a longer batch, "
        "buffers no estimate sees). Less than this shows amber. GiB = 2^30 bytes.",
    )


def _apply_fix(layout: Layout) -> None:
    sidebar.apply_layout(layout_inputs(layout))


def layout_inputs(layout: Layout) -> LayoutInputs:
    """The scenario's layout fields of a spec (a fix's layout back into the sidebar)."""
    return LayoutInputs(**{f.name: getattr(layout, f.name) for f in fields(LayoutInputs)})


def _fixes(case: inputs.TrainingCase, scenario: Scenario) -> None:
    fixes = cached.memory_fixes(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions
    )
    if not fixes:
        st.markdown(
            "No single change, nor any two of them (more PP, CP, TP or EP from DP, ZeRO, "
            "recompute, a smaller micro-batch), makes it fit on these GPUs: add GPUs or "
            "try the Meshes page."
        )
        return
    st.markdown("**What would make it fit** (each estimated; fastest step first)")
    for index, fix in enumerate(fixes):
        text, peak, step, button = st.columns([6, 3, 3, 2], vertical_alignment="center")
        text.markdown(fix.change)
        peak.markdown(f"peak {gib(fix.peak_bytes)} ({gib(fix.free_bytes)} free)")
        step.markdown(f"step {seconds(fix.step_time_s)}")
        button.button("Apply", key=f"memory_fix_{index}", on_click=_apply_fix, args=(fix.layout,))


def render(scenario: Scenario) -> None:
    case = inputs.training_case(scenario)
    header("Memory per GPU", scenario, case.model.name, case.cluster.gpu.name)
    memory = cached.training_memory(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions
    )
    peak = memory.stages[memory.peak_stage]
    free = memory.gpu_bytes - memory.peak_bytes
    _verdict(memory, case.cluster.gpu.name, scenario.reserve_gib * GiB)
    expected_error("memory")
    cols = st.columns(5)
    cols[0].metric(
        "Peak per GPU",
        gib(memory.peak_bytes),
        help="The most loaded stage's GPU at its fullest moment of the step, every category "
        "included (headroom too). GiB = 2^30 bytes.",
    )
    cols[1].metric(
        "GPU capacity", gib(memory.gpu_bytes), help=f"{case.cluster.gpu.name}, vendor figure."
    )
    cols[2].metric(
        "Free at peak" if free >= 0 else "Over capacity",
        gib(abs(free)),
        help="Capacity minus the peak; compared with your reserve for the amber verdict.",
    )
    cols[3].metric(
        "Peak stage",
        f"{memory.peak_stage} of {len(memory.stages)}",
        help="Pipeline stages are numbered from 0; the first holds the most activations in "
        "1F1B, the last the LM head.",
    )
    reserve_input(cols[4])
    if not memory.fits:
        _fixes(case, scenario)
    measured_input.render(case, scenario)
    # The verdict says whether it fits; the list keeps the other warnings.
    others = [w for w in memory.warnings if not w.startswith("does not fit")]
    if others:
        st.warning("\n".join(f"- {w[0].upper()}{w[1:]}" for w in others), icon=":material/info:")
    figure = cached.memory_chart(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions
    )
    light_chart(figure, "memory_chart")
    st.markdown(f"#### Inside the peak stage ({memory.peak_stage})")
    st.markdown(markdown_table(_parts(peak), {"GiB": ".2f", "bytes": ",.0f"}))
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
