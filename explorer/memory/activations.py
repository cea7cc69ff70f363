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
| query latent; the same normalised (MLA) | T_sp q_rank each | act | q norm; q up-projection | SP |
| kv latent; the same normalised (MLA) | T_sp kv_rank each | act | kv norm; kv up-projection | SP |
| query | T a d / t | act | attention core | TP |
| key, value | T k d / t each (MLA: a (d_nope+d_rope), a d_v) | act | attention core | TP |
| q, k before QK-norm | T (a + k) d / t | act | per-head q/k norms | TP |
| softmax log-sum-exp (flash) | T a / t | fp32 | FlashAttention | TP |
| softmax output (classic) | T s a / t | act | softmax, attention x V | TP |
| attention dropout mask, output (classic) | T s a / t each | 1, act | dropout, attention x V | TP |
| attention output | T a d_v / t | act | output projection | TP |
| residual dropout masks (dropout on) | T_sp h, twice | 1 | dropout after attention, MLP | SP |
| MLP norm input | T_sp h | act | pre-MLP norm | SP |
| MLP input | T_in h | act | up/gate projection (and router) | SP |
| SwiGLU: gate and up, product | T 2f / t, T f / t | act | fused SwiGLU, down projection | TP |
| SwiGLU eager: + silu(gate) | T f / t | act | gate x up product | TP |
| GELU: activation input, output | T f / t each | act | GELU, down projection | TP |
| router logits, routing probabilities | T_sp E, T_sp top-k | fp32 | router, combine | SP |
| dispatched tokens | R h | act | expert up/gate projections | EP |
| expert FFN (as the dense MLP) | R f_e / etp | act | expert SwiGLU / GELU | EP, ETP |
| expert outputs (pytorch); permuted probabilities (megatron) | R h; R | act; fp32 | combine | EP |
| shared experts (as the dense MLP) | T f_s / t | act | shared-expert MLP | TP |
| final norm input, LM head input | T_sp h, T_in h | act | final norm, output projection | SP |
| logits | T V / t | fp32 | vocab-parallel cross-entropy | TP |

R = T_sp x top-k x etp x (capacity factor, or imbalance when dropless): tokens the experts on
this GPU receive. Source: Korthikanti et al. 2022 (arXiv:2205.05198) sec. 4 for the GPT layer
(34 s b h + 5 a s^2 b); the same bookkeeping applied to GQA, SwiGLU, MoE (Megatron-Core token
dispatcher) and MLA (DeepSeek-V2 report, arXiv:2405.04434, sec. 2.1; Megatron-Core
MultiLatentAttention, whose down-projections are duplicated over TP and work on T_sp tokens).
Megatron-Core weights the expert activation by the routing probabilities (weighted SwiGLU) and
unpermutes without them, so its combine keeps R fp32 probabilities, not R h expert outputs
(``moe_probs_in_experts``). The head, embedding, MTP and per-stage totals are in
``stage_activations.py``.

DeepSeek-V3 recipe (``activation_recipe``; report arXiv:2412.19437): with
``recompute_norms_and_mla_up_projection`` (sec. 3.2.3) every norm output (QKV / down-projection
input, normalised latents, MLP input, LM head input, MTP projection input; with QK-norm q and k)
and the MLA up-projection outputs (q, k, v) are dropped and a T_sp x d_rope RoPE key is kept
to rebuild k. With ``fp8_activation_cache`` (sec. 3.3.3) only inputs of FP8 linear layers
become E4M3 + 1 x 128 fp32 tile scales (1 + 4/128 bytes): QKV / down-projection input,
normalised latents, the dense MLP input, dispatched tokens, down-projection inputs (SwiGLU
product, GELU output) and the MTP projection input; the attention output becomes E5M6
(1.5 + 4/128 bytes). Norm inputs (the residual stream), q, k, v (attention runs in bf16,
sec. 3.3.1), SwiGLU / GELU inputs, the MoE MLP input (the router keeps bf16, sec. 3.3.1; the
shared experts then save an FP8 copy), the LM head input (bf16 head) and fp32 tensors keep their
dtype. With ``moe_swiglu_recompute`` (sec. 3.3.3 (2)) routed and shared experts keep gate and up
in FP8 and drop the product. What the recipe drops, one block's backward rebuilds
(``rebuilt_activation_bytes``).

Left out: norm statistics (s b fp32 values), RoPE (fused kernels save nothing), the causal mask,
token indices, all-to-all buffers, activation gradients alive during backward and the unweighted
activation output an unfused probability-weighted activation keeps (GELU experts).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from explorer.memory.assumptions import TrainingAssumptions
from explorer.memory.attention import attention_core_tensors, gqa_tensors, mla_tensors
from explorer.memory.frameworks import activation_storage, framework_behaviour
from explorer.memory.recompute import RecomputePolicy, as_policy, selective_tensors
from explorer.memory.tensors import (
    FP8_BYTES,
    FP32_BYTES,
    ActivationShape,
    LayerKind,
    SavedTensor,
    linear_input_bytes,
    saved,
)
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
    "rebuilt_activation_bytes",
    "routed_tokens",
]


def input_tokens(x: ActivationShape, a: TrainingAssumptions) -> float:
    """Tokens whose input a column-parallel projection saves: T_in (see the table).

    Source: Korthikanti et al. 2022 sec. 4.2.2 (Megatron saves the SP shard and re-gathers it);
    measured: validation/results.json llama8b-tp4-bf16-pure-s4096-b1 (DTensor keeps T).
    """
    return x.tokens if framework_behaviour(a).sp_saves_gathered_inputs else x.sp_tokens


def ffn_tensors(
    model: ModelSpec,
    tokens: float,
    width: float,
    act: float,
    label: str,
    fused: bool = True,
    fp8: bool = False,
    swiglu_recompute: bool = False,
) -> tuple[SavedTensor, ...]:
    """Saved tensors inside one MLP of ``width`` channels on ``tokens`` tokens, bytes.

    SwiGLU keeps gate and up (fused kernel, Megatron-Core bias_swiglu) and their product (down
    projection input); eager SwiGLU also silu(gate) (``fused`` False; measured:
    validation/results.json llama8b-bf16-pure-s4096-b1); GELU keeps its input and output
    (Korthikanti et al. 2022: 8sbh + 8sbh). ``fp8``: the down-projection input in FP8;
    ``swiglu_recompute``: gate and up in FP8, the rest rebuilt (DeepSeek-V3 report sec. 3.3.3).
    """
    down_in = linear_input_bytes(act, fp8)
    if model.ffn_kind != "swiglu":
        return (
            saved(f"{label} activation input", tokens * width, act, model.ffn_kind.upper()),
            saved(f"{label} activation output", tokens * width, down_in, "down projection"),
        )
    gate_up = 2 * tokens * width
    if swiglu_recompute:
        return (saved(f"{label} gate and up", gate_up, FP8_BYTES, "SwiGLU, recomputed"),)
    product = saved(f"{label} SwiGLU product", tokens * width, down_in, "down projection")
    if fused:
        return (saved(f"{label} gate and up", gate_up, act, "fused SwiGLU"), product)
    return (
        saved(f"{label} gate and up", gate_up, act, "SiLU, gate x up product"),
        saved(f"{label} silu(gate)", tokens * width, act, "gate x up product"),
        product,
    )


def expert_load(model: ModelSpec, a: TrainingAssumptions) -> float:
    """Tokens the busiest GPU's experts process, as a multiple of the mean (1 for a dense model):
    the capacity factor when tokens beyond it are dropped (Megatron-Core
    --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity: experts run at
    capacity), else the dropless imbalance assumption.

    Source: Fedus et al. 2021 (arXiv:2101.03961) sec. 2.2 (expert capacity).
    """
    if not model.is_moe:
        return 1.0
    return a.moe_capacity_factor if a.moe_capacity_factor is not None else a.moe_imbalance


def routed_tokens(model: ModelSpec, x: ActivationShape, a: TrainingAssumptions) -> float:
    """Token copies the routed experts on one GPU process per micro-batch.

    Source: Megatron-Core all-to-all token dispatcher: T_sp tokens per rank, top-k copies each,
    all-gathered over expert-TP; capacity factor (Fedus et al. 2021, arXiv:2101.03961) or the
    dropless imbalance assumption for the busiest GPU.
    """
    return x.sp_tokens * model.num_experts_per_tok * x.etp * expert_load(model, a)


def moe_tensors(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """Saved tensors of an MoE MLP after its input (router, routed and shared experts), bytes.

    Source: Megatron-Core MoELayer (router, all-to-all dispatcher permute and unpermute,
    grouped experts with weighted SwiGLU, shared experts); Lepikhin et al. 2020, GShard
    (arXiv:2006.16668) sec. 2.2; torchtitan MoE (scores applied to the expert outputs).
    """
    h, act, sp, fp32 = model.hidden_size, x.dtype_bytes, x.sp_tokens, a.router_logits_bytes
    behaviour, storage = framework_behaviour(a), activation_storage(a)
    routed, fp8 = routed_tokens(model, x, a), storage.fp8_activation_cache
    dispatched = linear_input_bytes(act, fp8)  # FP8 already on the wire (sec. 3.3.3)
    experts = (behaviour.fused_swiglu, fp8, storage.moe_swiglu_recompute)
    combine = (  # what the probabilities' gradient needs (see the module docstring)
        saved("permuted probabilities", routed, fp32, "weighted SwiGLU")
        if behaviour.moe_probs_in_experts
        else saved("expert outputs", routed * h, act, "probability-weighted combine")
    )
    out = [
        saved("router logits", sp * model.n_routed_experts, fp32, "router top-k"),
        saved("routing probabilities", sp * model.num_experts_per_tok, fp32, "combine"),
        saved("dispatched tokens", routed * h, dispatched, "expert up/gate projections"),
        *ffn_tensors(model, routed, model.moe_intermediate_size / x.etp, act, "expert", *experts),
        combine,
    ]
    if model.shared_ffn_size:
        width = model.shared_ffn_size / x.tp
        out += ffn_tensors(model, x.tokens, width, act, "shared expert", *experts)
    return tuple(out)


def _attention(model: ModelSpec, x: ActivationShape, a: TrainingAssumptions) -> list[SavedTensor]:
    tokens, storage = input_tokens(x, a), activation_storage(a)
    norm_in = x.sp_tokens * model.hidden_size
    if model.is_mla:
        projections = mla_tensors(model, x, tokens, storage)
    else:
        projections = gqa_tensors(model, x, tokens, storage)
    return [
        saved("attention norm input", norm_in, x.dtype_bytes, "pre-attention norm"),
        *projections,
        *attention_core_tensors(model, x, a),
    ]


def _mlp(
    model: ModelSpec, kind: LayerKind, x: ActivationShape, a: TrainingAssumptions
) -> list[SavedTensor]:
    """The MLP sub-layer: norm input, the norm output the MLP reads, and the MLP's tensors."""
    h, act, storage = model.hidden_size, x.dtype_bytes, activation_storage(a)
    fp8, inputs = storage.fp8_activation_cache, input_tokens(x, a) * model.hidden_size
    out = [saved("MLP norm input", x.sp_tokens * h, act, "pre-MLP norm")]
    kept = not storage.recompute_norms_and_mla_up_projection  # the norm output is kept
    if kind == "dense":
        if kept:
            out.append(saved("MLP input", inputs, linear_input_bytes(act, fp8), "up/gate"))
        fused = framework_behaviour(a).fused_swiglu
        width = model.intermediate_size / x.tp
        return [*out, *ffn_tensors(model, x.tokens, width, act, "MLP", fused, fp8)]
    if kept:
        out.append(saved("MLP input", inputs, act, "router and shared-expert up/gate"))
    if kept and fp8 and model.shared_ffn_size:  # the router keeps bf16 (DeepSeek-V3 sec. 3.3.1)
        out.append(saved("shared expert input (FP8)", inputs, FP8_BYTES, "shared up/gate"))
    return [*out, *moe_tensors(model, x, a)]


@lru_cache(maxsize=1024)
def block_tensors(
    model: ModelSpec, kind: LayerKind, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """Every tensor one pre-norm block saves for one micro-batch on one GPU (the table above).

    Source: Korthikanti et al. 2022 sec. 4.1 (norm inputs 4sbh, residual dropout masks 2sbh).
    """
    if model.single_module_blocks:
        return _fp8_gemm_inputs(_single_module_block(model, x, a), kind, a)
    if model.linear_attention_layers:  # Qwen3-Next: Gated DeltaNet beside gated attention
        out = [*_linear_attention_mix(model, x, a), *_mlp(model, kind, x, a)]
    else:
        out = [*_attention(model, x, a), *_mlp(model, kind, x, a)]
    if a.dropout:
        sp_h = x.sp_tokens * model.hidden_size
        out.append(saved("attention residual dropout mask", sp_h, a.dropout_mask_bytes, "dropout"))
        out.append(saved("MLP residual dropout mask", sp_h, a.dropout_mask_bytes, "dropout"))
    return _fp8_gemm_inputs(tuple(out), kind, a)


def _mamba(model: ModelSpec, x: ActivationShape, a: TrainingAssumptions) -> list[SavedTensor]:
    """A Nemotron-H Mamba2 block: its norm input and in_proj input, and what the fused
    mamba_split_conv1d_scan_combined kernel saves: in_proj's output (z, x, B, C, dt), the scan
    output and the gated norm's fp32 rstd per group; it rebuilds the convolution output and
    the out_proj input in backward. Split over TP as Megatron-Core MambaMixer shards d_inner.
    Source: state-spaces/mamba ops/triton/ssd_combined.py (MambaSplitConv1dScanCombinedFn
    save_for_backward: zxbcdt, out_x, rstd and the weights). Not saved: the convolution state
    and output and the SSD chunk states (b x chunks x heads x P x N, fp32), which the backward
    recomputes from zxbcdt (_mamba_chunk_scan_combined_bwd); their forward-time transient is
    not counted here (Mamba-2 paper, arXiv:2405.21060, sec. 6: the chunked SSD algorithm)."""
    h, act, tp = model.hidden_size, x.dtype_bytes, x.tp
    inner, groups = model.mamba_inner_size, model.mamba_n_groups
    projected = 2 * inner + 2 * groups * model.ssm_state_size + model.mamba_num_heads
    return [
        saved("Mamba norm input", x.sp_tokens * h, act, "pre-mixer norm"),
        saved("Mamba in_proj input", input_tokens(x, a) * h, act, "in_proj"),
        saved("Mamba in_proj output", x.tokens * projected / tp, act, "conv1d, scan, gate"),
        saved("Mamba scan output", x.tokens * inner / tp, act, "gated norm, out_proj"),
        saved("Mamba gated-norm rstd", x.tokens * max(groups / tp, 1), FP32_BYTES, "norm"),
    ]


DELTA_RULE_CHUNK = 64
"""Tokens per chunk of the chunked gated delta rule: the WY matrix A it saves is T x heads x 64.
Source: fla-org/flash-linear-attention ops/gated_delta_rule/chunk.py (chunk size 64)."""


def _gated_deltanet(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> list[SavedTensor]:
    """A Qwen3-Next Gated DeltaNet (linear attention) sub-layer: its norm input and in_proj
    input; the short convolution's input (q, k, v mixed); the output gate z; beta (sigmoid) and
    the decay g with its softplus input (fp32); what chunk_gated_delta_rule saves: q and k after
    the in-kernel L2 norm, repeated to the value heads, with their fp32 rstd, v, and the WY
    matrix A (T x value heads x 64); the gated RMSNorm's input and fp32 rstd per head; out_proj's
    input. Nothing grows with the sequence beyond T: the recurrent state is rebuilt in backward.
    Source: transformers models/qwen3_next (Qwen3NextGatedDeltaNet.forward: causal_conv1d_fn,
    repeat_interleave of q and k, chunk_gated_delta_rule with use_qk_l2norm_in_kernel,
    FusedRMSNormGated); fla ChunkGatedDeltaRuleFunction (save_for_backward q, q_rstd, k,
    k_rstd, v, g, beta, A). Heads split over TP."""
    h, act, t = model.hidden_size, x.dtype_bytes, x.tokens
    v_heads = model.linear_num_value_heads / x.tp
    key_dim = model.linear_num_key_heads * model.linear_key_head_dim / x.tp
    value_dim = v_heads * model.linear_value_head_dim
    qk = 2 * t * v_heads * model.linear_key_head_dim
    return [
        saved("linear-attention norm input", x.sp_tokens * h, act, "pre-attention norm"),
        saved("linear-attention in_proj input", input_tokens(x, a) * h, act, "in_proj_qkvz, ba"),
        saved("short-convolution input", t * (2 * key_dim + value_dim), act, "causal_conv1d"),
        saved("output gate z", t * value_dim, act, "gated RMSNorm"),
        saved("delta-rule beta", t * v_heads, act, "sigmoid, delta rule"),
        saved("delta-rule decay g, softplus input", 2 * t * v_heads, FP32_BYTES, "softplus"),
        saved("delta-rule q and k", qk, act, "chunk_gated_delta_rule"),
        saved("delta-rule q and k rstd", 2 * t * v_heads, FP32_BYTES, "in-kernel L2 norm"),
        saved("delta-rule v", t * value_dim, act, "chunk_gated_delta_rule"),
        saved("delta-rule WY matrix", t * v_heads * DELTA_RULE_CHUNK, act, "delta rule"),
        saved("delta-rule output", t * value_dim, act, "gated RMSNorm"),
        saved("gated-norm rstd", t * v_heads, FP32_BYTES, "gated RMSNorm"),
        saved("linear-attention output", t * value_dim, act, "out_proj"),
    ]


def _linear_attention_mix(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> list[SavedTensor]:
    """The mean attention sub-layer of a Qwen3-Next block: Gated DeltaNet tensors and gated
    softmax attention tensors, each weighted by its share of the blocks (as Nemotron-H's mean
    block: a stage is charged the model's mix). The gated attention also keeps its ungated
    output and sigmoid(gate), the two inputs of the gating product.
    Source: transformers Qwen3NextAttention (attn_output * torch.sigmoid(gate))."""
    n, linear = model.num_hidden_layers, len(model.linear_attention_layers)
    full = _attention(model, x, a)
    if model.attn_output_gate:
        q = x.tokens * model.num_attention_heads / x.tp * model.head_size
        full += [
            saved("ungated attention output", q, x.dtype_bytes, "output gate product"),
            saved("sigmoid(output gate)", q, x.dtype_bytes, "output gate product"),
        ]
    parts = ((_gated_deltanet(model, x, a), linear), (full, n - linear))
    return [replace(t, elements=t.elements * k / n) for tensors, k in parts if k for t in tensors]


def _single_module_block(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """The mean Nemotron-H block: the tensors of a Mamba2, an attention and an MLP block, each
    weighted by its share of the model's blocks (a stage's own mix when ``model`` is that
    stage's: explorer.memory.stage_activations.stage_block_model). An attention or MLP block
    saves what that sub-layer of a transformer block saves (its pre-norm input included);
    every block one residual dropout mask."""
    n = model.num_hidden_layers
    parts = (
        (_mamba(model, x, a), len(model.mamba_layers)),
        (_attention(model, x, a), len(model.attention_only_layers)),
        (_mlp(model, "dense", x, a), len(model.ffn_only_layers)),
    )
    out = [replace(t, elements=t.elements * k / n) for tensors, k in parts if k for t in tensors]
    if a.dropout:
        sp_h = x.sp_tokens * model.hidden_size
        out.append(saved("residual dropout mask", sp_h, a.dropout_mask_bytes, "dropout"))
    return tuple(out)


FP8_GEMM_INPUTS = frozenset(
    {"QKV projection input", "down-projection input", "query latent, normalised",
     "key-value latent, normalised", "attention output", "MLP SwiGLU product",
     "MLP activation output", "dispatched tokens", "expert SwiGLU product",
     "expert activation output", "shared expert SwiGLU product",
     "shared expert activation output"}
)  # fmt: skip
"""Saved tensors that are inputs of Transformer Engine FP8 GEMMs (Linear / LayerNormLinear /
GroupedLinear): the QKV (MLA: down- and up-) projections, the output projection, fc1 (the
dense MLP input, below) and fc2 of dense MLPs, routed and shared experts."""


def _fp8_gemm_inputs(
    tensors: tuple[SavedTensor, ...], kind: LayerKind, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """``tensors`` with the FP8 GEMMs' saved inputs at ``a.fp8_linear_input_bytes``.

    The MoE MLP input stays in the activation dtype (the router reads it in bf16).
    Source: Transformer Engine linear.py / layernorm_linear.py (see the assumption).
    """
    width = a.fp8_linear_input_bytes
    if width is None:
        return tensors
    names = FP8_GEMM_INPUTS | ({"MLP input"} if kind == "dense" else set())
    return tuple(replace(t, bytes_per_element=width) if t.name in names else t for t in tensors)


@lru_cache(maxsize=1024)
def rebuilt_activation_bytes(
    model: ModelSpec, kind: LayerKind, x: ActivationShape, a: TrainingAssumptions
) -> float:
    """Bytes the activation recipe rebuilds in one block's backward, per micro-batch on one GPU.

    The tensors that ``recompute_norms_and_mla_up_projection`` and ``moe_swiglu_recompute`` drop
    from the saved set, rebuilt in the activation dtype one sub-layer at a time (the MLP's
    backward runs before the attention's): the larger sub-layer's. Source: DeepSeek-V3 report
    (arXiv:2412.19437) sec. 3.2.3 and 3.3.3; Chen et al. 2016 (arXiv:1604.06174) sec. 3.
    """
    kept = replace(a, recompute_norms_and_mla_up_projection=False, moe_swiglu_recompute=False)
    pairs = (
        (_attention(model, x, a), _attention(model, x, kept)),
        (_mlp(model, kind, x, a), _mlp(model, kind, x, kept)),
    )
    return max(_dropped_bytes(now, before, x.dtype_bytes) for now, before in pairs)


def _dropped_bytes(now: list[SavedTensor], before: list[SavedTensor], act: float) -> float:
    """Bytes, in the activation dtype, of the tensors in ``before`` that ``now`` no longer has."""
    names = {t.name for t in now}
    return sum(t.elements * act for t in before if t.name not in names)


@lru_cache(maxsize=1024)
def block_activation_bytes(
    model: ModelSpec,
    kind: LayerKind,
    x: ActivationShape,
    a: TrainingAssumptions,
    recompute: Recompute | RecomputePolicy,
) -> float:
    """Activation bytes one block keeps on the GPU for one micro-batch, after recomputation.

    Source: Korthikanti et al. 2022 sec. 5: selective recompute drops the attention core's
    tensors; full recompute keeps only the block input (2 s b h, sharded by SP as Megatron-LM
    checkpoints it). A ``RecomputePolicy`` names the recipe (recompute modules, torchtitan's
    op-level SAC, offloaded modules: ``explorer.memory.recompute``); with full granularity this
    is a checkpointed block (which blocks are: ``recompute.checkpoint_counts``).
    """
    p = as_policy(recompute)
    if p.granularity == "full":
        return x.sp_tokens * model.hidden_size * x.dtype_bytes
    kept = selective_tensors(model, kind, x, a, p, block_tensors(model, kind, x, a))
    return sum(t.bytes for t in kept)
