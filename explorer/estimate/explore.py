"""A free schedule explorer: the current model and layout under any schedule, stage count and
micro-batch count, each stage's GPU memory as the activation sets it holds times their bytes.

The layout keeps its DP, TP, CP, EP, ZeRO, recompute and micro-batch size; its PP, schedule and
virtual stages are the explorer's, and the global batch becomes ``microbatches x DP x
micro-batch`` so that each pipeline runs exactly that many micro-batches. The step is
estimated (``explorer.estimate.estimate``) and simulated action by action
(``estimate_timeline``); each stage's memory splits into what does not depend on the sets held
(model states, buffers, runtime, headroom, the LM head's logits, the recompute working set) and
the block and embedding activations of one stage-equivalent micro-batch
(``explorer.memory.stage_activations.ActivationLedger.in_flight``: both scale with the sets in
flight). The peak is ``base + most sets held x bytes per set``, with the most sets held taken
from the simulated step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.estimate.core import Estimate, estimate
from explorer.estimate.report import estimate_timeline
from explorer.estimate.stages import DEFAULT_ESTIMATE_ASSUMPTIONS, EstimateAssumptions
from explorer.memory import StageMemory
from explorer.schedules import Timeline
from explorer.specs import ClusterSpec, Layout, ModelSpec, ScheduleName, TrainingWorkload


@dataclass(frozen=True, slots=True)
class StageLive:
    """One stage's GPU memory as a function of the activation sets it holds, bytes."""

    stage: int
    states_bytes: float
    """Parameters, gradients, master weights and optimizer states."""
    base_bytes: float
    """Everything at the stage's peak that does not scale with the sets held (states
    included): buffers, runtime, headroom, the LM head and MTP logits, the recompute set."""
    bytes_per_set: float
    """Block and embedding activations of one stage-equivalent micro-batch."""
    most_sets: float
    """Most activation sets held at once in the simulated step (stage-equivalents)."""

    def bytes_at(self, sets: float) -> float:
        """The stage's GPU memory holding ``sets`` activation sets, bytes."""
        return self.base_bytes + sets * self.bytes_per_set

    @property
    def peak_bytes(self) -> float:
        """``base_bytes + most_sets x bytes_per_set``."""
        return self.bytes_at(self.most_sets)


@dataclass(frozen=True, slots=True)
class Exploration:
    """The explorer's step: its layout, estimate, simulated timeline and memory per stage."""

    layout: Layout
    microbatches: int
    estimate: Estimate
    timeline: Timeline
    stages: tuple[StageLive, ...]

    @property
    def gpu_bytes(self) -> float:
        return self.estimate.memory.gpu_bytes

    @property
    def peak_stage(self) -> StageLive:
        return max(self.stages, key=lambda s: s.peak_bytes)


def stage_live(memory: StageMemory, most_sets: float) -> StageLive:
    """A stage's memory split into its base and its bytes per activation set (see module)."""
    acts = memory.activation_parts
    scaling = acts.blocks + acts.embedding
    held = memory.microbatches_in_flight
    b = memory.breakdown
    return StageLive(
        stage=memory.stage,
        states_bytes=b.parameters + b.gradients + b.master_weights + b.optimizer_states,
        base_bytes=memory.total_bytes - scaling,
        bytes_per_set=scaling / held if held else 0.0,
        most_sets=most_sets,
    )


def explored_layout(
    layout: Layout, schedule: ScheduleName, stages: int, virtual: int = 1
) -> Layout:
    """``layout`` with the explorer's PP, schedule and virtual stages (1 unless interleaved);
    a hand placement of the blocks is dropped, since it was written for the old PP."""
    return replace(
        layout,
        pp=stages,
        schedule=schedule,
        virtual_stages=virtual if schedule == "interleaved" else 1,
        stage_layers=None,
        first_stage_layers=None,
        last_stage_layers=None,
        pipeline_layout=None,
    )


def explore_schedule(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    *,
    schedule: ScheduleName,
    stages: int,
    microbatches: int,
    virtual: int = 1,
) -> Exploration:
    """The step of ``layout`` under ``schedule`` on ``stages`` stages with ``microbatches``
    micro-batches per pipeline (and ``virtual`` chunks per stage for interleaved 1F1B).

    Raises ValueError (one sentence) when the schedule cannot run that shape or the model
    has fewer blocks than the stages need. Source: module docstring.
    """
    if microbatches < 1:
        raise ValueError(f"micro-batches must be at least 1, got {microbatches}")
    variant = explored_layout(layout, schedule, stages, virtual)
    batch = microbatches * variant.dp * variant.micro_batch_size
    est = estimate(model, cluster, variant, replace(workload, global_batch_size=batch), assumptions)
    timeline = estimate_timeline(est)
    memory = est.memory.stages
    if len(memory) != timeline.schedule.stages:
        raise ValueError(
            f"the memory model gives {len(memory)} stages for a {stages}-stage {schedule} step"
        )
    live = tuple(
        stage_live(m, most) for m, most in zip(memory, timeline.peak_inflight, strict=True)
    )
    return Exploration(
        layout=variant, microbatches=est.microbatches, estimate=est, timeline=timeline, stages=live
    )
