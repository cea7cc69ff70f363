"""Model, meshes and validation figures: units in the axis titles, exact values in the hover."""

from __future__ import annotations

import pandas as pd
import pytest

from explorer.charts.meshes import STEP_PARTS, step_breakdown_figure
from explorer.charts.model import flops_figure, params_figure
from explorer.charts.validation import (
    category_figure,
    measured_vs_estimated_figure,
    published_runs_figure,
)
from explorer.counting import active_param_counts, param_counts
from explorer.presets import load_model
from explorer.units import GiB


def test_parameters_are_drawn_in_billions_with_exact_counts_in_the_hover():
    model = load_model("deepseek-v3")
    total, active = param_counts(model).as_dict(), active_param_counts(model).as_dict()
    fig = params_figure(total, active)
    every, per_token = fig.data
    assert "Routed experts" in every.y
    index = list(every.y).index("Routed experts")
    assert every.x[index] == pytest.approx(total["routed_experts"] / 1e9)
    assert per_token.customdata[index] == active["routed_experts"]
    assert "billions" in fig.layout.xaxis.title.text


def test_flops_are_drawn_in_gflop_per_token():
    fig = flops_figure({"mlp": 2e9, "router": 0.0}, seq_len=4096)
    assert list(fig.data[0].y) == ["Dense MLP"]  # zero parts are left out
    assert fig.data[0].x[0] == pytest.approx(2.0)
    assert "GFLOP" in fig.layout.xaxis.title.text and "4,096" in fig.layout.title.text


def test_the_step_breakdown_stacks_the_four_parts_in_seconds():
    parts = {column: [1.0, 2.0] for column in STEP_PARTS}
    fig = step_breakdown_figure(["#1", "#2"], parts, title="t")
    assert [t.name for t in fig.data] == [name for name, _ in STEP_PARTS.values()]
    assert fig.layout.barmode == "stack"
    assert fig.layout.xaxis.title.text == "time per optimizer step (s)"


def test_measured_against_estimated_has_the_identity_line_and_signed_errors():
    fig = measured_vs_estimated_figure(["a", "b"], [1 * GiB, 2 * GiB], [1.1 * GiB, 1.5 * GiB])
    identity, points = fig.data
    assert identity.mode == "lines"
    assert list(points.customdata) == pytest.approx([10.0, -25.0])
    assert fig.layout.xaxis.type == "log" and "GiB" in fig.layout.xaxis.title.text


def test_categories_compare_measured_and_estimated_side_by_side():
    fig = category_figure(
        {"parameters": GiB, "other": 0.0}, {"parameters": 2 * GiB, "other": 0.0}, title="x"
    )
    assert [t.name for t in fig.data] == ["measured", "estimated"]
    assert list(fig.data[1].y) == pytest.approx([2.0])  # "other" is zero on both sides


def test_published_runs_draw_one_marker_set_per_metric_in_percent():
    table = pd.DataFrame(
        {
            "source": ["Narayanan et al. 2021, Table 1", "Korthikanti et al. 2022, Table 5"] * 2,
            "model": ["GPT 1.7B", "GPT 22B"] * 2,
            "layout": ["TP 1 · PP 1 · DP 32", "TP 8 · PP 1 · DP 1"] * 2,
            "gpus": [32, 8, 32, 8],
            "metric": ["TFLOP/s per GPU", "MFU", "TFLOP/s per GPU", "MFU"],
            "published": [137.0, 0.4, 140.0, 0.5],
            "ours": [150.7, 0.38, 140.0, 0.5],
            "relative_error": [0.1, -0.05, 0.0, 0.0],
        }
    )
    fig = published_runs_figure(table)
    assert [t.name for t in fig.data] == ["TFLOP/s per GPU", "MFU"]
    assert list(fig.data[0].x) == pytest.approx([10.0, 0.0])
    assert list(fig.data[1].y) == ["Korthikanti · GPT 22B · 8 GPUs"] * 2
    assert fig.data[0].customdata[0][0] == 137.0 and "%" in fig.layout.xaxis.title.text


def test_styled_merges_as_plotlys_own_updates_would_on_a_subplot_grid():
    """``styled`` assigns one merged layout for speed; Plotly's property-by-property updates
    (update_layout, then update_xaxes/update_yaxes over every axis) are the reference."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from explorer.charts.style import FONT, styled

    def built() -> go.Figure:
        fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.7, 0.3])
        fig.add_bar(x=[1, 2], y=[3, 4], row=1, col=1)
        fig.add_scatter(x=[1, 2], y=[5, 6], row=2, col=1)
        fig.update_layout(legend={"traceorder": "reversed"}, margin={"t": 10})
        fig.update_yaxes(title_text="kept?", row=2, col=1)
        return fig

    reference = built()
    reference.update_layout(
        title={"text": "T", "x": 0, "xanchor": "left", "font": {"size": 17}},
        font={"family": FONT, "size": 12},
        height=300,
        margin={"l": 60, "r": 20, "t": 80, "b": 50},
        plot_bgcolor="white",
        paper_bgcolor="white",
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.0, "xanchor": "left", "x": 0},
        hoverlabel={"font": {"family": FONT}},
    )
    reference.update_xaxes(
        title_text="x", showgrid=False, linecolor="#999", ticks="outside", automargin=True
    )
    reference.update_yaxes(
        title_text="y", gridcolor="#eee", linecolor="#999", zeroline=False, automargin=True
    )
    ours = styled(built(), title="T", x_title="x", y_title="y", height=300)
    assert ours.to_plotly_json() == reference.to_plotly_json()
    assert ours.layout.legend.traceorder == "reversed"  # the builder's own settings survive
    assert ours.layout.yaxis2.title.text == "y"
