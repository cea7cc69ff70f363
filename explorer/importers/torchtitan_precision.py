"""torchtitan's activation checkpointing and number formats -> recompute and precision.

``[activation_checkpoint]``: mode none / full / selective; selective with an integer N
checkpoints every N-th block whole (``Layout.recompute_every``), with "op" it saves the outputs
of matmuls (every other one of the same shape) and attention and recomputes the rest per op
(``Layout.recompute_ops``; torchtitan ``torchtitan/distributed/activation_checkpoint.py``).
``model.converters`` with float8 swaps the linears for torchao Float8Linear (FP8 GEMMs);
parameters stay fp32 under FSDP2 and are cast to ``training.mixed_precision_param`` for compute,
gradients are reduced in fp32.
"""

from __future__ import annotations

from explorer.importers.scenario import Draft
from explorer.importers.settings import RecipeError

_AC = "activation_checkpoint."


def read_recompute(draft: Draft) -> None:
    mode = draft.text(_AC + "mode") or "selective"  # torchtitan's default
    option = draft.text(_AC + "selective_ac_option") or "2"
    if mode in ("none", "full"):
        draft.layout["recompute"] = mode
        return
    if mode == "memory_budget":
        draft.layout["recompute"] = "full"
        draft.say("activation_checkpoint.mode memory_budget: estimated as full recompute.")
        return
    if mode != "selective":
        raise RecipeError(
            f"activation_checkpoint.mode must be none, selective or full, got {mode!r}"
        )
    if option == "op":
        draft.layout["recompute"] = "selective"
        draft.layout["recompute_ops"] = True
        return
    if not option.isdigit() or int(option) < 1:
        raise RecipeError(
            f"activation_checkpoint.selective_ac_option must be 'op' or a positive integer, got "
            f"{option!r}"
        )
    draft.layout["recompute"] = "full"  # every N-th block checkpointed whole
    if int(option) > 1:
        draft.layout["recompute_every"] = int(option)


def _converters(draft: Draft) -> list[str]:
    setting = draft.get("model.converters")
    if setting is None:
        return []
    value = setting.value
    words = value if isinstance(value, list) else str(value).split(",")
    return [str(w).strip().lower() for w in words if str(w).strip()]


def read_precision(draft: Draft) -> None:
    param = draft.text("training.mixed_precision_param") or "bfloat16"
    reduce = draft.text("training.mixed_precision_reduce") or "float32"
    if param not in ("bfloat16", "float32"):
        raise RecipeError(
            f"training.mixed_precision_param must be bfloat16 or float32, got {param!r}"
        )
    if reduce != "float32":
        raise RecipeError(f"training.mixed_precision_reduce must be float32, got {reduce!r}")
    fp8 = any("float8" in c or "mx" in c for c in _converters(draft))
    recipe = draft.text("float8.recipe_name")
    if param == "float32":
        draft.workload["precision"] = "fp32"
        return
    draft.workload["precision"] = "fp8-mixed" if fp8 else "bf16-mixed"
    if any("nvfp4" in c for c in _converters(draft)):  # torchtitan's NVFP4LinearConverter
        draft.workload["precision"] = "nvfp4-mixed"
        fp8 = False
    if draft.layout.get("zero") == 0:  # under FSDP the pytorch framework keeps no bf16 shard
        draft.say(
            "torchtitan without FSDP keeps fp32 parameters under autocast; the tool counts a "
            "bf16 working copy besides the fp32 master weights (2 bytes per parameter more)."
        )
    if fp8:
        draft.say(
            "FP8 training with fp32 Adam moments: the tool's fp8-mixed keeps bf16 moments "
            "(DeepSeek-V3 recipe), 4 bytes per parameter less than this run's optimizer states."
        )
        if recipe is not None:
            draft.say(
                f"float8 recipe {recipe}: estimated with the tool's one fp8-mixed policy; the "
                f"recipe's scaling state is not counted."
            )
