"""A straggler (a GPU group or link x% slower) and its cost on synchronous steps, with mitigations.

Synchronous training waits for the slowest: data-parallel replicas meet at every gradient
reduction, so a slow replica sets the step; inside a pipeline a slow stage paces the steady
state (every micro-batch passes it: the 1F1B bottleneck form M C_max + the others' ramp,
Narayanan et al. 2021, arXiv:2104.04473, sec. 2.2; other schedules by the simulator). A slower
link stretches the collectives whose ring crosses it (a ring runs at its slowest link's pace:
Patarasuk and Yuan 2009, "Bandwidth optimal all-reduce algorithms").

Mitigations the tool proposes, each re-timed with the straggler in place: an uneven batch (the
slow replica runs fewer micro-batches, in proportion to its speed: the straggler-aware split of
e.g. Harlap et al. 2016, "Addressing the straggler problem for iterative convergent parallel ML";
gradients then weigh replicas by their tokens), the slow node moved to the pipeline stage where
it costs least (the lightest: the ends hold a block fewer, Llama 3 sec. 3.3.2), and fewer layers
on the slow stage (the ranks' cycles balanced, min-max, as a mixed pipeline balances its GPU
types: ``explorer.hetero.balanced_layers``, held to the GPUs' memory where needed).
Left out: a slow GPU's effect on the collectives it joins (their time is the link's; only
their overlap windows grow with its compute, and a per-step collective stays exposed at least
as at speed: the step adds the slowest tail after the whole pipeline, so a tail shortened by
the slow rank's longer passes would shorten the step while that rank in fact ends later).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Literal

from explorer.comm.step import Collective
from explorer.compute import PassTimes
from explorer.estimate import (
    DEFAULT_ESTIMATE_ASSUMPTIONS,
    Estimate,
    EstimateAssumptions,
    estimate,
    time_step,
)
from explorer.estimate.stages import StageTime, step_tails_s
from explorer.hetero import balanced_layers, held_layers, rank_costs
from explorer.specs import ClusterSpec, Layout, MeshAxis, ModelSpec, TrainingWorkload

StragglerWhere = Literal["dp", "pp-stage", "link"]
STRAGGLER_WHERE: tuple[StragglerWhere, ...] = ("dp", "pp-stage", "link")


@dataclass(frozen=True, slots=True, kw_only=True)
class Straggler:
    """Where the step runs slower, and by how much."""

    slowdown: float
    """Extra time as a fraction: 0.1 means 10% slower (time x 1.1); 0 means no straggler."""
    where: StragglerWhere = "dp"
    """dp: every GPU of one data-parallel replica (a slow node holding it); pp-stage: the GPUs
    of one pipeline rank in one replica; link: the links of one pipeline rank's group on
    ``axis``."""
    stage: int = 0
    """Pipeline rank of the slow GPUs or link (pp-stage, link), 0-based."""
    axis: MeshAxis = "dp"
    """Mesh axis whose collectives cross the slow link (link)."""

    def __post_init__(self) -> None:
        if not 0 <= self.slowdown < math.inf:
            raise ValueError(f"slowdown must be zero or more, got {self.slowdown}")
        if self.where not in STRAGGLER_WHERE:
            raise ValueError(f"where must be one of {', '.join(STRAGGLER_WHERE)}, got {self.where}")
        if self.stage < 0:
            raise ValueError(f"stage must be zero or more, got {self.stage}")

    @property
    def factor(self) -> float:
        """Time multiplier on what is slow, 1 + slowdown."""
        return 1.0 + self.slowdown


@dataclass(frozen=True, slots=True, kw_only=True)
class Mitigation:
    """One way to run around the straggler, with the step it gives."""

    name: str
    """Short name: uneven-batch, move-slow-node, fewer-layers."""
    step_s: float
    """Step time with the straggler and this mitigation, s."""
    detail: str
    """One sentence: what changes (micro-batches per replica, the stage, the layer split)."""
    layout: Layout | None = None
    """The layout to run, when the mitigation changes it (fewer-layers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerCost:
    """A straggler's cost on the step and what the tool proposes against it."""

    straggler: Straggler
    baseline_step_s: float
    """Step time with every GPU and link at speed, s."""
    step_s: float
    """Step time with the straggler, s."""
    mitigations: tuple[Mitigation, ...]
    """Proposals, fastest first; empty when none applies."""

    @property
    def cost_fraction(self) -> float:
        """Step time lost to the straggler, step / baseline - 1, a fraction."""
        return self.step_s / self.baseline_step_s - 1.0 if self.baseline_step_s else 0.0


def slowed_passes(passes: PassTimes, factor: float) -> PassTimes:
    """Pass times of a GPU ``factor`` times slower: every compute second scaled (the kernel
    efficiency stays)."""
    scaled = {
        f.name: getattr(passes, f.name) * factor for f in fields(passes) if f.name.endswith("_s")
    }
    return replace(passes, **scaled)


def retimed(collective: Collective, time_s: float, passes: PassTimes) -> Collective:
    """``collective`` taking ``time_s`` and hiding behind ``passes`` (explorer.comm.step's
    exposure rule, ``Collective.exposed_for``)."""
    moved = replace(collective, time_s=time_s)
    return replace(moved, hidden_s=time_s - moved.exposed_for(passes))


def _at_least(slowed: Collective, at_speed: Collective) -> Collective:
    """A per-step collective (gradient reduction, parameter gathers once a step) exposed no
    less than at speed: its calls start as the slow GPU's longer passes make the gradients, so
    what they hide more is time the rank spends computing anyway, and the rank ends no earlier.
    The step adds the slowest tail after the whole pipeline's end, so re-timed alone a shorter
    tail would shorten the step (a slow rank 0 of Llama 3.1 405B, ZB-H1 at P 64: 39.9627 ->
    39.9559 s, 2026-12-04), and the search's certificate takes slowed >= at speed."""
    if at_speed.phase != "step" or slowed.exposed_s >= at_speed.exposed_s:
        return slowed
    return replace(slowed, hidden_s=slowed.time_s - at_speed.exposed_s)


def slowed_stage(stage: StageTime, compute_factor: float = 1.0, link_factor: float = 1.0,
                 axis: MeshAxis | None = None) -> StageTime:  # fmt: skip
    """``stage`` on GPUs ``compute_factor`` slower (compute and optimizer step) and with the
    collectives on ``axis`` ``link_factor`` slower; exposure re-timed, but a per-step
    collective exposed no less than at speed (``_at_least``)."""
    if compute_factor == 1.0 and link_factor == 1.0:
        return stage
    passes = slowed_passes(stage.compute, compute_factor)
    collectives = tuple(
        _at_least(retimed(c, c.time_s * (link_factor if c.axis == axis else 1.0), passes), c)
        for c in stage.collectives
    )
    return replace(
        stage, compute=passes, collectives=collectives,
        optimizer_s=stage.optimizer_s * compute_factor,
    )  # fmt: skip


def rank_parts(layout: Layout, rank: int, num_parts: int) -> tuple[int, ...]:
    """Parts pipeline rank ``rank`` runs: itself, or under DualPipe model stages r and P-1-r."""
    if layout.schedule == "dualpipe" and layout.pp > 1:
        return tuple(sorted({rank, num_parts - 1 - rank}))
    return (rank,)


def slowed_stages(
    stages: tuple[StageTime, ...], layout: Layout, straggler: Straggler, rank: int | None = None
) -> tuple[StageTime, ...]:
    """Every part's times with the straggler in place (on ``rank``, default its own stage)."""
    s = straggler
    if s.where == "dp":
        return tuple(slowed_stage(st, s.factor) for st in stages)
    slow = rank_parts(layout, s.stage if rank is None else rank, len(stages))
    if s.where == "pp-stage":
        return tuple(slowed_stage(st, s.factor) if i in slow else st for i, st in enumerate(stages))
    return tuple(
        slowed_stage(st, link_factor=s.factor, axis=s.axis) if i in slow else st
        for i, st in enumerate(stages)
    )


def step_s(stages: tuple[StageTime, ...], layout: Layout, microbatches: int,
           assumptions: EstimateAssumptions) -> float:  # fmt: skip
    """Pipelined part plus slowest tail of one replica with these part times, s."""
    pipe, tail = time_step(stages, layout, microbatches, assumptions.pipeline_model)
    return pipe.makespan_s + tail


FLOOR_MARGIN = 1e-9
"""Share taken off ``step_floor_s``: M durations summed in another order round differently
(and the periodic extrapolation is exact within 2^-45 of the makespan per iteration)."""


def step_floor_s(stages: tuple[StageTime, ...], layout: Layout, microbatches: int) -> float:
    """At most ``step_s`` of these part times, without simulating: a pipeline rank runs its
    actions one at a time, so the pipelined part lasts at least the busiest rank's compute,
    M cycles (F + B + W) of its part (DualPipe: M/2 of each of its two model stages), and the
    slowest tail follows it. Every micro-batch runs every (rank, chunk) of its route once and
    a chunk takes 1/V of its part (``explorer.schedules.times.StageTimes``); a part's cycle is
    ``StageTime.cycle_s``, what the simulator is given."""
    cycles = [s.cycle_s for s in stages]
    if layout.schedule == "dualpipe" and layout.pp > 1:
        p = len(cycles)
        busy = max(microbatches / 2 * (cycles[r] + cycles[p - 1 - r]) for r in range(p))
    else:
        busy = microbatches * max(cycles)
    return (busy + max(step_tails_s(stages, layout))) * (1 - FLOOR_MARGIN)


def uneven_batch(
    stages: tuple[StageTime, ...], layout: Layout, microbatches: int, straggler: Straggler,
    a: EstimateAssumptions,
) -> Mitigation | None:  # fmt: skip
    """The slow replica runs k micro-batches, the others share the rest (as even as integers
    allow): the k with the shortest step (the largest of equal ones); None without a gain."""
    dp, m = layout.dp, microbatches
    if dp == 1 or straggler.slowdown == 0:
        return None
    slow = slowed_stages(stages, layout, straggler)
    others: dict[int, float | None] = {}  # the other replicas' step at n micro-batches (None:
    # the schedule cannot run n); n = ceil((dp m - k) / (dp - 1)) repeats over k

    def other_s(n: int) -> float | None:
        if n not in others:
            try:
                others[n] = step_s(stages, layout, n, a)
            except ValueError:
                others[n] = None
        return others[n]

    # Every k in 1..m is a candidate; the step is max(slow replica at k, the others at n), so a
    # k whose others' step alone exceeds the best so far cannot win and its slow replica is not
    # timed. The answer is the k with the shortest step, the largest of equal ones, as a pass
    # over 1..m with "<=" picks; any order finds it. k runs down from m (the even split): the
    # others' step rises as k falls, so once it passes the best, the smaller k are settled by
    # their others' step alone (a few distinct n, cached), and only the k near the even split
    # are simulated for the slow replica (the bench's Llama 3.1 405B straggler, DP 8 and 256
    # micro-batches: 74 step timings, 294 going up from k = 1).
    best: tuple[float, int] | None = None
    for k in range(m, 0, -1):
        other = other_s(math.ceil((dp * m - k) / (dp - 1)))
        if other is None or (best is not None and other > best[0]):
            continue
        try:
            t = max(step_s(slow, layout, k, a), other)
        except ValueError:  # the schedule cannot run k micro-batches
            continue
        if best is None or t < best[0] or (t == best[0] and k > best[1]):
            best = (t, k)
    if best is None or best[1] == m:
        return None
    t, k = best
    detail = (
        f"the slow replica runs {k} micro-batches instead of {m}, the other "
        f"{'replica' if dp == 2 else f'{dp - 1} replicas'} {dp * m - k} in all; weigh each "
        f"replica's gradient by its tokens"
    )
    return Mitigation(name="uneven-batch", step_s=t, detail=detail)


def _move_slow_node(est: Estimate, straggler: Straggler, a: EstimateAssumptions) -> Mitigation:
    """The pipeline rank where the slow GPUs (or link) cost least."""
    layout = est.layout
    times = [
        step_s(slowed_stages(est.stages, layout, straggler, r), layout, est.microbatches, a)
        for r in range(layout.pp)
    ]
    best = min(range(layout.pp), key=times.__getitem__)
    what = "link" if straggler.where == "link" else "GPUs"
    detail = f"place the slow {what} on pipeline rank {best} instead of {straggler.stage}"
    return Mitigation(name="move-slow-node", step_s=times[best], detail=detail)


def _fewer_layers(
    model: ModelSpec, cluster: ClusterSpec, est: Estimate, workload: TrainingWorkload,
    straggler: Straggler, a: EstimateAssumptions,
) -> Mitigation | None:  # fmt: skip
    """Layers balanced over the ranks' cycles, the slow rank taking fewer: each rank's cycle
    its blocks x the per-block time plus what it holds beside them (the embedding, the head),
    the slow rank's all slowed, min-max (``explorer.hetero.balanced_layers`` on
    ``rank_costs``, as a mixed pipeline balances its types); where that split does not fit,
    each rank held to the blocks its GPU holds and balanced again (``held_layers``, checked by
    a fresh estimate). None when the layout cannot take an uneven split (DualPipe pairs model
    stages) or no such split fits."""
    layout = est.layout
    if layout.schedule == "dualpipe" or straggler.where != "pp-stage":
        return None
    factor = tuple(straggler.factor if r == straggler.stage else 1.0 for r in range(layout.pp))
    block_s, beside_s = rank_costs(est.stages)
    per_block = tuple(block_s * f for f in factor)
    extra = tuple(e * f for e, f in zip(beside_s, factor, strict=True))
    layers = balanced_layers(model.num_hidden_layers, per_block, extra)
    moved = replace(layout, stage_layers=layers)
    try:
        other = estimate(model, cluster, moved, workload, a)
    except ValueError:
        return None
    held = ""
    if not other.memory.fits:
        capacity = (float(cluster.gpu.memory_bytes),)
        held_split = held_layers((0,) * layout.pp, capacity, (est.memory,), (other.memory,),
                                 layers, per_block, extra)  # fmt: skip
        if held_split is None:
            return None
        layers = held_split
        moved = replace(layout, stage_layers=layers)
        try:
            other = estimate(model, cluster, moved, workload, a)
        except ValueError:
            return None
        if not other.memory.fits:
            return None
        held = ", held to the GPUs' memory"
    t = step_s(slowed_stages(other.stages, moved, straggler), moved, other.microbatches, a)
    counts = ",".join(map(str, layers))
    return Mitigation(name="fewer-layers", step_s=t, detail=f"layers per rank {counts}{held}",
                      layout=moved)  # fmt: skip


def straggler_cost(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    straggler: Straggler,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
) -> StragglerCost:
    """Step time of ``layout`` with ``straggler`` and the mitigations that shorten it, s.

    Raises ValueError (one sentence) for a stage outside the pipeline or a layout that cannot run.
    Source: module docstring.
    """
    if straggler.where != "dp" and straggler.stage >= layout.pp:
        raise ValueError(
            f"straggler stage {straggler.stage} is outside the {layout.pp} pipeline ranks"
        )
    est = estimate(model, cluster, layout, workload, assumptions)
    slow = step_s(slowed_stages(est.stages, layout, straggler), layout, est.microbatches,
                  assumptions)  # fmt: skip
    m = est.microbatches
    found: list[Mitigation | None] = [uneven_batch(est.stages, layout, m, straggler, assumptions)]
    if straggler.where != "dp" and layout.pp > 1 and straggler.slowdown > 0:
        found.append(_move_slow_node(est, straggler, assumptions))
        found.append(_fewer_layers(model, cluster, est, workload, straggler, assumptions))
    useful = sorted((m for m in found if m is not None and m.step_s < slow),
                    key=lambda m: m.step_s)  # fmt: skip
    return StragglerCost(
        straggler=straggler,
        baseline_step_s=est.step_time_s,
        step_s=slow,
        mitigations=tuple(useful),
    )


def straggler_dict(cost: StragglerCost) -> dict[str, object]:
    """The JSON object of a straggler's cost: seconds unrounded, fastest mitigation first."""
    s = cost.straggler
    return {
        "slowdown": s.slowdown,
        "where": s.where,
        "stage": s.stage,
        "axis": s.axis,
        "baseline_step_time_s": cost.baseline_step_s,
        "step_time_s": cost.step_s,
        "cost_fraction": cost.cost_fraction,
        "mitigations": [
            {"name": m.name, "step_time_s": m.step_s, "detail": m.detail} for m in cost.mitigations
        ],
    }


def straggler_sentence(cost: StragglerCost) -> str:
    """One sentence: what the straggler costs and the fastest mitigation (or that none helps)."""
    s = cost.straggler
    where = {"dp": "one data-parallel replica", "pp-stage": f"pipeline rank {s.stage}",
             "link": f"the {s.axis} links of pipeline rank {s.stage}"}[s.where]  # fmt: skip
    head = (
        f"With {where} {s.slowdown:.0%} slower the step takes {cost.step_s:.3f} s instead of "
        f"{cost.baseline_step_s:.3f} s ({cost.cost_fraction:+.1%})"
    )
    if not cost.mitigations:
        return head + "; no mitigation the tool knows shortens it."
    best = cost.mitigations[0]
    return (
        f"{head}; the best mitigation, {best.name}, ({best.detail}) brings it to "
        f"{best.step_s:.3f} s."
    )
