"""Lower bounds on a layout's peak memory per GPU, cheap enough to run before the estimate.

The memory model (``explorer.memory``) takes a stage's peak as the largest of its phases; two
of them give bounds that need no more than public pieces of that model:
- the optimizer step holds every model state with every gradient. Summed over stages the
  states do not depend on how the layers are split, so the stages' mean states (plus NCCL
  buffers, runtime and reserve) bound the peak: ``states_bytes``, known once the ZeRO stage
  is; once the plan is known, so do the fullest rank's.
- the backward start holds each rank's saved activations, at least min(M, P - r)
  micro-batches of them on rank r under every schedule (closed forms in
  ``explorer.partition``: 1F1B's P - r is the fewest), with its weights, master weights and
  optimizer states, and its gradients where they exist already (a persistent buffer, or more
  than one micro-batch: ``TrainingSetting.grads_held``), known per (schedule, recompute, ZeRO)
  choice; ``least_zero`` finds the lowest ZeRO stage whose floors fit.
Weights are counted as ZeRO-3 without a 16-bit shard would keep them (the fewest bytes any
framework behaviour gives). Tests compare both with ``training_memory`` on sampled layouts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from explorer.estimate import EstimateAssumptions
from explorer.memory.activations import block_activation_bytes
from explorer.memory.frameworks import framework_behaviour
from explorer.memory.setting import nccl_parts
from explorer.memory.stage_activations import stage_block_model
from explorer.memory.states import HeldParams, ModelStates, stage_model_states, stage_params
from explorer.memory.tensors import ActivationShape
from explorer.memory.training import fixed_overheads, recipe_storage
from explorer.mesh import Candidate, Problem, expert_data_parallel
from explorer.mesh.dims import MeshDims
from explorer.partition import StagePlan, pipeline_plan
from explorer.precision import precision_policy
from explorer.search.reads import STAGE_PARAMS, layout_of
from explorer.specs import V_SHAPED, Layout, Recompute, ScheduleName, ZeroStage
from explorer.units import GiB

SAFETY = 1 - 1e-9
"""Bounds are scaled by this so that rounding never lifts them above the memory model."""


class _Rank(NamedTuple):
    """What one pipeline rank holds: parameters, dense and MoE blocks, chunk copies."""

    held: HeldParams
    dense: int
    moe: int
    copies: int


class MemoryFloor:
    """Peak-memory lower bounds for one problem's candidates, with caches."""

    def __init__(self, problem: Problem, assumptions: EstimateAssumptions) -> None:
        w = problem.workload
        self.policy = precision_policy(w.precision, w.grad_dtype)
        memory = recipe_storage(assumptions.memory, self.policy)  # as explorer.memory does
        self.p, self.a = problem, replace(assumptions, memory=memory)
        assumptions = self.a
        self.fixed = fixed_overheads(problem.cluster.gpu, assumptions.memory).total_bytes
        self.persistent_grads = framework_behaviour(assumptions.memory).persistent_grad_buffer
        self._fixed_cache: dict[MeshDims, float] = {}
        self._held: dict[tuple[int, int, int, int, bool], HeldParams] = {}
        self._rank_cache: dict[tuple[int, ...], list[tuple[int, _Rank]]] = {}
        self._weight_cache: dict[tuple[object, ...], list[tuple[float, float]]] = {}
        self._blocks: dict[tuple[object, ...], tuple[float, float]] = {}
        self._fits: dict[tuple[object, ...], int] = {}
        self._state_cache: dict[tuple[object, ...], ModelStates] = {}
        self._floors: dict[tuple[object, ...], float] = {}
        self._params: dict[tuple[object, ...], HeldParams] = {}
        self._plan_cache: dict[tuple[object, ...], list[tuple[StagePlan, HeldParams]]] = {}
        self._states_ok: dict[tuple[object, ...], tuple[ZeroStage, ...]] = {}

    def _states(self, held: HeldParams, c: Candidate, zero: int) -> ModelStates:
        """Model states of ``held`` parameters, fewest bytes any framework keeps (cached)."""
        dp_cp, edp = c.dp * c.cp, expert_data_parallel(c)
        key = (held, zero, dp_cp, edp)  # the arguments of stage_model_states
        hit = self._state_cache.get(key)
        if hit is None:
            hit = self._state_cache[key] = stage_model_states(
                held, self.policy, zero, dp_cp, edp, keep_param_shard=False
            )
        return hit

    def _plans(self, layout: Layout) -> list[tuple[StagePlan, HeldParams]]:
        """Each rank's plan and parameters, computed once per distinct ``StagePlan.contents``
        (all that ``stage_params`` reads of a plan)."""
        key = (layout.tp, layout.pp, layout.ep, layout.etp, layout.virtual_stages, layout.schedule)
        hit = self._plan_cache.get(key)
        if hit is None:
            plans, view = pipeline_plan(self.p.model, layout), STAGE_PARAMS.key(layout)
            hit = self._plan_cache[key] = [(p, self._stage_params(layout, p, view)) for p in plans]
        return hit

    def _stage_params(
        self, layout: Layout, plan: StagePlan, view: tuple[object, ...]
    ) -> HeldParams:
        """``stage_params``, cached on what it reads (explorer.search.reads; ``view`` is
        ``STAGE_PARAMS.key(layout)``): shared by every pipeline depth and schedule that gives
        a rank the same contents."""
        # Nemotron-H: which blocks, not only how many (its blocks differ in size)
        which = plan.layers if self.p.model.single_module_blocks else ()
        key = (view, plan.contents, which)
        found = self._params.get(key)
        if found is None:
            found = self._params[key] = stage_params(self.p.model, layout, plan)
        return found

    def _mean_held(self, c: Candidate, dualpipe: bool) -> HeldParams:
        """Parameters per GPU averaged over the pipeline ranks: the same for any split, twice
        as many under DualPipe (each rank holds two stages)."""
        key = (c.tp, c.pp, c.ep or 1, c.etp or 1, dualpipe)
        hit = self._held.get(key)
        if hit is None:
            name: ScheduleName = "dualpipe" if dualpipe else "1f1b"
            layout = layout_of(tp=c.tp, pp=c.pp, ep=key[2], etp=key[3], schedule=name)
            dense = expert = 0.0  # HeldParams.__add__'s sums, without an object per rank
            for _, held in self._plans(layout):
                dense, expert = dense + held.dense, expert + held.expert
            hit = self._held[key] = HeldParams(dense, expert) * (1 / c.pp)
        return hit

    def _fixed(self, c: Candidate) -> float:
        """NCCL buffers, runtime and reserve: in every phase of every stage, bytes (cached per
        degrees; explorer.memory.setting.nccl_parts reads only those)."""
        dims = MeshDims.of(c)  # the whole input of the layout nccl_parts is given
        hit = self._fixed_cache.get(dims)
        if hit is None:
            layout = layout_of(**dims._asdict())
            buffers = nccl_parts(self.p.model, layout, self.a.memory, dims.edp)
            hit = self._fixed_cache[dims] = self.fixed + sum(size for _, size in buffers)
        return hit

    def _states_floor(self, c: Candidate, dualpipe: bool, zero: ZeroStage) -> float:
        key = (c.tp, c.pp, c.cp, c.dp, c.ep, c.etp, dualpipe, zero)
        hit = self._floors.get(key)
        if hit is None:
            states = self._states(self._mean_held(c, dualpipe), c, zero)
            hit = self._floors[key] = SAFETY * (states.total_bytes + self._fixed(c))
        return hit

    def states_bytes(self, c: Candidate) -> float:
        """Mean model states with gradients, runtime and reserve; ``c.zero`` known, bytes."""
        return self._states_floor(c, c.schedule == "dualpipe" and c.pp > 1, c.zero or 0)

    def _ranks(
        self, c: Candidate, virtual: int, dualpipe: bool, vshape: bool = False
    ) -> list[tuple[int, _Rank]]:
        """Per distinct pipeline rank: the index of the equal one holding the most micro-batches
        (the first; the last under a V placement, whose count rises with the rank), its
        parameters, dense and MoE blocks and chunk copies (cached)."""
        key = (c.tp, c.pp, c.ep or 1, c.etp or 1, virtual, dualpipe, vshape)
        hit = self._rank_cache.get(key)
        if hit is None:
            name: ScheduleName = (
                "zb-v" if vshape else
                "dualpipe" if dualpipe else "interleaved" if virtual > 1 else "1f1b"
            )  # fmt: skip
            layout = layout_of(tp=c.tp, pp=c.pp, ep=key[2], etp=key[3], virtual_stages=virtual,
                               schedule=name)  # fmt: skip
            fullest: dict[_Rank, int] = {}
            for r, (plan, held) in enumerate(self._plans(layout)):
                rank = _Rank(held, plan.num_dense_layers, plan.num_moe_layers, plan.copies)
                if vshape:  # V: min(P, M, (M + 1 + r) / 2) rises with r: the last
                    fullest[rank] = r
                else:  # the first
                    fullest.setdefault(rank, r)
            hit = self._rank_cache[key] = [(r, rank) for rank, r in fullest.items()]
        return hit

    def _block_bytes(self, c: Candidate, rc: Recompute) -> tuple[float, float]:
        """Saved activation bytes of one dense and one MoE block for one micro-batch."""
        key = (c.tp, c.cp, c.etp or 1, c.mbs or 1, rc)
        hit = self._blocks.get(key)
        if hit is None:
            hit = self._blocks[key] = self._block_pair(c, rc)
        return hit

    def _block_pair(self, c: Candidate, rc: Recompute) -> tuple[float, float]:
        shape = ActivationShape(
            seq_len=self.p.workload.seq_len,
            micro_batch_size=c.mbs or 1,
            tp=c.tp,
            sp=c.tp > 1,  # the search runs TP with sequence parallelism (explorer.mesh.to_layout)
            cp=c.cp,
            etp=c.etp or 1,
            dtype_bytes=self.policy.activation_bytes,
        )
        m, a = self.p.model, self.a.memory
        moe = block_activation_bytes(m, "moe", shape, a, rc) if m.is_moe else 0.0
        if m.single_module_blocks:  # Nemotron-H: a rank's own blocks; the lightest kind bounds
            kinds = (m.mamba_layers, m.attention_only_layers, m.ffn_only_layers)
            one = [stage_block_model(m, blocks[:1]) for blocks in kinds if blocks]
            return min(block_activation_bytes(k, "dense", shape, a, rc) for k in one), moe
        return block_activation_bytes(m, "dense", shape, a, rc), moe

    def _weights(
        self, c: Candidate, virtual: int, dualpipe: bool, zero: ZeroStage, vshape: bool = False
    ) -> list[tuple[float, float]]:
        """Per distinct rank (``_ranks`` order): bytes of its weights, master weights and
        optimizer states, and of its gradients (cached)."""
        key = (c.tp, c.pp, c.cp, c.dp, c.ep, c.etp, virtual, dualpipe, zero, vshape)
        hit = self._weight_cache.get(key)
        if hit is None:
            found = []
            for _, rank in self._ranks(c, virtual, dualpipe, vshape):
                s = self._states(rank.held, c, zero)
                found.append((s.parameters + s.master_weights + s.optimizer_states, s.gradients))
            hit = self._weight_cache[key] = found
        return hit

    def _activations(
        self, c: Candidate, variant: tuple[ScheduleName, int], rc: Recompute
    ) -> list[float]:
        """Per distinct rank (``_ranks`` order): min(M, P - r) micro-batches of its block
        activations at the backward start (every schedule's closed form holds at least that
        many; a V placement holds min(P, M, (M + 1 + r) / 2), explorer.partition), bytes."""
        dualpipe = variant[0] == "dualpipe" and c.pp > 1
        vshape = variant[0] in V_SHAPED and c.pp > 1
        dense, moe = self._block_bytes(c, rc)
        count = self.p.workload.global_batch_size // (c.dp * (c.mbs or 1))
        pp, ranks = c.pp, self._ranks(c, variant[1], dualpipe, vshape)
        if vshape:
            return [
                min(pp, count, (count + 1 + r) / 2) * (rank.dense * dense + rank.moe * moe)
                / rank.copies
                for r, rank in ranks
            ]  # fmt: skip
        return [
            min(count, pp - r) * (rank.dense * dense + rank.moe * moe) / rank.copies
            for r, rank in ranks
        ]

    def _first(
        self, c: Candidate, variant: tuple[ScheduleName, int], zero: ZeroStage, acts: list[float]
    ) -> float:
        """The fullest rank for one schedule, recompute and ZeRO stage: weights, master weights
        and optimizer states, with the larger of its activations ``acts`` (and its gradients
        where they exist at the backward start) and its gradients alone (the optimizer step)."""
        dualpipe = variant[0] == "dualpipe" and c.pp > 1
        vshape = variant[0] in V_SHAPED and c.pp > 1
        found = self._weights(c, variant[1], dualpipe, zero, vshape)
        return _fullest(found, acts, self._grads_held(c)) + self._fixed(c)

    def _grads_held(self, c: Candidate) -> bool:
        """Gradients exist at the backward start (``TrainingSetting.grads_held``)."""
        count = self.p.workload.global_batch_size // (c.dp * (c.mbs or 1))
        return self.persistent_grads or count > 1

    def least_zero(self, c: Candidate, variant: tuple[ScheduleName, int], rc: Recompute) -> int:
        """The lowest ZeRO stage at which both floors of one (schedule, recompute) choice under
        ``c`` (degrees and micro-batch known) leave room on the GPU; 4 when none does. Both
        floors only fall as the ZeRO stage rises, and they see the schedule only through the
        plan (virtual stages, DualPipe) (cached)."""
        dualpipe = variant[0] == "dualpipe" and c.pp > 1
        vshape = variant[0] in V_SHAPED and c.pp > 1
        key = (c.tp, c.pp, c.cp, c.dp, c.ep, c.etp, c.mbs, variant[1], dualpipe, rc, vshape)
        hit = self._fits.get(key)
        if hit is None:
            acts, held = self._activations(c, variant, rc), self._grads_held(c)
            room = self.p.cluster.gpu.memory_bytes / SAFETY - self._fixed(c)
            hit = self._fits[key] = next(
                (
                    z
                    for z in self.states_fit(c, dualpipe)
                    if _fullest(self._weights(c, variant[1], dualpipe, z, vshape), acts, held)
                    <= room
                ),
                4,
            )
        return hit

    def states_fit(self, c: Candidate, dualpipe: bool) -> tuple[ZeroStage, ...]:
        """The ZeRO stages, in order, whose model-states floor leaves room on the GPU (cached
        per degrees: the floor does not see the micro-batch, recompute or virtual stages)."""
        key = (c.tp, c.pp, c.cp, c.dp, c.ep, c.etp, dualpipe)
        hit = self._states_ok.get(key)
        if hit is None:
            have = self.p.cluster.gpu.memory_bytes
            stages: tuple[ZeroStage, ...] = (0, 1, 2, 3)
            ok = tuple(z for z in stages if self._states_floor(c, dualpipe, z) <= have)
            hit = self._states_ok[key] = ok
        return hit

    def _reason(self, need: float, what: str) -> str | None:
        have = self.p.cluster.gpu.memory_bytes
        if need <= have:
            return None
        return f"{what} alone need at least {need / GiB:.1f} GiB of the GPU's {have / GiB:.1f} GiB"

    def states_rule(self, p: Problem, c: Candidate) -> str | None:
        """A rule for the ZeRO level: model states, NCCL buffers, runtime and reserve cannot fit."""
        return self._reason(self.states_bytes(c), "model states, NCCL buffers, runtime and reserve")

    def layout_bytes(self, c: Candidate) -> float:
        """The fullest rank of a complete candidate at the backward start or the optimizer step
        (``_first``, as ``least_zero`` checks it), bytes."""
        variant = (c.schedule or "1f1b", c.virtual or 1)
        acts = self._activations(c, variant, c.recompute or "none")
        return SAFETY * self._first(c, variant, c.zero or 0, acts)

    def layout_rule(self, p: Problem, c: Candidate) -> str | None:
        """A rule for the ZeRO level: the fullest rank's states and saved activations cannot
        fit (a complete layout; the pipeline level's bounds only know that some ZeRO stage
        might)."""
        what = "the fullest rank's model states, saved activations, NCCL buffers and reserve"
        return self._reason(self.layout_bytes(c), what)


def _fullest(weights: list[tuple[float, float]], acts: list[float], held: bool) -> float:
    """The fullest rank's bytes without the fixed overheads: per rank, its weights, master
    weights and optimizer states with the larger of its activations (plus its gradients when
    ``held``) and its gradients alone."""
    best = float("-inf")  # max() over the ranks, as a loop: a hot path of least_zero
    for (w, g), a in zip(weights, acts, strict=True):
        total = w + a + g if held else w + (a if a >= g else g)
        if total > best:
            best = total
    return best
