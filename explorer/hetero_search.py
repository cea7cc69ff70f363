"""The mesh search on a mixed cluster, and with a straggler: layouts ranked by the step they get.

Both wrap the mesh search (``explorer.search.core.resumable_search``: ``search``'s own branch
and bound, ranked further on demand) and re-rank what it ranks, with a certificate that the
re-ranked top is exact:

- mixed cluster, data parallel across types (``explorer.hetero.hetero_dp``): the search runs on
  each GPU type's cluster (its GPU and links, sized to the whole world, as ``hetero_dp`` times
  it) for its K fastest layouts; the union is timed on the mixed cluster, memory checked on
  every type. A layout outside type g's K has a step on g of at least g's K-th, ``last_g``.
  With an even batch the mixed step is the slowest type's, so it is at least ``max_g last_g``;
  with a speed split (counts in proportion to each type's micro-batches per second at the even
  count m, ``hetero._speed_counts``, held to counts the schedule runs) the slowest type runs
  k <= m micro-batches and k / speed is at least N / sum_g(n_g / step_g) (n_g its GPUs), the
  split's value were counts fractional (rounding and the schedule's grid only add); a step per
  micro-batch that does not grow as the count falls (the pipeline fill amortised, the (M + p - 1)
  form of Narayanan et al. 2021 sec. 2.2) makes that harmonic mean of ``last_g`` the bound
  (a named assumption: rounding and the simulated schedules may leave it a little loose).
  When the ``ranked``-th mixed step is within that bound the top is exact;
  otherwise K grows (up to ``MAX_K``) and the result says when it is not certain. Each
  type's K is its own: under a speed split a much slower type is first searched for its best
  layout alone (``SLOW_START``; its last_g is then its best step), the fastest for more
  (``FAST_START``), and ``_more`` asks more of the type that needs the fewest. A type's
  search is one ``explorer.search.core.resumable_search``: asked for more, it goes on from
  its last K (its first K are ``search(..., ranked=K)``'s), so a longer K costs only the
  layouts beyond.
- a straggler (``explorer.straggler``): its step with the slow part in place is taken as at
  least the step at speed (every slowed compute second is scaled by 1 + slowdown >= 1, and a
  per-step collective stays exposed at least as at speed: ``explorer.straggler._at_least``;
  without that a slow rank that held the longest tail shortened the step, by up to 0.0171% on
  the 1,065 layout and straggler pairs checked on 2026-12-04, none with it), so the same
  certificate holds against the search's own K-th step; at 0% the ranking is today's. Within
  the K ranked, the straggler's own floor (``explorer.straggler.step_floor_s``) decides which
  are timed.

Named assumptions: every GPU type must hold the even split's micro-batches (a speed split gives
the slower type fewer, so this is the stricter check); groups of one GPU type and links are one
group (a homogeneous "mixed" cluster is today's cluster, and its search today's search); a
replica (TP x PP x CP GPUs) lies inside one group, so dp = 1 layouts across types are left out
(``explorer.hetero.hetero_pp`` times those, outside the search).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import reduce
from typing import Literal

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, Estimate, EstimateAssumptions
from explorer.estimate.stages import StageTime
from explorer.hetero import BatchSplit, HeteroStep, _on, hetero_dp, hetero_pp
from explorer.limits import MAX_GPUS
from explorer.mesh import SearchSpace
from explorer.search.core import resumable_search, without_gc
from explorer.specs import ClusterSpec, Layout, ModelSpec, TrainingWorkload
from explorer.straggler import (
    Straggler,
    StragglerCost,
    slowed_stages,
    step_floor_s,
    step_s,
    straggler_cost,
)
from explorer.units import GiB

MAX_K = 160
"""Most layouts asked of one type's search before the re-ranked top is reported uncertain."""


Rank = Callable[[int], tuple[tuple[Estimate, ...], int]]
"""One type's search, ranked further on each call: K -> (its K fastest, layouts evaluated)."""


def _resumable(model: ModelSpec, cluster: ClusterSpec, workload: TrainingWorkload, world: int,
               space: SearchSpace, assumptions: EstimateAssumptions) -> Rank:  # fmt: skip
    """``explorer.search.core.resumable_search`` of one type's cluster, started on first use."""
    started: list[Rank] = []

    def rank(k: int) -> tuple[tuple[Estimate, ...], int]:
        if not started:
            started.append(resumable_search(model, cluster, workload, num_gpus=world,
                                            space=space, assumptions=assumptions))  # fmt: skip
        return started[0](k)

    return rank


@dataclass(frozen=True, slots=True, kw_only=True)
class MixedRow:
    """One layout on the mixed cluster."""

    layout: Layout
    step_s: float
    """Mixed step, s (the slowest replica's)."""
    hetero: HeteroStep
    """Per GPU type: replicas, micro-batches, step, peak bytes, fits."""
    tokens_per_s: float
    placement: tuple[int, ...] | None = None
    """Group of each pipeline rank (a pipeline across types), else None."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MixedSearch:
    """Layouts ranked by their mixed-cluster step, and how sure that order is."""

    groups: tuple[ClusterSpec, ...]
    """The cluster's groups, one per GPU type (equal types merged)."""
    split: BatchSplit
    rows: tuple[MixedRow, ...]
    """Fastest first."""
    rejected: tuple[tuple[Layout, str], ...]
    """Layouts the types' searches ranked that the mixed cluster cannot run, with why."""
    bound_s: float
    """Every layout not looked at takes at least this long on the mixed cluster, s."""
    certain: bool
    """Whether ``rows`` are exactly the fastest layouts (the last within ``bound_s``)."""
    searched: int
    """Layouts each type's search ranked (K)."""
    elapsed_s: float
    mode: Literal["dp", "pp"] = "dp"
    """dp: data parallel across the types; pp: pipeline ranks on different types."""
    evaluated: int = 0
    """Layouts one type's search considered (ranked or rejected by a rule), the most over the
    types' searches: the size of the space searched."""


def merge_groups(groups: tuple[ClusterSpec, ...]) -> tuple[ClusterSpec, ...]:
    """Groups of the same GPU and links as one group with their nodes added, first seen first."""
    merged: list[ClusterSpec] = []
    for g in groups:
        for i, m in enumerate(merged):
            if replace(m, num_nodes=1, name="") == replace(g, num_nodes=1, name=""):
                merged[i] = replace(m, num_nodes=m.num_nodes + g.num_nodes)
                break
        else:
            merged.append(g)
    return tuple(merged)


def _gpus(g: ClusterSpec) -> int:
    return g.gpus_per_node * g.num_nodes


def _mixed_space(space: SearchSpace, groups: tuple[ClusterSpec, ...]) -> SearchSpace:
    """Only TP and PP degrees that divide every group's GPUs (a replica lies in one group)."""
    if len(groups) == 1:
        return space
    common = reduce(math.gcd, (_gpus(g) for g in groups))
    divisors = tuple(d for d in range(1, common + 1) if common % d == 0)

    def keep(values: tuple[int, ...] | None) -> tuple[int, ...]:
        kept = tuple(v for v in (values or divisors) if common % v == 0)
        if not kept:
            raise ValueError(
                f"no TP or PP degree asked for divides {common}, the GPUs every group shares"
            )
        return kept

    return replace(space, tp_values=keep(space.tp_values), pp_values=keep(space.pp_values))


Ranked = tuple[Estimate, ...]
"""A type's search's ranked estimates, fastest first."""


def _last(ranked: Ranked, k: int) -> float:
    """The K-th ranked step, or infinity when the search ranked everything that fits."""
    return ranked[-1].step_time_s if len(ranked) >= k else math.inf


def _harmonic(groups: tuple[ClusterSpec, ...], steps: list[float]) -> float:
    """N / sum_g(n_g / step_g): the mixed step of a speed split whose types take these steps at
    the even count, s (module docstring)."""
    return sum(_gpus(g) for g in groups) / sum(
        _gpus(g) / t for g, t in zip(groups, steps, strict=True)
    )


@without_gc
def mixed_search(
    model: ModelSpec,
    groups: tuple[ClusterSpec, ...],
    workload: TrainingWorkload,
    *,
    split: BatchSplit = "even",
    space: SearchSpace | None = None,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    ranked: int = 10,
) -> MixedSearch:
    """The ``ranked`` fastest layouts on a mixed cluster, data parallel across its types.

    Raises ValueError (one sentence) for an empty cluster, a bad space, or a search that fails.
    Source: module docstring (the certificate); ``explorer.hetero.hetero_dp`` (the step).
    """
    start = time.perf_counter()
    if not groups:
        raise ValueError("a mixed cluster needs at least one group of GPUs")
    if ranked < 1:
        raise ValueError(f"ranked must be at least 1, got {ranked}")
    merged = merge_groups(groups)
    world = sum(_gpus(g) for g in merged)
    if world > MAX_GPUS:
        raise ValueError(f"the mixed cluster has {world:,} GPUs, more than this tool's limit of "
                         f"{MAX_GPUS:,}")  # fmt: skip
    sized = tuple(_on(g, world) for g in merged)
    chosen = _mixed_space(space or SearchSpace(), merged)
    # Even split: the slowest type's search alone bounds what it leaves out (max_g >= any g),
    # so it runs first and the others only when that is not enough.
    slow_first = sorted(range(len(sized)), key=lambda i: sized[i].gpu.bf16_flops_per_s)
    # The speed split's bound is looser (a harmonic mean): it starts from more layouts.
    k = max(2 * ranked, 20) if split == "even" else max(4 * ranked, 40)
    seen: dict[Layout, HeteroStep | str] = {}  # mixed steps (or why not) already timed
    results: list[Ranked | None] = [None] * len(sized)
    ks = [0] * len(sized)  # K each type's search ranked (0: not run)
    evaluated = 0
    # One search per type, ranked further when the bound needs more of it (``resumable_search``:
    # its first K are ``search(..., ranked=K)``'s, so a longer K costs only the layouts beyond).
    searches = [_resumable(model, c, workload, world, chosen, assumptions) for c in sized]

    def run(i: int, k: int) -> None:
        nonlocal evaluated
        results[i], found = searches[i](k)
        ks[i] = k
        evaluated = max(evaluated, found)

    def settle() -> tuple[list[MixedRow], list[tuple[Layout, str]], dict[int, float], float, bool]:
        rows, rejected = _rerank(model, merged, workload, split, assumptions, results, seen)
        lasts = {i: _last(r, ks[i]) for i, r in enumerate(results) if r is not None}
        # A type whose search ranked all it holds leaves nothing outside that can run.
        bound = (max(lasts.values()) if split == "even" or math.inf in lasts.values()
                 else _harmonic(merged, [lasts[i] for i in range(len(merged))]))  # fmt: skip
        certain = bound == math.inf or (len(rows) >= ranked and rows[ranked - 1].step_s <= bound)
        return rows, rejected, lasts, bound, certain

    for i in slow_first[:1] if split == "even" else slow_first:
        # Speed split: the harmonic bound weighs each type by n_g / last_g^2, so the fastest
        # type's K-th step must climb furthest above its best; it starts from more layouts
        # (FAST_START x K: one search where a second, longer one was often needed), and the
        # slower types from SLOW_START (their best step: a type that takes twice as long per
        # layout moves the bound a quarter as much per second its K-th step climbs).
        if split == "even":
            run(i, k)
        elif i == slow_first[-1]:
            run(i, math.ceil(FAST_START * k))
        else:
            run(i, SLOW_START if _weight(merged[i]) <= SLOW_WEIGHT * _weight(merged[slow_first[-1]])
                else k)  # fmt: skip
    rows, rejected, lasts, bound, certain = settle()
    if not certain and split == "even" and len(sized) > 1:
        for i in slow_first[1:]:
            run(i, k)
        rows, rejected, lasts, bound, certain = settle()
    # Then each round asks more layouts of the type that reaches the bound needed soonest
    # (``_more``): the certificate is the same; its search goes on from its last K.
    while not certain:
        wanted = rows[ranked - 1].step_s if len(rows) >= ranked else math.inf
        more = _more(merged, split, results, ks, lasts, wanted, k)
        if not more:
            break
        for i, more_k in more.items():
            run(i, more_k)
        rows, rejected, lasts, bound, certain = settle()
    k = max(ks)
    return MixedSearch(
        groups=merged, split=split, rows=tuple(rows[:ranked]), rejected=tuple(rejected),
        bound_s=bound, certain=certain, searched=k, elapsed_s=time.perf_counter() - start,
        evaluated=evaluated,
    )  # fmt: skip


FAST_START = 1.35
"""The speed split's first K for the fastest type, times the start K (a choice of speed, not
of the ranking: on the bench's Llama 3.1 70B, 405B and DeepSeek-V3 mixes the certificate holds
after one search of 34, 52 and 53 of its layouts against the slower type's best alone, the
least such K, 2026-12-04; 34, 52 and 63 before the split held DualPipe to even counts, when
this was 1.6)."""


def _weight(g: ClusterSpec) -> float:
    """A type's expected weight in the harmonic bound's slope, n_g / step_g^2, up to a common
    factor: its GPUs times its dense BF16 peak squared (the step taken as inversely
    proportional to the peak: a guess that only sets where the speed split's search starts)."""
    return _gpus(g) * g.gpu.bf16_flops_per_s**2


SLOW_WEIGHT = 0.25
"""A slower type starts from SLOW_START when its ``_weight`` is at most this share of the
fastest type's (the bench's A100s against H100s or H800s: 0.1), else from the start K (a
choice of speed, not of the ranking)."""
SLOW_START = 1
"""The speed split's first K for the slower types: their best layout (a choice of speed, not
of the ranking, made when every search started from scratch: on the bench's mixes the slower
type's 40 fastest instead of 1 saved the fastest type 28, 13 and 15 layouts, far less time
than the slower type's longer search took). When the bound needs more of a slower type, its
search goes on to the start K (``_more``). The start Ks also set which layouts the types'
searches ranked, and so ``rejected``: they are kept as they were."""
EXTRAPOLATE_MARGIN = 2.0
"""How far past the extrapolated K a type's search goes next (a guess too short costs one
more round, one too long layouts ranked for nothing; a choice of speed, not of the
ranking)."""


def _reach(ranked: Ranked, k: int, needed_s: float) -> int:
    """The K at which a type's search is expected to rank a step of ``needed_s``: its ranked
    steps extended along the slope of their last half (at least K + K / 4, at most MAX_K)."""
    steps = [e.step_time_s for e in ranked]
    half = len(steps) // 2
    slope = (steps[-1] - steps[half - 1]) / (len(steps) - half) if half else 0.0
    if slope <= 0 or not math.isfinite(needed_s):
        return min(2 * k, MAX_K)
    guess = k + math.ceil(EXTRAPOLATE_MARGIN * (needed_s - steps[-1]) / slope)
    return min(max(guess, k + max(k // 4, 1)), MAX_K)


def _more(
    groups: tuple[ClusterSpec, ...], split: BatchSplit, results: list[Ranked | None],
    ks: list[int], lasts: dict[int, float], wanted_s: float, start: int,
) -> dict[int, int]:  # fmt: skip
    """The next K of the types to search again, {} when none can rank more.

    The bound needs the ``ranked``-th step ``wanted_s``: with the others' K-th steps held, type g
    must reach ``wanted_s`` (even split: the bound is a max) or n_g / (N / wanted_s -
    sum_h!=g n_h / last_h) (speed split: the harmonic bound solved for g). The type whose
    search is expected to get there with the fewest more layouts goes again; when none can
    alone (or fewer than ``ranked`` rows are known), every type's K doubles, as it always did.
    A type searched for fewer than ``start`` layouts (SLOW_START) has too few steps to extend:
    its next K is ``start``.
    """
    open_ = [i for i, k in enumerate(ks) if 0 < k < MAX_K]

    def doubled(i: int) -> int:
        return min(max(2 * ks[i], start), MAX_K)

    if not math.isfinite(wanted_s):
        return {i: doubled(i) for i in open_}
    world = sum(_gpus(g) for g in groups)
    options = []
    for i in open_:
        result = results[i]
        assert result is not None
        if split == "even":
            needed = wanted_s
        else:
            rest = sum(_gpus(groups[h]) / lasts[h] for h in lasts if h != i)
            room = world / wanted_s - rest
            if room <= 0:
                continue  # the others' K-th steps alone keep the bound below wanted_s
            needed = _gpus(groups[i]) / room
        k = _reach(result, ks[i], needed) if ks[i] >= start else min(start, MAX_K)
        options.append((k - ks[i], i, k))
    if not options:
        return {i: doubled(i) for i in open_}
    _, i, k = min(options)
    return {i: k}


def _rerank(
    model: ModelSpec, groups: tuple[ClusterSpec, ...], workload: TrainingWorkload,
    split: BatchSplit, a: EstimateAssumptions, results: list[Ranked | None],
    seen: dict[Layout, HeteroStep | str],
) -> tuple[list[MixedRow], list[tuple[Layout, str]]]:  # fmt: skip
    """Every layout the types' searches ranked, timed on the mixed cluster, fastest first."""
    known: dict[Layout, list[Estimate | None]] = {}
    order: list[Layout] = []
    for i, result in enumerate(results):
        for e in result or ():
            if e.layout not in known:
                known[e.layout] = [None] * len(groups)
                order.append(e.layout)
            known[e.layout][i] = e
    rows, rejected = [], []
    for layout in order:
        if layout not in seen:
            try:
                seen[layout] = hetero_dp(model, groups, layout, workload, split, a,
                                         tuple(known[layout]))  # fmt: skip
            except ValueError as error:
                seen[layout] = str(error)
        step = seen[layout]
        if isinstance(step, str):
            rejected.append((layout, step))
            continue
        if not step.fits:
            short = [t for t in step.types if not t.fits]
            rejected.append((layout, "; ".join(
                f"needs {t.peak_bytes / GiB:.1f} GiB on the {t.gpu}" for t in short)))  # fmt: skip
            continue
        tokens = workload.global_batch_size * workload.seq_len / step.step_s
        rows.append(MixedRow(layout=layout, step_s=step.step_s, hetero=step, tokens_per_s=tokens))
    rows.sort(key=lambda r: r.step_s)  # stable: ties keep the searches' order
    return rows, rejected


# ---------------------------------------------------------------------------------------------
# A pipeline across the types.

ONE_STAGE_PER_RANK = ("dualpipe", "zb-v", "dualpipev")
"""Schedules ``hetero_pp`` does not take (two model stages per rank)."""


def contiguous_placement(groups: tuple[ClusterSpec, ...], layout: Layout) -> tuple[int, ...]:
    """Pipeline ranks on the groups in their order, each group holding n_g / (TP x CP x DP)
    ranks; ValueError (one sentence) when a group does not hold a whole number of ranks."""
    per_rank = layout.tp * layout.cp * layout.dp
    counts = [_gpus(g) // per_rank for g in groups]
    if any(_gpus(g) % per_rank for g in groups) or sum(counts) != layout.pp or 0 in counts:
        raise ValueError(
            f"groups of {[_gpus(g) for g in groups]} GPUs do not hold whole pipeline ranks of "
            f"tp x cp x dp = {per_rank} GPUs, one type per rank, pp = {layout.pp} in all"
        )
    return tuple(i for i, n in enumerate(counts) for _ in range(n))


def mixed_step(
    model: ModelSpec, groups: tuple[ClusterSpec, ...], layout: Layout,
    workload: TrainingWorkload, mode: Literal["dp", "pp"] = "dp", split: BatchSplit = "even",
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
) -> HeteroStep:  # fmt: skip
    """One layout on the mixed cluster: data parallel across the types (``hetero_dp``) or its
    pipeline ranks on the types in the groups' order (``hetero_pp``); ValueError (one
    sentence) when the groups cannot hold it."""
    merged = merge_groups(groups)
    if mode == "dp":
        return hetero_dp(model, merged, layout, workload, split, assumptions)
    return hetero_pp(model, merged, contiguous_placement(merged, layout), layout, workload,
                     assumptions)  # fmt: skip


@without_gc
def pipeline_search(
    model: ModelSpec,
    groups: tuple[ClusterSpec, ...],
    workload: TrainingWorkload,
    *,
    space: SearchSpace | None = None,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    ranked: int = 10,
) -> MixedSearch:
    """Layouts whose pipeline ranks lie on different types (the groups' order, layers balanced
    by ``explorer.hetero.hetero_pp``), ranked among the K fastest of each type's own search.

    Not certain: a balanced split across types has no lower bound from one type's step (the
    even split a type's search times may be slower than a balanced one), so the result says
    ``certain`` False unless the cluster is one type (then it is today's search).
    Raises ValueError (one sentence) as ``mixed_search`` does.
    """
    start = time.perf_counter()
    merged = merge_groups(groups)
    if len(merged) == 1:
        return replace(mixed_search(model, merged, workload, space=space,
                                    assumptions=assumptions, ranked=ranked), mode="pp")  # fmt: skip
    world = sum(_gpus(g) for g in merged)
    if world > MAX_GPUS:
        raise ValueError(f"the mixed cluster has {world:,} GPUs, more than this tool's limit of "
                         f"{MAX_GPUS:,}")  # fmt: skip
    base = space or SearchSpace()
    schedules = tuple(x for x in base.schedules if x not in ONE_STAGE_PER_RANK) or ("1f1b",)
    pps = tuple(d for d in range(len(merged), world + 1)
                if world % d == 0 and (base.pp_values is None or d in base.pp_values))  # fmt: skip
    if not pps:
        raise ValueError(f"no pipeline degree asked for is at least {len(merged)}, one per type")
    tps = _mixed_space(replace(base, pp_values=None), merged).tp_values
    chosen = replace(base, schedules=schedules, max_virtual=1, pp_values=pps, tp_values=tps)
    k = max(2 * ranked, 20)
    rows: list[MixedRow] = []
    rejected: list[tuple[Layout, str]] = []
    seen: set[Layout] = set()
    sized = tuple(_on(g, world) for g in merged)
    searches = [_resumable(model, c, workload, world, chosen, assumptions) for c in sized]
    ranked_by: list[Ranked] = [()] * len(merged)  # each type's search, fastest first
    evaluated = 0
    # Layouts near a type's memory often do not fit once the faster type takes more layers:
    # K doubles until ``ranked`` fit or K reaches MAX_K, each round reading every type's K
    # fastest. Each type's search is ranked further round by round (``resumable_search``: its
    # first K are ``search(..., ranked=K)``'s), so it ranks no more than the rounds read.
    while True:
        for i in range(len(sized)):
            ranked_by[i], found = searches[i](k)
            evaluated = max(evaluated, found)
        _pipelines(model, merged, workload, assumptions, ranked_by, rows, rejected, seen)
        if len(rows) >= ranked or k >= MAX_K:
            break
        k *= 2
    rows.sort(key=lambda r: r.step_s)
    return MixedSearch(
        groups=merged, split="even", rows=tuple(rows[:ranked]), rejected=tuple(rejected),
        bound_s=0.0, certain=False, searched=k, elapsed_s=time.perf_counter() - start,
        mode="pp", evaluated=evaluated,
    )  # fmt: skip


def _pipelines(
    model: ModelSpec, merged: tuple[ClusterSpec, ...], workload: TrainingWorkload,
    assumptions: EstimateAssumptions, firsts: list[Ranked], rows: list[MixedRow],
    rejected: list[tuple[Layout, str]], seen: set[Layout],
) -> None:  # fmt: skip
    """Time on the mixed pipeline every layout of the types' K fastest (``firsts``, type by
    type) not seen yet, fitting ones as rows, the others rejected. A type's estimate of a
    layout is reused where that type's search ranked it (only its stages are read, as a fresh
    estimate's: the rows do not depend on which search ranked it first)."""
    by_type = [{e.layout: e for e in r} for r in firsts]
    for first in firsts:
        for e in first:
            if e.layout in seen:
                continue
            seen.add(e.layout)
            try:
                placement = contiguous_placement(merged, e.layout)
                step = hetero_pp(
                    model,
                    merged,
                    placement,
                    e.layout,
                    workload,
                    assumptions,
                    tuple(index.get(e.layout) for index in by_type),
                    time_unfit=False,
                )  # a rejected one's step is not read
            except ValueError as error:
                rejected.append((e.layout, str(error)))
                continue
            if not step.fits:
                rejected.append((e.layout, "; ".join(f"needs {t.peak_bytes / GiB:.1f} GiB on "
                                 f"the {t.gpu}" for t in step.types if not t.fits)))  # fmt: skip
                continue
            tokens = workload.global_batch_size * workload.seq_len / step.step_s
            rows.append(MixedRow(layout=e.layout, step_s=step.step_s, hetero=step,
                                 tokens_per_s=tokens, placement=placement))  # fmt: skip


# ---------------------------------------------------------------------------------------------
# A straggler.


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerRow:
    layout: Layout
    baseline_step_s: float
    """Step at speed, s (the search's)."""
    step_s: float
    """Step with the straggler in place, s."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerSearch:
    """Layouts ranked by their step with a straggler, the top one's cost and mitigations."""

    straggler: Straggler
    rows: tuple[StragglerRow, ...]
    rejected: tuple[tuple[Layout, str], ...]
    top: StragglerCost | None
    """The fastest layout's cost and the mitigations the tool proposes for it."""
    bound_s: float
    certain: bool
    searched: int
    elapsed_s: float
    evaluated: int = 0
    """Layouts the search considered (ranked or rejected by a rule)."""


@without_gc
def straggler_search(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    straggler: Straggler,
    *,
    num_gpus: int | None = None,
    space: SearchSpace | None = None,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    ranked: int = 10,
) -> StragglerSearch:
    """The ``ranked`` fastest layouts with ``straggler`` in place; at 0% today's ranking.

    Raises ValueError (one sentence) as ``explorer.search.search`` does.
    Source: module docstring (the certificate); ``explorer.straggler`` (the slowed step).
    """
    start = time.perf_counter()
    if ranked < 1:
        raise ValueError(f"ranked must be at least 1, got {ranked}")
    k = max(2 * ranked, 20)
    # One search ranked further while the certificate needs more (``resumable_search``).
    gpus = cluster.world_size if num_gpus is None else num_gpus
    rank = _resumable(model, cluster, workload, gpus, space or SearchSpace(), assumptions)
    while True:
        estimates, evaluated = rank(k)
        rejected: list[tuple[Layout, str]] = []
        floors: list[tuple[float, int, Estimate, tuple[StageTime, ...]]] = []
        for i, e in enumerate(estimates):
            if straggler.where != "dp" and straggler.stage >= e.layout.pp:
                rejected.append((e.layout, f"the straggler's stage {straggler.stage} is outside "
                                           f"its {e.layout.pp} pipeline ranks"))  # fmt: skip
                continue
            slowed = slowed_stages(e.stages, e.layout, straggler)
            # The slowed step is at least the busiest rank's compute plus the slowest tail
            # (``step_floor_s``, from the slowed times themselves). Taken lowest floor first,
            # once a floor exceeds the ranked-th slowed step so far no later layout enters the
            # top, and its step is not simulated.
            floors.append((step_floor_s(slowed, e.layout, e.microbatches), i, e, slowed))
        floors.sort(key=lambda f: (f[0], f[1]))
        timed: list[tuple[float, int, StragglerRow]] = []
        slowest: list[float] = []  # max-heap (negated) of the ``ranked`` fastest slowed steps
        for floor, i, e, slowed in floors:
            if len(slowest) == ranked and floor > -slowest[0]:
                break
            slow = step_s(slowed, e.layout, e.microbatches, assumptions)
            row = StragglerRow(layout=e.layout, baseline_step_s=e.step_time_s, step_s=slow)
            timed.append((slow, i, row))
            heapq.heappush(slowest, -slow)
            if len(slowest) > ranked:
                heapq.heappop(slowest)
        rows = [row for _, _, row in sorted(timed, key=lambda t: (t[0], t[1]))]
        bound = _last(estimates, k)
        certain = (len(rows) >= ranked and rows[ranked - 1].step_s <= bound) or bound == math.inf
        if certain or k >= MAX_K // 2:
            break
        # The next K: where the search's steps are expected to reach the ranked-th slowed step
        # (``_reach``; doubling when fewer rows than ``ranked`` are known), at most MAX_K / 2.
        wanted = rows[ranked - 1].step_s if len(rows) >= ranked else math.inf
        k = min(_reach(estimates, k, wanted), MAX_K // 2)
    top = None
    if rows:
        top = straggler_cost(model, cluster, rows[0].layout, workload, straggler, assumptions)
    return StragglerSearch(
        straggler=straggler, rows=tuple(rows[:ranked]), rejected=tuple(rejected), top=top,
        bound_s=bound, certain=certain, searched=k, elapsed_s=time.perf_counter() - start,
        evaluated=evaluated,
    )  # fmt: skip


def layout_dict(layout: Layout) -> dict[str, object]:
    """The search's layout columns of a layout (explorer.search.rows' names)."""
    return {
        "tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "cp": layout.cp, "ep": layout.ep,
        "zero": layout.zero, "mbs": layout.micro_batch_size, "recompute": layout.recompute,
        "schedule": layout.schedule, "virtual": layout.virtual_stages,
    }  # fmt: skip


def mixed_search_dict(found: MixedSearch) -> dict[str, object]:
    """The JSON object of a mixed search: seconds and bytes unrounded, finite only."""
    from explorer.hetero import hetero_dict

    return {
        "groups": [
            {"gpu": g.gpu.name, "gpus_per_node": g.gpus_per_node, "num_nodes": g.num_nodes}
            for g in found.groups
        ],
        "split": found.split,
        "certain": found.certain,
        "bound_s": found.bound_s if math.isfinite(found.bound_s) else None,
        "searched_per_type": found.searched,
        "elapsed_s": found.elapsed_s,
        "mode": found.mode,
        "layouts": [
            {
                **layout_dict(r.layout),
                "step_time_s": r.step_s,
                "tokens_per_s": r.tokens_per_s,
                "mixed": hetero_dict(r.hetero, found.mode, found.split),
                "placement": list(r.placement) if r.placement else None,
            }
            for r in found.rows
        ],
        "rejected": [{**layout_dict(lay), "reason": why} for lay, why in found.rejected],
    }


def straggler_search_dict(found: StragglerSearch) -> dict[str, object]:
    """The JSON object of a straggler search: seconds unrounded, finite only."""
    from explorer.straggler import straggler_dict

    return {
        "certain": found.certain,
        "bound_s": found.bound_s if math.isfinite(found.bound_s) else None,
        "searched": found.searched,
        "elapsed_s": found.elapsed_s,
        "layouts": [
            {
                **layout_dict(r.layout),
                "baseline_step_time_s": r.baseline_step_s,
                "step_time_s": r.step_s,
            }
            for r in found.rows
        ],
        "rejected": [{**layout_dict(lay), "reason": why} for lay, why in found.rejected],
        "top": straggler_dict(found.top) if found.top else None,
    }
