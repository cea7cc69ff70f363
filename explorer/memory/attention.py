"""Activations the attention sub-layer saves: projections (GQA or MLA) and the attention core.

Symbols and the full table: ``activations.py``. ``input_tokens`` is how many tokens the QKV
(MLA: down-) projection saves its input for: T_sp as Megatron-LM, T when sequence parallel
keeps the gathered input (PyTorch DTensor, ``sp_saves_gathered_inputs``).
"""

from __future__ import annotations

from explorer.memory.assumptions import TrainingAssumptions
from explorer.memory.tensors import FP32_BYTES, ActivationShape, SavedTensor, saved
from explorer.specs import ModelSpec


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
    model: ModelSpec, x: ActivationShape, input_tokens: float | None = None
) -> tuple[SavedTensor, ...]:
    """Saved projections of grouped-query attention (MHA, GQA, MQA), per GPU, bytes.

    Source: Korthikanti et al. 2022 sec. 4.1 (QKV input 2sbh, Q and K 4sbh, V 2sbh, output
    projection input 2sbh) with k KV heads in K and V (Ainslie et al. 2023, arXiv:2305.13245).
    """
    heads, act = model.num_attention_heads / x.tp, x.dtype_bytes
    kv_heads = max(model.kv_heads / x.tp, 1.0)  # fewer KV heads than TP: one replica per rank
    q, kv = x.tokens * heads * model.head_size, x.tokens * kv_heads * model.head_size
    qkv_in = (x.sp_tokens if input_tokens is None else input_tokens) * model.hidden_size
    out = [
        saved("QKV projection input", qkv_in, act, "QKV projection"),
        saved("query", q, act, "attention core"),
        saved("key", kv, act, "attention core"),
        saved("value", kv, act, "attention core"),
    ]
    if model.qk_norm:
        out.append(saved("q and k before QK-norm", q + kv, act, "per-head q/k norms"))
    out.append(saved("attention output", q, act, "output projection"))
    return tuple(out)


def mla_tensors(
    model: ModelSpec, x: ActivationShape, input_tokens: float | None = None
) -> tuple[SavedTensor, ...]:
    """Saved tensors of multi-head latent attention, per GPU, bytes.

    Source: DeepSeek-V2 report (arXiv:2405.04434) sec. 2.1.2, Eq. 9-19; Megatron-Core
    MultiLatentAttention (duplicated down-projections on T_sp tokens, TP-split up-projections).
    """
    heads, act, sp = model.num_attention_heads / x.tp, x.dtype_bytes, x.sp_tokens
    qk_head = model.qk_nope_head_dim + model.qk_rope_head_dim
    down_in = (sp if input_tokens is None else input_tokens) * model.hidden_size
    out = [saved("down-projection input", down_in, act, "q/kv down-projections")]
    if model.q_lora_rank:
        out.append(
            saved("query latent", 2 * sp * model.q_lora_rank, act, "q norm, q up-projection")
        )
    rank = model.kv_lora_rank or 0
    out += [
        saved("key-value latent", 2 * sp * rank, act, "kv norm, kv up-projection"),
        saved("query", x.tokens * heads * qk_head, act, "attention core"),
        saved("key", x.tokens * heads * qk_head, act, "attention core"),
        saved("value", x.tokens * heads * model.v_head_dim, act, "attention core"),
        saved("attention output", x.tokens * heads * model.v_head_dim, act, "output projection"),
    ]
    return tuple(out)
