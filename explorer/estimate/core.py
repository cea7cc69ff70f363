"""One layout end to end: memory, compute, communication, schedule; step time, tokens/s, MFU.

Step time = pipelined part (explorer.estimate.pipeline, with per-micro-batch exposed
communication inside the stage times) + the slowest rank's tail (exposed DP / ZeRO per-step
communication and the optimizer step). Exposed communication per collective kind and per
axis is attributed on the bottleneck part (M times its per-micro-batch exposure) plus the
slowest tail's per-step exposure; the pipeline ramp's share stays in the bubble.
FLOP convention: explorer.flops (matmuls only; causal attention halved unless
``ComputeAssumptions.causal_attention_flops`` is False). MFU and HFU are against the dense
peak of the precision policy's GEMM format (bf16, fp8, fp4 or tf32): an fp8-mixed run's MFU is
on the FP8 dense peak (nvfp4-mixed: the FP4 one), its BF16 layers (LM head, router, attention
core) included; HFU counts
recomputed FLOPs too (explorer.flops).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from explorer.comm import Collective, GroupPlacement, exposed_by_axis, exposed_by_kind
from explorer.compute import peak_flops_per_s
from explorer.estimate.pipeline import PipelineModel, PipelineTime, pipeline_time
from explorer.estimate.stages import (
    DEFAULT_ESTIMATE_ASSUMPTIONS,
    EstimateAssumptions,
    StageTime,
    schedule_times,
    stage_context,
    stage_times,
    step_tails_s,
)
from explorer.estimate.warnings import attention_efficiency_unset, comm_warnings
from explorer.flops import hardware_flops_per_token, model_flops_per_token, utilisation
from explorer.memory import TrainingMemory, training_memory
from explorer.specs import ClusterSpec, Layout, ModelSpec, Recompute, TrainingWorkload
from explorer.workload import resolve_workload


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """Memory, step time and throughput of one layout, with the parts behind them."""

    layout: Layout
    """The layout estimated."""
    memory: TrainingMemory
    """Bytes per GPU by category and stage (explorer.memory)."""
    stages: tuple[StageTime, ...]
    """Per part: compute, collectives, optimizer step."""
    groups: dict[str, GroupPlacement]
    """Placement of each process group on the topology."""
    microbatches: int
    """Micro-batches per step on one pipeline."""
    pipeline: PipelineTime
    """The pipelined part of the step."""
    tail_s: float
    """Slowest rank's exposed per-step communication plus optimizer step, s."""
    num_gpus: int
    """GPUs the layout occupies."""
    tokens_per_step: int
    """Tokens per optimizer step."""
    model_flops_per_token: float
    """Training FLOPs per token MFU counts."""
    hardware_flops_per_token: float
    """Training FLOPs per token executed (recomputation included)."""
    peak_flops_per_s: float
    """Dense peak of one GPU in the policy's GEMM format, FLOP/s."""
    exposed_comm_s: dict[str, float]
    """Exposed seconds per step by collective kind."""
    exposed_comm_by_axis_s: dict[str, float]
    """Exposed seconds per step by mesh axis."""
    warnings: tuple[str, ...]
    """Memory warnings and communication warnings, one sentence each."""
    assumptions: EstimateAssumptions

    @property
    def step_time_s(self) -> float:
        """Seconds per optimizer step."""
        return self.pipeline.makespan_s + self.tail_s

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the pipelined part (explorer.estimate.pipeline)."""
        return self.pipeline.bubble_fraction

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second over the whole job."""
        return self.tokens_per_step / self.step_time_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Tokens per second per GPU."""
        return self.tokens_per_s / self.num_gpus

    @property
    def model_flops_per_s_per_gpu(self) -> float:
        """Achieved model FLOP/s per GPU (what "TFLOP/s per GPU" tables quote, x 1e12)."""
        return self.model_flops_per_token * self.tokens_per_s_per_gpu

    @property
    def hardware_flops_per_s_per_gpu(self) -> float:
        """Executed FLOP/s per GPU (recomputation included; Narayanan et al. 2021 Eq. 3)."""
        return self.hardware_flops_per_token * self.tokens_per_s_per_gpu

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation. Source: Chowdhery et al. 2022 (PaLM) appendix B."""
        return utilisation(
            self.model_flops_per_token, self.tokens_per_s, self.num_gpus, self.peak_flops_per_s
        )

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilisation (recomputation counted)."""
        return utilisation(
            self.hardware_flops_per_token,
            self.tokens_per_s,
            self.num_gpus,
            self.peak_flops_per_s,
        )

    @property
    def fits(self) -> bool:
        """Whether every stage fits in GPU memory."""
        return self.memory.fits


def bottleneck_part(stages: tuple[StageTime, ...]) -> StageTime:
    """The part with the longest cycle per micro-batch (it paces the pipeline)."""
    return max(stages, key=lambda s: s.cycle_s)


def _rank_parts(layout: Layout, rank: int, num_parts: int) -> tuple[int, ...]:
    """Parts a pipeline rank runs: itself, or under DualPipe stages r and P-1-r."""
    if layout.schedule == "dualpipe" and layout.pp > 1:
        return (rank, num_parts - 1 - rank)
    return (rank,)


def _attributed(
    stages: tuple[StageTime, ...], tails: tuple[float, ...], layout: Layout
) -> tuple[Collective, ...]:
    """Per-micro-batch collectives of the bottleneck part and per-step ones of the rank with
    the slowest tail, for the exposed-time breakdown."""
    paced = bottleneck_part(stages).collectives
    slowest = max(range(len(tails)), key=tails.__getitem__)
    per_step = tuple(
        c
        for part in _rank_parts(layout, slowest, len(stages))
        for c in stages[part].collectives
        if c.phase == "step"
    )
    return tuple(c for c in paced if c.phase != "step") + per_step


def time_step(
    stages: tuple[StageTime, ...],
    layout: Layout,
    microbatches: int,
    pipeline_model: PipelineModel = "closed-form",
) -> tuple[PipelineTime, float]:
    """(pipelined part, slowest rank's tail in s) of a step with these per-part times.

    Source: module docstring (step = pipeline + slowest tail).
    """
    times = schedule_times(stages)
    pipe = pipeline_time(
        layout.schedule, microbatches, layout.virtual_stages, times, pipeline_model
    )
    return pipe, max(step_tails_s(stages, layout))


def estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    *,
    memory: TrainingMemory | None = None,
) -> Estimate:
    """Memory, step time, tokens/s, MFU and exposed communication of one training layout.

    ``memory`` is this layout's ``training_memory`` (same inputs, ``assumptions.memory``,
    ``cluster.domain_size``) when the caller has it already, as the search does after its
    memory check; None computes it. Raises ValueError (one sentence) for a layout that cannot
    run. Source: module docstring.
    """
    # the workload resolved once here (precision policy, micro-batch count, tokens) and passed
    # down: docs/ARCHITECTURE.md, "The boundary"
    r = resolve_workload(layout, workload)
    m = r.microbatches
    if memory is None:
        memory = training_memory(
            model, cluster.gpu, layout, workload, assumptions.memory,
            domain_size=cluster.domain_size, resolved=r,
        )  # fmt: skip
    ctx = stage_context(model, cluster, layout, workload, assumptions, resolved=r)
    stages = stage_times(model, cluster, layout, workload, assumptions, ctx, resolved=r)
    pipe, tail = time_step(stages, layout, m, assumptions.pipeline_model)
    attributed = _attributed(stages, step_tails_s(stages, layout), layout)
    groups = ctx.groups
    causal = assumptions.compute.causal_attention_flops
    return Estimate(
        layout=layout,
        memory=memory,
        stages=stages,
        groups=groups,
        microbatches=m,
        pipeline=pipe,
        tail_s=tail,
        num_gpus=layout.world_size,
        tokens_per_step=r.tokens_per_step,
        model_flops_per_token=_model_flops(model, r.seq_len, causal),
        hardware_flops_per_token=_hardware_flops(model, r.seq_len, layout.recompute, causal),
        peak_flops_per_s=peak_flops_per_s(cluster.gpu, r.policy.compute),
        exposed_comm_s=exposed_by_kind(attributed, m),
        exposed_comm_by_axis_s=exposed_by_axis(attributed, m),
        warnings=(
            *memory.warnings,
            *comm_warnings(groups, cluster, layout, memory.warnings),
            *filter(
                None,
                [
                    attention_efficiency_unset(
                        (s.compute for s in stages), assumptions.compute, cluster.gpu
                    )
                ],
            ),
        ),
        assumptions=assumptions,
    )


@lru_cache(maxsize=1024)
def _model_flops(model: ModelSpec, seq_len: int, causal: bool) -> float:
    return model_flops_per_token(model, seq_len, causal)


@lru_cache(maxsize=1024)
def _hardware_flops(model: ModelSpec, seq_len: int, recompute: Recompute, causal: bool) -> float:
    return hardware_flops_per_token(model, seq_len, recompute, causal)
