"""Scaling figures: efficiency against GPU count, with the baseline and the denominator named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from explorer.charts.colors import CAPACITY, HIGHLIGHT
from explorer.charts.style import styled

LINE = {"strong": "#4C78A8", "weak": "#F58518"}


@dataclass(frozen=True, slots=True)
class ScalingRow:
    """One GPU count of a sweep, as the figure draws it (None where no layout fits)."""

    num_gpus: int
    global_batch_size: int
    efficiency: float | None
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    mfu: float | None
    layout: str
    """The chosen layout in words ('' when none fits)."""


def scaling_figure(kind: str, rows: Sequence[ScalingRow], *, denominator: str) -> go.Figure:
    """Efficiency (%) against GPUs (log 2 axis) for one sweep; 100% dashed; counts where no
    layout fits marked on the axis. The title names the kind, the batch rule and the
    denominator."""
    fits = [r for r in rows if r.efficiency is not None]
    fig = go.Figure()
    fig.add_scatter(
        x=[r.num_gpus for r in fits],
        y=[100 * (r.efficiency or 0.0) for r in fits],
        mode="lines+markers",
        name=f"{kind} scaling",
        line={"color": LINE.get(kind, CAPACITY), "width": 2},
        marker={"size": 9},
        customdata=[
            [
                r.layout,
                r.tokens_per_s,
                r.tokens_per_s_per_gpu,
                100 * (r.mfu or 0),
                r.global_batch_size,
            ]
            for r in fits
        ],
        hovertemplate="%{x} GPUs: efficiency %{y:.1f}%<br>%{customdata[0]}<br>"
        "%{customdata[1]:,.0f} tokens/s (%{customdata[2]:,.0f} per GPU), MFU %{customdata[3]:.1f}%"
        "<br>global batch %{customdata[4]:,} sequences<extra></extra>",
    )
    missing = [r.num_gpus for r in rows if r.efficiency is None]
    if missing:
        fig.add_scatter(
            x=missing,
            y=[0.0] * len(missing),
            mode="markers",
            name="no layout fits",
            marker={"symbol": "x", "size": 11, "color": HIGHLIGHT},
            hovertemplate="%{x} GPUs: no layout of the family fits<extra></extra>",
        )
    fig.add_hline(y=100, line={"color": CAPACITY, "dash": "dash", "width": 1})
    fig.update_xaxes(type="log", dtick=0.30102999566, tickformat="d")  # one tick per doubling
    fig.update_yaxes(rangemode="tozero")
    batch = "global batch fixed" if kind == "strong" else "global batch grows with the GPUs"
    return styled(
        fig,
        title=f"{kind.capitalize()} scaling ({batch})<br><sup>efficiency = {denominator}</sup>",
        x_title="GPUs (log scale)",
        y_title="scaling efficiency (%)",
        height=420,
    )
