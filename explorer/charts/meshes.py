"""Figures of the Meshes page: where each ranked layout's step goes, and two layouts compared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from explorer.charts.style import styled

STEP_PARTS = {
    "compute_s": ("compute", "#4C78A8"),
    "exposed_comm_s": ("exposed communication", "#F58518"),
    "optimizer_s": ("optimizer step", "#54A24B"),
    "bubble_s": ("pipeline bubble", "#BAB0AC"),
}
"""Step-time components (explorer.search.rows.TIME_COLUMNS): label and colour."""


def step_breakdown_figure(
    labels: Sequence[str], parts_s: Mapping[str, Sequence[float]], *, title: str
) -> go.Figure:
    """Stacked horizontal bars: each layout's step time (s) split into compute, exposed
    communication, optimizer step and bubble; the first label is drawn on top."""
    fig = go.Figure()
    for column, values in parts_s.items():
        name, color = STEP_PARTS.get(column, (column, "#888888"))
        fig.add_bar(
            name=name,
            y=list(labels),
            x=list(values),
            orientation="h",
            marker_color=color,
            hovertemplate=f"%{{y}}<br>{name}: %{{x:.4g}} s<extra></extra>",
        )
    fig.update_yaxes(autorange="reversed", type="category")
    styled(
        fig,
        title=title,
        x_title="time per optimizer step (s)",
        y_title="",
        height=140 + 30 * len(labels),
    )
    return fig.update_layout(barmode="stack", legend_traceorder="normal")
