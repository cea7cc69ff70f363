"""Validation figures: estimated against measured bytes (per configuration, per category) and
against published training runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from explorer.charts.colors import memory_color, memory_label
from explorer.charts.style import styled
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


PUBLISHED_MARKERS = (("#4C78A8", "circle"), ("#F58518", "diamond"), ("#54A24B", "square"),
                     ("#B279A2", "triangle-up"))  # fmt: skip
"""(colour, symbol) of each compared metric, in order of appearance (Tableau 10)."""


def published_runs_figure(table: pd.DataFrame) -> go.Figure:
    """Our estimate against each published figure: relative error (%) per run, one marker per
    metric. ``table`` is ``explorer.calibration.calibration_table()``."""
    runs = table["source"].str.split(" et al.").str[0] + " · " + table["model"]
    runs = runs + " · " + table["gpus"].map("{:,} GPUs".format)
    fig = go.Figure()
    for (metric, rows), (color, symbol) in zip(
        table.groupby("metric", sort=False), PUBLISHED_MARKERS, strict=False
    ):
        fig.add_scatter(
            x=rows["relative_error"] * 100,
            y=runs[rows.index],
            mode="markers",
            name=metric,
            marker={"size": 10, "color": color, "symbol": symbol},
            customdata=rows[["published", "ours", "layout"]].to_numpy(),
            hovertemplate=f"%{{y}} (%{{customdata[2]}})<br>{metric}<br>published "
            "%{customdata[0]:.4g}, ours %{customdata[1]:.4g}<br>error %{x:+.1f}%<extra></extra>",
        )
    fig.add_vline(x=0, line={"color": "#999", "dash": "dash"})
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=runs.unique())
    styled(
        fig,
        title="Published runs: our estimate against the paper",
        x_title="relative error of our estimate (%, (ours − published) / published)",
        y_title="",
        height=190 + 26 * runs.nunique(),
    )
    fig.update_layout(margin={"t": 110})  # room for the title above a legend of two rows
    return fig
