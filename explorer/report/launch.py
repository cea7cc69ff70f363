"""The report's launch settings: Megatron-LM arguments and a torchtitan config for the layout.

The flags themselves come from ``explorer.launch``; here they are laid out to paste.
"""

from __future__ import annotations

from typing import Any

from explorer.launch import megatron_arguments, torchtitan_config
from explorer.report.tables import CodeBlock, Section
from explorer.report.training import TrainingCase


def launch_section(case: TrainingCase) -> Section:
    """Megatron-LM arguments and a torchtitan config for the chosen layout."""
    args = _megatron(case)
    flags = [a for a in args if not a.startswith("#")]
    comments = [a for a in args if a.startswith("#")]
    megatron = " \\\n".join(["torchrun ... pretrain_gpt.py", *(f"    {a}" for a in flags)])
    megatron = "\n".join([*comments, megatron])
    return Section(
        "launch",
        "Launch settings",
        paragraphs=(
            "Ready to paste for the chosen layout; model, data and optimizer flags are left "
            "to you.",
        ),
        code=(
            CodeBlock("Megatron-LM arguments", "bash", megatron),
            CodeBlock(
                "torchtitan config (TOML)",
                "toml",
                torchtitan_config(case.layout, case.workload, case.model.num_hidden_layers),
            ),
        ),
    )


def _megatron(case: TrainingCase) -> list[str]:
    """Megatron's flags for the case; a layout string places the MTP modules last."""
    model = case.model
    return megatron_arguments(
        case.layout, case.workload, model.num_hidden_layers, model.num_nextn_predict_layers
    )


def launch_results(case: TrainingCase) -> dict[str, Any]:
    return {
        "megatron_arguments": _megatron(case),
        "torchtitan_config": torchtitan_config(
            case.layout, case.workload, case.model.num_hidden_layers
        ),
    }
