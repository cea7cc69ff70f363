"""Bytes per GPU by category, per pipeline stage: training (and, apart, serving)."""

from explorer.memory.assumptions import (
    DEFAULT_TRAINING_ASSUMPTIONS,
    GPT_STYLE,
    TrainingAssumptions,
)
from explorer.memory.checks import AxisRole, axis_roles, parallel_axes_in_words
from explorer.memory.training import (
    CATEGORIES,
    MemoryBreakdown,
    StageMemory,
    TrainingMemory,
    training_memory,
)

__all__ = [
    "CATEGORIES",
    "DEFAULT_TRAINING_ASSUMPTIONS",
    "GPT_STYLE",
    "AxisRole",
    "MemoryBreakdown",
    "StageMemory",
    "TrainingAssumptions",
    "TrainingMemory",
    "axis_roles",
    "parallel_axes_in_words",
    "training_memory",
]
