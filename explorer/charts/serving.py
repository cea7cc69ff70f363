"""Figures of the Serving page: memory per GPU by category, and the throughput-ITL frontier."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from explorer.charts.colors import CAPACITY, HIGHLIGHT, memory_color, memory_label
from explorer.charts.style import styled
from explorer.serving import ParetoPoint, ServingEstimate
from explorer.units import GiB

SERVING_CATEGORIES = ("weights", "kv_cache", "activations", "communication", "runtime", "headroom")
"""Serving memory categories, bottom of the stack first (docs/ARCHITECTURE.md)."""
LEGEND_RIGHT = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"}
"""Legend beside the plot: many layouts would crowd a legend above it."""
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#72B7B2", "#9D755D", "#FF9DA6")
"""One colour per layout on the frontier chart, cycled."""


def memory_figure(estimates: Sequence[ServingEstimate], capacity_bytes: float) -> go.Figure:
    """Stacked bars of memory per GPU (GiB) by category for a few layouts, capacity dashed."""
    labels = [e.layout.label for e in estimates]
    fig = go.Figure()
    for category in SERVING_CATEGORIES:
        values = [getattr(e.memory, category) for e in estimates]
        fig.add_bar(
            name=memory_label(category),
            x=labels,
            y=[v / GiB for v in values],
            marker_color=memory_color(category),
            customdata=values,
            hovertemplate="%{x}<br>"
            + memory_label(category)
            + ": %{y:.2f} GiB (%{customdata:,.0f} bytes)<extra></extra>",
        )
    fig.add_hline(
        y=capacity_bytes / GiB,
        line={"color": CAPACITY, "dash": "dash"},
        annotation_text=f"GPU memory {capacity_bytes / GiB:.1f} GiB",
        annotation_position="top left",
    )
    fig.update_layout(barmode="stack")
    styled(
        fig,
        title="Memory per GPU by category (heaviest pipeline stage)",
        x_title="layout (TP, PP, EP x replicas)",
        y_title="memory per GPU (GiB, 2^30 bytes)",
    )
    return fig.update_layout(legend=LEGEND_RIGHT)


def _layout_trace(points: Sequence[ParetoPoint], color: str) -> go.Scatter:
    return go.Scatter(
        name=points[0].label,
        x=[p.itl_s * 1e3 for p in points],
        y=[p.tokens_per_s_per_gpu for p in points],
        mode="lines+markers",
        line={"color": color, "width": 1},
        marker={"color": color, "size": 7},
        customdata=[[p.concurrency, p.ttft_s * 1e3, p.tokens_per_s, p.bound] for p in points],
        hovertemplate="%{fullData.name}, %{customdata[0]} sequences per replica<br>"
        "ITL %{x:.2f} ms, TTFT %{customdata[1]:.0f} ms<br>"
        "%{y:,.1f} tokens/s per GPU (%{customdata[2]:,.0f} in all)<br>"
        "decode bound: %{customdata[3]}<extra></extra>",
    )


def _frontier_trace(points: Sequence[ParetoPoint]) -> go.Scatter:
    front = sorted((p for p in points if p.pareto), key=lambda p: p.itl_s)
    return go.Scatter(
        name="Pareto frontier",
        x=[p.itl_s * 1e3 for p in front],
        y=[p.tokens_per_s_per_gpu for p in front],
        mode="lines+markers",
        line={"color": HIGHLIGHT, "width": 3, "shape": "hv"},
        marker={"color": HIGHLIGHT, "size": 11, "symbol": "circle-open", "line": {"width": 2}},
        text=[f"{p.label}, {p.concurrency} sequences" for p in front],
        hovertemplate="frontier: %{text}<br>ITL %{x:.2f} ms, %{y:,.1f} tokens/s per GPU"
        "<extra></extra>",
    )


def frontier_figure(points: Sequence[ParetoPoint]) -> go.Figure:
    """Output tokens/s per GPU against inter-token latency (ms): one colour per layout, each
    line over concurrency; the Pareto frontier drawn on top."""
    fig = go.Figure()
    labels = list(dict.fromkeys(p.label for p in points))
    for i, label in enumerate(labels):
        mine = sorted((p for p in points if p.label == label), key=lambda p: p.concurrency)
        fig.add_trace(_layout_trace(mine, PALETTE[i % len(PALETTE)]))
    if points:
        fig.add_trace(_frontier_trace(points))
    fig.update_xaxes(type="log")
    styled(
        fig,
        title="Throughput against latency across layouts and concurrency",
        x_title="inter-token latency (ms, log scale)",
        y_title="output tokens/s per GPU",
        height=520,
    )
    return fig.update_layout(legend=LEGEND_RIGHT)
