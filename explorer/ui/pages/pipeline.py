"""Pipeline: the current layout's schedule, simulated, with live activations per stage."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from explorer.scenario import Scenario
from explorer.specs import SCHEDULES
from explorer.ui import bubble, cached, inputs, schedule_explorer, schedule_zoom
from explorer.ui.format import gib, percent, seconds
from explorer.ui.pages import (
    chart,
    expected_error,
    header,
    light_chart,
    markdown_table,
    opened,
    run_page,
)
from explorer.ui.sidebar import SCHEDULE_LABELS
from explorer.units import GiB

if TYPE_CHECKING:
    from explorer.estimate import Estimate
    from explorer.schedules import Timeline

COMPARE_KEY = "pipeline_compare"
DRAWN_KEY = "pipeline_drawn"


def _stage_table(est: Estimate) -> pd.DataFrame:
    rows = [
        {
            "part": part.stage,
            "layers": len(part.layers),
            "forward (ms)": part.forward_s * 1e3,
            "backward (ms)": part.backward_s * 1e3,
            "weight grad (ms)": part.weight_s * 1e3,
            "cycle (ms)": part.cycle_s * 1e3,
        }
        for part in est.stages
    ]
    table = pd.DataFrame(rows).set_index("part")
    memory = est.memory.stages
    if len(memory) == len(table):  # DualPipe times 2P model parts on P ranks
        table["peak memory (GiB)"] = [s.total_bytes / GiB for s in memory]
        table["micro-batches held"] = [s.microbatches_in_flight for s in memory]
    return table


def _drawn(timeline: Timeline) -> int:
    """Micro-batches to draw: the whole step, or its pattern (the person chooses)."""
    whole = timeline.schedule.microbatches
    few = cached.pattern_microbatches(timeline)
    if few >= whole:
        return whole
    labels = {few: f"Pattern: {few} micro-batches", whole: f"Whole step: {whole} micro-batches"}
    choice = st.segmented_control(
        "Draw", list(labels), format_func=labels.__getitem__, key=DRAWN_KEY, default=few,
        help="The pattern (2P micro-batches) shows warm-up, steady state and cool-down at a "
        "readable size; the whole step draws every micro-batch (binned when long).",
    )  # fmt: skip
    return choice or few


def _compare(scenario: Scenario, case: inputs.TrainingCase) -> None:
    """Other schedules for the same stage times, drawn only while their expander is open."""
    if opened("Schedules side by side", "pipeline_compare_open"):
        _comparison(scenario, case)


@st.fragment  # choosing schedules reruns this panel only
def _comparison(scenario: Scenario, case: inputs.TrainingCase) -> None:
    st.caption(
        "The same stage times under other schedules (interleaved with the layout's virtual "
        "stages, or 2). Step figures are for the whole step; the diagrams show its pattern, "
        "and a pattern shorter than the step has a larger bubble in its title: warm-up and "
        "cool-down weigh more in a short run."
    )
    others = [] if scenario.layout.schedule == "1f1b" else ["1f1b"]
    chosen = st.multiselect(
        "Schedules",
        SCHEDULES,
        default=[scenario.layout.schedule, *others],
        format_func=SCHEDULE_LABELS.__getitem__,
        key=COMPARE_KEY,
    )
    variants = cached.schedule_variants(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions, tuple(chosen)
    )
    rows = []
    for name, timeline, reason in variants:
        if timeline is None:
            st.warning(f"{SCHEDULE_LABELS[name]} cannot run this layout: {reason}")
            continue
        rows.append(
            {
                "schedule": SCHEDULE_LABELS[name],
                "pipeline time (s)": timeline.makespan_s,
                "bubble": percent(timeline.bubble_fraction),
                "most micro-batches held": max(timeline.peak_inflight),
            }
        )
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        specs = (case.model, case.cluster, case.layout, case.workload, scenario.assumptions)
        figure = cached.schedule_comparison_chart(*specs, tuple(chosen))
        if figure is not None:
            chart(figure, "schedule_comparison", theme=True)


def _verdict(est: Estimate, scenario: Scenario) -> None:
    """The page's answer first: how much of the pipeline idles, and which stage paces it."""
    layout = scenario.layout
    if layout.pp == 1:
        st.info(
            "**No pipeline**: PP = 1, so every GPU holds every layer and nothing waits on a "
            "neighbouring stage. Raise PP in the sidebar to see a schedule.",
            icon=":material/info:",
        )
        return
    pacing = cached.pacing_part(est)
    st.success(
        f"**{percent(est.bubble_fraction)} of the pipeline is bubble** "
        f"({SCHEDULE_LABELS[layout.schedule]}, {layout.pp} stages, {est.microbatches:,} "
        f"micro-batches): part {pacing.stage} paces it at {pacing.cycle_s * 1e3:.1f} ms per "
        "micro-batch.",
        icon=":material/view_timeline:",
    )


def _diagram_caption(est: Estimate, timeline: Timeline, drawn: int) -> str:
    caption = (
        f"Simulated action by action ({est.pipeline.method} timing for the step estimate). "
        "Bars are forward (F), backward (B) and weight-gradient (W) passes, numbered by "
        "micro-batch; the lower panel is each stage's GPU memory over the step: the activation "
        "sets it holds times their bytes, on top of its states and buffers (its peak is the "
        "Memory page's; hover for the sets held)."
    )
    return f"{caption} {bubble.sentence(est, bubble.drawn_bubble(timeline, drawn), drawn)}"


@st.fragment  # choosing the pattern or the whole step redraws the diagram only
def _diagram(
    scenario: Scenario, case: inputs.TrainingCase, est: Estimate, timeline: Timeline
) -> None:
    drawn = _drawn(timeline)
    specs = (case.model, case.cluster, case.layout, case.workload, scenario.assumptions)
    zoomed = schedule_zoom.zoomed_figure(scenario, case, timeline, drawn)
    if zoomed is not None:  # a window of the step: built for this run, so drawn by Plotly
        chart(zoomed, "schedule", theme=True)
    else:
        light_chart(cached.schedule_memory_chart(*specs, drawn), "schedule", theme=True)
    st.caption(_diagram_caption(est, timeline, drawn))


def render(scenario: Scenario) -> None:
    case = inputs.training_case(scenario)
    header("Pipeline schedule", scenario, case.model.name, case.cluster.gpu.name)
    est = cached.estimate(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions
    )
    timeline = cached.timeline(
        case.model, case.cluster, case.layout, case.workload, scenario.assumptions
    )
    _verdict(est, scenario)
    expected_error("schedule")
    cols = st.columns(4)
    cols[0].metric(
        "Micro-batches per step",
        f"{est.microbatches:,}",
        help="Global batch / (DP x micro-batch size): what each pipeline runs per step.",
    )
    cols[1].metric(
        "Pipeline part of the step",
        seconds(est.pipeline.makespan_s),
        help="From the first forward to the last backward; the step adds the optimizer and "
        "the exposed data-parallel communication.",
    )
    cols[2].metric(
        "Bubble",
        percent(est.bubble_fraction),
        help="Idle share of the pipelined part of the whole step (all its micro-batches).",
    )
    cols[3].metric(
        "Peak memory per GPU",
        gib(est.memory.peak_bytes),
        help="The Memory page's peak: the most loaded stage's GPU (GiB = 2^30 bytes).",
    )
    _diagram(scenario, case, est, timeline)
    schedule_explorer.render(scenario, case, est.microbatches)
    st.markdown("#### Per stage")
    table = _stage_table(est)
    floats = {c: ".2f" for c in table.columns if c != "layers"}
    st.markdown(markdown_table(table, floats, index=True))
    _compare(scenario, case)


if __name__ == "__main__":
    run_page("pipeline")
