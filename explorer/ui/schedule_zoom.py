"""Zoom for long schedule diagrams: a time window (percent of the pipelined part) that redraws
the diagram over that window only, re-binned, or one bar per action once few enough remain
(``explorer.schedules.aggregate``). Shown only for diagrams drawn in time bins."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from explorer.schedules.aggregate import needs_binning
from explorer.ui import cached

if TYPE_CHECKING:
    from explorer.charts.style import Figure
    from explorer.scenario import Scenario
    from explorer.schedules import StageTimes, Timeline
    from explorer.specs import ScheduleName
    from explorer.ui import inputs

ZOOM_KEY = "pipeline_zoom"
"""The layout diagram's zoom slider (the explorer has its own)."""


def window_slider(timeline: Timeline, key: str) -> tuple[float, float] | None:
    """A range slider over the step when ``timeline`` is drawn in bins; the window in s, or
    None for the whole step (nothing to zoom, or the slider at its full range)."""
    if timeline.makespan_s <= 0 or not needs_binning(timeline):
        return None
    low, high = st.slider(
        "Zoom: time window (% of the pipelined part)",
        min_value=0,
        max_value=100,
        value=(0, 100),
        key=key,
        help="The diagram draws this part of the step; with few enough actions per stage in "
        "the window it draws every action with its micro-batch number instead of time bins.",
    )
    if high <= low or (low, high) == (0, 100):
        return None
    span = timeline.makespan_s
    return (span * low / 100, span * high / 100)


@st.cache_data(max_entries=32, show_spinner=False)  # keyed on the small specs, not the events
def _shorter(
    name: ScheduleName, stages: int, microbatches: int, virtual: int, times: StageTimes
) -> Timeline | None:
    from explorer.schedules import build_schedule, simulate

    try:
        return simulate(build_schedule(name, stages, microbatches, virtual), times)
    except ValueError:
        return None


def drawn_timeline(timeline: Timeline, drawn: int) -> Timeline:
    """The timeline the diagram draws: the whole step, or its first ``drawn`` micro-batches'
    pattern (the whole step when the schedule cannot run with that many)."""
    s = timeline.schedule
    if drawn >= s.microbatches:
        return timeline
    return _shorter(s.name, s.stages, drawn, s.virtual, timeline.times) or timeline


def zoomed_figure(
    scenario: Scenario, case: inputs.TrainingCase, timeline: Timeline, drawn: int
) -> Figure | None:
    """The layout's diagram over the zoom window, or None (draw the page's cached figure)."""
    shown = drawn_timeline(timeline, drawn)
    window = window_slider(shown, ZOOM_KEY)
    if window is None:
        return None
    from explorer.charts.schedule import live_memory, schedule_figure

    specs = (case.model, case.cluster, case.layout, case.workload, scenario.assumptions)
    memory = cached.estimate(*specs).memory
    live = live_memory(memory.stages) if len(memory.stages) == shown.schedule.stages else None
    return schedule_figure(shown, live=live, window=window)
