"""One colour per memory category, collective and mesh axis, used by every chart and table.

Categories are the names of docs/ARCHITECTURE.md ("Contracts"); training and serving share the
colours of the categories they share (serving ``weights`` is the training ``parameters`` blue).
The palette is Tableau 10, which stays distinguishable for the common colour-vision deficiencies
in neighbouring pairs.
"""

from __future__ import annotations

from types import MappingProxyType

MEMORY_COLORS = MappingProxyType(
    {
        "parameters": "#4C78A8",
        "weights": "#4C78A8",
        "gradients": "#F58518",
        "master_weights": "#72B7B2",
        "optimizer_states": "#54A24B",
        "activations": "#E45756",
        "kv_cache": "#EECA3B",
        "temporary": "#B279A2",
        "communication": "#FF9DA6",
        "runtime": "#9D755D",
        "headroom": "#BAB0AC",
    }
)
"""Memory category -> colour."""

MEMORY_LABELS = MappingProxyType(
    {
        "parameters": "Parameters",
        "weights": "Weights",
        "gradients": "Gradients",
        "master_weights": "Master weights",
        "optimizer_states": "Optimizer states",
        "activations": "Activations",
        "kv_cache": "KV cache",
        "temporary": "Temporary buffers",
        "communication": "Communication buffers",
        "runtime": "CUDA context & workspaces",
        "headroom": "Allocator headroom",
    }
)
"""Memory category -> the label charts and tables show."""

AXIS_COLORS = MappingProxyType(
    {
        "tp": "#4C78A8",
        "cp": "#B279A2",
        "ep": "#F58518",
        "dp": "#54A24B",
        "pp": "#E45756",
    }
)
"""Mesh axis -> colour (communication charts, placement on nodes)."""

FALLBACK = "#888888"
CAPACITY = "#222222"
"""The GPU-capacity line."""
HIGHLIGHT = "#D62728"


def memory_color(category: str) -> str:
    return MEMORY_COLORS.get(category, FALLBACK)


def memory_label(category: str) -> str:
    return MEMORY_LABELS.get(category, category.replace("_", " ").capitalize())


def axis_color(axis: str) -> str:
    return AXIS_COLORS.get(axis.lower(), FALLBACK)
