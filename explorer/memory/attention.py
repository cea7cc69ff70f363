"""Activations the attention sub-layer saves: projections (GQA or MLA) and the attention core.

Symbols and the full table: ``activations.py``. ``input_tokens`` is how many tokens the QKV
(MLA: down-) projection saves its input for: T_sp as Megatron-LM, T when sequence parallel
keeps the gathered input (PyTorch DTensor, ``sp_saves_gathered_inputs``). ``storage`` says what
the DeepSeek-V3 recipe recomputes or caches in FP8 (``frameworks.ActivationStorage``).
"""

from __future__ import annotations

from explorer.memory.assumptions import TrainingAssumptions
from explorer.memory.frameworks import ACTIVATION_RECIPES, ActivationStorage
from explorer.memory.tensors import (
    FP32_BYTES,
    ActivationShape,
    SavedTensor,
    attention_output_bytes,
    linear_input_bytes,
    saved,
)
from explorer.specs import ModelSpec

STANDARD_STORAGE = ACTIVATION_RECIPES["standard"]
"""Every tensor in the activation dtype, nothing rebuilt."""


def attention_core_tensors(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """The attention core's own saved tensors (beyond q, k, v, output), per GPU, bytes.

    Source: Dao et al. 2022 (arXiv:2205.14135) sec. 3.1 (log-sum-exp only); Korthikanti et al.
    2022 sec. 4.1 (softmax 2as^2b, dropout mask as^2b, dropout output 2as^2b).
    """
    heads = model.num_attention_heads / x.tp
    if a.flash_attention:
        return (saved("softmax log-sum-exp", x.tokens * heads, FP32_BYTES, "FlashAttention", True),)
    scores = x.tokens * x.seq_len * heads  # local queries x all keys
    core = [saved("softmax output", scores, x.dtype_bytes, "softmax, attention x V", True)]
    if a.dropout:
        core.append(saved("attention dropout mask", scores, a.dropout_mask_bytes, "dropout", True))
        core.append(saved("attention dropout output", scores, x.dtype_bytes, "attention x V", True))
    return tuple(core)


def gqa_tensors(
    model: ModelSpec,
    x: ActivationShape,
    input_tokens: float | None = None,
    storage: ActivationStorage = STANDARD_STORAGE,
) -> tuple[SavedTensor, ...]:
    """Saved projections of grouped-query attention (MHA, GQA, MQA), per GPU, bytes.

    Source: Korthikanti et al. 2022 sec. 4.1 (QKV input 2sbh, Q and K 4sbh, V 2sbh, output
    projection input 2sbh) with k KV heads in K and V (Ainslie et al. 2023, arXiv:2305.13245).
    Recomputed norms drop the QKV input and, with QK-norm, q and k (DeepSeek-V3 sec. 3.2.3).
    """
    heads, act = model.num_attention_heads / x.tp, x.dtype_bytes
    kv_heads = max(model.kv_heads / x.tp, 1.0)  # fewer KV heads than TP: one replica per rank
    q, kv = x.tokens * heads * model.head_size, x.tokens * kv_heads * model.head_size
    qkv_in = (x.sp_tokens if input_tokens is None else input_tokens) * model.hidden_size
    norms_rebuilt, fp8 = storage.recompute_norms_and_mla_up_projection, storage.fp8_activation_cache
    out = []
    if not norms_rebuilt:
        out.append(
            saved("QKV projection input", qkv_in, linear_input_bytes(act, fp8), "QKV projection")
        )
    if not (model.qk_norm and norms_rebuilt):  # q, k are then QK-norm outputs, rebuilt
        out += [saved("query", q, act, "attention core"), saved("key", kv, act, "attention core")]
    out.append(saved("value", kv, act, "attention core"))
    if model.qk_norm:
        out.append(saved("q and k before QK-norm", q + kv, act, "per-head q/k norms"))
    out.append(saved("attention output", q, attention_output_bytes(act, fp8), "output projection"))
    return tuple(out)


def mla_tensors(
    model: ModelSpec,
    x: ActivationShape,
    input_tokens: float | None = None,
    storage: ActivationStorage = STANDARD_STORAGE,
) -> tuple[SavedTensor, ...]:
    """Saved tensors of multi-head latent attention, per GPU, bytes.

    Source: DeepSeek-V2 report (arXiv:2405.04434) sec. 2.1.2, Eq. 9-19; Megatron-Core
    MultiLatentAttention (duplicated down-projections on T_sp tokens, TP-split up-projections).
    DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.3: recomputed norms and up-projections keep
    the latents before their norms and the RoPE key, and rebuild q, k, v from them.
    """
    heads, act, sp = model.num_attention_heads / x.tp, x.dtype_bytes, x.sp_tokens
    rebuilt, fp8 = storage.recompute_norms_and_mla_up_projection, storage.fp8_activation_cache
    linear_in, rank = linear_input_bytes(act, fp8), model.kv_lora_rank or 0
    down_in = (sp if input_tokens is None else input_tokens) * model.hidden_size
    q_head = x.tokens * heads * (model.qk_nope_head_dim + model.qk_rope_head_dim)
    v_head = x.tokens * heads * model.v_head_dim
    out: list[SavedTensor] = []
    if not rebuilt:
        out.append(saved("down-projection input", down_in, linear_in, "q/kv down-projections"))
    if model.q_lora_rank:
        out += _latent("query latent", sp * model.q_lora_rank, act, linear_in, rebuilt)
    out += _latent("key-value latent", sp * rank, act, linear_in, rebuilt)
    if rebuilt:  # k's RoPE part comes from the down-projection, not the up-projection
        out.append(saved("RoPE key", sp * model.qk_rope_head_dim, act, "key rebuild"))
    if not (rebuilt and model.q_lora_rank):  # without a q latent, q is no up-projection output
        out.append(saved("query", q_head, act, "attention core"))
    if not rebuilt:
        out += [
            saved("key", q_head, act, "attention core"),
            saved("value", v_head, act, "attention core"),
        ]
    o_bytes = attention_output_bytes(act, fp8)
    out.append(saved("attention output", v_head, o_bytes, "output projection"))
    return tuple(out)


def _latent(
    name: str, elements: float, act: float, linear_in: float, rebuilt: bool
) -> list[SavedTensor]:
    """An MLA latent: its norm's input, and the normalised latent its up-projection reads."""
    normed = [] if rebuilt else [saved(f"{name}, normalised", elements, linear_in, "up-projection")]
    return [saved(name, elements, act, f"{name} norm"), *normed]
