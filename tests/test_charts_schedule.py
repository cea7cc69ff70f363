"""Schedule figures: one bar trace per action kind, every action a bar, activations below."""

from __future__ import annotations

import time

import pytest

from explorer.charts.schedule import (
    KIND_COLOURS,
    schedule_comparison_figure,
    schedule_figure,
)
from explorer.schedules import StageTimes, build_schedule, simulate


def _timeline(name: str, stages: int = 4, microbatches: int = 8, virtual: int = 1):
    times = StageTimes.uniform(stages, 1.0, 1.0, 1.0)
    return simulate(build_schedule(name, stages, microbatches, virtual), times)


def _bars(fig):
    return [t for t in fig.data if t.type == "bar"]


@pytest.mark.parametrize(
    ("name", "virtual", "kinds"),
    [("1f1b", 1, "FB"), ("interleaved", 2, "FB"), ("zb-h1", 1, "FBW"), ("dualpipe", 1, "FBW")],
)
def test_schedule_figure_has_a_bar_per_action_and_a_trace_per_kind(name, virtual, kinds):
    timeline = _timeline(name, virtual=virtual)
    fig = schedule_figure(timeline)
    bars = _bars(fig)
    assert [t.legendgroup for t in bars] == list(kinds)
    assert sum(len(t.x) for t in bars) == len(timeline.events)
    assert [t.marker.color for t in bars] == [KIND_COLOURS[k] for k in kinds]
    lines = [t for t in fig.data if t.type == "scatter"]
    assert len(lines) == timeline.schedule.stages  # activations held, one line per stage


def test_bars_run_from_start_to_end_with_micro_batch_text_and_exact_hover():
    timeline = _timeline("1f1b")
    forward = _bars(schedule_figure(timeline))[0]
    first = timeline.events[0]
    assert (forward.base[0], forward.x[0], forward.y[0]) == (first.start_s, 1.0, first.stage)
    assert forward.text[0] == str(first.microbatch)
    assert "start" in forward.hovertemplate and "end" in forward.hovertemplate
    assert list(forward.customdata[0][:2]) == [first.start_s, first.end_s]


def test_stage_0_is_the_top_row_and_time_is_in_seconds():
    fig = schedule_figure(_timeline("gpipe"), title="GPipe")
    assert fig.layout.yaxis.autorange == "reversed"
    assert fig.layout.yaxis.ticktext[0] == "stage 0"
    assert fig.layout.xaxis2.title.text == "time (s)"
    assert fig.layout.title.text == "GPipe"


def test_comparison_stacks_one_diagram_per_schedule_with_one_legend_entry_per_kind():
    timelines = [_timeline("1f1b"), _timeline("zb-h1"), _timeline("dualpipe")]
    fig = schedule_comparison_figure(timelines)
    bars = _bars(fig)
    assert len(bars) == 2 + 3 + 3
    assert sum(len(t.x) for t in bars) == sum(len(t.events) for t in timelines)
    assert sorted(t.legendgroup for t in bars if t.showlegend) == ["B", "F", "W"]
    assert {t.yaxis for t in bars} == {"y", "y2", "y3"}
    assert "dualpipe" in fig.layout.annotations[2].text


def test_comparison_needs_a_timeline():
    with pytest.raises(ValueError, match="at least one"):
        schedule_comparison_figure([])


def test_figures_for_64_microbatches_build_quickly():
    timeline = _timeline("interleaved", stages=8, microbatches=64, virtual=2)
    start = time.perf_counter()
    schedule_figure(timeline)
    assert time.perf_counter() - start < 2.0  # about 25 ms on a development machine
