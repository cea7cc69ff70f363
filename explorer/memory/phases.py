"""The moments of a training step at which a GPU's memory can peak, and its bytes at each.

A stage's peak is the maximum over these phases, not the sum of every category's largest value
(measured: validation/results.json, 37 of 41 configurations peak at the backward start, the
other 4 in the optimizer step; validation/README.md CR-3):
- ``backward_start``: the loss backward (a stage's first backward): every saved activation,
  the cross-entropy temporaries, ZeRO-3's gathered [final norm, LM head] unit; gradients only
  when they exist already (a persistent buffer, or earlier micro-batches' accumulation).
- ``block_backward``: one block's backward: that micro-batch's loss temporaries and head
  activations are gone; recomputation rebuilds one block (CR-7); ZeRO-3 holds the gathered
  block, the prefetched next one and the block's unsharded gradient (CR-9).
- ``optimizer_step``: model states with every gradient and the optimizer's temporaries (CR-8);
  no activations.
The forward is left out: it holds the same saved activations with fewer loss temporaries
(PyTorch 6 B per logit against 8, Megatron the same 2 B) and ZeRO-3 gathers no more than in a
block's backward, which also holds an unsharded gradient. Persistent buffers (a DDP gradient
bucket), NCCL buffers, runtime and headroom are in every phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from explorer.frozen import fast_init
from explorer.memory.breakdown import MemoryBreakdown
from explorer.memory.stage_activations import NO_ACTIVATIONS, StageActivations
from explorer.memory.states import ModelStates

Phase = Literal["backward_start", "block_backward", "optimizer_step"]
PHASES: tuple[Phase, ...] = get_args(Phase)
"""The candidate peaks of one training step, in step order."""

Parts = tuple[tuple[str, float], ...]
"""Named buffers, bytes."""


@fast_init
@dataclass(frozen=True, slots=True)
class PhaseMemory:
    """Bytes on one GPU at one phase of the step, by category and part."""

    phase: Phase
    breakdown: MemoryBreakdown
    activation_parts: StageActivations
    temporary_parts: Parts
    """Named temporary buffers alive at this phase, bytes."""

    @property
    def total_bytes(self) -> float:
        return self.breakdown.total_bytes


@fast_init
@dataclass(frozen=True, slots=True)
class StageParts:
    """What the phases of one stage's GPU are assembled from."""

    states: ModelStates
    """Persistent model states, with every gradient."""
    grads_held: bool
    """Gradients exist before the first backward ends (persistent buffer or accumulation)."""
    activations: StageActivations
    """Saved activations at their most (micro-batches in flight) and the recompute working set."""
    loss_inflight: float
    """Micro-batches whose head activations wait for their loss backward."""
    persistent: Parts
    """Buffers alive in every phase (a DDP gradient bucket)."""
    backward_start: Parts
    block_backward: Parts
    optimizer_step: Parts
    fixed: MemoryBreakdown
    """Communication, runtime and headroom."""
    backward_gradients: float | None = None
    """Gradient bytes alive in the backward phases when not the usual rule's (FSDP
    accumulating unsharded gradients under pipelining holds no sharded ones); None: every
    gradient when ``grads_held``, else none."""

    @property
    def held_gradients(self) -> float:
        """Gradient bytes alive in the backward phases."""
        if self.backward_gradients is not None:
            return self.backward_gradients
        return self.states.gradients if self.grads_held else 0.0


def _phase(
    name: Phase, p: StageParts, gradients: float, acts: StageActivations, temporary: Parts
) -> PhaseMemory:
    parts = p.persistent + temporary
    breakdown = MemoryBreakdown(
        parameters=p.states.parameters,
        gradients=gradients,
        master_weights=p.states.master_weights,
        optimizer_states=p.states.optimizer_states,
        activations=acts.total_bytes,
        temporary=sum(b for _, b in parts),
        communication=p.fixed.communication,
        runtime=p.fixed.runtime,
        headroom=p.fixed.headroom,
    )
    return PhaseMemory(name, breakdown, acts, parts)


def backward_start(p: StageParts) -> PhaseMemory:
    """Every saved activation, no block rebuilt yet (CR-7), gradients only when held (CR-3)."""
    a = p.activations
    acts = StageActivations(a.blocks, a.embedding, a.head, a.mtp, 0.0)
    return _phase("backward_start", p, p.held_gradients, acts, p.backward_start)


def block_backward(p: StageParts) -> PhaseMemory:
    """One block's backward: one micro-batch's head activations freed, one block rebuilt."""
    a = p.activations
    waiting = (p.loss_inflight - 1) / p.loss_inflight if p.loss_inflight > 1 else 0.0
    acts = StageActivations(
        a.blocks, a.embedding, a.head * waiting, a.mtp * waiting, a.recompute_working
    )
    return _phase("block_backward", p, p.held_gradients, acts, p.block_backward)


def optimizer_step(p: StageParts) -> PhaseMemory:
    """Every gradient, the optimizer's temporaries, no activations (CR-3, CR-8)."""
    return _phase("optimizer_step", p, p.states.gradients, NO_ACTIVATIONS, p.optimizer_step)


def stage_phases(p: StageParts) -> tuple[PhaseMemory, ...]:
    """The stage's bytes at each phase, in ``PHASES`` order."""
    return (backward_start(p), block_backward(p), optimizer_step(p))


def peak_of(phases: tuple[PhaseMemory, ...]) -> PhaseMemory:
    """The phase with the most bytes (the earliest on a tie)."""
    return max(phases, key=lambda ph: ph.total_bytes)
