"""Activations saved for the backward pass, tensor by tensor, per GPU and micro-batch.

Symbols: s sequence, b micro-batch, h hidden, a query heads, k KV heads, d head width, f FFN
width, E routed experts, top-k experts per token, V vocabulary; t TP, c CP. Local tokens
T = s b / c; sequence-parallel tokens T_sp = T / t with SP, T without; T_in = T_sp, or T when
SP saves gathered inputs (PyTorch DTensor). Bytes per element: ``act`` from the precision
policy (2 for bf16), masks 1, fp32 4. Every tensor is split by CP (local queries only).

| tensor | elements | dtype | saved by | split |
|---|---|---|---|---|
| attention norm input | T_sp h | act | pre-attention norm | SP |
| QKV / down-projection input | T_in h | act | QKV (MLA: q and kv down) projections | SP |
| query latent, normalised (MLA) | 2 T_sp q_rank | act | q latent norm, q up-projection | SP |
| kv latent, normalised (MLA) | 2 T_sp kv_rank | act | kv latent norm, kv up-projection | SP |
| query | T a d / t | act | attention core | TP |
| key, value | T k d / t each (MLA: a (d_nope+d_rope), a d_v) | act | attention core | TP |
| q, k before QK-norm | T (a + k) d / t | act | per-head q/k norms | TP |
| softmax log-sum-exp (flash) | T a / t | fp32 | FlashAttention | TP |
| softmax output (classic) | T s a / t | act | softmax, attention x V | TP |
| attention dropout mask, output (classic) | T s a / t each | 1, act | dropout, attention x V | TP |
| attention output | T a d_v / t | act | output projection | TP |
| residual dropout masks (dropout on) | T_sp h, twice | 1 | dropout after attention, MLP | SP |
| MLP norm input | T_sp h | act | pre-MLP norm | SP |
| MLP input | T_in h | act | up/gate projection | SP |
| SwiGLU: gate and up, product | T 2f / t, T f / t | act | fused SwiGLU, down projection | TP |
| SwiGLU eager: + silu(gate) | T f / t | act | gate x up product | TP |
| GELU: activation input, output | T f / t each | act | GELU, down projection | TP |
| router logits, routing probabilities | T_sp E, T_sp top-k | fp32 | router, combine | SP |
| dispatched tokens, expert outputs | R h each | act | expert up/gate, combine | EP |
| expert FFN (as the dense MLP) | R f_e / etp | act | expert SwiGLU / GELU | EP, ETP |
| shared experts (as the dense MLP) | T f_s / t | act | shared-expert MLP | TP |
| final norm input, LM head input | T_sp h, T_in h | act | final norm, output projection | SP |
| logits | T V / t | fp32 | vocab-parallel cross-entropy | TP |

R = T_sp x top-k x etp x (capacity factor, or imbalance when dropless): tokens the experts on
this GPU receive. Source: Korthikanti et al. 2022 (arXiv:2205.05198) sec. 4 for the GPT layer
(34 s b h + 5 a s^2 b); the same bookkeeping applied to GQA, SwiGLU, MoE (Megatron-Core token
dispatcher) and MLA (DeepSeek-V2 report, arXiv:2405.04434, sec. 2.1; Megatron-Core
MultiLatentAttention, whose down-projections are duplicated over TP and work on T_sp tokens).
The head, embedding, MTP and per-stage totals are in ``stage_activations.py``.

Left out: norm statistics (s b fp32 values), RoPE (fused kernels save nothing), the causal mask,
token indices, all-to-all buffers and activation gradients alive during backward.
"""

from __future__ import annotations

from functools import lru_cache

from explorer.memory.assumptions import TrainingAssumptions
from explorer.memory.attention import attention_core_tensors, gqa_tensors, mla_tensors
from explorer.memory.frameworks import framework_behaviour
from explorer.memory.tensors import FP32_BYTES, ActivationShape, LayerKind, SavedTensor, saved
from explorer.specs import ModelSpec, Recompute

__all__ = [
    "FP32_BYTES",
    "ActivationShape",
    "LayerKind",
    "SavedTensor",
    "attention_core_tensors",
    "block_activation_bytes",
    "block_tensors",
    "ffn_tensors",
    "gqa_tensors",
    "input_tokens",
    "mla_tensors",
    "moe_tensors",
    "routed_tokens",
]


def input_tokens(x: ActivationShape, a: TrainingAssumptions) -> float:
    """Tokens whose input a column-parallel projection saves: T_in (see the table).

    Source: Korthikanti et al. 2022 sec. 4.2.2 (Megatron saves the SP shard and re-gathers it);
    measured: validation/results.json llama8b-tp4-bf16-pure-s4096-b1 (DTensor keeps T).
    """
    return x.tokens if framework_behaviour(a).sp_saves_gathered_inputs else x.sp_tokens


def ffn_tensors(
    model: ModelSpec, tokens: float, width: float, act: float, label: str, fused: bool = True
) -> tuple[SavedTensor, ...]:
    """Saved tensors inside one MLP of ``width`` channels on ``tokens`` tokens, bytes.

    SwiGLU keeps gate and up (fused kernel, Megatron-Core bias_swiglu) and their product (down
    projection input); eager SwiGLU also silu(gate) (``fused`` False; measured:
    validation/results.json llama8b-bf16-pure-s4096-b1); GELU keeps its input and output
    (Korthikanti et al. 2022: 8sbh + 8sbh).
    """
    if model.ffn_kind != "swiglu":
        return (
            saved(f"{label} activation input", tokens * width, act, model.ffn_kind.upper()),
            saved(f"{label} activation output", tokens * width, act, "down projection"),
        )
    gate_up = 2 * tokens * width
    product = saved(f"{label} SwiGLU product", tokens * width, act, "down projection")
    if fused:
        return (saved(f"{label} gate and up", gate_up, act, "fused SwiGLU"), product)
    return (
        saved(f"{label} gate and up", gate_up, act, "SiLU, gate x up product"),
        saved(f"{label} silu(gate)", tokens * width, act, "gate x up product"),
        product,
    )


def routed_tokens(model: ModelSpec, x: ActivationShape, a: TrainingAssumptions) -> float:
    """Token copies the routed experts on one GPU process per micro-batch.

    Source: Megatron-Core all-to-all token dispatcher: T_sp tokens per rank, top-k copies each,
    all-gathered over expert-TP; capacity factor (Fedus et al. 2021, arXiv:2101.03961) or the
    dropless imbalance assumption for the busiest GPU.
    """
    margin = a.moe_capacity_factor if a.moe_capacity_factor is not None else a.moe_imbalance
    return x.sp_tokens * model.num_experts_per_tok * x.etp * margin


def moe_tensors(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """Saved tensors of an MoE MLP after its input (router, routed and shared experts), bytes.

    Source: Megatron-Core MoELayer (router, all-to-all dispatcher permute and unpermute,
    grouped experts, shared experts); Lepikhin et al. 2020, GShard (arXiv:2006.16668) sec. 2.2.
    """
    h, act, sp, fp32 = model.hidden_size, x.dtype_bytes, x.sp_tokens, a.router_logits_bytes
    routed, fused = routed_tokens(model, x, a), framework_behaviour(a).fused_swiglu
    expert_width = model.moe_intermediate_size / x.etp
    out = [
        saved("router logits", sp * model.n_routed_experts, fp32, "router top-k"),
        saved("routing probabilities", sp * model.num_experts_per_tok, fp32, "combine"),
        saved("dispatched tokens", routed * h, act, "expert up/gate projections"),
        *ffn_tensors(model, routed, expert_width, act, "expert", fused),
        saved("expert outputs", routed * h, act, "probability-weighted combine"),
    ]
    if model.shared_ffn_size:
        width = model.shared_ffn_size / x.tp
        out += ffn_tensors(model, x.tokens, width, act, "shared expert", fused)
    return tuple(out)


def _attention(model: ModelSpec, x: ActivationShape, a: TrainingAssumptions) -> list[SavedTensor]:
    tokens = input_tokens(x, a)
    projections = mla_tensors(model, x, tokens) if model.is_mla else gqa_tensors(model, x, tokens)
    return [*projections, *attention_core_tensors(model, x, a)]


@lru_cache(maxsize=1024)
def block_tensors(
    model: ModelSpec, kind: LayerKind, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """Every tensor one pre-norm block saves for one micro-batch on one GPU (the table above).

    Source: Korthikanti et al. 2022 sec. 4.1 (norm inputs 4sbh, residual dropout masks 2sbh).
    """
    h, act, sp = model.hidden_size, x.dtype_bytes, x.sp_tokens
    fused = framework_behaviour(a).fused_swiglu
    mlp = (
        moe_tensors(model, x, a)
        if kind == "moe"
        else ffn_tensors(model, x.tokens, model.intermediate_size / x.tp, act, "MLP", fused)
    )
    out = [
        saved("attention norm input", sp * h, act, "pre-attention norm"),
        *_attention(model, x, a),
        saved("MLP norm input", sp * h, act, "pre-MLP norm"),
        saved("MLP input", input_tokens(x, a) * h, act, "MLP up/gate projections and router"),
        *mlp,
    ]
    if a.dropout:
        out.append(
            saved("attention residual dropout mask", sp * h, a.dropout_mask_bytes, "dropout")
        )
        out.append(saved("MLP residual dropout mask", sp * h, a.dropout_mask_bytes, "dropout"))
    return tuple(out)


@lru_cache(maxsize=1024)
def block_activation_bytes(
    model: ModelSpec,
    kind: LayerKind,
    x: ActivationShape,
    a: TrainingAssumptions,
    recompute: Recompute,
) -> float:
    """Activation bytes one block keeps for one micro-batch on one GPU, after recomputation.

    Source: Korthikanti et al. 2022 sec. 5: selective recompute drops the attention core's
    tensors; full recompute keeps only the block input (2 s b h, sharded by SP as Megatron-LM
    checkpoints it).
    """
    if recompute == "full":
        return x.sp_tokens * model.hidden_size * x.dtype_bytes
    tensors = block_tensors(model, kind, x, a)
    return sum(t.bytes for t in tensors if not (recompute == "selective" and t.core))
