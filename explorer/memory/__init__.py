"""Bytes per GPU by category, per pipeline stage: training (and, apart, serving)."""

from explorer.memory.assumptions import (
    DEEPSEEK_V3_ASSUMPTIONS,
    DEFAULT_TRAINING_ASSUMPTIONS,
    GPT_STYLE,
    PYTORCH_ASSUMPTIONS,
    ActivationRecipe,
    Framework,
    TrainingAssumptions,
)
from explorer.memory.checks import AxisRole, axis_roles, parallel_axes_in_words
from explorer.memory.frameworks import (
    ACTIVATION_RECIPES,
    FRAMEWORKS,
    ActivationStorage,
    FrameworkBehaviour,
    activation_storage,
    framework_behaviour,
)
from explorer.memory.phases import PHASES, Phase, PhaseMemory
from explorer.memory.training import (
    CATEGORIES,
    MemoryBreakdown,
    StageMemory,
    TrainingMemory,
    training_memory,
)

__all__ = [
    "ACTIVATION_RECIPES",
    "CATEGORIES",
    "DEEPSEEK_V3_ASSUMPTIONS",
    "DEFAULT_TRAINING_ASSUMPTIONS",
    "FRAMEWORKS",
    "GPT_STYLE",
    "PHASES",
    "PYTORCH_ASSUMPTIONS",
    "ActivationRecipe",
    "ActivationStorage",
    "AxisRole",
    "Framework",
    "FrameworkBehaviour",
    "MemoryBreakdown",
    "Phase",
    "PhaseMemory",
    "StageMemory",
    "TrainingAssumptions",
    "TrainingMemory",
    "activation_storage",
    "axis_roles",
    "framework_behaviour",
    "parallel_axes_in_words",
    "training_memory",
]
