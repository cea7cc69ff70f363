"""Recompute and activation-offload recipes as the frameworks spell them: which saved tensors
each one drops, moves to host memory or rebuilds, per block and per pipeline rank.

Megatron-Core (TransformerConfig recompute_granularity / recompute_method /
recompute_num_layers / recompute_modules; fine-grained activation offloading): a module under
normal checkpointing (core_attn, mlp, moe, shared_experts) keeps its inputs and drops every
tensor saved inside it; output-discarding checkpointing (layernorm, moe_act, mla_up_proj) drops
the module's output where later operations saved it. Full recompute keeps each checkpointed
unit's input only. Offloading moves a module's input activation to host memory in the forward
and brings it back before its backward. torchtitan (activation_checkpoint.py): full AC; layer
SAC checkpoints every n-th block of a rank; op SAC keeps the block input and the outputs of
the ops on its save list (every second matmul, attention, reduce-scatter).

Tensor names are those of ``activations.py`` and ``attention.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from explorer.memory.assumptions import TrainingAssumptions
from explorer.memory.attention import attention_core_tensors
from explorer.memory.tensors import ActivationShape, LayerKind, SavedTensor, saved
from explorer.specs import Layout, ModelSpec, OffloadModule, Recompute, RecomputeModule


@dataclass(frozen=True, slots=True)
class RecomputePolicy:
    """What a layout recomputes and offloads, as the memory model reads it (hashable)."""

    granularity: Recompute = "none"
    modules: frozenset[RecomputeModule] = frozenset({"core_attn"})
    """Selective: the Megatron-Core modules recomputed."""
    ops: bool = False
    """Selective: torchtitan's op-level SAC instead of modules."""
    method: str = "uniform"
    num_layers: int | None = None
    every: int = 1
    offload: frozenset[OffloadModule] = frozenset()
    """Modules whose input activation lives in host memory between forward and backward."""
    offload_layers: int = 0
    """Blocks of a rank whose saved activations all live in host memory."""


@lru_cache(maxsize=4096)  # pure; asked many times per search for few inputs
def recompute_policy(layout: Layout) -> RecomputePolicy:
    """The recompute and offload recipe of ``layout``."""
    return RecomputePolicy(
        granularity=layout.recompute,
        modules=frozenset(layout.recompute_modules),
        ops=layout.recompute_ops,
        method=layout.recompute_method,
        num_layers=layout.recompute_num_layers,
        every=layout.recompute_every,
        offload=frozenset(layout.activation_offload),
        offload_layers=layout.offload_layers,
    )


def as_policy(recompute: Recompute | RecomputePolicy) -> RecomputePolicy:
    """A policy from a plain granularity (Megatron's defaults for the rest)."""
    return recompute if isinstance(recompute, RecomputePolicy) else RecomputePolicy(recompute)


def _ffn_names(label: str) -> frozenset[str]:
    """Every FFN tensor ``activations.ffn_tensors`` may save under ``label``."""
    parts = ("gate and up", "SwiGLU product", "silu(gate)", "activation input", "activation output")
    return frozenset(f"{label} {part}" for part in parts)


_ROUTING = frozenset(
    {"router logits", "routing probabilities", "dispatched tokens", "permuted probabilities",
     "expert outputs"}
)  # fmt: skip
_SHARED = _ffn_names("shared expert") | {"shared expert input (FP8)"}

MODULE_TENSORS: dict[RecomputeModule, frozenset[str]] = {
    # the attention core's own tensors are flagged ``core`` (attention.attention_core_tensors)
    "core_attn": frozenset(),
    # input_layernorm and pre_mlp_layernorm outputs: what the QKV (MLA: down-) projection and
    # the MLP (router, shared experts) read
    "layernorm": frozenset({"QKV projection input", "down-projection input", "MLP input"}),
    # MLA: the normalised latents and the up-projection outputs; the RoPE key is kept instead
    "mla_up_proj": frozenset(
        {"query latent, normalised", "key-value latent, normalised", "key", "value"}
    ),
    "mlp": _ffn_names("MLP"),
    "moe": _ROUTING | _ffn_names("expert") | _SHARED,
    # the expert activation's output, which the second expert linear saved
    "moe_act": frozenset({"expert SwiGLU product", "expert activation output"}),
    "shared_experts": _SHARED,
}
"""Tensors each Megatron-Core recompute module drops from a block's saved set.
Source: Megatron-Core transformer_config.py (recompute_modules) and transformer_layer.py /
multi_latent_attention.py / moe_layer.py / experts.py (what each checkpoint wraps)."""

OFFLOAD_TENSORS: dict[OffloadModule, frozenset[str]] = {
    "attn_norm": frozenset({"attention norm input"}),
    "qkv_linear": frozenset({"QKV projection input", "down-projection input"}),
    "core_attn": frozenset({"query", "key", "value"}),
    "attn_proj": frozenset({"attention output"}),
    "mlp_norm": frozenset({"MLP norm input"}),
    "expert_fc1": frozenset({"dispatched tokens"}),
    "moe_act": frozenset({"expert gate and up"}),
}
"""The input activation each offload module moves to host memory. Source: Megatron-Core
docs, Fine-Grained Activation Offloading ("each module offloads its input activation")."""


def _dropped_names(model: ModelSpec, modules: Iterable[RecomputeModule]) -> frozenset[str]:
    names: set[str] = set()
    for module in modules:
        names |= MODULE_TENSORS[module]
    if "mla_up_proj" in modules and model.q_lora_rank:  # q is an up-projection output then
        names.add("query")
    return frozenset(names)


def _module_tensors(
    model: ModelSpec, x: ActivationShape, tensors: tuple[SavedTensor, ...], p: RecomputePolicy
) -> tuple[SavedTensor, ...]:
    """``tensors`` with what the selective modules drop left out (and MLA's RoPE key in)."""
    names = _dropped_names(model, p.modules)
    core = "core_attn" in p.modules
    kept = [t for t in tensors if t.name not in names and not (core and t.core)]
    present = {t.name for t in tensors}
    if "mla_up_proj" in p.modules and model.is_mla and "RoPE key" not in present:
        rope = x.sp_tokens * model.qk_rope_head_dim  # the checkpoint's input: k_pos_emb
        kept.append(saved("RoPE key", rope, x.dtype_bytes, "key rebuild"))
    return tuple(kept)


def op_sac_tensors(
    model: ModelSpec,
    kind: LayerKind,
    x: ActivationShape,
    a: TrainingAssumptions,
    tensors: tuple[SavedTensor, ...],
) -> tuple[SavedTensor, ...]:
    """What torchtitan's op-level SAC keeps of one GQA block, bytes.

    The block input; matmuls 1, 3, 5, 7 in call order (wq, wv, w1, w2; wk, wo, w3 are
    recomputed); scaled_dot_product_attention's outputs (output and statistics); with TP the
    two reduce-scatter outputs. Source: torchtitan llama3 parallelize.py ``_save_list`` and
    ``_apply_ac_to_transformer_block`` (per-block mm counter, every second mm recomputed).
    MLA attention and MoE MLPs are kept as without recompute (their op orders are not
    modelled), so this never undercounts them.
    """
    h, act, tokens = model.hidden_size, x.dtype_bytes, x.tokens
    heads, kv_heads = model.num_attention_heads / x.tp, max(model.kv_heads / x.tp, 1.0)
    out: list[SavedTensor] = [saved("block input", x.sp_tokens * h, act, "checkpoint")]
    if model.is_mla:
        out += [t for t in tensors if _attention_side(t)]
    else:
        out += [
            saved("query", tokens * heads * model.head_size, act, "wq (mm 1) output"),
            saved("value", tokens * kv_heads * model.head_size, act, "wv (mm 3) output"),
            saved("attention output", tokens * heads * model.head_size, act, "SDPA output"),
            *attention_core_tensors(model, x, a),
        ]
    if kind == "moe":
        out += [t for t in tensors if not _attention_side(t)]
    else:
        width = model.intermediate_size / x.tp
        out.append(saved("MLP gate", tokens * width, act, "w1 (mm 5) output"))
        out.append(saved("MLP output", tokens * h, act, "w2 (mm 7) output"))
    if x.tp > 1:
        out.append(saved("reduce-scatter outputs", 2 * x.sp_tokens * h, act, "TP collectives"))
    return tuple(out)


_ATTENTION_PREFIXES = ("attention", "QKV", "down-projection", "query", "key", "value", "RoPE",
                       "q and k", "softmax")  # fmt: skip


def _attention_side(t: SavedTensor) -> bool:
    """Whether ``t`` belongs to the attention sub-layer (else the MLP's)."""
    return t.name.startswith(_ATTENTION_PREFIXES) and "residual" not in t.name


@lru_cache(maxsize=2048)
def selective_tensors(
    model: ModelSpec,
    kind: LayerKind,
    x: ActivationShape,
    a: TrainingAssumptions,
    p: RecomputePolicy,
    all_tensors: tuple[SavedTensor, ...],
) -> tuple[SavedTensor, ...]:
    """The tensors a block keeps on the GPU under ``p`` (recompute "none" or "selective"),
    offloaded ones left out."""
    tensors = all_tensors
    if p.granularity == "selective":
        if p.ops:
            tensors = op_sac_tensors(model, kind, x, a, tensors)
        else:
            tensors = _module_tensors(model, x, tensors, p)
    return tuple(t for t in tensors if t.name not in offloaded_names(p))


def offloaded_names(p: RecomputePolicy) -> frozenset[str]:
    """Tensor names the policy's offload modules move to host memory."""
    names: set[str] = set()
    for module in p.offload:
        names |= OFFLOAD_TENSORS[module]
    return frozenset(names)


def offloaded_tensors(
    tensors: tuple[SavedTensor, ...], p: RecomputePolicy
) -> tuple[SavedTensor, ...]:
    """The tensors of a (not fully recomputed) block that live in host memory under ``p``."""
    names = offloaded_names(p)
    return tuple(t for t in tensors if t.name in names)


_OP_SAC_SAME = {"attention norm input": 1.0, "MLP gate and up": 0.5}
"""Tensors of the plain block that op SAC keeps under other names: the block input is the
attention norm's input; its w1 output is the gate half of gate and up."""


def rebuilt_bytes(
    before: tuple[SavedTensor, ...], after: tuple[SavedTensor, ...], whole_block: bool
) -> float:
    """Bytes the backward rebuilds at once: the tensors of ``before`` (the plain block) that
    ``after`` does not keep, the larger sub-layer's (Megatron checkpoints each module apart;
    the MLP's backward ends before the attention's), or the whole block's (torch checkpoint
    reruns the block's forward, op SAC)."""
    names = {t.name for t in after}
    attention = mlp = 0.0
    for t in before:
        kept = 1.0 if t.name in names else 0.0
        if whole_block and "block input" in names:  # op SAC
            kept = max(kept, _OP_SAC_SAME.get(t.name, 0.0))
        if _attention_side(t):
            attention += t.bytes * (1 - kept)
        else:
            mlp += t.bytes * (1 - kept)
    return attention + mlp if whole_block else max(attention, mlp)


def checkpoint_units(p: RecomputePolicy, chunk_blocks: tuple[int, ...]) -> int:
    """Checkpointed units of a rank whose inputs full recompute keeps: uniform groups of
    recompute_num_layers blocks per chunk, else one per checkpointed block."""
    if p.granularity != "full":
        return 0
    if p.method == "uniform" and p.every == 1 and p.num_layers:
        return sum(-(-n // p.num_layers) for n in chunk_blocks)
    if p.method == "block" and p.num_layers is not None:
        return sum(min(p.num_layers, n) for n in chunk_blocks)
    return sum(chunk_blocks) // p.every


def unit_blocks(p: RecomputePolicy) -> int:
    """Blocks one checkpointed unit rebuilds at once in the backward (uniform groups)."""
    if p.granularity == "full" and p.method == "uniform" and p.every == 1 and p.num_layers:
        return p.num_layers
    return 1


def offloaded_layer_counts(p: RecomputePolicy, dense: int, moe: int) -> tuple[int, int]:
    """(dense, MoE) blocks among a rank's ``dense`` and ``moe`` blocks that are not
    checkpointed whose activations are offloaded whole (``offload_layers``; dense ones first,
    as the dense blocks of DeepSeek-style models lead)."""
    off_dense = min(p.offload_layers, dense)
    return off_dense, min(p.offload_layers - off_dense, moe)


@lru_cache(maxsize=4096)  # pure; asked many times per search for few inputs
def checkpoint_counts(
    model: ModelSpec, p: RecomputePolicy, layers: tuple[int, ...], chunk_blocks: tuple[int, ...]
) -> tuple[int, int, int]:
    """(dense, MoE) blocks of a rank that full recompute checkpoints, and its checkpoint units.

    ``layers`` are the rank's blocks in route order, ``chunk_blocks`` their chunks' sizes.
    Megatron block method: the first recompute_num_layers of each model chunk (all when None);
    torchtitan layer SAC: every n-th block the rank builds (its per-process counter); otherwise
    every block. Source: Megatron-Core transformer_block.py _checkpointed_forward; torchtitan
    activation_checkpoint.py _apply_layer_sac.
    """
    if p.granularity != "full":
        return 0, 0, 0
    chunks = chunk_blocks or (len(layers),)
    picked: list[int] = []
    start = 0
    for n in chunks:
        chunk = layers[start : start + n]
        start += n
        if p.method == "block" and p.num_layers is not None:
            picked += chunk[: p.num_layers]
    if not (p.method == "block" and p.num_layers is not None):
        picked = [i for k, i in enumerate(layers, 1) if k % p.every == 0]
    moe = sum(model.is_moe_layer(i) for i in picked)
    return len(picked) - moe, moe, checkpoint_units(p, chunks)
