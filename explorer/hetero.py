"""Clusters that mix GPU types: data parallel across types, pipeline stages on different types.

A mixed cluster is a tuple of homogeneous groups (``ClusterSpec``: one GPU type, its nodes and
links). Two placements:
- data parallel across types (``hetero_dp``): every replica (TP x PP x CP GPUs) lies inside one
  group; replicas meet at the gradient reduction, so the step is the slowest replica's. The
  batch is split evenly (M micro-batches each) or in proportion to speed (each type's
  micro-batches per second at the even count; integer counts by min-max water-filling;
  gradients weighed by tokens), as heterogeneity-aware schedulers do (e.g. Jia et al. 2022,
  "Whale", USENIX ATC; Li et al. 2023, "HexiScale").
- pipeline stages on different types (``hetero_pp``): pipeline rank r on group g_r; layers
  split so that each rank's cycle (its layers x its type's per-layer time, plus the embedding
  or head it holds) is balanced, min-max (water-filling on times, ``balanced_layers``); where
  a type cannot hold its share, each rank is held to the blocks its GPU holds (bytes linear
  in blocks between the layout's own split and the balanced one, ``memory_caps``) and
  balanced again, checked exactly; the stages' times, each from its own type, go through
  the estimate's schedule step.
Each type is timed by ``explorer.estimate`` on that group's GPU and links (its collectives use
that group's fabric: a reduction spanning both groups is paced by the slower one, which the
max over types keeps only for the compute-bound part). Memory is checked per GPU type: every
stage against its own GPU. One group is today's estimate exactly (tests/test_hetero.py).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from explorer.estimate import (
    DEFAULT_ESTIMATE_ASSUMPTIONS,
    Estimate,
    EstimateAssumptions,
    time_step,
)
from explorer.estimate.stages import StageTime, stage_context, stage_times
from explorer.memory.training import TrainingMemory, microbatch_count, training_memory
from explorer.schedules.builders import microbatch_grid
from explorer.specs import ClusterSpec, Layout, ModelSpec, TrainingWorkload
from explorer.workload import ResolvedWorkload, resolve_workload

BatchSplit = Literal["even", "speed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeStep:
    """One GPU type's share of a mixed step."""

    gpu: str
    """GPU name."""
    replicas: int
    """Data-parallel replicas on this type (hetero_dp), or pipeline ranks (hetero_pp)."""
    microbatches: int
    """Micro-batches per replica (hetero_dp) or per pipeline (hetero_pp)."""
    step_s: float
    """Step of one of its replicas alone, s (hetero_dp); the pipeline's, s (hetero_pp)."""
    peak_bytes: float
    """Most bytes on one of its GPUs."""
    fits: bool
    """Whether that fits the GPU's memory."""


HELD_TO_MEMORY = "held to each GPU's memory: the split by speed alone does not fit"
"""How the estimate text and the report say ``HeteroStep.memory_held``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeteroStep:
    """A synchronous step on a mixed cluster."""

    step_s: float
    """Step time: the slowest replica (hetero_dp) or the mixed pipeline (hetero_pp), s."""
    types: tuple[TypeStep, ...]
    """Per group, in the cluster's order."""
    stage_layers: tuple[int, ...] | None = None
    """Layers per pipeline rank (hetero_pp)."""
    memory_held: bool = False
    """Whether those layers were held to what each rank's GPU holds (hetero_pp: the split
    balanced by speed alone did not fit; ``_refit``)."""

    @property
    def fits(self) -> bool:
        """Whether every GPU type holds its share."""
        return all(t.fits for t in self.types)


def _on(group: ClusterSpec, gpus: int) -> ClusterSpec:
    """``group``'s GPU and links, sized to hold ``gpus`` (a layout's world size)."""
    return replace(group, num_nodes=max(group.num_nodes, math.ceil(gpus / group.gpus_per_node)))


def _replicas(groups: tuple[ClusterSpec, ...], layout: Layout) -> tuple[int, ...]:
    """Data-parallel replicas each group holds; ValueError when they do not add up to DP."""
    size = layout.tp * layout.pp * layout.cp
    gpus = [g.gpus_per_node * g.num_nodes for g in groups]
    counts = tuple(n // size for n in gpus)
    if sum(counts) != layout.dp or any(n % size for n in gpus):
        raise ValueError(
            f"groups of {gpus} GPUs do not hold dp = {layout.dp} "
            f"replicas of tp x pp x cp = {size} GPUs each"
        )
    return counts


class _Parts(NamedTuple):
    """What ``hetero_dp`` and ``hetero_pp`` read of one type's estimate of a layout."""

    stages: tuple[StageTime, ...]
    memory: TrainingMemory | None
    """None where it was not asked for (``_parts``)."""
    microbatches: int


def _of(est: Estimate) -> _Parts:
    return _Parts(est.stages, est.memory, est.microbatches)


def _parts(model: ModelSpec, cluster: ClusterSpec, layout: Layout, workload: TrainingWorkload,
           a: EstimateAssumptions, memory: bool = True) -> _Parts:  # fmt: skip
    """``estimate(...)``'s stages, memory (unless ``memory`` is False) and micro-batches, by its
    own calls and inputs, without timing the layout's pipeline on this type alone
    (``explorer.estimate.core``)."""
    r = resolve_workload(layout, workload)
    bytes_ = _memory(model, cluster, layout, workload, a, r) if memory else None
    ctx = stage_context(model, cluster, layout, workload, a, resolved=r)
    return _Parts(stage_times(model, cluster, layout, workload, a, ctx), bytes_, r.microbatches)


def _memory(model: ModelSpec, cluster: ClusterSpec, layout: Layout, workload: TrainingWorkload,
            a: EstimateAssumptions, resolved: ResolvedWorkload | None = None,
            ) -> TrainingMemory:  # fmt: skip
    """``estimate(...)``'s own memory call."""
    return training_memory(
        model, cluster.gpu, layout, workload, a.memory, domain_size=cluster.domain_size,
        resolved=resolved or resolve_workload(layout, workload),
    )  # fmt: skip


def _step(est: _Parts, layout: Layout, microbatches: int, a: EstimateAssumptions) -> float:
    pipe, tail = time_step(est.stages, layout, microbatches, a.pipeline_model)
    return pipe.makespan_s + tail


def _speed_counts(
    ests: list[_Parts], layout: Layout, replicas: tuple[int, ...], total: int,
    a: EstimateAssumptions,
) -> tuple[int, ...]:  # fmt: skip
    """Most micro-batches on one replica of each type: the ``total`` over all replicas split in
    proportion to each type's speed, micro-batches per second of one replica at the even count
    (m / its even step), as counts the schedule runs (``microbatch_grid``: DualPipe an even
    count of at least 2P, DualPipeV at least 2P) with the least slowest count / speed (min-max
    water-filling in steps of the grid, from each type's least count); a type's replicas
    differ by at most one step. Two pipeline timings per type. Any count so held takes at
    least the fractional split's time, so the mixed search's bound (a lower bound) stands."""
    least, step = microbatch_grid(layout.schedule, layout.pp, layout.virtual_stages)
    spare, rest = divmod(total - least * sum(replicas), step)
    if spare < 0 or rest:  # the even count is off the grid: ``_step`` says why
        least, step, spare = 1, 1, total - sum(replicas)
    speeds = [e.microbatches / _step(e, layout, e.microbatches, a) if r else 0.0
              for e, r in zip(ests, replicas, strict=True)]  # fmt: skip
    weight = sum(r * v for r, v in zip(replicas, speeds, strict=True))
    open_ = [i for i, r in enumerate(replicas) if r]
    # units: steps above the least count, per type over its replicas (a proportional start)
    units = [max(0, (math.floor(total * r * v / weight) - r * least) // step) if r else 0
             for r, v in zip(replicas, speeds, strict=True)]  # fmt: skip

    def count(i: int, u: int) -> int:  # the most micro-batches on one of type i's replicas
        return least + step * math.ceil(u / replicas[i])

    while sum(units) > spare:  # a type held at its least count: the others give the steps
        slowest = max((i for i in open_ if units[i]), key=lambda i: count(i, units[i]) / speeds[i])
        units[slowest] -= 1
    for _ in range(spare - sum(units)):
        best = min(open_, key=lambda i: count(i, units[i] + 1) / speeds[i])
        units[best] += 1
    return tuple(
        count(i, u) if r else 0 for i, (u, r) in enumerate(zip(units, replicas, strict=True))
    )


def hetero_dp(
    model: ModelSpec,
    groups: tuple[ClusterSpec, ...],
    layout: Layout,
    workload: TrainingWorkload,
    split: BatchSplit = "even",
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    known: tuple[Estimate | None, ...] | None = None,
) -> HeteroStep:
    """Data parallel across GPU types: each group's replicas timed on its GPU, the batch split
    evenly or by speed, the step the slowest replica's, s; memory per type.

    ``known`` may hold, per group, the estimate of ``layout`` on ``_on(group, world)`` already
    made (the mixed search's); None entries are estimated here.
    Raises ValueError (one sentence) when the groups do not hold the layout's replicas.
    Source: module docstring.
    """
    replicas = _replicas(groups, layout)
    m = microbatch_count(layout, workload)
    given = known or (None,) * len(groups)
    # A type not estimated yet: the estimate's stages, and its memory at the even count only
    # where that count is kept (a speed split checks memory at each type's own count).
    ests = [_of(e) if e else _parts(model, _on(g, layout.world_size), layout, workload,
                                    assumptions, memory=split == "even")
            for g, e in zip(groups, given, strict=True)]  # fmt: skip
    counts = (m,) * len(groups)
    if split == "speed":
        counts = _speed_counts(ests, layout, replicas, m * layout.dp, assumptions)
    types = []
    for g, est, r, k in zip(groups, ests, replicas, counts, strict=True):
        sized = _on(g, layout.world_size)  # the estimate's own memory call, at k micro-batches
        memory = est.memory
        if k == m and memory is None:
            memory = _memory(model, sized, layout, workload, assumptions)
        elif k != m:
            share = replace(workload, global_batch_size=k * layout.dp * layout.micro_batch_size)
            memory = training_memory(
                model, sized.gpu, layout, share, assumptions.memory, domain_size=sized.domain_size
            )
        assert memory is not None
        types.append(TypeStep(gpu=g.gpu.name, replicas=r, microbatches=k,
                              step_s=_step(est, layout, k, assumptions),
                              peak_bytes=memory.peak_bytes, fits=memory.fits))  # fmt: skip
    return HeteroStep(step_s=max(t.step_s for t in types if t.replicas), types=tuple(types))


def _stages(model: ModelSpec, cluster: ClusterSpec, layout: Layout, workload: TrainingWorkload,
            a: EstimateAssumptions) -> tuple[StageTime, ...]:  # fmt: skip
    """``estimate(...).stages`` without its memory (the estimate's own two calls)."""
    return stage_times(model, cluster, layout, workload, a,
                       stage_context(model, cluster, layout, workload, a))  # fmt: skip


def rank_costs(stages: tuple[StageTime, ...]) -> tuple[float, tuple[float, ...]]:
    """(cycle per block on this type, per rank the cycle beyond its blocks: the embedding, the
    head), s per micro-batch, from the stage times of a layout on one type."""
    per_block = min(s.cycle_s / len(s.layers) for s in stages if s.layers)
    return per_block, tuple(max(0.0, s.cycle_s - len(s.layers) * per_block) for s in stages)


def balanced_layers(num_layers: int, per_block_s: tuple[float, ...],
                    extra_s: tuple[float, ...],
                    caps: tuple[int, ...] | None = None) -> tuple[int, ...]:  # fmt: skip
    """Blocks per pipeline rank, at least one each, minimising the slowest rank's cycle
    n_r x per_block_r + extra_r (one block at a time to the rank that ends it first: min-max;
    at equal cycles the first rank). A heap of each rank's cycle with one block more.
    ``caps``: at most that many blocks on each rank (a rank at its cap takes no more); the
    caps must hold ``num_layers`` together (ValueError otherwise)."""
    limits = caps or (num_layers,) * len(per_block_s)
    if sum(limits) < num_layers or min(limits) < 1:
        raise ValueError(f"caps {limits} do not hold {num_layers} blocks, one or more per rank")
    counts = [1] * len(per_block_s)
    after = [(2 * t + e, r) for r, (t, e) in enumerate(zip(per_block_s, extra_s, strict=True))
             if limits[r] > 1]  # fmt: skip
    heapq.heapify(after)  # (cycle, rank): the least cycle first, then the first rank
    for _ in range(num_layers - len(counts)):
        best = heapq.heappop(after)[1]
        counts[best] += 1
        if counts[best] < limits[best]:
            heapq.heappush(after, ((counts[best] + 1) * per_block_s[best] + extra_s[best], best))
    return tuple(counts)


def memory_caps(
    placement: tuple[int, ...], capacity: tuple[float, ...],
    even: tuple[TrainingMemory, ...], balanced: tuple[TrainingMemory, ...],
    layers: tuple[int, ...],
) -> tuple[int, ...] | None:  # fmt: skip
    """Most blocks each pipeline rank can hold on its type, from two splits' memory on every
    type: the layout's own (even) split and the balanced one. A rank's bytes are taken as
    linear in its blocks (its states and activations per block; what it holds beside the
    blocks fixed): the slope from its two splits, where they differ in its blocks, else the
    largest slope of its type's ranks. None where no slope is known on an over-full type."""
    slopes: list[float | None] = []
    for r, g in enumerate(placement):
        n_even = len(even[g].stages[r].layers)
        b_even, b_bal = even[g].stages[r].total_bytes, balanced[g].stages[r].total_bytes
        slopes.append((b_bal - b_even) / (layers[r] - n_even) if layers[r] != n_even else None)
    caps = []
    for r, g in enumerate(placement):
        slope = slopes[r]
        if slope is None or slope <= 0:
            known = [x for x, h in zip(slopes, placement, strict=True) if h == g and x and x > 0]
            if not known:
                if balanced[g].stages[r].total_bytes > capacity[g]:
                    return None
                caps.append(layers[r])  # fits as it is: no more blocks than it has
                continue
            slope = max(known)
        room = capacity[g] - balanced[g].stages[r].total_bytes
        caps.append(max(1, layers[r] + math.floor(room / slope)))
    return tuple(caps)


def held_layers(
    placement: tuple[int, ...], capacity: tuple[float, ...],
    even: tuple[TrainingMemory, ...], balanced: tuple[TrainingMemory, ...],
    layers: tuple[int, ...], per_block_s: tuple[float, ...], extra_s: tuple[float, ...],
) -> tuple[int, ...] | None:  # fmt: skip
    """``balanced_layers`` again with each rank held to what its GPU holds (``memory_caps``
    from the two splits' memory): the new split, or None where no capped split holds the
    blocks or it is the same split (the caller checks the new one's memory exactly)."""
    caps = memory_caps(placement, capacity, even, balanced, layers)
    if caps is None or sum(caps) < sum(layers):
        return None
    held = balanced_layers(sum(layers), per_block_s, extra_s, caps)
    return None if held == layers else held


def hetero_pp(
    model: ModelSpec,
    groups: tuple[ClusterSpec, ...],
    placement: tuple[int, ...],
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    known: tuple[Estimate | None, ...] | None = None,
    *,
    time_unfit: bool = True,
) -> HeteroStep:
    """Pipeline rank r on group ``placement[r]``: layers balanced over the types' speeds (held
    to what each rank's GPU holds where the balanced split does not fit: ``_refit``), each
    stage timed and its memory checked on its own GPU, the step through the schedule, s.

    With every rank on one type the layout's own split is kept (today's estimate).
    ``known`` may hold, per group, the estimate of ``layout`` (its own split) on
    ``_on(group, world)`` already made (the pipeline search's); across types only its stages
    are read, so the others are timed without their memory (the balanced split's is checked).
    ``time_unfit`` False: across types, a balanced split that some type cannot hold is not
    timed (every step infinite; memory per type as always), as the pipeline search reads.
    Raises ValueError (one sentence) for a placement that does not name a group per rank.
    Source: module docstring.
    """
    if len(placement) != layout.pp or not all(0 <= g < len(groups) for g in placement):
        raise ValueError(
            f"placement {placement} must name one of the {len(groups)} groups for each of the "
            f"{layout.pp} pipeline ranks"
        )
    if layout.schedule in ("dualpipe", "zb-v", "dualpipev") or layout.virtual_stages > 1:
        raise ValueError(f"mixed pipelines take one stage per rank, not {layout.schedule}")
    sized = [_on(g, layout.world_size) for g in groups]
    given = known or (None,) * len(groups)
    if len(set(placement)) > 1:
        costs = [rank_costs(e.stages if e else _stages(model, c, layout, workload, assumptions))
                 for c, e in zip(sized, given, strict=True)]  # fmt: skip
        per_block = tuple(costs[g][0] for g in placement)
        extra = tuple(costs[g][1][r] for r, g in enumerate(placement))
        layers = balanced_layers(model.num_hidden_layers, per_block, extra)
        layout = replace(layout, stage_layers=layers)
        # Only the stages and memory of each type are read: its own pipeline is not timed.
        # Memory first (``_parts``'s own calls): a split some type cannot hold may stop there.
        resolved = resolve_workload(layout, workload)
        memories = [_memory(model, c, layout, workload, assumptions, resolved) for c in sized]
        untimed = _untimed(groups, placement, memories, resolved.microbatches)
        held = False
        if not all(t.fits for t in untimed):  # the balanced split within each type's memory
            refit = _refit(model, sized, groups, placement, layout, workload, assumptions,
                           given, memories, per_block, extra)  # fmt: skip
            if refit is not None and all(t.fits for t in refit[3]):  # else the fastest split
                layers, layout, memories, untimed = refit
                held = True
        if not time_unfit and not all(t.fits for t in untimed):
            return HeteroStep(step_s=math.inf, types=tuple(untimed), stage_layers=layers)
        plain = [_Parts(stage_times(model, c, layout, workload, assumptions,
                                    stage_context(model, c, layout, workload, assumptions,
                                                  resolved=resolved)), mem, resolved.microbatches)
                 for c, mem in zip(sized, memories, strict=True)]  # fmt: skip
    else:
        held = False
        plain = [_of(e) if e else _parts(model, c, layout, workload, assumptions)
                 for c, e in zip(sized, given, strict=True)]  # fmt: skip
    stages = tuple(plain[g].stages[r] for r, g in enumerate(placement))
    pipe, tail = time_step(stages, layout, plain[0].microbatches, assumptions.pipeline_model)
    types = []
    for i, (g, est) in enumerate(zip(groups, plain, strict=True)):
        assert est.memory is not None  # _parts asked for it
        peak = _pp_peak(est.memory, placement, i)
        types.append(TypeStep(gpu=g.gpu.name, replicas=placement.count(i),
                              microbatches=est.microbatches,
                              step_s=pipe.makespan_s + tail, peak_bytes=peak,
                              fits=peak <= g.gpu.memory_bytes))  # fmt: skip
    return HeteroStep(step_s=pipe.makespan_s + tail, types=tuple(types),
                      stage_layers=layout.stage_layers, memory_held=held)  # fmt: skip


def _untimed(groups: tuple[ClusterSpec, ...], placement: tuple[int, ...],
             memories: list[TrainingMemory], microbatches: int) -> list[TypeStep]:  # fmt: skip
    """Each type's share of a mixed pipeline by its memory, its step not timed (infinite)."""
    untimed = []
    for i, (g, mem) in enumerate(zip(groups, memories, strict=True)):
        peak = _pp_peak(mem, placement, i)
        untimed.append(TypeStep(gpu=g.gpu.name, replicas=placement.count(i),
                                microbatches=microbatches, step_s=math.inf,
                                peak_bytes=peak, fits=peak <= g.gpu.memory_bytes))  # fmt: skip
    return untimed


def _refit(
    model: ModelSpec, sized: list[ClusterSpec], groups: tuple[ClusterSpec, ...],
    placement: tuple[int, ...], layout: Layout, workload: TrainingWorkload,
    a: EstimateAssumptions, given: tuple[Estimate | None, ...],
    memories: list[TrainingMemory], per_block: tuple[float, ...], extra: tuple[float, ...],
) -> tuple[tuple[int, ...], Layout, list[TrainingMemory], list[TypeStep]] | None:  # fmt: skip
    """The balanced split again with each rank held to the blocks its GPU can hold
    (``memory_caps`` from the layout's own split and the balanced one), checked exactly:
    (layers, layout, memories, per-type shares), or None where no capped split differs or
    holds the blocks. One or two memory calls per type."""
    own = replace(layout, stage_layers=None)
    even = tuple(e.memory if e is not None else _memory(model, c, own, workload, a)
                 for c, e in zip(sized, given, strict=True))  # fmt: skip
    assert layout.stage_layers is not None  # hetero_pp's balanced split
    capacity = tuple(float(g.gpu.memory_bytes) for g in groups)
    layers = held_layers(placement, capacity, even, tuple(memories), layout.stage_layers,
                         per_block, extra)  # fmt: skip
    if layers is None:
        return None
    layout = replace(layout, stage_layers=layers)
    resolved = resolve_workload(layout, workload)
    memories = [_memory(model, c, layout, workload, a, resolved) for c in sized]
    return layers, layout, memories, _untimed(groups, placement, memories, resolved.microbatches)


def _pp_peak(memory: TrainingMemory, placement: tuple[int, ...], group: int) -> float:
    """Most bytes on one GPU of ``group``: its pipeline ranks' stages, B (0 without ranks)."""
    return max((memory.stages[r].total_bytes for r, g in enumerate(placement) if g == group),
               default=0.0)  # fmt: skip


def parse_groups(text: str) -> tuple[tuple[str, int], ...]:
    """``"hgx-h100:4,dgx-a100:4"`` as (cluster preset, nodes) pairs; ValueError otherwise."""
    pairs = []
    for item in text.split(","):
        name, _, nodes = item.partition(":")
        if not name or not nodes.isdigit() or int(nodes) < 1:
            raise ValueError(f"mixed groups are PRESET:NODES separated by commas, got {item!r}")
        pairs.append((name.strip(), int(nodes)))
    return tuple(pairs)


def hetero_dict(step: HeteroStep, mode: str, split: str) -> dict[str, object]:
    """The JSON object of a mixed step: seconds and bytes unrounded, one entry per group."""
    types = [
        {"gpu": t.gpu, "replicas": t.replicas, "microbatches": t.microbatches,
         "step_time_s": t.step_s, "peak_bytes": t.peak_bytes, "fits": t.fits}
        for t in step.types
    ]  # fmt: skip
    return {
        "mode": mode,
        "split": split,
        "step_time_s": step.step_s,
        "fits": step.fits,
        "stage_layers": list(step.stage_layers) if step.stage_layers else None,
        "memory_held": step.memory_held,
        "types": types,
    }
