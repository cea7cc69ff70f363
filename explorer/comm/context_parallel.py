"""Context-parallel exchanges of K and V for one micro-batch: ring, all-gather or all-to-all.

Sources per function; the overview is in ``explorer.comm.step``.
"""

from __future__ import annotations

from explorer.comm.collectives import CollectiveKind
from explorer.comm.step import (
    Collective,
    Overlap,
    StageContext,
    Window,
    both_ways,
    timed,
    tokens_per_rank,
)
from explorer.compute import PassTimes, StageWork
from explorer.specs import ModelSpec

TORCH_GRAD_BYTES = 4.0
"""Bytes per element of the K/V gradients torch's ring sends: it accumulates and rotates them
in fp32 (_ContextParallelOptions.convert_to_f32 = True, accum_dtype float32 in
_templated_ring_attention_backward, torch/distributed/tensor/experimental/_attention.py)."""


def kv_width(model: ModelSpec, tp: int, repeated: bool = False) -> float:
    """Per-GPU width of K plus V per token: heads split over TP, at least one KV head; with
    ``repeated``, as many as the query heads (K/V repeated before the attention).

    MLA sends per-head K and V after the up-projection (Megatron-Core MLA with CP).
    """
    if model.is_mla:
        heads = model.num_attention_heads / tp
        return heads * (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim)
    heads = model.num_attention_heads / tp if repeated else max(1.0, model.kv_heads / tp)
    return 2 * heads * model.head_size


def _kv_bytes(ctx: StageContext) -> float:
    """K and V of this rank's tokens, bytes (CommAssumptions.cp_kv_repeated: the query's
    heads)."""
    width = kv_width(ctx.model, ctx.layout.tp, ctx.assumptions.cp_kv_repeated)
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


def torch_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """PyTorch's ring (CommAssumptions.torch_cp): K/V by torch's rotate method, the K/V
    gradients around the ring in fp32.

    Source: torch/distributed/tensor/experimental/_attention.py. Forward, per layer: with the
    "allgather" rotate method (``cp_comm`` all-gather) one all-gather of every rank's K/V,
    issued before the diagonal SDPA call and waited for before the first off-diagonal one
    (_AllGatherRotater), so it hides behind the diagonal step: 1 / cp of the ring's score
    pairs (explorer.compute.attention.ring_sdpa_calls); with "alltoall" (``cp_comm`` p2p)
    cp - 1 hops, each behind one step's call. Backward (and full recomputation's rerun
    forward, before it): the K/V exchange again (kv_rotater), behind the backward's own
    steps, and cp hops of the fp32 K/V gradients (dkv_rotater, always _AllToAllRotater):
    each hides behind the next step's backward call, the last one is waited for after the
    loop (exposed: floor 1 / cp of their time). Compiled (torch_cp "compiled": torchtitan
    compiles each block with fullgraph=True, parallelize_llama.py apply_compile at 9dec370),
    the ring is traced into the block's graph, where a functional collective is waited for
    as soon as it is issued (torch/distributed/_functional_collectives.py _maybe_wrap_tensor:
    wait_tensor while tracing) and Inductor does not move it
    (torch/_inductor/config.py reorder_for_compute_comm_overlap = False): nothing hides.
    """
    cp, layers = ctx.layout.cp, work.num_layers
    rerun = 1 if ctx.layout.recompute == "full" else 0
    kv, share = _kv_bytes(ctx), ctx.assumptions.cp_overlap
    if ctx.assumptions.torch_cp == "compiled":
        share = 0.0
    ratio = (
        passes.attention_backward_s / passes.attention_forward_s
        if passes.attention_forward_s
        else 0.0
    )
    kind: CollectiveKind = "point-to-point"
    size, hops, hidden = kv, cp - 1, (cp - 1) / cp
    if ctx.assumptions.cp_comm == "all-gather":
        kind, size, hops, hidden = "all-gather", kv * cp, 1, 1.0 / cp
    forward = timed(
        ctx,
        axis="cp",
        kind=kind,
        what="K and V",
        phase="forward",
        size_bytes=size,
        count=layers * hops,
        passes=passes,
        overlap=Overlap(share=share, window=Window(attention=hidden)),
    )
    again = timed(
        ctx,
        axis="cp",
        kind=kind,
        what="K and V (backward and recompute)",
        phase="backward",
        size_bytes=size,
        count=layers * hops * (1 + rerun),
        passes=passes,
        overlap=Overlap(share=share, window=Window(attention=hidden * (rerun + ratio))),
    )
    grads = timed(
        ctx, axis="cp", kind="point-to-point", what="K and V gradients (fp32)",
        phase="backward", size_bytes=kv / ctx.policy.activation_bytes * TORCH_GRAD_BYTES,
        count=layers * cp, passes=passes,
        overlap=Overlap(share=share, window=Window(attention=ratio * (cp - 1) / cp),
                        floor=1.0 / cp),
    )  # fmt: skip
    return [forward, again, grads]


def cp_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """Context-parallel K/V exchange of one micro-batch in the configured variant."""
    if ctx.layout.cp == 1 or work.num_layers == 0:
        return []
    if ctx.assumptions.torch_cp != "none" and ctx.assumptions.cp_comm in ("all-gather", "p2p"):
        return torch_collectives(work, passes, ctx)
    if ctx.assumptions.cp_comm == "all-gather":
        return gather_collectives(work, ctx)
    if ctx.assumptions.cp_comm == "all-to-all":
        return ulysses_collectives(work, ctx)
    return ring_collectives(work, passes, ctx)
