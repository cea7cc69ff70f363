"""The static SVG drawing of a figure (explorer.ui.svg_chart): bars land where their values
say, hover text is the trace's own template filled in, and the app's figures keep their text."""

from __future__ import annotations

import re

import plotly.graph_objects as go
import pytest

from explorer.charts.memory import training_memory_figure
from explorer.estimate import estimate, estimate_timeline
from explorer.presets import load_cluster, load_model
from explorer.specs import Layout, TrainingWorkload
from explorer.ui.svg_chart import cached_svg, figure_svg, hover_text, nice_ticks, tick_label

RECT = re.compile(
    r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="(#\w+)"'
)


def _two_stacks() -> go.Figure:
    """Two categories, two stacked traces, a fixed value range and round margins."""
    fig = go.Figure()
    fig.add_bar(name="p", x=["a", "b"], y=[1, 2], marker_color="#111111")
    fig.add_bar(name="q", x=["a", "b"], y=[3, 2], marker_color="#222222")
    fig.update_layout(
        barmode="stack",
        bargap=0.2,
        height=600,
        margin={"l": 100, "r": 100, "t": 100, "b": 100},
        yaxis={"range": [0, 5]},
    )
    return fig


def test_stacked_bars_are_drawn_at_their_values():
    # viewBox 1000 wide: the plot is 800 x 400 px from (100, 100). Two categories span
    # [-0.5, 1.5]; a bar is 0.8 wide (bargap 0.2), so "a" runs from 140 to 460 px. On [0, 5]
    # each unit is 80 px: p's 1 is y 420 to 500; q's 3 sits on it, y 180 to 420.
    bars = [m.groups() for m in RECT.finditer(figure_svg(_two_stacks()))]
    colours = [b for b in bars if b[4] in ("#111111", "#222222")]
    assert colours[0] == ("140.0", "420.0", "320.0", "80.0", "#111111")  # p on a
    assert colours[1] == ("540.0", "340.0", "320.0", "160.0", "#111111")  # p on b: 2 units
    assert colours[2] == ("140.0", "180.0", "320.0", "240.0", "#222222")  # q on a: 1 to 4
    assert colours[3] == ("540.0", "180.0", "320.0", "160.0", "#222222")  # q on b: 2 to 4


def test_hover_text_fills_the_traces_template():
    template = (
        "<b>Activations</b><br>%{x}<br>%{y:.2f} GiB (%{customdata:,.0f} bytes)<extra></extra>"
    )
    point = {"x": "0", "y": 1.5, "customdata": 1_610_612_736}
    assert hover_text(template, point) == "Activations\n0\n1.50 GiB (1,610,612,736 bytes)"
    row = {"customdata": [0.25, 0.5, 7, 1], "y": 3, "fullData.name": "F forward"}
    assert (
        hover_text("stage %{y}<br>%{fullData.name}<br>micro-batch %{customdata[2]}", row)
        == "stage 3\nF forward\nmicro-batch 7"
    )


def test_ticks_are_round_steps_with_the_decimals_they_need():
    assert nice_ticks(0, 87.5) == [0, 20, 40, 60, 80]  # 87.5 / 6 = 14.6: step 20
    ticks = nice_ticks(0, 2.9)  # 2.9 / 6 = 0.48: step 0.5
    assert ticks == [0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert [tick_label(t, ticks) for t in ticks] == ["0.0", "0.5", "1.0", "1.5", "2.0", "2.5"]


def test_the_memory_figure_keeps_its_title_peak_and_capacity_text():
    model, cluster = load_model("llama-3.1-70b"), load_cluster("hgx-h100", 8)
    layout = Layout(dp=2, tp=8, pp=4, zero=1, recompute="selective")  # the app's default
    workload = TrainingWorkload(seq_len=8192, global_batch_size=512)
    memory = estimate(model, cluster, layout, workload).memory
    fig = training_memory_figure(memory, cluster.gpu.name)
    svg = figure_svg(fig)
    assert "Memory per GPU by pipeline stage" in svg
    peak = f"peak {memory.peak_bytes / 2**30:,.1f} GiB"
    assert re.search(rf'class="annotation-text"[^>]*><tspan[^>]*>{re.escape(peak)}</tspan>', svg)
    assert "<title>" in svg and "bytes)" in svg  # each bar's hover, exact bytes
    assert "\n" not in svg  # one line: the app draws it inside a markdown HTML block
    assert cached_svg(fig) is cached_svg(fig)  # drawn once per figure


def test_a_schedule_figure_draws_every_action_with_its_microbatch():
    from explorer.charts.schedule import schedule_figure

    model, cluster = load_model("llama-3.1-70b"), load_cluster("hgx-h100", 8)
    layout = Layout(dp=2, tp=8, pp=4, zero=1, recompute="selective")
    workload = TrainingWorkload(seq_len=8192, global_batch_size=64)  # 32 micro-batches
    est = estimate(model, cluster, layout, workload)
    timeline = estimate_timeline(est)
    svg = figure_svg(schedule_figure(timeline))
    actions = len(timeline.events.stage)
    assert svg.count("micro-batch ") == actions  # one hover per action
    assert "stage 3" in svg and "time (s)" in svg
    assert est.microbatches == 32


@pytest.mark.parametrize("barmode", ["stack", "overlay"])
def test_an_empty_figure_still_draws(barmode):
    fig = go.Figure().update_layout(barmode=barmode, title="nothing")
    assert figure_svg(fig).startswith("<svg") and "nothing" in figure_svg(fig)
