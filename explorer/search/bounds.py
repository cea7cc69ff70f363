"""Lower bounds on step time that let the search skip what cannot rank.

In tiers; each bounds ``explorer.estimate``'s step time of every complete layout below a node
of ``explorer.mesh``'s tree that passes the memory floors (``explorer.search.floor``; a node
with none gets infinity, and the search rejects it as ``memory``):
0. ``degrees_s`` (degrees and expert degrees known): the ranks' mean busy time with the
   whole model's compute and exposed TP, CP and EP, at its least over the micro-batch sizes
   and recompute policies: it prunes a mesh whose all-to-alls or TP traffic alone are too
   slow before its micro-batch and recompute choices are bounded one by one.
1. ``node_s`` (micro-batch known): the pipelined part is at least the ranks' mean busy time
   (every micro-batch runs every part once, so busy time summed over ranks is M x the whole
   model's cycle), at least the heaviest rank's compute (its blocks by kind, embedding and
   head), and, for GPipe, 1F1B and interleaved 1F1B (the estimate's bottleneck form), the
   ramp (``explorer.search.shapes``). Collectives (EP at DualPipe's overlap for DualPipe) and
   the data-parallel tail enter as whole-model figures once the recompute policy is known;
   open knobs (recompute, schedule, ZeRO) take their minimum over the choices whose memory
   floors fit.
2. ``pipeline_s`` (all known but ZeRO): per-part cycles from the functions the estimate uses,
   data-parallel collectives left out; the bottleneck form itself (monotone in every cycle)
   for closed-form schedules, else the arrival bound; plus the least mean tail.
3. ``zero_s`` (complete, cheap): tier 1 with the layout's own data-parallel figures.
4. ``leaf_s`` (complete): tier 2 plus data-parallel collectives and the exact tail: the
   estimate's own step time for closed-form schedules, computed without the memory model.
Whole-model figures bound sums over parts from below (``explorer.search.context``). Nothing
here is a heuristic: tests check every tier against the estimate on sampled layouts (closed
forms and simulator), and the ranked top against an exhaustive search.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np

from explorer.comm import StageContext
from explorer.comm.data_parallel import dp_collectives
from explorer.comm.inventory import model_collectives
from explorer.compute import PassTimes, StageWork, optimizer_step_s, pass_times
from explorer.estimate import EstimateAssumptions
from explorer.estimate.pipeline import bottleneck_makespan_s
from explorer.estimate.stages import parts
from explorer.memory.training import microbatch_count
from explorer.mesh import LEAF, ROOT, Candidate, Problem, Tree, valid_pipelines
from explorer.partition import pipeline_plan
from explorer.schedules import StageTimes
from explorer.search.context import Contexts, dualpipe_possible, exposed_s
from explorer.search.floor import MemoryFloor
from explorer.search.reads import (
    PASS_TIMES,
    candidate_layout,
    layout_of,
    with_micro,
    with_recompute,
)
from explorer.search.shapes import Mix, Unit, arrival_bound_s, pipelined_floor, rank_loads
from explorer.specs import RECOMPUTES, V_SHAPED, Layout, Recompute, ScheduleName, ZeroStage

SAFETY = 1 - 1e-9
"""Bounds are scaled by this so that rounding in sums never lifts them above the estimate."""

FBW = tuple[float, float, float]
"""(forward, backward, weight) seconds of one micro-batch on one part."""

Pair = tuple[ScheduleName, int]
"""A pipeline schedule and its virtual stages."""


def _stage_times(rows: Sequence[Sequence[float]]) -> StageTimes:
    return StageTimes(
        forward_s=tuple(r[0] for r in rows),
        backward_s=tuple(r[1] for r in rows),
        weight_s=tuple(r[2] for r in rows),
    )


class _Parts(NamedTuple):
    """Tier 2's part data: per distinct part work its pass times and (F, B, W) with the
    exposed non-data-parallel collectives, which of them each part runs, and the parts'
    (F, B, W) as stage times."""

    distinct: tuple[tuple[StageWork, PassTimes, FBW], ...]
    of_part: tuple[int, ...]
    """Per part, its entry in ``distinct``."""
    times: StageTimes


def _fbw(work: StageWork, passes: PassTimes, ctx: StageContext) -> FBW:
    """(F, B, W) of one part: compute plus the exposed TP, CP, EP and PP collectives."""
    found = model_collectives(work, passes, ctx)  # the dp ones are not summed here
    axes = ("tp", "cp", "ep", "pp")
    return (
        passes.forward_s + exposed_s(found, axes, ("forward",)),
        passes.backward_input_s + passes.recompute_s + exposed_s(found, axes, ("backward",)),
        passes.weight_s,
    )


class Bounds:
    """Lower bounds on step time and peak memory for subtrees of one problem, with caches."""

    def __init__(
        self,
        problem: Problem,
        assumptions: EstimateAssumptions,
        floor: MemoryFloor,
        tree: Tree | None = None,
    ) -> None:
        self.p, self.a, self.floor = problem, assumptions, floor
        self.tree = tree or Tree(problem)
        """The search's tree (its first two levels list the expert level, ``degrees_s``)."""
        self.ctx = Contexts(problem, assumptions)
        m = problem.model
        w, n = problem.workload, m.num_hidden_layers
        low = [i for i in range(n) if w.bf16_layers_at_start <= i < n - w.bf16_layers_at_end]
        self._block_kinds = {m.is_moe_layer(i): i for i in [*range(n), *low]}
        """A block of each kind (MoE or not): the last of its kind outside the BF16 blocks
        where there is one (the cheaper, so the bounds stay bounds)."""
        kinds = (m.mamba_layers, m.attention_only_layers, m.ffn_only_layers)
        self._hybrid_blocks = tuple(
            next((i for i in reversed([*range(n), *low]) if i in kind), kind[-1])
            for kind in kinds
            if kind
        )
        """Nemotron-H: one block of each single-module kind; the cheapest stands for every
        block (the bounds stay bounds)."""
        self._parts: dict[Candidate, _Parts] = {}
        self._units: dict[tuple[int, int, int, int, int, Recompute], Unit] = {}
        self._pairs: dict[tuple[object, ...], tuple[tuple[ScheduleName, int], ...]] = {}
        self._policies: dict[tuple[Candidate, bool, bool], float] = {}
        self._passes: dict[tuple[object, ...], PassTimes] = {}
        self._mix_cache: dict[tuple[int, int, bool, bool], tuple[tuple[Mix, ...], Mix]] = {}
        self._loads: dict[tuple[object, ...], tuple[float, float]] = {}
        self._ranked: dict[tuple[object, ...], list[tuple[float, int, ZeroStage]]] = {}
        self._tier0: dict[Candidate, float] = {}
        """Tier 0 per expert-level node (``degrees_s``)."""
        self._level: dict[Candidate, None] | None = None
        self._floors: dict[Candidate, list[Callable[[float], float]]] = {}
        """Per node (its variants, ``_variants``): each pipeline's floor as a function of the
        exposed communication (``pipelined_floor``)."""

    # ------------------------------------------------------------------ tier 1

    def unit(self, tp: int, cp: int, ep: int, etp: int, mbs: int, rc: Recompute) -> Unit:
        """Compute seconds of one micro-batch on one GPU: the whole model, the cheapest block,
        and one block of each kind, the embedding and the head (cached)."""
        key = (tp, cp, ep, etp, mbs, rc)
        hit = self._units.get(key)
        if hit is None:
            layout = layout_of(tp=tp, cp=cp, ep=ep, etp=etp, micro_batch_size=mbs, recompute=rc)
            compute = self.ctx.compute(layout)
            blocks = {
                moe: pass_times(self.ctx.work((i,), False, False), compute)
                for moe, i in self._block_kinds.items()
            }
            if self._hybrid_blocks:
                each = [pass_times(self.ctx.work((i,), False, False), compute)
                        for i in self._hybrid_blocks]  # fmt: skip
                blocks[False] = min(each, key=lambda t: t.forward_s + t.backward_s)
            whole = pass_times(self.ctx.whole_model, compute)
            embedding = pass_times(self.ctx.work((), True, False), compute)
            head = pass_times(self.ctx.work((), False, True), compute)

            def cycle(passes: PassTimes | None) -> float:
                return passes.forward_s + passes.backward_s if passes else 0.0

            hit = self._units[key] = Unit(
                whole_s=cycle(whole),
                block_s=min(cycle(b) for b in blocks.values()),
                block_forward_s=min(b.forward_s for b in blocks.values()),
                kinds=(
                    cycle(blocks.get(False)),
                    cycle(blocks.get(True)),
                    cycle(embedding),
                    cycle(head),
                ),
            )
        return hit

    def _mixes(
        self, pp: int, virtual: int, dualpipe: bool, vshape: bool = False
    ) -> tuple[tuple[Mix, ...], Mix]:
        """What the pipeline ranks hold (distinct mixes) and what the last rank holds (cached
        per plan shape; explorer.partition.pipeline_plan, as the estimate splits layers)."""
        key = (pp, virtual, dualpipe, vshape)
        hit = self._mix_cache.get(key)
        if hit is None:
            name: ScheduleName = (
                "zb-v" if vshape else
                "dualpipe" if dualpipe else "interleaved" if virtual > 1 else "1f1b"
            )  # fmt: skip
            layout = layout_of(pp=pp, virtual_stages=virtual, schedule=name)
            mixes = [
                (p.num_dense_layers, p.num_moe_layers, int(p.has_embedding), int(p.has_head))
                for p in pipeline_plan(self.p.model, layout)
            ]
            hit = self._mix_cache[key] = (tuple(set(mixes)), mixes[-1])
        return hit

    def _variants(self, c: Candidate) -> tuple[tuple[ScheduleName, int], ...]:
        """The node's schedule, or the valid ones it leaves open (cached per pp, dp, mbs)."""
        if c.schedule is not None:
            return ((c.schedule, c.virtual or 1),)
        key = (c.pp, c.dp, c.mbs)
        hit = self._pairs.get(key)
        if hit is None:
            hit = self._pairs[key] = valid_pipelines(self.p, c)
        return hit

    def pipelined_floor(
        self, c: Candidate, variant: Pair, unit: Unit, m: int
    ) -> Callable[[float], float]:
        """``explorer.search.shapes.pipelined_floor`` for node ``c``: seconds as a function
        of the exposed communication per micro-batch."""
        closed = self.a.pipeline_model == "closed-form" or c.pp == 1
        layers = self.p.model.num_hidden_layers
        dualpipe = variant[0] == "dualpipe" and c.pp > 1
        vshape = variant[0] in V_SHAPED and c.pp > 1
        key = (unit.kinds, c.pp, variant[1], dualpipe, vshape)
        loads = self._loads.get(key)
        if loads is None:
            mixes, last = self._mixes(c.pp, variant[1], dualpipe, vshape)
            loads = self._loads[key] = rank_loads(mixes, last, unit)
        return pipelined_floor(variant, c.pp, layers, unit, m, closed, loads)

    def _costs(
        self, c: Candidate, stages: Iterable[ZeroStage]
    ) -> list[tuple[ZeroStage, float, float]]:
        """Per ZeRO stage of a node whose recompute policy is known: (stage, exposed
        data-parallel seconds per micro-batch, mean tail), from whole-model figures."""
        found = [(z, self.ctx.data_of(c, z)) for z in stages]
        return [(z, d.per_microbatch_s, d.tail_s / c.pp) for z, d in found]

    def _policy_s(self, c: Candidate, comm: bool, memory: bool) -> float:
        """Tier 1 for a node whose recompute policy is known, s (see ``node_s``; cached)."""
        key = (c, comm, memory)
        hit = self._policies.get(key)
        if hit is None:
            hit = self._policies[key] = self._policy_bound_s(c, comm, memory)
        return hit

    def _policy_bound_s(self, c: Candidate, comm: bool, memory: bool) -> float:
        """The least tier-1 term over the (pipeline, ZeRO stage) choices under ``c`` whose
        memory floors fit: terms in increasing order, each pipeline's floors computed only
        when its turn comes (``MemoryFloor.least_zero``, once per plan shape)."""
        variants, rc = self._variants(c), c.recompute or "none"
        flags = [s in ("dualpipe", "dualpipev") and c.pp > 1 for s, _ in variants]  # EP overlap
        copies = {s == "dualpipe" and c.pp > 1 for s, _ in variants}  # two parameter copies
        stages = [c.zero] if c.zero is not None else list(self.p.space.zero_stages)
        if memory:  # the model-states floor sees only the degrees and DualPipe
            fit = [self.floor.states_fit(c, flag) for flag in copies]
            stages = [z for z in stages if any(z in f for f in fit)]
        if not stages:
            return float("inf")
        if not comm:  # no ZeRO stage changes a term: the highest fits whenever any does
            stages = [max(stages)]
        key = (c, comm, tuple(stages))  # the same terms with and without the memory floors
        ranked = self._ranked.get(key)
        if ranked is None:
            ranked = self._ranked[key] = self._terms(c, comm, stages, variants, flags)
        if not memory:
            return ranked[0][0]
        shapes: dict[tuple[int, bool, bool], int] = {}
        for value, i, z in ranked:
            shape = (variants[i][1], flags[i], variants[i][0] in V_SHAPED)
            if shape not in shapes:
                shapes[shape] = self.floor.least_zero(c, variants[i], rc)
            if z >= shapes[shape]:
                return value
        return float("inf")

    def _terms(
        self,
        c: Candidate,
        comm: bool,
        stages: list[ZeroStage],
        variants: Sequence[Pair],
        flags: Sequence[bool],
    ) -> list[tuple[float, int, ZeroStage]]:
        """Tier 1's (term, variant index, ZeRO stage) under ``c``, in increasing order; a
        pipeline's floor is computed once per distinct communication time (ZeRO 0 and 1, and
        every stage without collectives, share theirs). EP is exposed at DualPipe's overlap
        for DualPipe (CommAssumptions.dualpipe_ep_overlap)."""
        floors = self._floors.get(c)  # the same with and without collectives (``comm``)
        if floors is None:
            unit = self.unit(c.tp, c.cp, c.ep or 1, c.etp or 1, c.mbs or 1, c.recompute or "none")
            m = self.p.workload.global_batch_size // (c.dp * (c.mbs or 1))
            floors = self._floors[c] = [self.pipelined_floor(c, v, unit, m) for v in variants]
        costs = self._costs(c, stages) if comm else [(z, 0.0, 0.0) for z in stages]
        exposed = dict.fromkeys(flags, 0.0)
        if comm:
            model = self.ctx.whole_of(c).model_s
            for flag in exposed:
                exposed[flag] = model + self.ctx.whole_of(c, dualpipe=flag).expert_s
        ranked = []
        for i, floor_of in enumerate(floors):
            base = exposed[flags[i]]
            seen: dict[float, float] = {}
            for z, per_microbatch, tail in costs:
                total = base + per_microbatch
                if total not in seen:
                    seen[total] = floor_of(total)
                ranked.append((seen[total] + tail, i, z))
        ranked.sort()
        return ranked

    def degrees_s(self, c: Candidate) -> float:
        """Tier 0: lower bound on the step time of every complete layout under ``c`` (degrees
        and expert degrees known), s (``degrees_level``). The first call bounds the whole
        expert level of the tree at once (the search tightens every node of it: they all
        reach the front at priority 0); a node outside it is bounded alone."""
        found = self._tier0.get(c)
        if found is None:
            level = self._expert_level()
            nodes = list(level) if c in level else [c]
            self._tier0.update(zip(nodes, self.degrees_level(nodes), strict=True))
            found = self._tier0[c]
        return found

    def _expert_level(self) -> dict[Candidate, None]:
        """The nodes of the expert level that pass the rules of the first two levels (an
        ordered set; made once, from the tree's own children, which it keeps)."""
        if self._level is None:
            tree, found = self.tree, {}
            for mesh in tree.children(0, ROOT)[0]:
                found.update(dict.fromkeys(tree.children(1, mesh)[0]))
            self._level = found
        return self._level

    def degrees_level(self, nodes: Sequence[Candidate]) -> list[float]:
        """Tier 0 of each of ``nodes`` (degrees and expert degrees known), s: the ranks' mean
        busy time with the whole model's compute and exposed TP, CP and EP, at its least over
        the recompute policies (``Contexts.busy_floors``; DualPipe's EP overlap where DualPipe
        is open: it hides at least as much), plus the least mean data-parallel time over the
        ZeRO stages whose states floor fits, exposed behind the widest windows (the most
        recompute: data-parallel calls do not depend on it, and wider windows only hide
        more), at its least over the micro-batch sizes. Every tier-1 term is at least that;
        the bubble and the memory floors only add.

        Arrays over (node, micro-batch size, recompute policy or ZeRO stage): the busy and
        data-parallel figures come from the estimate's functions through ``Contexts``, the
        sums and minima are taken once for the whole level."""
        space, gbs = self.p.space, self.p.workload.global_batch_size
        sizes, policies, stages = space.micro_batch_sizes, space.recomputes, space.zero_stages
        widest = policies.index(max(policies, key=RECOMPUTES.index))
        shape = (len(nodes), len(sizes))
        busy = np.zeros((*shape, len(policies)))
        per_microbatch = np.zeros((*shape, len(stages)))
        tail = np.full((*shape, len(stages)), np.inf)  # inf: the states floor does not fit
        counts = np.zeros(shape)  # micro-batches; 0 where the batch rule rejects the size
        busy_floors, data_of = self.ctx.busy_floors, self.ctx.data_of
        for k, c in enumerate(nodes):
            dualpipe = dualpipe_possible(c.pp, space.schedules)
            fit = self.floor.states_fit(c, False)  # DualPipe's two copies only fit fewer
            for i, mbs in enumerate(sizes):
                if gbs % (c.dp * mbs):  # the batch rule rejects it
                    continue
                counts[k, i] = gbs // (c.dp * mbs)
                busy[k, i] = busy_floors(with_micro(c, mbs, "none"), dualpipe, policies)
                windows = with_micro(c, mbs, policies[widest])
                for j, z in enumerate(stages):
                    if z in fit:
                        d = data_of(windows, z)
                        per_microbatch[k, i, j], tail[k, i, j] = d.per_microbatch_s, d.tail_s
        least_busy = counts * busy.min(axis=2)
        least_tail = (counts[..., None] * per_microbatch + tail).min(axis=2)
        pp = np.array([c.pp for c in nodes], dtype=float)[:, None]
        steps = np.where(counts > 0, (least_busy + least_tail) / pp, np.inf)
        found: list[float] = (SAFETY * steps.min(axis=1)).tolist()
        return found

    def node_s(self, c: Candidate, comm: bool = True, memory: bool = True) -> float:
        """Tier 1: lower bound on the step time of every complete layout under ``c`` (degrees
        and micro-batch known) that passes the memory floors, s; infinity when none does.

        ``comm`` False leaves out the collectives, ``memory`` False the memory floors (each
        cheaper, looser).
        """
        policies: Iterable[Recompute] = [c.recompute] if c.recompute else self.p.space.recomputes
        best = min(self._policy_s(with_recompute(c, rc), comm, memory) for rc in policies)
        return SAFETY * best

    def zero_s(self, c: Candidate) -> float:
        """Tier 3: a complete layout's tier-1 bound with its data-parallel collectives and
        the mean tail (per-step collectives, optimizer step), s."""
        dualpipe = c.schedule in ("dualpipe", "dualpipev") and c.pp > 1  # the EP overlap
        whole, data = self.ctx.whole_of(c, dualpipe=dualpipe), self.ctx.data_of(c, c.zero or 0)
        comm = whole.model_s + data.per_microbatch_s + whole.expert_s
        unit = self.unit(c.tp, c.cp, c.ep or 1, c.etp or 1, c.mbs or 1, c.recompute or "none")
        m = self.p.workload.global_batch_size // (c.dp * (c.mbs or 1))
        variant = (c.schedule or "1f1b", c.virtual or 1)
        return SAFETY * (self.pipelined_floor(c, variant, unit, m)(comm) + data.tail_s / c.pp)

    # ------------------------------------------------------------------ tier 2

    def _part_data(self, c: Candidate) -> _Parts:
        """Per distinct part work: pass times and non-data-parallel F, B, W (cached; GPipe and
        ZB-H1 share 1F1B's parts and collectives, and ZeRO does not change them)."""
        same = c.schedule in ("gpipe", "zb-h1")
        key = c._replace(zero=0, schedule="1f1b" if same else c.schedule)
        found = self._parts.get(key)
        if found is None:
            layout = candidate_layout(key)
            works = [self.ctx.work(*part) for part in parts(self.p.model, layout)]
            compute, comm = self.ctx.compute(layout), self.ctx.comm(layout)
            fields = PASS_TIMES.key(layout)  # what pass_times reads (explorer.search.reads)
            slots: dict[int, int] = {}  # equal works are one object (Contexts.work)
            distinct: list[tuple[StageWork, PassTimes, FBW]] = []
            index: list[int] = []
            for work in works:
                slot = slots.get(id(work))
                if slot is None:
                    slot = slots[id(work)] = len(distinct)
                    if (work, fields) not in self._passes:
                        self._passes[work, fields] = pass_times(work, compute)
                    passes = self._passes[work, fields]
                    distinct.append((work, passes, _fbw(work, passes, comm)))
                index.append(slot)
            times = _stage_times([distinct[i][2] for i in index])
            found = self._parts[key] = _Parts(tuple(distinct), tuple(index), times)
        return found

    def _pipelined_s(self, layout: Layout, times: StageTimes) -> float:
        """Closed forms where the estimate uses them, else the arrival bound, s."""
        m = microbatch_count(layout, self.p.workload)
        closed = self.a.pipeline_model == "closed-form"
        if layout.pp == 1 or (closed and layout.schedule in ("gpipe", "1f1b", "interleaved")):
            return bottleneck_makespan_s(times, m, layout.virtual_stages)
        virtual = 2 if layout.schedule in V_SHAPED else layout.virtual_stages  # half-rank chunks
        return arrival_bound_s(times, m, layout.schedule == "dualpipe", virtual)

    def pipeline_s(self, c: Candidate) -> float:
        """Tier 2: lower bound for a node whose fields are all known but the ZeRO stage, s."""
        times = self._part_data(c).times
        stages = [c.zero] if c.zero is not None else self.p.space.zero_stages
        tail = min(t for _, _, t in self._costs(c, stages))
        return SAFETY * (self._pipelined_s(candidate_layout(c._replace(zero=0)), times) + tail)

    # ------------------------------------------------------------------ tier 4

    def leaf_s(self, c: Candidate) -> float:
        """Tier 4: a complete layout's step time; the estimate's own for closed-form schedules.

        Tier 2's part times plus data-parallel collectives, and the slowest rank's tail
        (DualPipe ranks hold two parts). Source: explorer.estimate.core.estimate.
        """
        data, layout = self._part_data(c), candidate_layout(c)
        comm, compute = self.ctx.comm(layout), self.ctx.compute(layout)
        full = []
        for work, passes, (f, b, w) in data.distinct:
            found = dp_collectives(work, passes, comm)  # a stage's only collectives on dp
            step = exposed_s(found, ("dp",), ("step",)) + optimizer_step_s(work, compute)
            forward = f + exposed_s(found, ("dp",), ("forward",))
            full.append((forward, b + exposed_s(found, ("dp",), ("backward",)), w, step))
        rows = [full[i] for i in data.of_part]
        tails = [r[3] for r in rows]
        if layout.schedule == "dualpipe" and layout.pp > 1:
            tails = [tails[r] + tails[-1 - r] for r in range(len(tails))]
        return SAFETY * (self._pipelined_s(layout, _stage_times(rows)) + max(tails))

    # ------------------------------------------------------------------ by depth

    def cheap_s(self, depth: int, c: Candidate, parent_s: float) -> float:
        """The bound a node is queued under when it is made. The mesh, expert and ZeRO levels
        inherit their parent's (an expert node gets tier 0 when it first reaches the front);
        micro-batch nodes get compute-only tier 1, recompute nodes add the memory floors,
        pipeline nodes the collectives (the terms are cached: a parent's tightening computed
        most of them)."""
        if depth == LEAF or c.mbs is None:
            return parent_s
        deep = c.schedule is not None
        bound = self.node_s(c, comm=deep, memory=c.recompute is not None)
        return max(parent_s, bound)

    def tight_s(self, depth: int, c: Candidate) -> float | None:
        """The costlier bound computed when a node first reaches the front of the queue: tier 0
        at the expert level, tier 1 with memory floors at the micro-batch level and with
        collectives at the recompute level, tier 2 at the pipeline level, tier 3 at the ZeRO
        level."""
        if depth == LEAF:
            return self.zero_s(c)
        if depth == LEAF - 1:
            return self.pipeline_s(c)
        if c.mbs is None:
            return self.degrees_s(c) if c.ep is not None else None
        return self.node_s(c, comm=c.recompute is not None)
