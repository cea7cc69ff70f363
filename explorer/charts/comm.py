"""Communication figures: exposed time per collective and per axis; process groups on nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.charts.colors import axis_color
from explorer.charts.style import FONT, styled

COLLECTIVE_COLOR = "#4C78A8"
MAX_SLOTS_DRAWN = 48
"""GPU slots drawn per row; a group spanning more domains shows its first few and a count."""
IDLE = "#E6E6E6"


def exposed_figure(
    by_collective_s: Mapping[str, float], by_axis_s: Mapping[str, float], step_time_s: float
) -> go.Figure:
    """Two bar panels: exposed seconds per step by collective kind and by mesh axis."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("by collective", "by parallel axis"),
        horizontal_spacing=0.12,
    )
    kinds = list(by_collective_s)
    fig.add_bar(
        x=[by_collective_s[k] for k in kinds],
        y=kinds,
        orientation="h",
        marker_color=COLLECTIVE_COLOR,
        customdata=[100 * by_collective_s[k] / step_time_s for k in kinds],
        hovertemplate="%{y}: %{x:.4g} s per step (%{customdata:.1f}% of the step)<extra></extra>",
        showlegend=False,
        row=1,
        col=1,
    )
    axes = list(by_axis_s)
    fig.add_bar(
        x=[by_axis_s[a] for a in axes],
        y=[a.upper() for a in axes],
        orientation="h",
        marker_color=[axis_color(a) for a in axes],
        customdata=[100 * by_axis_s[a] / step_time_s for a in axes],
        hovertemplate="%{y}: %{x:.4g} s per step (%{customdata:.1f}% of the step)<extra></extra>",
        showlegend=False,
        row=1,
        col=2,
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title_text="exposed time (s per step)", rangemode="tozero")
    return styled(
        fig,
        title=f"Communication on the critical path (step time {step_time_s:.3g} s)",
        x_title="exposed time (s per step)",
        y_title="",
        height=320,
    )


@dataclass(frozen=True, slots=True)
class GroupRow:
    """One process group as the placement diagram draws it."""

    name: str
    """Axis label (TP, DP x CP, EP, ...)."""
    axis: str
    """Mesh axis for the colour (tp, cp, ep, dp, pp)."""
    size: int
    ranks_per_domain: int
    num_domains: int
    link: str
    """Which links it uses, in words (NVLink 450 GB/s, fabric 50 GB/s)."""


def _domains_drawn(domain_size: int) -> int:
    return max(1, MAX_SLOTS_DRAWN // domain_size)


def placement_figure(groups: Sequence[GroupRow], domain_size: int) -> go.Figure:
    """One row per process group: the scale-up domains (nodes) one of its groups spans, with the
    GPUs of that group coloured and the rest of each node grey; the links it uses at the right."""
    fig = go.Figure()
    gap = 1.0
    for row, group in enumerate(groups):
        drawn = min(group.num_domains, _domains_drawn(domain_size))
        xs, colors, texts = [], [], []
        for domain in range(drawn):
            left = domain * (domain_size + gap)
            fig.add_shape(
                type="rect",
                x0=left - 0.45,
                x1=left + domain_size - 0.55,
                y0=row - 0.38,
                y1=row + 0.38,
                line={"color": "#999", "width": 1},
            )
            for slot in range(domain_size):
                member = slot < group.ranks_per_domain
                xs.append(left + slot)
                colors.append(axis_color(group.axis) if member else IDLE)
                texts.append(
                    f"node {domain}, GPU {slot}: "
                    + (f"in this {group.name} group" if member else "other groups")
                )
        fig.add_scatter(
            x=xs,
            y=[row] * len(xs),
            mode="markers",
            marker={
                "symbol": "square",
                "size": 10,
                "color": colors,
                "line": {"color": "white", "width": 1},
            },
            hovertext=texts,
            hoverinfo="text",
            showlegend=False,
        )
        more = group.num_domains - drawn
        label = group.link + (f"<br><i>{more} more nodes not drawn</i>" if more > 0 else "")
        fig.add_annotation(
            x=drawn * (domain_size + gap),
            y=row,
            text=label,
            showarrow=False,
            xanchor="left",
            font={"size": 12, "family": FONT},
        )
    width_slots = _domains_drawn(domain_size) * (domain_size + gap)
    fig.update_xaxes(visible=False, range=[-1, width_slots + max(24, domain_size * 3)])
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(groups))),
        ticktext=[f"{g.name} ({g.size})" for g in groups],
        autorange="reversed",
        showgrid=False,
    )
    styled(
        fig,
        title=f"One group of each axis on the nodes ({domain_size} GPUs per fast-link domain)",
        x_title="",
        y_title="",
        height=110 + 48 * len(groups),
    )
    fig.update_xaxes(visible=False)
    return fig
