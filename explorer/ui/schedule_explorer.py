"""The Pipeline page's free schedule explorer: the current model and layout under any schedule,
stage count and micro-batch count, with each stage's GPU memory in GiB under the diagram.

The core does the work (``explorer.estimate.explore``); this module draws the controls, the
diagram (zoomed by a time window, binned when long) and the per-stage memory table whose
peak is written out as ``fixed + sets x bytes per set`` so that it can be checked by hand.
Its cached wrappers live here, not in ``explorer.ui.cached``, because only this panel uses
them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from explorer.charts.style import Figure
from explorer.scenario import Overrides, Scenario
from explorer.specs import (
    SCHEDULES,
    V_SHAPED,
    ClusterSpec,
    Layout,
    ModelSpec,
    ScheduleName,
    TrainingWorkload,
)
from explorer.ui.assumptions import estimate_assumptions
from explorer.ui.format import gib, percent, seconds, sentence
from explorer.ui.pages import chart, number_columns
from explorer.ui.schedule_zoom import window_slider
from explorer.ui.sidebar import SCHEDULE_LABELS
from explorer.units import GiB

if TYPE_CHECKING:
    from explorer.estimate.explore import Exploration
    from explorer.ui import inputs

TOGGLE = "explorer_on"
SCHEDULE = "explorer_schedule"
STAGES = "explorer_stages"
MICROBATCHES = "explorer_microbatches"
VIRTUAL = "explorer_virtual"
WINDOW = "explorer_window"
MAX_STAGES = 64
"""Most stages the explorer takes: a UI bound keeping one simulation interactive."""
MAX_MICROBATCHES = 512
"""Most micro-batches the explorer takes. At the bounds, ``explore_schedule`` of Llama 3.1 405B
(DP 2, TP 8) on 64 stages x 512 took 1.126 s (1F1B), 1.949 s (ZB-H1) and 1.536 s (DualPipe) in
one run and 1.607 s, 2.503 s, 2.376 s in a second, and ``schedule_figure`` of that DualPipe
step 2.742 s (time.perf_counter on the shared 2-core development machine)."""
MAX_VIRTUAL = 8


@st.cache_data(max_entries=64, show_spinner=False)
def exploration(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
    shape: tuple[ScheduleName, int, int, int],
) -> Exploration:
    """explorer.estimate.explore.explore_schedule for (schedule, stages, micro-batches, V)."""
    from explorer.estimate.explore import explore_schedule

    schedule, stages, microbatches, virtual = shape
    assumptions = estimate_assumptions(dict(overrides))
    return explore_schedule(
        model, cluster, layout, workload, assumptions,
        schedule=schedule, stages=stages, microbatches=microbatches, virtual=virtual,
    )  # fmt: skip


def figure(x: Exploration, window: tuple[float, float] | None) -> Figure:
    """The explorer's diagram with each stage's memory (GiB) under it and the GPU's capacity."""
    from explorer.charts.schedule import LiveMemory, schedule_figure

    live = [LiveMemory(s.base_bytes, s.bytes_per_set) for s in x.stages]
    fig = schedule_figure(x.timeline, live=live, window=window)
    fig.add_hline(
        y=x.gpu_bytes / GiB,
        line={"dash": "dot", "width": 1, "color": "#888"},
        annotation_text="GPU capacity",
        row=2,
        col=1,
    )
    return fig


def stage_table(x: Exploration) -> pd.DataFrame:
    """One row per stage: states, the rest that does not scale, bytes per set, most sets held
    and the peak (GiB = 2^30 bytes); peak = fixed + most held x per set."""
    rows = [
        {
            "stage": s.stage,
            "model states (GiB)": s.states_bytes / GiB,
            "fixed, states included (GiB)": s.base_bytes / GiB,
            "activations per micro-batch (GiB)": s.bytes_per_set / GiB,
            "most micro-batches held": s.most_sets,
            "peak (GiB)": s.peak_bytes / GiB,
            "free (GiB)": (x.gpu_bytes - s.peak_bytes) / GiB,
        }
        for s in x.stages
    ]
    return pd.DataFrame(rows).set_index("stage")


def peak_sentence(x: Exploration) -> str:
    """The peak stage's memory written out as a sum a person can check."""
    p = x.peak_stage
    verdict = "fits" if p.peak_bytes <= x.gpu_bytes else "does not fit"
    return (
        f"Peak: stage {p.stage} holds {p.most_sets:g} micro-batches' activations of "
        f"{gib(p.bytes_per_set, 3)} each on top of {gib(p.base_bytes, 2)} that do not depend on "
        f"them (its {gib(p.states_bytes, 2)} of model states included): "
        f"{gib(p.base_bytes, 2)} + {p.most_sets:g} × {gib(p.bytes_per_set, 3)} = "
        f"{gib(p.peak_bytes, 2)} of {gib(x.gpu_bytes, 1)}, so it {verdict}."
    )


def _defaults(scenario: Scenario, microbatches: int) -> None:
    layout = scenario.layout
    state = st.session_state
    state.setdefault(SCHEDULE, layout.schedule)
    stages = min(max(layout.pp, 2), MAX_STAGES)
    state.setdefault(STAGES, stages)
    # The layout's micro-batches, or enough to show warm-up, steady state and cool-down (2P).
    state.setdefault(MICROBATCHES, min(max(microbatches, 1), max(8, 2 * stages)))
    state.setdefault(VIRTUAL, min(max(layout.virtual_stages, 2), MAX_VIRTUAL))


def _virtual_help(schedule: str) -> str:
    text = "Model chunks per stage of interleaved 1F1B (Megatron's virtual pipeline size)."
    if schedule in V_SHAPED:
        return text + " Off for this schedule: ZB-V and DualPipeV place two chunks per rank."
    if schedule != "interleaved":
        return text + " Off for this schedule: it runs one chunk per stage."
    return text


def render(scenario: Scenario, case: inputs.TrainingCase, microbatches: int) -> None:
    """The explorer, behind its toggle (nothing is estimated while it is off)."""
    _panel(scenario, case, microbatches)


@st.fragment  # the explorer's controls rerun this panel only
def _panel(scenario: Scenario, case: inputs.TrainingCase, microbatches: int) -> None:
    on = st.toggle(
        "Explore any schedule",
        key=TOGGLE,
        help="Another schedule, stage count or micro-batch count for this model and layout "
        "(its DP, TP, CP, ZeRO, recompute and micro-batch size kept), estimated and simulated, "
        "with each stage's memory in GiB. The sidebar's layout does not change.",
    )
    if not on:
        return
    _defaults(scenario, microbatches)
    cols = st.columns(4)
    schedule = cols[0].selectbox(
        "Schedule",
        SCHEDULES,
        key=SCHEDULE,
        format_func=SCHEDULE_LABELS.__getitem__,
        help="The pipeline schedule to simulate (explorer.schedules).",
    )
    stages = cols[1].number_input(
        "Stages",
        min_value=1,
        max_value=MAX_STAGES,
        key=STAGES,
        help="Pipeline stages P; the model's blocks are split over them as the Memory page does.",
    )
    count = cols[2].number_input(
        "Micro-batches",
        min_value=1,
        max_value=MAX_MICROBATCHES,
        key=MICROBATCHES,
        help="Micro-batches M each pipeline runs per step (the global batch becomes "
        "M x DP x micro-batch size).",
    )
    virtual = cols[3].number_input(
        "Virtual stages",
        min_value=1,
        max_value=MAX_VIRTUAL,
        key=VIRTUAL,
        disabled=schedule != "interleaved",
        help=_virtual_help(schedule),
    )
    specs = (case.model, case.cluster, case.layout, case.workload, scenario.assumptions)
    shape = (schedule, int(stages), int(count), int(virtual))
    try:
        x = exploration(*specs, shape)
    except ValueError as error:
        st.warning(f"{SCHEDULE_LABELS[schedule]} cannot run this: {sentence(error)}")
        return
    est = x.estimate
    st.markdown(
        f"**{SCHEDULE_LABELS[schedule]}, {stages} stages, {x.microbatches} micro-batches**: "
        f"bubble {percent(x.timeline.bubble_fraction)} of the pipelined part "
        f"({seconds(x.timeline.makespan_s)}), step {seconds(est.step_time_s)}, peak "
        f"{gib(x.peak_stage.peak_bytes)} per GPU on stage {x.peak_stage.stage}."
    )
    needed, have = x.layout.world_size, case.cluster.world_size
    if needed != have:
        lay = x.layout
        st.caption(
            f"This shape needs {needed:,} GPUs (DP {lay.dp} × TP {lay.tp} × PP {lay.pp} × "
            f"CP {lay.cp}); the sidebar's cluster has {have:,}, so it is estimated as if the "
            "cluster had that many of the same GPUs and links."
        )
    window = window_slider(x.timeline, WINDOW)
    chart(figure(x, window), "explorer_chart", theme=True)
    st.caption(peak_sentence(x))
    table = stage_table(x)
    st.dataframe(table, width="stretch", column_config=number_columns(table.columns, "%.3f"))
