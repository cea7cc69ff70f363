"""Data-parallel and ZeRO / FSDP collectives of one stage (see ``explorer.comm.step``).

Volumes per rank (Rajbhandari et al. 2020, arXiv:1910.02054, sec. 7): DDP all-reduces the
gradients (2 Psi on the wire); ZeRO-1/2 reduce-scatter them and all-gather the updated
parameters (the same 2 Psi); ZeRO-3 all-gathers the parameters in forward and in backward and
reduce-scatters the gradients (3 Psi). Psi here is in bytes: gradients at the precision
policy's gradient width (Megatron-LM reduces fp32 main grads), parameters at its working width.
"""

from __future__ import annotations

from explorer.comm.collectives import CollectiveKind
from explorer.comm.step import (
    BACKWARD,
    FORWARD,
    NO_WINDOW,
    Collective,
    Overlap,
    Phase,
    StageContext,
    Window,
    timed,
)
from explorer.compute import PassTimes, StageWork


def _bucket_floor(params_per_gpu: float, ctx: StageContext) -> float:
    """Share of a step-end reduction that cannot overlap: the last bucket's."""
    return min(1.0, ctx.assumptions.dp_bucket_params / params_per_gpu)


def _on(
    ctx: StageContext,
    group: str,
    kind: CollectiveKind,
    what: str,
    phase: Phase,
    size_bytes: float,
    passes: PassTimes,
    hiding: tuple[Window, float],
) -> Collective:
    """One call on a data-parallel group; ``hiding`` is (window, unhideable share). The part
    it hides costs compute time: ``contention_per_hidden_s`` of each second hidden."""
    window, floor = hiding
    overlap = Overlap(share=ctx.assumptions.dp_overlap, window=window, floor=floor)
    lost = contention_per_hidden_s(ctx.assumptions.dp_overlap_slowdown)
    return timed(
        ctx, axis="dp", group=group, kind=kind, what=what, phase=phase,
        size_bytes=size_bytes, count=1, passes=passes, overlap=overlap, contention=lost,
    )  # fmt: skip


def contention_per_hidden_s(slowdown: float) -> float:
    """Compute seconds lost per second a collective hides behind compute that runs
    ``slowdown`` x longer beside it: the hidden second covers 1 / (1 + slowdown) seconds of
    standalone compute (CommAssumptions.dp_overlap_slowdown, arXiv:2507.03114)."""
    return slowdown / (1.0 + slowdown)


def _ddp(
    group: str, params: float, label: str, passes: PassTimes, ctx: StageContext
) -> list[Collective]:
    """ZeRO 0: one bucketed gradient all-reduce per step behind the last backward."""
    grads, floor = params * ctx.policy.grad_bytes, _bucket_floor(params, ctx)
    return [
        _on(ctx, group, "all-reduce", f"{label} gradients", "step", grads, passes,
            (BACKWARD, floor))
    ]  # fmt: skip


def _zero12(
    group: str, params: float, label: str, passes: PassTimes, ctx: StageContext
) -> list[Collective]:
    """ZeRO 1/2: gradient reduce-scatter (per step, or per micro-batch under ZeRO-2 unless
    the stack accumulates first: CommAssumptions.zero2_grad_sync_per_step) and a parameter
    all-gather per step behind the next forward."""
    floor = _bucket_floor(params, ctx)
    per_microbatch = ctx.layout.zero == 2 and not ctx.assumptions.zero2_grad_sync_per_step
    phase: Phase = "backward" if per_microbatch else "step"
    grads, weights = params * ctx.policy.grad_bytes, params * ctx.policy.param_bytes
    return [
        _on(ctx, group, "reduce-scatter", f"{label} gradients", phase, grads, passes,
            (BACKWARD, floor)),
        _on(ctx, group, "all-gather", f"{label} parameters", "step", weights, passes,
            (FORWARD, floor)),
    ]  # fmt: skip


def _zero3(
    group: str, params: float, label: str, passes: PassTimes, work: StageWork, ctx: StageContext
) -> list[Collective]:
    """ZeRO 3 / FSDP: per micro-batch, gather parameters for forward and for backward and
    reduce-scatter gradients, each prefetched a block ahead (the first block's is exposed);
    the backward's gather and scatter share its compute, or, with BACKWARD_POST prefetching
    (CommAssumptions.fsdp_backward_prefetch), the gather is exposed and the scatter has the
    backward to itself. Under pipeline parallelism, once per step where the stack keeps the
    stage unsharded over the micro-batches (StageContext.pipeline_keeps_unsharded,
    ``_zero3_pipelined``)."""
    floor = 1.0 / max(1, work.num_layers)
    weights, grads = params * ctx.policy.param_bytes, params * ctx.policy.grad_bytes
    if ctx.layout.pp > 1 and ctx.pipeline_keeps_unsharded:
        return _zero3_pipelined(group, weights, grads, label, passes, floor, ctx)
    forward, half_backward = (FORWARD, floor), (Window(backward=0.5), floor)
    gather, scatter = half_backward, half_backward
    if ctx.assumptions.fsdp_backward_prefetch == "post":  # the gather waits for the gradients
        gather, scatter = (NO_WINDOW, 1.0), (BACKWARD, floor)
    return [
        _on(ctx, group, "all-gather", f"{label} parameters", "forward", weights, passes,
            forward),
        _on(ctx, group, "all-gather", f"{label} parameters", "backward", weights, passes,
            gather),
        _on(ctx, group, "reduce-scatter", f"{label} gradients", "backward", grads, passes,
            scatter),
    ]  # fmt: skip


def _zero3_pipelined(
    group: str,
    weights: float,
    grads: float,
    label: str,
    passes: PassTimes,
    floor: float,
    ctx: StageContext,
) -> list[Collective]:
    """ZeRO 3 / FSDP2 under a pipeline schedule: the parameters are gathered once, in the
    first micro-batch's forward (prefetched a block at a time: the first block's is exposed),
    and kept unsharded over the micro-batches; the gradients accumulate and are
    reduce-scattered once, after the last micro-batch's backward has finished: exposed.
    Source: torch.distributed.pipelining stage.py backward_maybe_with_nosync (FSDP modules:
    gradient sync and reshard only on the last backward, whose post-backward the stage calls
    by hand once that backward is done); torchtitan parallelize_llama.py apply_fsdp
    (reshard_after_forward False when PP is on); the same rule as the compute side's
    explorer.compute.framework.fsdp_copies_per_microbatch."""
    return [
        _on(ctx, group, "all-gather", f"{label} parameters", "step", weights, passes,
            (FORWARD, floor)),
        _on(ctx, group, "reduce-scatter", f"{label} gradients", "step", grads, passes,
            (NO_WINDOW, 1.0)),
    ]  # fmt: skip


def dp_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """Gradient reduction and ZeRO parameter gathers of one stage, dense and expert weights.

    Source: module docstring (ZeRO sec. 7, PyTorch DDP, Megatron-Core distributed optimizer).
    """
    out: list[Collective] = []
    for group, params, label in _replicated_params(work, ctx):
        if ctx.groups[group].size == 1 or params <= 0:
            continue
        if ctx.layout.zero == 0:
            out += _ddp(group, params, label, passes, ctx)
        elif ctx.layout.zero in (1, 2):
            out += _zero12(group, params, label, passes, ctx)
        else:
            out += _zero3(group, params, label, passes, work, ctx)
    return out


def _replicated_params(work: StageWork, ctx: StageContext) -> tuple[tuple[str, float, str], ...]:
    """(group, parameters per GPU, label) for dense and expert weights of the stage."""
    layout = ctx.layout
    return (
        ("dp_cp", work.dense_params / layout.tp, "dense"),
        ("edp", work.expert_params / (layout.ep * layout.etp), "expert"),
    )
