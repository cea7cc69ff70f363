"""Training memory per GPU, by category, for every pipeline stage of a layout.

Categories (docs/ARCHITECTURE.md): parameters, gradients, master_weights, optimizer_states
(model states, ``states.py``), activations (``activations.py``, ``stage_activations.py``), temporary
(``temporaries.py``: ZeRO-3 gathers, gradient buckets, cross-entropy and optimizer-step
temporaries), communication (NCCL buffers), runtime (CUDA context and library workspaces) and
headroom (allocator reserve: the assumed share of the GPU, or under the "pytorch" framework the
caching allocator's modelled reserve where larger, ``allocator.py``). Each stage's breakdown is
taken at its peak phase (``phases.py``: backward start, one block's backward, optimizer step);
the framework (``frameworks.py``) says
what exists at each. Assumptions live in ``assumptions.py``; warnings in ``checks.py``.

Memory recipes (``Layout``: recompute modules and methods, torchtitan's SAC, activation and
optimizer offload, HSDP, reshard_after_forward; ``recompute.py``) and Transformer Engine's FP8
storage (``TrainingAssumptions.fp8_linear_input_bytes`` / ``fp8_weight_copy_bytes``) change
what the parts above hold.

DeepEP's NVLink and NVSHMEM buffers (``TrainingAssumptions.moe_dispatcher``), per-layer CUDA
graphs' static edge tensors (``cuda_graph_modules``) and torch.distributed.pipelining's
per-micro-batch receive buffers and kept stage outputs are counted (``buffers.py``,
``temporaries.py``).

Left out on purpose: activation gradients and matmul outputs alive during backward, the
allocator's fragmentation beyond ``headroom`` and ``allocator.py``'s mechanisms, NVSHMEM's
own state beyond DeepEP's heap, NCCL LL/LL128 and tree buffers, Megatron's p2p staging
buffers, the activations CUDA graphs' private pools hold beyond eager's, FP8 scaling factors and
amax histories, MoE routing temporaries (token gather / index_add; measured 0.3-1.5% of the
MoE peaks in validation/results.json), torch.compile's changes to what is saved, and
data-loader pinned memory (host side). PyTorch DDP without gradient_as_bucket_view (a second
copy of every gradient) is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.frozen import fast_init
from explorer.memory.accumulation import (
    pipelined_gradient_shares,
    zero2_accumulates,
    zero2_backward_gradients,
)
from explorer.memory.allocator import allocator_reserve
from explorer.memory.assumptions import DEFAULT_TRAINING_ASSUMPTIONS, TrainingAssumptions
from explorer.memory.breakdown import CATEGORIES, MemoryBreakdown
from explorer.memory.checks import (
    assumption_warnings,
    layout_warnings,
    result_warnings,
    storage_warnings,
)
from explorer.memory.frameworks import behaviour_in_words, framework_behaviour, storage_notes
from explorer.memory.phases import Parts, Phase, PhaseMemory, StageParts, peak_of, stage_phases
from explorer.memory.recompute import checkpoint_counts
from explorer.memory.setting import TrainingSetting, fixed_overheads, nccl_parts
from explorer.memory.stage_activations import (
    NO_ACTIVATIONS,
    ActivationLedger,
    StageActivations,
    activation_ledger,
)
from explorer.memory.states import (
    HeldParams,
    ModelStates,
    expert_shards,
    full_embedding_grad_bytes,
    offloaded_states,
    shard_groups,
    stage_model_states,
    stage_params,
)
from explorer.memory.temporaries import (
    PIPELINED_UNSHARDED_GRADIENTS,
    backward_start_temporaries,
    block_backward_temporaries,
    experts_outside_fsdp,
    fsdp_accumulates_unsharded,
    graph_buffer_parts,
    optimizer_temporaries,
    persistent_buffers,
    pipeline_kept_outputs,
)
from explorer.memory.tensors import activation_shape
from explorer.partition import StagePlan, inflight_microbatches, loss_inflight, pipeline_plan
from explorer.specs import GpuSpec, Layout, ModelSpec, PrecisionPolicy, TrainingWorkload
from explorer.workload import ResolvedWorkload, microbatch_count, resolve_workload

__all__ = [
    "CATEGORIES",
    "MemoryBreakdown",
    "StageMemory",
    "TrainingMemory",
    "fixed_overheads",
    "microbatch_count",
    "nccl_parts",
    "training_memory",
]


@fast_init
@dataclass(frozen=True, slots=True)
class StageMemory:
    """One pipeline stage's GPU at its peak phase: bytes by category and the parts behind them."""

    stage: int
    layers: tuple[int, ...]
    """Transformer blocks held (0-based indices; DualPipe ranks hold two stages)."""
    breakdown: MemoryBreakdown
    """Bytes by category at the peak phase."""
    num_params: float
    """Parameters on one GPU of the stage before ZeRO-3 sharding."""
    microbatches_in_flight: float
    """Peak activation sets held, in stage-equivalent micro-batches."""
    activation_parts: StageActivations
    """Activations at the peak phase, by part."""
    temporary_parts: tuple[tuple[str, float], ...]
    """Named temporary buffers at the peak phase, bytes."""
    communication_parts: tuple[tuple[str, float], ...]
    """NCCL buffers per communicator, bytes."""
    phases: tuple[PhaseMemory, ...] = ()
    """Bytes at every phase of the step (``explorer.memory.phases.PHASES`` order)."""
    peak_phase: Phase = "backward_start"
    """The phase whose bytes ``breakdown`` holds: the stage's largest."""
    allocator_parts: tuple[tuple[str, float], ...] = ()
    """What PyTorch's caching allocator reserves beyond the live peak, by mechanism, bytes
    (``explorer.memory.allocator``); ``breakdown.headroom`` is at least their sum."""

    @property
    def total_bytes(self) -> float:
        return self.breakdown.total_bytes

    @property
    def phase_totals(self) -> dict[Phase, float]:
        """Total bytes at each phase."""
        return {ph.phase: ph.total_bytes for ph in self.phases}

    def phase(self, name: Phase) -> PhaseMemory:
        """The stage's bytes at phase ``name``."""
        for ph in self.phases:
            if ph.phase == name:
                return ph
        raise ValueError(f"no phase {name!r}; phases are {[p.phase for p in self.phases]}")


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
    """Conventions in force (gradient dtype, in-flight counts, framework), in words."""

    @property
    def peak_phase(self) -> Phase:
        """The phase of the step at which the peak stage peaks."""
        return self.stages[self.peak_stage].peak_phase


def stage_states(s: TrainingSetting, plan: StagePlan, held: HeldParams) -> ModelStates:
    """Persistent model states of a stage's GPU, with every gradient (CR-1 and CR-2 applied)."""
    b = s.behaviour
    states = stage_model_states(
        held,
        s.policy,
        s.layout.zero,
        s.dense_shards,
        s.moe_shards,
        keep_param_shard=b.keep_bf16_shard,
    )
    states = offloaded_states(states, s.layout.optimizer_offload_fraction)
    if not b.tp_full_embedding_grad:
        return states
    extra = full_embedding_grad_bytes(s.model, s.layout, s.policy, plan)
    return states + ModelStates(0.0, extra, 0.0, 0.0)


def pipelined_backward_gradients(s: TrainingSetting, held: HeldParams) -> float | None:
    """Gradient bytes of the stage's GPU during the backward when FSDP accumulates unsharded
    gradients over micro-batches (``fsdp_accumulates_unsharded``): only those of parameters
    outside FSDP, as the sharded ones are made at the last backward's reduce-scatter, after
    ``optimizer.zero_grad(set_to_none=True)`` freed them (the unsharded ones are temporaries).
    None: the usual rule (``StageParts.grads_held``).

    Source: torch/distributed/pipelining/stage.py backward_maybe_with_nosync (post_backward,
    hence the reduce-scatter, only after the last backward); PyTorch Optimizer.zero_grad.
    """
    if not fsdp_accumulates_unsharded(s):
        return None
    if not experts_outside_fsdp(s):
        return 0.0
    lay, keep = s.layout, s.behaviour.keep_bf16_shard
    experts = HeldParams(expert=held.expert)
    outside = stage_model_states(
        experts, s.policy, lay.zero, s.dense_shards, s.moe_shards, keep_param_shard=keep
    )
    return outside.gradients


def stage_parts(
    s: TrainingSetting, plan: StagePlan, held: HeldParams, inflight: float
) -> StageParts:
    """What the phases of ``plan``'s stage are made of: states, activations, buffers."""
    ledger = activation_ledger(s.model, plan, s.shape, s.assumptions, s.recompute)
    return _in_flight(_contents_parts(s, plan, held), ledger, s, plan, inflight, held)


def _contents_parts(s: TrainingSetting, plan: StagePlan, held: HeldParams) -> StageParts:
    """``stage_parts`` but the activations (what ``plan.contents`` fixes)."""
    states = stage_states(s, plan, held)
    return StageParts(
        states=states,
        grads_held=s.grads_held,
        backward_gradients=pipelined_backward_gradients(s, held),
        activations=NO_ACTIVATIONS,
        loss_inflight=s.loss_inflight if plan.has_head else 1.0,
        persistent=persistent_buffers(s, plan),
        backward_start=backward_start_temporaries(s, plan),
        block_backward=block_backward_temporaries(s, plan),
        optimizer_step=optimizer_temporaries(s, states) + pipeline_kept_outputs(s, plan),
        fixed=s.fixed,
    )


def _in_flight(
    parts: StageParts,
    ledger: ActivationLedger,
    s: TrainingSetting,
    plan: StagePlan,
    inflight: float,
    held: HeldParams,
) -> StageParts:
    """``parts`` with the activations of ``inflight`` micro-batches (and, where ZeRO-2
    accumulates unsharded gradients, or FSDP does under an interleaved pipeline, those alive
    at that peak, per phase for the latter: ``explorer.memory.accumulation``)."""
    graphs = graph_buffer_parts(s, plan, inflight)
    v = max(1, s.layout.virtual_stages)
    if not zero2_accumulates(s):
        shares = pipelined_gradient_shares(
            s, plan, inflight, ledger.blocks / plan.copies / v, _pipelined_grads(parts)
        )
        freed = shares[2] if shares else 0
        acts = ledger.in_flight(inflight - freed / v, s.loss_inflight, plan.copies)
        parts = replace(parts, activations=acts, persistent=parts.persistent + graphs)
        if shares is None:
            return parts
        return replace(
            parts,
            block_backward=_scaled_grads(parts.block_backward, shares[0]),
            backward_start=_scaled_grads(parts.backward_start, shares[1]),
        )
    grads, freed = zero2_backward_gradients(s, held, inflight, ledger.blocks / plan.copies / v)
    acts = ledger.in_flight(inflight - freed / v, s.loss_inflight, plan.copies)
    return replace(
        parts, activations=acts, persistent=parts.persistent + graphs, backward_gradients=grads
    )


def _pipelined_grads(parts: StageParts) -> float:
    """Bytes of the unsharded gradients FSDP accumulates under pipelining (0 when none)."""
    return dict(parts.block_backward).get(PIPELINED_UNSHARDED_GRADIENTS, 0.0)


def _scaled_grads(phase: Parts, share: float) -> Parts:
    """``phase`` with its pipelined unsharded gradients scaled to ``share`` of them."""
    return tuple(
        (name, size * share if name == PIPELINED_UNSHARDED_GRADIENTS else size)
        for name, size in phase
    )


def stage_memory(s: TrainingSetting, plan: StagePlan, inflight: float) -> StageMemory:
    """Bytes on one GPU of ``plan``'s stage at its peak phase, by category and part."""
    held = stage_params(s.model, s.layout, plan)
    return _memory_of(s, plan, held, stage_parts(s, plan, held, inflight), inflight)


def _memory_of(
    s: TrainingSetting, plan: StagePlan, held: HeldParams, parts: StageParts, inflight: float
) -> StageMemory:
    phases = stage_phases(parts)
    reserve = allocator_reserve(s, plan, phases)
    modelled = sum(b for _, b in reserve)
    if modelled > parts.fixed.headroom:  # the modelled reserve where above the assumed share
        parts = replace(parts, fixed=replace(parts.fixed, headroom=modelled))
        phases = stage_phases(parts)
    peak = peak_of(phases)
    return StageMemory(
        plan.stage,
        plan.layers,
        peak.breakdown,
        held.total,
        inflight,
        peak.activation_parts,
        peak.temporary_parts,
        s.communication,
        phases,
        peak.phase,
        reserve,
    )


def _stage_memories(
    s: TrainingSetting, plans: tuple[StagePlan, ...], inflight: tuple[float, ...]
) -> tuple[StageMemory, ...]:
    """``stage_memory`` of every stage, once per distinct stage (same ``StagePlan.contents``
    and micro-batches in flight): equal stages differ only in their index and blocks."""
    done: dict[tuple[object, ...], StageMemory] = {}
    bases: dict[object, tuple[HeldParams, StageParts, ActivationLedger]] = {}
    found = []
    for plan, count in zip(plans, inflight, strict=True):
        which = plan.layers if s.model.single_module_blocks else ()  # Nemotron-H: which blocks
        contents = (plan.contents, checkpoint_counts(s.model, s.recompute, plan.layers,
                                                     plan.chunk_blocks), which)  # fmt: skip
        key = (contents, count)
        if key in done:
            found.append(replace(done[key], stage=plan.stage, layers=plan.layers))
            continue
        if contents not in bases:  # what does not change with the micro-batches in flight
            held = stage_params(s.model, s.layout, plan)
            ledger = activation_ledger(s.model, plan, s.shape, s.assumptions, s.recompute)
            bases[contents] = (held, _contents_parts(s, plan, held), ledger)
        held, parts, ledger = bases[contents]
        parts = _in_flight(parts, ledger, s, plan, count, held)
        found.append(done.setdefault(key, _memory_of(s, plan, held, parts, count)))
    return tuple(found)


def recipe_storage(a: TrainingAssumptions, policy: PrecisionPolicy) -> TrainingAssumptions:
    """``a`` with the precision recipe's own low-precision storage (nvfp4-mixed: Transformer
    Engine's saved NVFP4 inputs and cached weight copies, ``PrecisionPolicy.gemm_input_bytes``
    / ``gemm_weight_copy_bytes``) where it states none, under Megatron-Core (TE)."""
    te = a.framework == "megatron"
    if not te or a.fp8_linear_input_bytes is not None or policy.gemm_input_bytes is None:
        return a
    return replace(
        a,
        fp8_linear_input_bytes=policy.gemm_input_bytes,
        fp8_weight_copy_bytes=policy.gemm_weight_copy_bytes,
    )


def _setting(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: TrainingAssumptions,
    resolved: ResolvedWorkload | None = None,
) -> TrainingSetting:
    r = resolved
    if r is None:
        r = resolve_workload(layout, workload)
    policy, microbatches = r.policy, r.microbatches
    assumptions = recipe_storage(assumptions, policy)
    if assumptions.optimizer_state_bytes is not None:
        policy = replace(policy, optimizer_bytes=assumptions.optimizer_state_bytes)
    dense_shards, moe_shards = shard_groups(layout)
    communication = nccl_parts(model, layout, assumptions, expert_shards(layout))
    fixed = fixed_overheads(gpu, assumptions)
    return TrainingSetting(
        model=model,
        layout=layout,
        policy=policy,
        assumptions=assumptions,
        behaviour=framework_behaviour(assumptions),
        shape=activation_shape(layout, r.seq_len, policy.activation_bytes),
        dense_shards=dense_shards,
        moe_shards=moe_shards,
        microbatches=microbatches,
        loss_inflight=loss_inflight(layout.schedule, layout.pp, microbatches),
        fixed=MemoryBreakdown(
            communication=sum(b for _, b in communication),
            runtime=fixed.runtime,
            headroom=fixed.headroom,
        ),
        communication=communication,
    )


def _notes(s: TrainingSetting) -> tuple[str, ...]:
    policy, a = s.policy, s.assumptions
    grads = f"{policy.grad_bytes:g}-byte gradients"
    if policy.grad_bytes == 4 and policy.param_bytes == 2:
        grads = "fp32 main gradients (Megatron-LM's default; grad_dtype='bf16' for 2 bytes)"
    return (
        f"precision {policy.name}: {policy.param_bytes:g}-byte weights, {grads}, "
        f"{policy.master_bytes:g}-byte master weights, {policy.optimizer_bytes:g}-byte Adam states",
        "activations: peak micro-batches in flight per stage from closed forms equal to "
        "explorer.schedules' simulator",
        f"framework {a.framework}: {behaviour_in_words(s.behaviour)}",
        *storage_notes(a),
        "each stage at its peak phase: the largest of backward start, one block's backward and "
        "the optimizer step (explorer.memory.phases)",
    )


def training_memory(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: TrainingAssumptions = DEFAULT_TRAINING_ASSUMPTIONS,
    *,
    domain_size: int | None = None,
    resolved: ResolvedWorkload | None = None,
) -> TrainingMemory:
    """Bytes per GPU by category for every pipeline stage of ``layout``, and the peak.

    ``domain_size`` is the number of GPUs on the fast links (a ClusterSpec's ``domain_size``);
    None means the GPU's ``scale_up_domain_size``. ``resolved`` is ``workload`` resolved for
    ``layout`` (explorer.workload.resolve_workload: the precision policy, the micro-batch count)
    when the caller has it already (explorer.estimate.core.estimate); None resolves it here.
    Invalid layouts raise ValueError.
    """
    s = _setting(model, gpu, layout, workload, assumptions, resolved)
    plans = pipeline_plan(model, layout)
    inflight = inflight_microbatches(
        layout.schedule, layout.pp, s.microbatches, layout.virtual_stages
    )
    stages = _stage_memories(s, plans, inflight)
    peak = max(stages, key=lambda st: st.total_bytes)
    totals = [st.total_bytes for st in stages]
    domain = domain_size or gpu.scale_up_domain_size
    warnings = layout_warnings(model, layout, workload, s.microbatches, domain)
    warnings += assumption_warnings(layout, assumptions)
    warnings += storage_warnings(assumptions, s.policy.compute)
    warnings += result_warnings(totals, gpu, assumptions.heavy_stage_ratio)
    return TrainingMemory(
        stages=stages,
        peak_stage=peak.stage,
        peak_bytes=peak.total_bytes,
        gpu_bytes=float(gpu.memory_bytes),
        fits=peak.total_bytes <= gpu.memory_bytes,
        warnings=warnings,
        assumptions=assumptions,
        notes=_notes(s),
    )
