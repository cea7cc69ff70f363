"""The contexts ``explorer.estimate`` builds for a layout, and whole-model figures, cached.

The search's bounds call the same compute and communication functions as the estimate, with
the same contexts; this module builds those contexts once per distinct key. "Whole model"
figures treat all blocks, the embedding and the head as one part: compute and collective
times are linear in a part's FLOPs, layers and parameters and the hidden share of a collective
is a minimum (concave), so whole-model figures bound the sum over parts from below.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import NamedTuple

from explorer.comm import Collective, GroupPlacement, StageContext, place_group
from explorer.comm.data_parallel import dp_collectives
from explorer.comm.inventory import model_collectives
from explorer.comm.model_parallel import ep_collectives
from explorer.comm.topology import GroupName
from explorer.compute import (
    ComputeContext,
    PassTimes,
    StageWork,
    optimizer_step_s,
    pass_times,
    stage_work,
)
from explorer.estimate import EstimateAssumptions
from explorer.memory import framework_behaviour
from explorer.memory.activations import expert_load
from explorer.mesh import Candidate, Problem
from explorer.precision import precision_policy
from explorer.search.reads import (
    DATA_PARALLEL,
    MODEL_COLLECTIVES,
    MODEL_GROUPS,
    PASS_TIMES,
    Shape,
    placement_key,
    with_recompute,
)
from explorer.specs import Layout, Recompute, ScheduleName, ZeroStage

GROUPS: tuple[GroupName, ...] = ("tp", "cp", "ep", "etp", "pp", "dp_cp", "edp")
"""Process groups whose collectives a part runs (explorer.comm)."""


def dualpipe_possible(pp: int, schedules: Iterable[str]) -> bool:
    """Whether DualPipe may run on ``pp`` stages: it pairs stage r with P - 1 - r, so P is even
    (explorer.partition; the micro-batch count's rule waits for the micro-batch)."""
    both = pp % 2 == 0 and "dualpipe" in schedules  # DualPipeV overlaps as well, on any P
    return pp > 1 and (both or "dualpipev" in schedules)


class Whole(NamedTuple):
    """Seconds of one micro-batch through the whole model on one GPU, ZeRO aside."""

    compute_s: float
    """Forward, input and weight gradients and recompute."""
    model_s: float
    """Exposed TP and CP collectives."""
    expert_s: float
    """Exposed EP all-to-alls."""


class Data(NamedTuple):
    """Whole-model data-parallel seconds on one GPU under one ZeRO stage."""

    per_microbatch_s: float
    """Exposed collectives per micro-batch (ZeRO-2 and 3)."""
    tail_s: float
    """Exposed per-step collectives plus the optimizer step."""


def exposed_s(
    collectives: Iterable[Collective], axes: Iterable[str], phases: Iterable[str]
) -> float:
    """Exposed seconds of the collectives on ``axes`` in ``phases``."""
    return sum(c.exposed_s for c in collectives if c.axis in axes and c.phase in phases)


class Contexts:
    """Compute and communication contexts of one problem's layouts, as the estimate builds them."""

    def __init__(self, problem: Problem, assumptions: EstimateAssumptions) -> None:
        self.p, self.a = problem, assumptions
        self._groups: dict[tuple[int, ...], dict[str, GroupPlacement]] = {}
        self._model_placed: dict[tuple[int, ...], tuple[object, ...]] = {}
        self._whole: dict[tuple[object, ...], Whole] = {}
        self._data: dict[tuple[object, ...], Data] = {}
        self._pass_cache: dict[tuple[object, ...], PassTimes] = {}
        self._pass_inputs: dict[tuple[Candidate, bool], PassTimes] = {}
        self._window_inputs: dict[Candidate, PassTimes] = {}
        self._call_inputs: dict[tuple[Candidate, bool], tuple[Collective, ...]] = {}
        self._contents: dict[GroupPlacement, tuple[object, ...]] = {}
        self._exposure: dict[tuple[int, int], tuple[float, float]] = {}
        self._works: dict[tuple[tuple[int, ...], bool, bool], StageWork] = {}
        self._interned: dict[StageWork, StageWork] = {}
        self._calls: dict[tuple[object, ...], tuple[Collective, ...]] = {}
        self._data_calls_cache: dict[tuple[object, ...], tuple[tuple[Collective, ...], float]] = {}
        self._compute_of: dict[Layout, ComputeContext] = {}
        self._comm_of: dict[Layout, StageContext] = {}
        # resolved once per problem, as the estimate resolves them once per layout
        self.moe_imbalance = expert_load(problem.model, assumptions.memory)  # estimate.stages
        w = problem.workload
        self.policy = precision_policy(w.precision, w.grad_dtype)

    @cached_property
    def pipeline_keeps_unsharded(self) -> bool:
        """The memory framework's behaviour the ZeRO-3 calls under PP follow (as the estimate:
        explorer.estimate.stages.stage_context)."""
        return framework_behaviour(self.a.memory).pipeline_keeps_unsharded

    def compute(self, layout: Layout) -> ComputeContext:
        """The compute context of ``layout`` (explorer.estimate.stages; one per distinct
        layout: it resolves the workload as it is made)."""
        found = self._compute_of.get(layout)
        if found is None:
            found = self._compute_of[layout] = self._compute(layout)
        return found

    def _compute(self, layout: Layout) -> ComputeContext:
        return ComputeContext(
            model=self.p.model,
            gpu=self.p.cluster.gpu,
            layout=layout,
            workload=self.p.workload,
            assumptions=self.a.compute,
            moe_imbalance=self.moe_imbalance,
            flash_attention=self.a.memory.flash_attention,
            dropout=self.a.memory.dropout,
            fp8_dispatch=self.a.comm.fp8_dispatch,
            torch_cp=self.a.comm.torch_cp,
            kv_heads_repeated=self.a.comm.cp_kv_repeated,
            resolved_policy=self.policy,
        )

    def placements(self, layout: Layout | Shape) -> dict[str, GroupPlacement]:
        """Placement of every group a part uses, cached per degrees (all that place_group
        reads of a searched layout; mesh_order stays at its default)."""
        key = (layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp)
        found = self._groups.get(key)
        if found is None:
            real = layout.layout() if isinstance(layout, Shape) else layout
            found = self._groups[key] = {g: place_group(g, self.p.cluster, real) for g in GROUPS}
            self._model_placed[key] = tuple(self._placed(found[g]) for g in MODEL_GROUPS)
        return found

    def _model_placements(self, layout: Layout | Shape) -> tuple[object, ...]:
        """``placement_key`` of each of ``MODEL_GROUPS``' placements, in order (made with
        ``placements``, on the same key)."""
        key = (layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.etp)
        found = self._model_placed.get(key)
        if found is None:
            self.placements(layout)
            found = self._model_placed[key]
        return found

    def _placed(self, placement: GroupPlacement) -> tuple[object, ...]:
        """``placement_key`` of a placement (cached per placement object)."""
        found = self._contents.get(placement)
        if found is None:
            found = self._contents[placement] = placement_key(placement)
        return found

    def comm(self, layout: Layout) -> StageContext:
        """The communication context of ``layout`` (explorer.estimate.stages.stage_context; one
        per distinct layout)."""
        found = self._comm_of.get(layout)
        if found is None:
            found = self._comm_of[layout] = self._comm(layout)
        return found

    def _comm(self, layout: Layout) -> StageContext:
        return StageContext(
            model=self.p.model,
            layout=layout,
            policy=self.policy,
            seq_len=self.p.workload.seq_len,
            groups=self.placements(layout),
            assumptions=self.a.comm,
            moe_imbalance=self.moe_imbalance,
            pipeline_keeps_unsharded=self.pipeline_keeps_unsharded,
        )

    def work(self, layers: tuple[int, ...], first: bool, last: bool) -> StageWork:
        """A part's work (explorer.compute.stage_work with the estimate's FLOP convention)."""
        key = (layers, first, last)
        hit = self._works.get(key)  # cached here: stage_work's own cache hashes the model
        if hit is None:
            causal = self.a.compute.causal_attention_flops
            w = self.p.workload
            ends = (w.bf16_layers_at_start, w.bf16_layers_at_end)
            work = stage_work(self.p.model, layers, w.seq_len, first, last, causal, ends)
            # equal works are one object, so parts can be told apart by identity
            hit = self._works[key] = self._interned.setdefault(work, work)
        return hit

    @cached_property
    def whole_model(self) -> StageWork:
        return self.work(tuple(range(self.p.model.num_hidden_layers)), True, True)

    def _shape(self, c: Candidate, zero: ZeroStage, dualpipe: bool) -> Shape:
        """``to_layout``'s fields for ``c`` with this ZeRO stage, one virtual stage, and
        DualPipe's EP overlap (as DualPipeV, which has it on any P) or 1F1B."""
        schedule: ScheduleName = "dualpipev" if dualpipe else "1f1b"
        # positional, in Shape's (Layout's) field order: a hot path
        return Shape(
            c.dp, c.tp, c.pp, c.cp, c.ep or 1, c.etp or 1, zero, c.mbs or 1,
            c.recompute or "none", schedule, 1,
        )  # fmt: skip

    def _passes(self, c: Candidate, dualpipe: bool = False) -> PassTimes:
        """Whole-model pass times (cached): ZeRO and the schedule change no compute, except
        that DualPipe with EP runs it on the SMs its all-to-alls leave
        (ComputeAssumptions.comm_sm_share), which only lengthens it."""
        found = self._pass_inputs.get((c, dualpipe))  # memo on the whole input
        if found is None:
            shape = self._shape(c, 0, dualpipe)
            key = PASS_TIMES.key(shape)  # what pass_times reads (explorer.search.reads)
            found = self._pass_cache.get(key)
            if found is None:
                found = pass_times(self.whole_model, self.compute(shape.layout()))
                self._pass_cache[key] = found
            self._pass_inputs[c, dualpipe] = found
        return found

    def _windows(self, c: Candidate) -> PassTimes:
        """The pass times collectives hide behind in every bound: the widest any schedule
        under ``c`` gives (exposure only falls as a window widens), while compute is always
        taken from ``_passes`` (the least)."""
        found = self._window_inputs.get(c)  # memo on the whole input
        if found is None:
            sms = self.a.compute.comm_sm_share > 0 and (c.ep or 1) > 1
            dualpipe = sms and dualpipe_possible(c.pp, self.p.space.schedules)
            found = self._window_inputs[c] = self._passes(c, dualpipe)
        return found

    def whole_of(self, c: Candidate, dualpipe: bool = False) -> Whole:
        """Whole-model compute and exposed TP, CP and EP seconds per micro-batch of a
        candidate whose degrees, micro-batch and recompute are known (cached; the calls are
        timed once per recompute count, their exposure per pass times)."""
        key = (c.tp, c.cp, c.dp, c.pp, c.ep, c.etp, c.mbs, c.recompute, dualpipe)
        hit = self._whole.get(key)
        if hit is None:
            passes, windows = self._passes(c), self._windows(c)
            model, expert = self._exposed(self._model_calls(c, dualpipe), windows)
            hit = self._whole[key] = Whole(
                compute_s=passes.forward_s + passes.backward_s, model_s=model, expert_s=expert
            )
        return hit

    def _exposed(self, calls: tuple[Collective, ...], windows: PassTimes) -> tuple[float, float]:
        """Exposed seconds of ``calls`` behind ``windows``: (not EP, EP). A pure function of
        its two inputs, memoised by their identity: both live in this object's caches for its
        lifetime, and meshes that share a timing share them."""
        key = (id(calls), id(windows))
        found = self._exposure.get(key)
        if found is None:
            model = expert = 0.0
            for call in calls:
                if call.axis == "ep":
                    expert += call.exposed_for(windows)
                else:
                    model += call.exposed_for(windows)
            found = self._exposure[key] = (model, expert)
        return found

    def busy_floors(
        self, c: Candidate, dualpipe: bool, policies: Iterable[Recompute]
    ) -> list[float]:
        """Lower bounds on compute plus exposed TP, CP and EP seconds per micro-batch of a
        candidate whose micro-batch is known, under each of ``policies``: ``whole_of``'s sum,
        except that full recompute's collectives are bounded by the calls without recompute
        behind its windows (it only adds backward calls: explorer.comm; exposure grows with a
        call's time), which spares timing them. So every policy's calls are those without
        recompute (looked up once), each behind its own windows."""
        calls = self._model_calls(with_recompute(c, "none"), dualpipe)
        found = []
        for rc in policies:
            node = with_recompute(c, rc)
            passes = self._passes(node)
            model, expert = self._exposed(calls, self._windows(node))
            found.append(passes.forward_s + passes.backward_s + model + expert)
        return found

    def _model_calls(self, c: Candidate, dualpipe: bool) -> tuple[Collective, ...]:
        """The whole model's TP, CP and EP collectives per micro-batch (cached per degrees,
        micro-batch, whether recompute is full (it adds backward calls; explorer.comm reads
        nothing else of the policy) and DualPipe (its EP overlap))."""
        found = self._call_inputs.get((c, dualpipe))  # memo on the whole input
        if found is None:
            policy: Recompute = "full" if c.recompute == "full" else "none"
            plain = c if c.recompute == policy else with_recompute(c, policy)
            found = self._call_inputs.get((plain, dualpipe))  # what the shape below sees
            if found is None:
                found = self._model_calls_of(c, plain, dualpipe)
                self._call_inputs[plain, dualpipe] = found
            self._call_inputs[c, dualpipe] = found
        return found

    def _model_calls_of(
        self, c: Candidate, plain: Candidate, dualpipe: bool
    ) -> tuple[Collective, ...]:
        """``_model_calls`` on a miss of its memo: the calls of ``c``, cached on what they
        read (``plain`` is ``c`` with its recompute as the calls see it, full or none)."""
        shape = self._shape(plain, 0, dualpipe)
        # what the calls read (explorer.search.reads): shared by meshes that differ only in
        # dp and pp where those leave the TP, CP and EP groups placed alike
        key = (MODEL_COLLECTIVES.key(shape), *self._model_placements(shape))
        hit = self._calls.get(key)
        if hit is None:
            ctx, passes = self.comm(shape.layout()), self._passes(c)
            found: tuple[Collective, ...]
            if dualpipe:  # DualPipe changes only the EP overlap: the TP and CP calls are shared
                alone = self._model_calls(c, False)
                found = (
                    *(x for x in alone if x.axis != "ep"),
                    *ep_collectives(self.whole_model, passes, ctx),
                )
            else:
                found = model_collectives(self.whole_model, passes, ctx, pp=False)
            hit = self._calls[key] = tuple(x for x in found if x.phase in ("forward", "backward"))
        return hit

    def data_of(self, c: Candidate, zero: ZeroStage) -> Data:
        """Whole-model data-parallel seconds of a candidate under ZeRO stage ``zero`` (cached;
        explorer.comm.data_parallel and the optimizer step; the calls are timed once per
        degrees and ZeRO stage, their exposure per pass times)."""
        key = (c.tp, c.cp, c.dp, c.pp, c.ep, c.etp, c.mbs, c.recompute, zero)
        hit = self._data.get(key)
        if hit is None:
            calls, optimizer = self._data_calls(c, zero)
            passes = self._windows(c)
            per_microbatch = step = 0.0
            for call in calls:
                if call.phase == "step":
                    step += call.exposed_for(passes)
                else:
                    per_microbatch += call.exposed_for(passes)
            hit = self._data[key] = Data(per_microbatch_s=per_microbatch, tail_s=step + optimizer)
        return hit

    def _data_calls(self, c: Candidate, zero: ZeroStage) -> tuple[tuple[Collective, ...], float]:
        """The whole model's data-parallel collectives and optimizer step, s (cached per
        degrees and ZeRO stage: neither ``dp_collectives``' calls nor ``optimizer_step_s``
        read the micro-batch size, recompute policy or schedule, only the pass times that
        ``Collective.exposed_for`` takes)."""
        shape = self._shape(c, zero, False)
        key = DATA_PARALLEL.key(shape)  # what both read (explorer.search.reads)
        hit = self._data_calls_cache.get(key)
        if hit is None:
            layout = shape.layout()
            optimizer = optimizer_step_s(self.whole_model, self.compute(layout))
            found = dp_collectives(self.whole_model, self._passes(c), self.comm(layout))
            hit = self._data_calls_cache[key] = (tuple(found), optimizer)
        return hit
