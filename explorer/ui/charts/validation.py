"""Validation figures: estimated against measured bytes, per configuration and per category."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from explorer.ui.charts.colors import memory_color, memory_label
from explorer.ui.charts.style import styled
from explorer.units import GiB


def measured_vs_estimated_figure(
    ids: Sequence[str], measured_bytes: Sequence[float], estimated_bytes: Sequence[float]
) -> go.Figure:
    """Estimated against measured peak per configuration (GiB, log-log), with the y = x line."""
    measured = [m / GiB for m in measured_bytes]
    estimated = [e / GiB for e in estimated_bytes]
    low = min([*measured, *estimated]) * 0.7
    high = max([*measured, *estimated]) * 1.4
    fig = go.Figure()
    fig.add_scatter(
        x=[low, high],
        y=[low, high],
        mode="lines",
        line={"color": "#999", "dash": "dash"},
        name="estimate = measurement",
        hoverinfo="skip",
    )
    errors = [100 * (e - m) / m if m else 0.0 for m, e in zip(measured, estimated, strict=True)]
    fig.add_scatter(
        x=measured,
        y=estimated,
        mode="markers",
        marker={"size": 10, "color": "#4C78A8"},
        name="configuration",
        text=list(ids),
        customdata=errors,
        hovertemplate="%{text}<br>measured %{x:.3f} GiB<br>estimated %{y:.3f} GiB"
        "<br>error %{customdata:+.1f}%<extra></extra>",
    )
    fig.update_xaxes(type="log", dtick=1, minor={"ticks": "outside", "showgrid": False})
    fig.update_yaxes(type="log", dtick=1)
    return styled(
        fig,
        title="Peak memory per GPU: estimated against measured (PyTorch, one rank)",
        x_title="measured peak (GiB, 2^30 bytes, log scale)",
        y_title="estimated peak (GiB, log scale)",
        height=440,
    )


def category_figure(
    measured_bytes: Mapping[str, float], estimated_bytes: Mapping[str, float], title: str
) -> go.Figure:
    """Measured and estimated bytes per memory category of one configuration (GiB)."""
    categories = [c for c in measured_bytes if measured_bytes[c] or estimated_bytes.get(c)]
    labels = [memory_label(c) for c in categories]
    fig = go.Figure()
    for name, values, pattern in (
        ("measured", measured_bytes, ""),
        ("estimated", estimated_bytes, "/"),
    ):
        fig.add_bar(
            name=name,
            x=labels,
            y=[values.get(c, 0.0) / GiB for c in categories],
            customdata=[values.get(c, 0.0) for c in categories],
            marker={"color": [memory_color(c) for c in categories], "pattern_shape": pattern},
            hovertemplate=f"{name} %{{x}}: %{{y:.3f}} GiB"
            "<br>%{customdata:,.0f} bytes<extra></extra>",
        )
    fig.update_layout(barmode="group")
    return styled(
        fig, title=title, x_title="memory category", y_title="GiB (2^30 bytes)", height=380
    )
