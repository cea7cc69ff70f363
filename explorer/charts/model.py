"""Figures of the Model page: parameters and FLOPs per token by component."""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

from explorer.charts.style import styled

COMPONENT_LABELS = {
    "embeddings": "Embeddings",
    "position_embeddings": "Position embeddings",
    "attention": "Attention",
    "mlp": "Dense MLP",
    "routed_experts": "Routed experts",
    "shared_experts": "Shared experts",
    "router": "Router",
    "norms": "Norms",
    "lm_head": "LM head",
    "mtp": "Multi-token prediction",
    "attention_projections": "Attention projections",
    "attention_core": "Attention scores × V",
    "logits": "Logits (LM head)",
}


def label(name: str) -> str:
    return COMPONENT_LABELS.get(name, name.replace("_", " ").capitalize())


def params_figure(total: Mapping[str, int], active: Mapping[str, int]) -> go.Figure:
    """Horizontal bars of parameters per component, all and active per token (billions)."""
    names = [name for name, value in total.items() if value]
    labels = [label(name) for name in names]
    fig = go.Figure()
    for title, counts, color in (
        ("All parameters", total, "#4C78A8"),
        ("Active per token", active, "#F58518"),
    ):
        values = [counts.get(name, 0) for name in names]
        fig.add_bar(
            name=title,
            y=labels,
            x=[v / 1e9 for v in values],
            orientation="h",
            marker_color=color,
            customdata=values,
            hovertemplate="%{y}: %{customdata:,} parameters (%{x:.3f} B)<extra>"
            + title
            + "</extra>",
        )
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_yaxes(autorange="reversed")
    return styled(
        fig,
        title="Parameters by component",
        x_title="parameters (billions, 10^9)",
        y_title="",
        height=120 + 38 * len(names),
    )


def flops_figure(parts: Mapping[str, float], seq_len: int) -> go.Figure:
    """Horizontal bars of forward FLOPs per token by part (GFLOP)."""
    names = [name for name, value in parts.items() if value]
    fig = go.Figure(
        go.Bar(
            y=[label(name) for name in names],
            x=[parts[name] / 1e9 for name in names],
            orientation="h",
            marker_color="#54A24B",
            customdata=[parts[name] for name in names],
            hovertemplate="%{y}: %{customdata:.4~e} FLOP per token<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    return styled(
        fig,
        title=f"Forward FLOPs per token at {seq_len:,} tokens per sequence",
        x_title="FLOP per token (GFLOP, 10^9)",
        y_title="",
        height=120 + 30 * len(names),
    )
