"""The forward work a recompute recipe repeats before the backward, as shares of a stage's
forward parts (the pass-time model multiplies them by its forward times).

Recipes (``explorer.memory.recompute``): full recompute repeats the checkpointed blocks'
forward; Megatron-Core's selective modules repeat their own work (core_attn the attention
core, mlp the dense MLP's GEMMs, moe the router, routed and shared experts, shared_experts
those, mla_up_proj MLA's up-projections, layernorm and moe_act elementwise work only);
torchtitan's op-level SAC repeats the matmuls it does not save (wk, wo, w3 of a dense GQA
block) and every elementwise operation. Source: Korthikanti et al. 2022 (arXiv:2205.05198)
sec. 5; Megatron-Core transformer_config.py (recompute_modules); torchtitan llama3
parallelize.py (op SAC save list).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from explorer.flops import block_forward_flops, mlp_weights
from explorer.memory.recompute import checkpoint_units, recompute_policy
from explorer.specs import Layout, ModelSpec


@dataclass(frozen=True, slots=True)
class RecomputeShares:
    """Shares (0 to 1) of a stage's forward parts that recomputation repeats."""

    linear: float = 0.0
    """Of the dense GEMMs (attention projections, dense MLPs, shared experts, routers)."""
    expert: float = 0.0
    """Of the routed experts' GEMMs."""
    attention: float = 0.0
    """Of the attention core (with its memory-bound softmax)."""
    memory_bound: float = 0.0
    """Of the blocks' memory-bound kernels (norms, residuals, activation functions)."""


NO_RECOMPUTE = RecomputeShares()


def _first(model: ModelSpec, moe: bool) -> int:
    """Index of the first block that is (not) MoE."""
    return next(
        (i for i in range(model.num_hidden_layers) if model.is_moe_layer(i) == moe),
        model.num_hidden_layers,
    )


@lru_cache(maxsize=4096)  # pure; asked many times per search for few inputs
def _linear_flops(model: ModelSpec, moe: bool, seq_len: int) -> float:
    """Dense-GEMM forward FLOPs per token of one block (as ``explorer.compute.work``)."""
    f = block_forward_flops(model, _first(model, moe), seq_len)
    routed = 2.0 * model.num_experts_per_tok * mlp_weights(model, model.moe_intermediate_size)
    return f.attention_projections + f.mlp - (routed if moe else 0.0) + f.router


def _module_linear_flops(model: ModelSpec, modules: frozenset[str], moe: bool) -> float:
    """Dense-GEMM forward FLOPs per token one block's recomputed modules repeat."""
    h, flops = model.hidden_size, 0.0
    shared = 2.0 * mlp_weights(model, model.shared_ffn_size) if model.shared_ffn_size else 0.0
    if not moe and "mlp" in modules:
        flops += 2.0 * mlp_weights(model, model.intermediate_size)
    if moe and ("moe" in modules or "shared_experts" in modules):
        flops += shared
    if moe and "moe" in modules:
        flops += 2.0 * h * model.n_routed_experts  # the router
    if model.is_mla and "mla_up_proj" in modules:
        a, rank = model.num_attention_heads, model.kv_lora_rank or 0
        q_up = (model.q_lora_rank or 0) * a * (model.qk_nope_head_dim + model.qk_rope_head_dim)
        flops += 2.0 * (q_up + rank * a * (model.qk_nope_head_dim + model.v_head_dim))
    return flops


def _op_sac_linear_flops(model: ModelSpec, moe: bool) -> float:
    """Dense-GEMM forward FLOPs per token torchtitan's op SAC repeats in one GQA block:
    wk (mm 2), wo (mm 4) and, in a dense MLP, w3 (mm 6)."""
    if model.is_mla:
        return 0.0
    h, d = model.hidden_size, model.head_size
    wk, wo = 2.0 * h * model.kv_heads * d, 2.0 * h * model.num_attention_heads * d
    w3 = 0.0 if moe else 2.0 * h * model.intermediate_size
    return wk + wo + w3


@lru_cache(maxsize=4096)
def recompute_shares(
    model: ModelSpec, layout: Layout, num_layers: int, num_moe_layers: int, seq_len: int
) -> RecomputeShares:
    """Shares of a stage's forward work that ``layout``'s recompute recipe repeats.

    Ledger: full: the checkpointed blocks' share of the stage's blocks (each chunk of the rank
    holding an even part); selective: per module as in the module docstring, its GEMM FLOPs
    over the stage's dense-GEMM FLOPs; elementwise modules' memory-bound work is left out
    (layernorm, moe_act, the rebuilt RoPE), except under op SAC, which repeats all of it.
    """
    p = recompute_policy(layout)
    if p.granularity == "none" or not num_layers:
        return NO_RECOMPUTE
    if p.granularity == "full":
        v = layout.virtual_stages
        chunks = tuple(num_layers // v + (i < num_layers % v) for i in range(v))
        blocks = checkpoint_units(p, chunks) if p.method == "block" or p.every > 1 else num_layers
        share = min(blocks / num_layers, 1.0)
        return RecomputeShares(share, share, share, share)
    dense = num_layers - num_moe_layers
    total = dense * _linear_flops(model, False, seq_len) if dense else 0.0
    total += num_moe_layers * _linear_flops(model, True, seq_len) if num_moe_layers else 0.0
    if p.ops:
        again = dense * _op_sac_linear_flops(model, False)
        again += num_moe_layers * _op_sac_linear_flops(model, True)
        return RecomputeShares(linear=again / total if total else 0.0, memory_bound=1.0)
    again = dense * _module_linear_flops(model, p.modules, False)
    again += num_moe_layers * _module_linear_flops(model, p.modules, True)
    return RecomputeShares(
        linear=min(again / total, 1.0) if total else 0.0,
        expert=1.0 if "moe" in p.modules else 0.0,
        attention=1.0 if "core_attn" in p.modules else 0.0,
    )
