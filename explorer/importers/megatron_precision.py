"""Megatron's number formats -> the tool's precision policy and gradient dtype.

``--fp8-format`` (Bridge and NeMo: ``fp8``) makes fp8-mixed, ``--bf16`` bf16-mixed (Megatron
keeps fp32 master weights), neither fp32. The tool's fp8-mixed is the DeepSeek-V3 recipe with
bf16 Adam moments (``explorer.precision``); Megatron's precision-aware optimizer
(``--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16``) is how a
Megatron run keeps them so, and a run that does not gets a sentence.
"""

from __future__ import annotations

from explorer.importers.scenario import Draft
from explorer.specs import GradDType, Precision

_OFF = ("", "none", "null", "false", "0")
_BF16 = ("bf16", "bfloat16")


def _fp8_on(draft: Draft, recipe_name: str) -> bool:
    setting = draft.get("fp8")
    draft.get("fp8_hybrid")
    draft.get("fp8_e4m3")
    if "fp8" in recipe_name:
        return True
    if setting is None:
        return False
    return setting.value is True or str(setting.value).strip().lower() not in _OFF


def _fp4_on(draft: Draft, recipe_name: str) -> bool:
    """Megatron-Core's fp4 (``--fp4-format e2m1``) or a Bridge recipe named for NVFP4."""
    setting = draft.get("fp4")
    draft.get("fp4_recipe")
    if "fp4" in recipe_name:
        return True
    return setting is not None and str(setting.value).strip().lower() not in _OFF


def _precision(draft: Draft, default: Precision | None) -> Precision | None:
    recipe_name = draft.text("mixed_precision") or ""
    trainer = draft.text("precision") or ""
    if _fp4_on(draft, recipe_name):
        return "nvfp4-mixed"
    if _fp8_on(draft, recipe_name):
        return "fp8-mixed"
    if draft.flag("bf16") or "bf16" in recipe_name or trainer.startswith("bf16"):
        return "bf16-mixed"
    if draft.flag("fp16") or "fp16" in recipe_name or trainer.startswith("16"):
        draft.say("fp16 training is estimated as bf16-mixed (the same bytes per state).")
        return "bf16-mixed"
    if recipe_name or trainer or "bf16" in draft.settings or "fp16" in draft.settings:
        return "fp32"
    return default


def read_precision(draft: Draft, default: Precision | None = None) -> None:
    """Precision and gradient dtype into the draft's workload, with sentences for the rest;
    ``default`` when nothing names one (fp32 for a Megatron-LM argument line, whose default it
    is; None for a partial recipe file)."""
    precision = _precision(draft, default)
    if precision is None:
        return
    draft.workload["precision"] = precision
    recipe = draft.text("fp8_recipe")
    if precision == "fp8-mixed" and recipe not in (None, "blockwise"):
        draft.say(
            f"FP8 recipe {recipe}: estimated with the tool's one fp8-mixed policy (FP8 GEMMs, "
            f"bf16 weights, blockwise scales as in DeepSeek-V3); the recipe's own scaling "
            f"state is not counted."
        )
    _optimizer_dtypes(draft, precision)
    _grad_dtype(draft, precision)
    _bf16_layers(draft, precision)


def _bf16_layers(draft: Draft, precision: Precision) -> None:
    """Megatron-Core first_last_layers_bf16: the first and last N blocks (1 each by default,
    TransformerConfig) keep BF16 linear layers under FP8 / FP4."""
    start = draft.int("num_layers_at_start_in_bf16")
    end = draft.int("num_layers_at_end_in_bf16")
    if not draft.flag("first_last_layers_bf16") or precision not in ("fp8-mixed", "nvfp4-mixed"):
        return
    draft.workload["bf16_layers_at_start"] = 1 if start is None else start
    draft.workload["bf16_layers_at_end"] = 1 if end is None else end


def _dtype(draft: Draft, name: str) -> str | None:
    text = draft.text(name)
    return None if text is None else text.removeprefix("torch.")


def _optimizer_dtypes(draft: Draft, precision: Precision) -> None:
    aware = bool(draft.flag("use_precision_aware_optimizer"))
    moments = {_dtype(draft, "exp_avg_dtype"), _dtype(draft, "exp_avg_sq_dtype")}
    bf16_moments = aware and moments <= set(_BF16)
    if precision == "fp8-mixed" and not bf16_moments:
        draft.say(
            "FP8 training with fp32 Adam moments: the tool's fp8-mixed keeps bf16 moments "
            "(DeepSeek-V3 recipe), 4 bytes per parameter less than this run's optimizer states."
        )
    if precision in ("bf16-mixed", "fp32") and bf16_moments:
        draft.say(
            f"bf16 Adam moments (precision-aware optimizer): {precision} counts fp32 moments, "
            f"4 bytes per parameter more than this run keeps."
        )
    main = _dtype(draft, "main_params_dtype")
    if aware and main not in (None, "fp32", "float32"):
        draft.say(f"main_params_dtype {main}: the tool keeps fp32 master weights.")


def _grad_dtype(draft: Draft, precision: Precision) -> None:
    """The main-gradient buffer's dtype."""
    grad: GradDType | None = None
    main = _dtype(draft, "main_grads_dtype")
    fp32 = draft.flag("accumulate_allreduce_grads_in_fp32")
    if draft.flag("grad_reduce_in_bf16"):
        grad = "bf16"
    elif fp32 is not None:
        grad = "fp32" if fp32 else "bf16"
    if draft.flag("use_precision_aware_optimizer") and main is not None:
        grad = "bf16" if main in _BF16 else "fp32"
    if grad is not None and precision != "fp32":
        draft.workload["grad_dtype"] = grad  # Draft.finish drops it where it is the default
