"""Activations saved for the backward pass, tensor by tensor, per GPU and micro-batch.

Symbols: s sequence, b micro-batch, h hidden, a query heads, k KV heads, d head width, f FFN
width, E routed experts, top-k experts per token, V vocabulary; t TP, c CP. Local tokens
T = s b / c; sequence-parallel tokens T_sp = T / t with SP, T without. Bytes per element:
``act`` from the precision policy (2 for bf16), masks 1, fp32 4. Every tensor is split by CP
(local queries only).

| tensor | elements | dtype | saved by | split |
|---|---|---|---|---|
| attention norm input | T_sp h | act | pre-attention norm | SP |
| QKV / down-projection input | T_sp h | act | QKV (MLA: q and kv down) projections | SP |
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
| MLP norm input, MLP input | T_sp h each | act | pre-MLP norm, up/gate projection | SP |
| SwiGLU: gate and up, product | T 2f / t, T f / t | act | fused SwiGLU, down projection | TP |
| GELU: activation input, output | T f / t each | act | GELU, down projection | TP |
| router logits, routing probabilities | T_sp E, T_sp top-k | fp32 | router, combine | SP |
| dispatched tokens, expert outputs | R h each | act | expert up/gate, combine | EP |
| expert FFN (as the dense MLP) | R f_e / etp | act | expert SwiGLU / GELU | EP, ETP |
| shared experts (as the dense MLP) | T f_s / t | act | shared-expert MLP | TP |
| final norm input, LM head input | T_sp h each | act | final norm, output projection | SP |
| logits | T V / t | fp32 | vocab-parallel cross-entropy | TP |

R = T_sp x top-k x etp x (capacity factor, or imbalance when dropless): tokens the experts on
this GPU receive. Source: Korthikanti et al. 2022 (arXiv:2205.05198) sec. 4 for the GPT layer
(34 s b h + 5 a s^2 b); the same bookkeeping applied to GQA, SwiGLU, MoE (Megatron-Core token
dispatcher) and MLA (DeepSeek-V2 report, arXiv:2405.04434, sec. 2.1; Megatron-Core
MultiLatentAttention, whose down-projections are duplicated over TP and work on T_sp tokens).

Left out: norm statistics (s b fp32 values), RoPE (fused kernels save nothing), the causal mask,
token indices, all-to-all buffers and activation gradients alive during backward.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from explorer.memory.assumptions import TrainingAssumptions
from explorer.partition import StagePlan
from explorer.specs import ModelSpec, Recompute

LayerKind = Literal["dense", "moe"]
FP32_BYTES = 4.0
"""Bytes of an fp32 element (softmax statistics)."""


@dataclass(frozen=True, slots=True)
class SavedTensor:
    """One tensor kept for backward, for one micro-batch on one GPU."""

    name: str
    elements: float
    """Elements on this GPU."""
    bytes_per_element: float
    saved_by: str
    """The operation whose backward needs it."""
    core: bool = False
    """Part of the attention core that selective recompute drops."""

    @property
    def bytes(self) -> float:
        return self.elements * self.bytes_per_element


@dataclass(frozen=True, slots=True)
class ActivationShape:
    """The slice of one micro-batch one GPU works on."""

    seq_len: int
    """Tokens per sequence before context parallelism."""
    micro_batch_size: int
    tp: int = 1
    sp: bool = False
    cp: int = 1
    etp: int = 1
    dtype_bytes: float = 2.0
    """Bytes per saved activation element."""

    @property
    def tokens(self) -> float:
        """Tokens of the micro-batch on this CP rank, T = s b / c."""
        return self.seq_len * self.micro_batch_size / self.cp

    @property
    def sp_tokens(self) -> float:
        """Tokens of sequence-parallel regions, T / t with SP, T without."""
        return self.tokens / self.tp if self.sp and self.tp > 1 else self.tokens


def _t(name: str, elements: float, nbytes: float, by: str, core: bool = False) -> SavedTensor:
    return SavedTensor(name, elements, nbytes, by, core)


def attention_core_tensors(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """The attention core's own saved tensors (beyond q, k, v, output), per GPU, bytes.

    Source: Dao et al. 2022 (arXiv:2205.14135) sec. 3.1 (log-sum-exp only); Korthikanti et al.
    2022 sec. 4.1 (softmax 2as^2b, dropout mask as^2b, dropout output 2as^2b).
    """
    heads = model.num_attention_heads / x.tp
    if a.flash_attention:
        return (_t("softmax log-sum-exp", x.tokens * heads, FP32_BYTES, "FlashAttention", True),)
    scores = x.tokens * x.seq_len * heads  # local queries x all keys
    core = [_t("softmax output", scores, x.dtype_bytes, "softmax, attention x V", True)]
    if a.dropout:
        core.append(_t("attention dropout mask", scores, a.dropout_mask_bytes, "dropout", True))
        core.append(_t("attention dropout output", scores, x.dtype_bytes, "attention x V", True))
    return tuple(core)


def gqa_tensors(model: ModelSpec, x: ActivationShape) -> tuple[SavedTensor, ...]:
    """Saved projections of grouped-query attention (MHA, GQA, MQA), per GPU, bytes.

    Source: Korthikanti et al. 2022 sec. 4.1 (QKV input 2sbh, Q and K 4sbh, V 2sbh, output
    projection input 2sbh) with k KV heads in K and V (Ainslie et al. 2023, arXiv:2305.13245).
    """
    heads, act = model.num_attention_heads / x.tp, x.dtype_bytes
    kv_heads = max(model.kv_heads / x.tp, 1.0)  # fewer KV heads than TP: one replica per rank
    q, kv = x.tokens * heads * model.head_size, x.tokens * kv_heads * model.head_size
    out = [
        _t("QKV projection input", x.sp_tokens * model.hidden_size, act, "QKV projection"),
        _t("query", q, act, "attention core"),
        _t("key", kv, act, "attention core"),
        _t("value", kv, act, "attention core"),
    ]
    if model.qk_norm:
        out.append(_t("q and k before QK-norm", q + kv, act, "per-head q/k norms"))
    out.append(_t("attention output", q, act, "output projection"))
    return tuple(out)


def mla_tensors(model: ModelSpec, x: ActivationShape) -> tuple[SavedTensor, ...]:
    """Saved tensors of multi-head latent attention, per GPU, bytes.

    Source: DeepSeek-V2 report (arXiv:2405.04434) sec. 2.1.2, Eq. 9-19; Megatron-Core
    MultiLatentAttention (duplicated down-projections on T_sp tokens, TP-split up-projections).
    """
    heads, act, sp = model.num_attention_heads / x.tp, x.dtype_bytes, x.sp_tokens
    qk_head = model.qk_nope_head_dim + model.qk_rope_head_dim
    out = [_t("down-projection input", sp * model.hidden_size, act, "q/kv down-projections")]
    if model.q_lora_rank:
        out.append(_t("query latent", 2 * sp * model.q_lora_rank, act, "q norm, q up-projection"))
    rank = model.kv_lora_rank or 0
    out += [
        _t("key-value latent", 2 * sp * rank, act, "kv norm, kv up-projection"),
        _t("query", x.tokens * heads * qk_head, act, "attention core"),
        _t("key", x.tokens * heads * qk_head, act, "attention core"),
        _t("value", x.tokens * heads * model.v_head_dim, act, "attention core"),
        _t("attention output", x.tokens * heads * model.v_head_dim, act, "output projection"),
    ]
    return tuple(out)


def ffn_tensors(
    model: ModelSpec, tokens: float, width: float, act: float, label: str
) -> tuple[SavedTensor, ...]:
    """Saved tensors inside one MLP of ``width`` channels on ``tokens`` tokens, bytes.

    SwiGLU keeps gate and up (fused kernel, Megatron-Core bias_swiglu) and their product (down
    projection input); GELU keeps its input and output (Korthikanti et al. 2022: 8sbh + 8sbh).
    """
    if model.ffn_kind == "swiglu":
        return (
            _t(f"{label} gate and up", 2 * tokens * width, act, "fused SwiGLU"),
            _t(f"{label} SwiGLU product", tokens * width, act, "down projection"),
        )
    return (
        _t(f"{label} activation input", tokens * width, act, model.ffn_kind.upper()),
        _t(f"{label} activation output", tokens * width, act, "down projection"),
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
    routed = routed_tokens(model, x, a)
    out = [
        _t("router logits", sp * model.n_routed_experts, fp32, "router top-k"),
        _t("routing probabilities", sp * model.num_experts_per_tok, fp32, "combine"),
        _t("dispatched tokens", routed * h, act, "expert up/gate projections"),
        *ffn_tensors(model, routed, model.moe_intermediate_size / x.etp, act, "expert"),
        _t("expert outputs", routed * h, act, "probability-weighted combine"),
    ]
    if model.shared_ffn_size:
        out += ffn_tensors(model, x.tokens, model.shared_ffn_size / x.tp, act, "shared expert")
    return tuple(out)


@lru_cache(maxsize=1024)
def block_tensors(
    model: ModelSpec, kind: LayerKind, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """Every tensor one pre-norm block saves for one micro-batch on one GPU (the table above).

    Source: Korthikanti et al. 2022 sec. 4.1 (norm inputs 4sbh, residual dropout masks 2sbh).
    """
    h, act, sp = model.hidden_size, x.dtype_bytes, x.sp_tokens
    attention = mla_tensors(model, x) if model.is_mla else gqa_tensors(model, x)
    mlp = (
        moe_tensors(model, x, a)
        if kind == "moe"
        else ffn_tensors(model, x.tokens, model.intermediate_size / x.tp, act, "MLP")
    )
    out = [
        _t("attention norm input", sp * h, act, "pre-attention norm"),
        *attention,
        *attention_core_tensors(model, x, a),
        _t("MLP norm input", sp * h, act, "pre-MLP norm"),
        _t("MLP input", sp * h, act, "MLP up/gate projections and router"),
        *mlp,
    ]
    if a.dropout:
        out.append(_t("attention residual dropout mask", sp * h, a.dropout_mask_bytes, "dropout"))
        out.append(_t("MLP residual dropout mask", sp * h, a.dropout_mask_bytes, "dropout"))
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


def head_tensors(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions
) -> tuple[SavedTensor, ...]:
    """Final norm, LM head and loss tensors of one micro-batch on the last stage, bytes.

    Source: Korthikanti et al. 2022 sec. 4.3: 4 s b h / t (1 + V / h) with SP; logits upcast
    to fp32 by Megatron-LM's vocab_parallel_cross_entropy.
    """
    h, act = model.hidden_size, x.dtype_bytes
    logits = x.tokens * model.vocab_size / x.tp
    return (
        _t("final norm input", x.sp_tokens * h, act, "final norm"),
        _t("LM head input", x.sp_tokens * h, act, "output projection"),
        _t("logits (fp32)", logits, a.loss_logits_bytes, "cross-entropy"),
    )


def embedding_activation_bytes(x: ActivationShape, a: TrainingAssumptions, hidden: int) -> float:
    """Bytes the embedding saves per micro-batch: its dropout mask when dropout is on.

    The embedding output itself is the first block's input, counted there (its norm saves it).
    Source: Korthikanti et al. 2022 sec. 4.3 (s b h p / t for the embedding dropout).
    """
    return x.sp_tokens * hidden * a.dropout_mask_bytes if a.dropout else 0.0


def mtp_activation_bytes(
    model: ModelSpec, x: ActivationShape, a: TrainingAssumptions, recompute: Recompute
) -> float:
    """Bytes the multi-token-prediction modules save per micro-batch on the last stage.

    Per module: two input norms and the 2h -> h projection input (4 T_sp h), one block, and its
    own final norm, head and fp32 logits. Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 2.2.
    """
    if not model.num_nextn_predict_layers:
        return 0.0
    kind: LayerKind = "moe" if model.is_moe_layer(model.num_hidden_layers) else "dense"
    inputs = 4 * x.sp_tokens * model.hidden_size * x.dtype_bytes
    block = block_activation_bytes(model, kind, x, a, recompute)
    head = sum(t.bytes for t in head_tensors(model, x, a))
    return model.num_nextn_predict_layers * (inputs + block + head)


def recompute_working_bytes(
    model: ModelSpec, plan: StagePlan, x: ActivationShape, a: TrainingAssumptions, r: Recompute
) -> float:
    """Bytes one block rebuilds during its backward under recomputation (largest block kind).

    Full: the whole block's tensors; selective: the attention core's (s^2 terms when classic).
    Source: Chen et al. 2016 (arXiv:1604.06174) sec. 3; Korthikanti et al. 2022 sec. 5.
    """
    kinds: list[LayerKind] = ["moe"] if plan.num_moe_layers else []
    kinds += ["dense"] if plan.num_dense_layers else []
    if r == "none" or not kinds:
        return 0.0
    kept = {k: 0.0 if r == "full" else block_activation_bytes(model, k, x, a, r) for k in kinds}
    return max(block_activation_bytes(model, k, x, a, "none") - kept[k] for k in kinds)


@dataclass(frozen=True, slots=True)
class StageActivations:
    """Activation bytes on one GPU of a pipeline stage, by part; ``total_bytes`` is their sum."""

    blocks: float
    """Transformer blocks x micro-batches in flight."""
    embedding: float
    head: float
    """Final norm, LM head and fp32 logits x micro-batches waiting for their loss backward."""
    mtp: float
    recompute_working: float
    """Recomputation: one block's tensors rebuilt during its backward (full: all of them)."""

    @property
    def total_bytes(self) -> float:
        return self.blocks + self.embedding + self.head + self.mtp + self.recompute_working


def stage_activations(
    model: ModelSpec,
    plan: StagePlan,
    x: ActivationShape,
    a: TrainingAssumptions,
    recompute: Recompute,
    inflight: float,
    loss_inflight: float,
) -> StageActivations:
    """Activation bytes held on one GPU of ``plan``'s stage at its peak, by part."""
    # ledger: stage-equivalents in flight x blocks' bytes per micro-batch / chunk copies
    # (DualPipe counts one of its two chunks per stage-equivalent)
    blocks = 0.0
    if plan.num_dense_layers:
        blocks += plan.num_dense_layers * block_activation_bytes(model, "dense", x, a, recompute)
    if plan.num_moe_layers:
        blocks += plan.num_moe_layers * block_activation_bytes(model, "moe", x, a, recompute)
    head = mtp = embedding = 0.0
    if plan.has_head:
        head = sum(t.bytes for t in head_tensors(model, x, a))
        mtp = mtp_activation_bytes(model, x, a, recompute)
    if plan.has_embedding:
        embedding = embedding_activation_bytes(x, a, model.hidden_size)
    return StageActivations(
        blocks=inflight * blocks / plan.copies,
        embedding=inflight * embedding,
        head=loss_inflight * head,
        mtp=loss_inflight * mtp,
        recompute_working=recompute_working_bytes(model, plan, x, a, recompute),
    )
