"""Per-stage times of one layout: compute, exposed communication, optimizer step.

A *part* is what one entry of the schedule's StageTimes describes: a pipeline rank (all its
interleaved chunks together), or under DualPipe one of the P model stages (rank r runs stages
r and P-1-r). Per-micro-batch exposed communication (TP, CP, EP, PP, ZeRO-2/3) is added to the
pass it belongs to; per-step communication (DP gradients, ZeRO-1/2 parameter gathers) and the
optimizer step come after the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from explorer.comm import (
    DEFAULT_COMM_ASSUMPTIONS,
    Collective,
    CommAssumptions,
    StageContext,
    place_groups,
    stage_collectives,
)
from explorer.comm.model_parallel import tied_embedding_collectives
from explorer.compute import (
    DEFAULT_COMPUTE_ASSUMPTIONS,
    ComputeAssumptions,
    ComputeContext,
    PassTimes,
    StageWork,
    optimizer_step_s,
    pass_times,
    stage_work,
)
from explorer.estimate.offload import HostCopies
from explorer.estimate.pipeline import PipelineModel
from explorer.memory import (
    DEFAULT_TRAINING_ASSUMPTIONS,
    TrainingAssumptions,
    framework_behaviour,
)
from explorer.memory.activations import expert_load
from explorer.partition import layout_chunk_sizes, pipeline_plan
from explorer.schedules import StageTimes
from explorer.specs import ClusterSpec, Layout, ModelSpec, TrainingWorkload
from explorer.workload import ResolvedWorkload, resolve_workload


@dataclass(frozen=True, slots=True, kw_only=True)
class EstimateAssumptions:
    """Every adjustable assumption behind a step-time estimate, by model."""

    memory: TrainingAssumptions = DEFAULT_TRAINING_ASSUMPTIONS
    """Memory model (its expert load, ``moe_capacity_factor`` or ``moe_imbalance``, also
    scales expert compute and all-to-all bytes)."""
    compute: ComputeAssumptions = DEFAULT_COMPUTE_ASSUMPTIONS
    """Kernel efficiency, HBM efficiency, attention FLOP convention."""
    comm: CommAssumptions = DEFAULT_COMM_ASSUMPTIONS
    """Link efficiency and overlap of each collective."""
    pipeline_model: PipelineModel = "closed-form"
    """How the pipeline is timed (explorer.estimate.pipeline): closed forms where they apply,
    or always the simulator (slower, exact for unequal stages)."""

    def __post_init__(self) -> None:
        # a ZeRO-2 gradient reduced once a step accumulates unsharded until then, in memory
        # (explorer.memory.accumulation) as in time: either switch turns on both, so memory
        # and communication agree on every path (estimate, search, app)
        comm, memory = self.comm, self.memory
        if comm.zero2_grad_sync_per_step != memory.zero2_accumulates_unsharded:
            object.__setattr__(self, "comm", replace(comm, zero2_grad_sync_per_step=True))
            memory = replace(memory, zero2_accumulates_unsharded=True)
            object.__setattr__(self, "memory", memory)


DEFAULT_ESTIMATE_ASSUMPTIONS = EstimateAssumptions()


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTime:
    """One part's compute and communication per micro-batch, and its per-step tail."""

    stage: int
    """Part index: pipeline rank, or model stage under DualPipe."""
    layers: tuple[int, ...]
    """Transformer blocks of the part."""
    compute: PassTimes
    """Compute seconds per micro-batch by pass."""
    collectives: tuple[Collective, ...]
    """Every collective of the part, with time and exposure."""
    optimizer_s: float
    """Optimizer step on one GPU of the part, s (with optimizer offload's host copies)."""
    offload_s: float = 0.0
    """Activation offload: host copies of one micro-batch the pass cannot hide, in the forward
    (device to host) and again in the backward (host to device), s each."""
    exposed_s: tuple[float, float, float] = field(init=False, repr=False, compare=False)
    """Exposed communication in the forward, backward and step phases, s (derived)."""

    def __post_init__(self) -> None:
        # exposed_in_phase per phase, the collectives read once: each phase's sum is sum()
        # over the same values in the same order
        by_phase: dict[str, list[float]] = {"forward": [], "backward": [], "step": []}
        for call in self.collectives:
            found = by_phase.get(call.phase)
            if found is not None:
                found.append(call.exposed_s)
        sums = (sum(by_phase["forward"]), sum(by_phase["backward"]), sum(by_phase["step"]))
        object.__setattr__(self, "exposed_s", sums)

    @property
    def forward_s(self) -> float:
        """Forward of one micro-batch with its exposed communication, s."""
        return self.compute.forward_s + self.exposed_s[0] + self.offload_s

    @property
    def backward_s(self) -> float:
        """Input-gradient backward and recompute with exposed communication, s."""
        backward = self.compute.backward_input_s + self.compute.recompute_s + self.exposed_s[1]
        return backward + self.offload_s

    @property
    def weight_s(self) -> float:
        """Weight-gradient pass, s."""
        return self.compute.weight_s

    @property
    def cycle_s(self) -> float:
        """F + B + W of one micro-batch, s."""
        return self.forward_s + self.backward_s + self.weight_s

    @property
    def step_comm_s(self) -> float:
        """Exposed per-step communication (DP gradients, ZeRO parameter gathers), s."""
        return self.exposed_s[2]


def parts(model: ModelSpec, layout: Layout) -> tuple[tuple[tuple[int, ...], bool, bool], ...]:
    """(blocks, holds the embedding, holds the head) of each part, in schedule order."""
    if layout.schedule == "dualpipe" and layout.pp > 1:
        sizes = layout_chunk_sizes(model, layout)
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        last = len(sizes) - 1
        return tuple(
            (tuple(range(s, s + n)), i == 0, i == last)
            for i, (s, n) in enumerate(zip(starts, sizes, strict=True))
        )
    return tuple((p.layers, p.has_embedding, p.has_head) for p in pipeline_plan(model, layout))


def stage_context(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions,
    *,
    resolved: ResolvedWorkload | None = None,
) -> StageContext:
    """What every part's collectives share: model, layout, precision, placements.

    ``resolved`` is ``workload`` resolved for ``layout`` (explorer.workload.resolve_workload)
    when the caller has it (explorer.estimate.core.estimate); None resolves it here.
    """
    r = resolved
    if r is None:
        r = resolve_workload(layout, workload, check=False)
    return StageContext(
        model=model,
        layout=layout,
        policy=r.policy,
        seq_len=r.seq_len,
        groups=place_groups(cluster, layout),
        assumptions=assumptions.comm,
        moe_imbalance=expert_load(model, assumptions.memory),
        pipeline_keeps_unsharded=framework_behaviour(assumptions.memory).pipeline_keeps_unsharded,
        microbatches=r.microbatches,
    )


def _time_work(
    work: StageWork,
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions,
    ctx: StageContext,
    resolved: ResolvedWorkload,
) -> tuple[PassTimes, tuple[Collective, ...], float]:
    """Pass times, collectives and optimizer step of one part's work."""
    compute = ComputeContext(
        model=model,
        gpu=cluster.gpu,
        layout=layout,
        workload=workload,
        assumptions=assumptions.compute,
        moe_imbalance=ctx.moe_imbalance,
        flash_attention=assumptions.memory.flash_attention,
        dropout=assumptions.memory.dropout,
        fp8_dispatch=assumptions.comm.fp8_dispatch,
        torch_cp=assumptions.comm.torch_cp,
        kv_heads_repeated=assumptions.comm.cp_kv_repeated,
        resolved_policy=resolved.policy,
        resolved=resolved,
    )
    passes = pass_times(work, compute)
    if assumptions.comm.tp_comm_overlap:  # TP collectives timed with their GEMMs
        ctx = replace(ctx, compute=compute)
    return passes, stage_collectives(work, passes, ctx), optimizer_step_s(work, compute)


def stage_times(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions,
    ctx: StageContext,
    *,
    resolved: ResolvedWorkload | None = None,
) -> tuple[StageTime, ...]:
    """Compute, collectives and optimizer step of every part of ``layout``.

    ``resolved``: as in ``stage_context`` (None resolves it here, with ``ctx``'s policy and
    micro-batch count). Source: explorer.compute (pass times, optimizer) and explorer.comm
    (collectives).
    """
    r = resolved
    if r is None:
        r = resolve_workload(layout, workload, policy=ctx.policy, microbatches=ctx.microbatches)
    causal = assumptions.compute.causal_attention_flops
    memo: dict[StageWork, tuple[PassTimes, tuple[Collective, ...], float]] = {}
    host = HostCopies(model, cluster, layout, r, assumptions.memory)
    out = []
    for index, (layers, first, last) in enumerate(parts(model, layout)):
        work = stage_work(model, layers, r.seq_len, first, last, causal, r.bf16_ends)
        if work not in memo:  # stages of equal work (most of them) are timed once
            memo[work] = _time_work(work, model, cluster, layout, workload, assumptions, ctx, r)
        passes, collectives, optimizer = memo[work]
        if first or last:  # the ends of a tied embedding reduce its gradient once a step
            collectives += tuple(tied_embedding_collectives(ctx, first, last))
        out.append(
            StageTime(
                stage=index,
                layers=layers,
                compute=passes,
                collectives=collectives,
                optimizer_s=host.optimizer_s(work, optimizer),
                offload_s=host.activation_s(layers, passes),
            )
        )
    return tuple(out)


def schedule_times(stages: tuple[StageTime, ...]) -> StageTimes:
    """The schedule simulator's input: F, B (input gradient) and W per part, s; p2p folded in."""
    return StageTimes(
        forward_s=tuple(s.forward_s for s in stages),
        backward_s=tuple(s.backward_s for s in stages),
        weight_s=tuple(s.weight_s for s in stages),
        p2p_s=0.0,
    )


def step_tails_s(stages: tuple[StageTime, ...], layout: Layout) -> tuple[float, ...]:
    """Per pipeline rank: exposed per-step communication plus optimizer step, s.

    Under DualPipe rank r holds model stages r and P-1-r, so both parts' tails add up.
    """
    tails = [s.step_comm_s + s.optimizer_s for s in stages]
    if layout.schedule != "dualpipe" or layout.pp == 1:
        return tuple(tails)
    p = len(tails)
    return tuple(tails[r] + tails[p - 1 - r] for r in range(p))
