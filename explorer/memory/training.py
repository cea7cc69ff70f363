"""Training memory per GPU, by category, for every pipeline stage of a layout.

Categories (DESIGN.md): parameters, gradients, master_weights, optimizer_states (model states,
``states.py``), activations (``activations.py``), temporary (ZeRO-3 gathers, gradient buckets,
the bf16 logits before their fp32 upcast), communication (NCCL buffers), runtime (CUDA context
and library workspaces) and headroom (allocator reserve). Assumptions live in
``assumptions.py``; warnings in ``checks.py``.

Left out on purpose: activation gradients and matmul outputs alive during backward, the
allocator's fragmentation beyond ``headroom``, optimizer step temporaries (e.g. a fused Adam's
fp32 copies), DeepEP / NVSHMEM buffers, NCCL LL/LL128 and tree buffers, pipeline p2p staging
buffers, CUDA graphs' private pools, FP8 weight transposes and scaling factors, and data-loader
pinned memory (host side). Framework-specific duplicates (PyTorch DDP without
gradient_as_bucket_view copies every gradient into its buckets) are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from explorer.memory.activations import (
    ActivationShape,
    StageActivations,
    stage_activations,
)
from explorer.memory.assumptions import DEFAULT_TRAINING_ASSUMPTIONS, TrainingAssumptions
from explorer.memory.checks import assumption_warnings, layout_warnings, result_warnings
from explorer.memory.states import (
    ModelStates,
    expert_shards,
    stage_model_states,
    stage_params,
    stage_units,
)
from explorer.partition import StagePlan, inflight_microbatches, loss_inflight, pipeline_plan
from explorer.precision import precision_policy
from explorer.specs import GpuSpec, Layout, ModelSpec, PrecisionPolicy, TrainingWorkload

CATEGORIES = (
    "parameters",
    "gradients",
    "master_weights",
    "optimizer_states",
    "activations",
    "temporary",
    "communication",
    "runtime",
    "headroom",
)
"""Training memory categories, in the order charts stack them."""


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes on one GPU by category; ``total_bytes`` is their sum."""

    parameters: float = 0.0
    gradients: float = 0.0
    master_weights: float = 0.0
    optimizer_states: float = 0.0
    activations: float = 0.0
    temporary: float = 0.0
    communication: float = 0.0
    runtime: float = 0.0
    headroom: float = 0.0

    @property
    def total_bytes(self) -> float:
        states = self.parameters + self.gradients + self.master_weights + self.optimizer_states
        other = self.activations + self.temporary + self.communication + self.runtime
        return states + other + self.headroom

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class StageMemory:
    """One pipeline stage's GPU: its blocks, bytes by category and the named parts behind them."""

    stage: int
    layers: tuple[int, ...]
    """Transformer blocks held (0-based indices; DualPipe ranks hold two stages)."""
    breakdown: MemoryBreakdown
    num_params: float
    """Parameters on one GPU of the stage before ZeRO-3 sharding."""
    microbatches_in_flight: float
    """Peak activation sets held, in stage-equivalent micro-batches."""
    activation_parts: StageActivations
    temporary_parts: tuple[tuple[str, float], ...]
    """Named temporary buffers, bytes."""
    communication_parts: tuple[tuple[str, float], ...]
    """NCCL buffers per communicator, bytes."""

    @property
    def total_bytes(self) -> float:
        return self.breakdown.total_bytes


@dataclass(frozen=True, slots=True)
class TrainingMemory:
    """Training memory of one layout: every stage, the peak, and whether it fits."""

    stages: tuple[StageMemory, ...]
    peak_stage: int
    peak_bytes: float
    gpu_bytes: float
    fits: bool
    warnings: tuple[str, ...]
    assumptions: TrainingAssumptions
    notes: tuple[str, ...] = ()
    """Conventions in force (gradient dtype, in-flight counts), in words."""


@dataclass(frozen=True, slots=True)
class _Setup:
    """Quantities shared by every stage of one estimate."""

    model: ModelSpec
    layout: Layout
    policy: PrecisionPolicy
    assumptions: TrainingAssumptions
    shape: ActivationShape
    dense_shards: int
    moe_shards: int
    loss_inflight: float
    fixed: MemoryBreakdown
    """Runtime and headroom, the same on every GPU."""
    communication: tuple[tuple[str, float], ...] = ()
    """NCCL buffers per communicator, the same on every GPU."""


def microbatch_count(layout: Layout, workload: TrainingWorkload) -> int:
    """Micro-batches per step on one pipeline, M = global batch / (DP x micro-batch)."""
    per_step = layout.dp * layout.micro_batch_size
    count = workload.global_batch_size // per_step
    if count < 1:
        raise ValueError(
            f"global batch of {workload.global_batch_size} sequences is smaller than "
            f"DP x micro-batch = {per_step}"
        )
    return count


def zero3_temporaries(s: _Setup, plan: StagePlan) -> tuple[tuple[str, float], ...]:
    """Unsharded parameters of the gathered layers and one layer's unsharded gradients, bytes.

    Source: PyTorch FSDP (Zhao et al. 2023, arXiv:2304.11277): the unit computing plus
    ``zero3_prefetch_layers`` prefetched ones; a unit's gradients whole until reduce-scatter.
    """
    dense_on, expert_on = s.dense_shards > 1, s.moe_shards > 1
    gathered = max(
        (u.dense * dense_on + u.expert * expert_on for u in stage_units(s.model, s.layout, plan)),
        default=0.0,
    )
    copies = 1 + s.assumptions.zero3_prefetch_layers
    return (
        ("ZeRO-3 gathered parameters", copies * gathered * s.policy.param_bytes),
        ("ZeRO-3 unsharded gradients", gathered * s.policy.grad_bytes),
    )


def temporary_parts(s: _Setup, plan: StagePlan) -> tuple[tuple[str, float], ...]:
    """Named temporary buffers on a stage's GPU, bytes."""
    parts: list[tuple[str, float]] = []
    if s.layout.zero == 3:
        parts += zero3_temporaries(s, plan)
    elif s.dense_shards > 1 or s.moe_shards > 1:
        parts.append(("gradient bucket", s.assumptions.grad_bucket_bytes))
    if plan.has_head and s.shape.dtype_bytes < s.assumptions.loss_logits_bytes:
        # bf16 logits live next to their fp32 copy until the loss (Megatron-LM cross-entropy)
        logits = s.shape.tokens * s.model.vocab_size / s.layout.tp
        parts.append(("logits before fp32 upcast", logits * s.shape.dtype_bytes))
    return tuple(parts)


def nccl_parts(
    model: ModelSpec, layout: Layout, a: TrainingAssumptions, moe_shards: int
) -> tuple[tuple[str, float], ...]:
    """NCCL buffers of each communicator a GPU uses, bytes.

    Source: NCCL environment variables: NCCL_BUFFSIZE per channel and peer; a ring collective
    has 2 peers per channel, point-to-point NCCL_NCHANNELS_PER_NET_PEER channels per peer.
    """
    lay, moe = layout, model.is_moe
    ring = a.nccl_buffer_bytes * a.nccl_channels * 2  # buffer x channels x 2 ring neighbours
    p2p = a.nccl_buffer_bytes * a.nccl_p2p_channels_per_peer  # per peer
    groups = (  # (communicator, used by this layout, bytes)
        ("TP", lay.tp > 1, ring),
        ("CP (ring attention send/recv)", lay.cp > 1, 2 * p2p),
        ("DP x CP", lay.dp * lay.cp > 1, ring),
        ("PP send/recv", lay.pp > 1, min(lay.pp - 1, 2) * p2p),
        ("EP all-to-all", moe and lay.ep > 1, (lay.ep - 1) * p2p),
        ("expert TP", moe and lay.etp > 1, ring),
        ("expert DP", moe and moe_shards > 1, ring),
    )
    return tuple((name, size) for name, used, size in groups if used)


def fixed_overheads(gpu: GpuSpec, a: TrainingAssumptions) -> MemoryBreakdown:
    """Runtime (CUDA context + library workspaces) and headroom (share of the GPU), bytes."""
    return MemoryBreakdown(
        runtime=a.cuda_context_bytes + a.library_workspace_bytes,
        headroom=a.headroom_fraction * gpu.memory_bytes,
    )


def stage_memory(s: _Setup, plan: StagePlan, inflight: float) -> StageMemory:
    """Bytes on one GPU of ``plan``'s stage, by category and part."""
    held = stage_params(s.model, s.layout, plan)
    states: ModelStates = stage_model_states(
        held, s.policy, s.layout.zero, s.dense_shards, s.moe_shards
    )
    acts = stage_activations(
        s.model, plan, s.shape, s.assumptions, s.layout.recompute, inflight, s.loss_inflight
    )
    temporary, comm = temporary_parts(s, plan), s.communication
    breakdown = MemoryBreakdown(
        parameters=states.parameters,
        gradients=states.gradients,
        master_weights=states.master_weights,
        optimizer_states=states.optimizer_states,
        activations=acts.total_bytes,
        temporary=sum(b for _, b in temporary),
        communication=sum(b for _, b in comm),
        runtime=s.fixed.runtime,
        headroom=s.fixed.headroom,
    )
    return StageMemory(
        plan.stage, plan.layers, breakdown, held.total, inflight, acts, temporary, comm
    )


def _setup(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: TrainingAssumptions,
) -> _Setup:
    policy = precision_policy(workload.precision, workload.grad_dtype)
    shape = ActivationShape(
        seq_len=workload.seq_len,
        micro_batch_size=layout.micro_batch_size,
        tp=layout.tp,
        sp=layout.sp,
        cp=layout.cp,
        etp=layout.etp,
        dtype_bytes=policy.activation_bytes,
    )
    microbatches = microbatch_count(layout, workload)
    moe_shards = expert_shards(layout)
    return _Setup(
        model=model,
        layout=layout,
        policy=policy,
        assumptions=assumptions,
        shape=shape,
        dense_shards=layout.dp * layout.cp,
        moe_shards=moe_shards,
        loss_inflight=loss_inflight(layout.schedule, layout.pp, microbatches),
        fixed=fixed_overheads(gpu, assumptions),
        communication=nccl_parts(model, layout, assumptions, moe_shards),
    )


def _notes(policy: PrecisionPolicy) -> tuple[str, ...]:
    grads = f"{policy.grad_bytes:g}-byte gradients"
    if policy.grad_bytes == 4 and policy.param_bytes == 2:
        grads = "fp32 main gradients (Megatron-LM's default; grad_dtype='bf16' for 2 bytes)"
    return (
        f"precision {policy.name}: {policy.param_bytes:g}-byte weights, {grads}, "
        f"{policy.master_bytes:g}-byte master weights, {policy.optimizer_bytes:g}-byte Adam states",
        "activations: peak micro-batches in flight per stage from explorer.schedules' simulator",
        "logits kept in fp32 for the cross-entropy backward (Megatron-LM)",
    )


def training_memory(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: TrainingAssumptions = DEFAULT_TRAINING_ASSUMPTIONS,
    *,
    domain_size: int | None = None,
) -> TrainingMemory:
    """Bytes per GPU by category for every pipeline stage of ``layout``, and the peak.

    ``domain_size`` is the number of GPUs on the fast links (a ClusterSpec's ``domain_size``);
    None means the GPU's ``scale_up_domain_size``. Invalid layouts raise ValueError.
    """
    s = _setup(model, gpu, layout, workload, assumptions)
    plans = pipeline_plan(model, layout)
    microbatches = microbatch_count(layout, workload)
    inflight = inflight_microbatches(
        layout.schedule, layout.pp, microbatches, layout.virtual_stages
    )
    stages = tuple(stage_memory(s, p, f) for p, f in zip(plans, inflight, strict=True))
    peak = max(stages, key=lambda st: st.total_bytes)
    totals = [st.total_bytes for st in stages]
    domain = domain_size or gpu.scale_up_domain_size
    warnings = layout_warnings(model, layout, workload, microbatches, domain)
    warnings += assumption_warnings(layout, assumptions)
    warnings += result_warnings(totals, gpu, assumptions.heavy_stage_ratio)
    return TrainingMemory(
        stages=stages,
        peak_stage=peak.stage,
        peak_bytes=peak.total_bytes,
        gpu_bytes=float(gpu.memory_bytes),
        fits=peak.total_bytes <= gpu.memory_bytes,
        warnings=warnings,
        assumptions=assumptions,
        notes=_notes(s.policy),
    )
