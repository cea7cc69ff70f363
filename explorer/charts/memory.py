"""Memory figures: bytes per GPU by category, stacked per pipeline stage, against capacity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from explorer.charts.colors import CAPACITY, HIGHLIGHT, memory_color, memory_label
from explorer.charts.style import styled
from explorer.memory import CATEGORIES, TrainingMemory
from explorer.units import GB, GiB

Y_TITLE = "memory per GPU (GiB, 2^30 bytes)"
LEGEND_RIGHT = {
    "orientation": "v",
    "traceorder": "reversed",
    "x": 1.01,
    "xanchor": "left",
    "y": 1,
    "yanchor": "top",
}


def _hover(category: str) -> str:
    return (
        f"<b>{memory_label(category)}</b><br>%{{x}}<br>"
        "%{y:.2f} GiB (%{customdata:,.0f} bytes)<extra></extra>"
    )


def stage_memory_figure(
    stage_labels: Sequence[str],
    by_category: Mapping[str, Sequence[float]],
    *,
    capacity_bytes: float,
    gpu_name: str,
    peak_index: int,
    title: str = "Memory per GPU by pipeline stage",
    x_title: str = "pipeline stage (rank)",
) -> go.Figure:
    """Stacked bars of bytes per category for each stage, the GPU's capacity as a line, and the
    peak stage marked. ``by_category`` maps a category to its bytes on each stage, in stack
    order (bottom first); categories that are zero on every stage are left out of the legend."""
    fig = go.Figure()
    for category, values in by_category.items():
        if not any(values):
            continue
        fig.add_bar(
            name=memory_label(category),
            x=list(stage_labels),
            y=[v / GiB for v in values],
            customdata=list(values),
            marker_color=memory_color(category),
            hovertemplate=_hover(category),
        )
    totals = [sum(column) for column in zip(*by_category.values(), strict=True)]
    _capacity_line(fig, capacity_bytes, gpu_name)
    _mark_peak(fig, stage_labels[peak_index], totals[peak_index], capacity_bytes)
    top = max(max(totals, default=0.0), capacity_bytes) / GiB
    fig.update_yaxes(range=[0, top * 1.15])
    fig.update_xaxes(type="category")
    styled(fig, title=title, x_title=x_title, y_title=Y_TITLE, height=480)
    fig.update_layout(
        barmode="stack",
        bargap=0.35 if len(stage_labels) < 8 else 0.15,
        legend=LEGEND_RIGHT,  # stack order: the legend's top entry is the bar's top segment
    )
    return fig


def training_memory_figure(memory: TrainingMemory, gpu_name: str) -> go.Figure:
    """``stage_memory_figure`` of a training estimate: every stage, the peak marked."""
    by_category = {
        name: [s.breakdown.as_dict()[name] for s in memory.stages] for name in CATEGORIES
    }
    return stage_memory_figure(
        [str(s.stage) for s in memory.stages],
        by_category,
        capacity_bytes=memory.gpu_bytes,
        gpu_name=gpu_name,
        peak_index=memory.peak_stage,
    )


def _capacity_line(fig: go.Figure, capacity_bytes: float, gpu_name: str) -> None:
    fig.add_hline(
        y=capacity_bytes / GiB,
        line={"color": CAPACITY, "dash": "dash", "width": 1.5},
        annotation_text=(
            f"{gpu_name}: {capacity_bytes / GB:,.0f} GB = {capacity_bytes / GiB:,.1f} GiB"
        ),
        annotation_position="top right",
        annotation_font={"size": 11, "color": CAPACITY},
    )


def _mark_peak(fig: go.Figure, label: str, total_bytes: float, capacity_bytes: float) -> None:
    fits = total_bytes <= capacity_bytes
    fig.add_annotation(
        x=label,
        y=total_bytes / GiB,
        text=f"peak {total_bytes / GiB:,.1f} GiB" + ("" if fits else " · does not fit"),
        showarrow=True,
        arrowhead=2,
        arrowcolor=HIGHLIGHT if not fits else CAPACITY,
        ax=0,
        ay=-28,
        font={"size": 12, "color": HIGHLIGHT if not fits else CAPACITY},
        bgcolor="rgba(255,255,255,0.85)",
    )


def breakdown_figure(
    by_category: Mapping[str, float], *, capacity_bytes: float, title: str
) -> go.Figure:
    """One horizontal stacked bar of a single GPU's bytes by category, with its capacity."""
    fig = go.Figure()
    for category, value in by_category.items():
        if not value:
            continue
        fig.add_bar(
            name=memory_label(category),
            y=[""],
            x=[value / GiB],
            orientation="h",
            customdata=[value],
            marker_color=memory_color(category),
            hovertemplate=f"<b>{memory_label(category)}</b><br>"
            "%{x:.2f} GiB (%{customdata:,.0f} bytes)<extra></extra>",
        )
    fig.add_vline(x=capacity_bytes / GiB, line={"color": CAPACITY, "dash": "dash"})
    fig.update_layout(barmode="stack", showlegend=True)
    return styled(fig, title=title, x_title="GiB (2^30 bytes)", y_title="", height=200)
