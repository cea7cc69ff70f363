"""Context-parallel exchanges of K and V for one micro-batch: ring, all-gather or all-to-all.

Sources per function; the overview is in ``explorer.comm.step``.
"""

from __future__ import annotations

from explorer.comm.step import Collective, StageContext, Window, both_ways, tokens_per_rank
from explorer.compute import PassTimes, StageWork
from explorer.specs import ModelSpec


def kv_width(model: ModelSpec, tp: int) -> float:
    """Per-GPU width of K plus V per token: heads split over TP, at least one KV head.

    MLA sends per-head K and V after the up-projection (Megatron-Core MLA with CP).
    """
    if model.is_mla:
        heads = model.num_attention_heads / tp
        return heads * (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim)
    return 2 * max(1.0, model.kv_heads / tp) * model.head_size


def _kv_bytes(ctx: StageContext) -> float:
    """K and V of this rank's tokens, bytes."""
    width = kv_width(ctx.model, ctx.layout.tp)
    return tokens_per_rank(ctx) * width * ctx.policy.activation_bytes


def ring_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """Ring attention: cp - 1 hops of K, V per block forward; K, V and gradients backward.

    Overlapped with the attention core (double buffered). Source: Liu et al. 2023, Ring
    Attention (arXiv:2310.01889); Megatron-Core / Transformer Engine context parallelism.
    """
    rerun = 1 if ctx.layout.recompute == "full" else 0
    hops = (ctx.layout.cp - 1) * work.num_layers
    windows = (Window(attention=1.0), Window(attention=2.0 + rerun))  # the attention core
    what = ("K and V", "K, V and their gradients")
    counts = (hops, hops * (2 + rerun))
    share, size = ctx.assumptions.cp_overlap, _kv_bytes(ctx)
    return both_ways(
        ctx, axis="cp", kind="point-to-point", what=what, size_bytes=size, counts=counts,
        passes=passes, windows=windows, share=share,
    )  # fmt: skip


def gather_collectives(work: StageWork, ctx: StageContext) -> list[Collective]:
    """All-gather K, V before each block's attention; reduce-scatter their gradients; exposed.

    Source: Llama 3 (arXiv:2407.21783) sec. 3.3.2 (all-gather based context parallelism).
    """
    size, layers = _kv_bytes(ctx) * ctx.layout.cp, work.num_layers
    rerun = 1 if ctx.layout.recompute == "full" else 0
    gathers = both_ways(
        ctx, axis="cp", kind="all-gather", what=("K and V", "K and V (recompute)"),
        size_bytes=size, counts=(layers, layers * rerun),
    )  # fmt: skip
    scatters = both_ways(
        ctx, axis="cp", kind="reduce-scatter", what=("", "K and V gradients"), size_bytes=size,
        counts=(0, layers),
    )  # fmt: skip
    return gathers + scatters


def ulysses_collectives(work: StageWork, ctx: StageContext) -> list[Collective]:
    """All-to-all of q, k, v in and the output back per block, each way; exposed.

    Source: Jacobs et al. 2023, DeepSpeed-Ulysses (arXiv:2309.14509) sec. 3.
    """
    q = tokens_per_rank(ctx) * ctx.model.num_attention_heads * ctx.model.head_size / ctx.layout.tp
    size = _kv_bytes(ctx) + 2 * q * ctx.policy.activation_bytes  # q and the output
    rerun = 1 if ctx.layout.recompute == "full" else 0
    layers = work.num_layers
    what = ("q, k, v and output", "their gradients")
    return both_ways(
        ctx, axis="cp", kind="all-to-all", what=what, size_bytes=size,
        counts=(layers, layers * (1 + rerun)),
    )  # fmt: skip


def cp_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """Context-parallel K/V exchange of one micro-batch in the configured variant."""
    if ctx.layout.cp == 1 or work.num_layers == 0:
        return []
    if ctx.assumptions.cp_comm == "all-gather":
        return gather_collectives(work, ctx)
    if ctx.assumptions.cp_comm == "all-to-all":
        return ulysses_collectives(work, ctx)
    return ring_collectives(work, passes, ctx)
