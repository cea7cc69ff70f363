"""Search: walk the candidate tree best first, estimate the survivors, rank them.

Branch and bound over ``explorer.mesh``'s tree. Every node waits in one priority queue under a
lower bound on the step time of the complete layouts below it that can fit
(``explorer.search.bounds``, with the memory floors of ``explorer.search.floor``); a subtree
with nothing that can fit is rejected as ``memory``. Popping the smallest, the search tightens
a node's bound the first time it comes out (costlier tiers, computed only for nodes that reach
the front), expands it into its children the second time (the rules of ``explorer.mesh``
reject subtrees on the way), and for a complete layout checks the memory model and then runs
the full ``explorer.estimate.estimate``. A fitting estimate re-enters the queue under its own
step time, ties broken by spare memory (more first), and is ranked when it comes out again:
everything still queued is bounded at least as slow, so the ranked layouts are exactly the
fastest ones, in order, and each row is the estimate's own numbers. The search stops after
``ranked`` layouts (None: all of them); what is still queued is listed as rejected, kind
``slower``, with its bound.
"""

from __future__ import annotations

import gc
import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, NamedTuple, ParamSpec, TypeVar

import pandas as pd

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, Estimate, EstimateAssumptions, estimate
from explorer.limits import MAX_QUEUED, SEARCH_BUDGET_S
from explorer.memory import training_memory
from explorer.mesh import (
    LEAF,
    ROOT,
    Candidate,
    Problem,
    Rejection,
    SearchSpace,
    Tree,
    from_layout,
)
from explorer.search.bounds import Bounds
from explorer.search.floor import MemoryFloor
from explorer.search.reads import candidate_layout
from explorer.search.recipe import LayoutRecipe, UnprunedFloor, apply_recipe
from explorer.search.rows import layouts_frame, rejected_frame, rejection_row
from explorer.specs import ClusterSpec, ModelSpec, TrainingWorkload
from explorer.units import GiB

DEFAULT_RANKED = 20
"""Layouts ranked by default: enough for a table; the search stops once they are certain."""

_LOOSE, _NODE, _STEP, _ROW = 0, 1, 2, 3
"""Queue phases: a node under the bound it was made with, a node under its tightest bound, a
complete layout under its step time without memory, a fitting estimate. At equal priority the
earlier phase comes out first, so a row is ranked only once nothing queued can still tie with
it or beat it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """Ranked layouts, rejected ones with reasons, and what the search looked at."""

    evaluated: int
    """Complete layouts considered: ranked + every rejected row's ``num_layouts``."""
    layouts: pd.DataFrame
    """Ranked layouts, best (shortest step) first (``explorer.search.rows`` columns)."""
    rejected: pd.DataFrame
    """Rejected layouts and subtrees: layout fields (None = any), kind, reason, num_layouts."""
    elapsed_s: float
    """Wall time of the search, s."""
    estimates: tuple[Estimate, ...]
    """The estimate behind each ranked row, in rank order."""
    problem: Problem
    """What was searched (model, cluster, workload, GPUs, space)."""
    assumptions: EstimateAssumptions
    """The estimate's assumptions."""
    estimated: int = 0
    """Layouts given the full estimate (memory included)."""


class _Entry(NamedTuple):
    """One queued item; entries compare field by field, so the order of the fields is the
    order of the queue."""

    priority: float
    """A node's lower bound on step time, or a row's own step time, s."""
    phase: int
    """``_LOOSE``, ``_NODE``, ``_STEP`` or ``_ROW``: at equal priority the earlier first."""
    tie: float
    """At equal priority and phase: a row's peak bytes less the GPU's (more spare first)."""
    order: int
    """Push count: first in, first out among equals (and items are never compared)."""
    depth: int
    """The tree level of ``item`` (``LEAF`` for a complete layout or a row)."""
    item: Any
    """A ``Candidate``, or for a row its ``Estimate``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchProgress:
    """Where a running search stands, for a progress bar (``search(progress=...)``)."""

    covered: int
    """Complete layouts settled so far: ranked, or rejected by a rule, a memory floor or the
    memory model (subtrees count every layout under them)."""
    total: int
    """Complete layouts in the search space (every mesh's subtree, counted before the search).
    At the end, the layouts still queued are listed as slower and the count reaches it."""
    ranked: int
    """Layouts ranked so far."""
    limit: int | None
    """Layouts to rank (None: all of them)."""
    elapsed_s: float
    budget_s: float
    """The search's time budget (explorer.limits.SEARCH_BUDGET_S unless given)."""

    @property
    def fraction(self) -> float:
        """Progress in [0, 1]: the larger of the share of layouts settled and the share of the
        ranked rows found (the search ends at whichever comes first)."""
        settled = self.covered / self.total if self.total else 0.0
        found = self.ranked / self.limit if self.limit else 0.0
        return min(1.0, max(settled, found))


Progress = Callable[[SearchProgress], bool | None]
"""Called during a search every few hundred steps; returning True stops it (ValueError)."""


class SearchStopped(ValueError):
    """The caller's progress callback stopped the search (one sentence)."""


@dataclass(slots=True)
class _Search:
    """The queue and the tallies of one branch-and-bound search."""

    tree: Tree
    bounds: Bounds
    assumptions: EstimateAssumptions
    limit: float
    recipe: LayoutRecipe | None = None
    """The user's memory recipe, kept in every layout it applies to (``explorer.search.recipe``)."""
    queue: list[_Entry] = field(default_factory=list)
    ranked: list[Estimate] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    estimated: int = 0
    covered: int = 0
    """Complete layouts ranked or rejected so far (the progress callback's count)."""
    _order: int = 0

    def push(self, priority: float, phase: int, depth: int, item: Any, tie: float = 0.0) -> None:
        self._order += 1
        heapq.heappush(self.queue, _Entry(priority, phase, tie, self._order, depth, item))

    def reject(self, rejections: list[Rejection]) -> None:
        self.rejected += [rejection_row(r) for r in rejections]
        self.covered += sum(r.num_layouts for r in rejections)

    def expand(self, depth: int, node: Candidate, bound: float) -> None:
        """Push the children of ``node`` under their cheap bounds."""
        passed, failed = self.tree.children(depth + 1, node)
        self.reject(failed)
        for child in passed:
            self.push_node(depth + 1, child, self.bounds.cheap_s(depth + 1, child, bound), _LOOSE)

    def push_node(self, depth: int, node: Candidate, bound: float, phase: int) -> None:
        """Queue a node, or reject it when no layout under it passes the memory floors."""
        if bound == float("inf"):
            reason = "no ZeRO stage, schedule or recompute policy under it fits (memory floors)"
            count = self.tree.leaves_below(node, depth) if depth < LEAF else 1
            self.reject([Rejection(node, "memory", reason, count)])
        else:
            self.push(bound, phase, depth, node)

    def tighten(self, depth: int, node: Candidate, bound: float) -> None:
        """A node reaches the front for the first time: re-queue it under its tight bound."""
        tight = self.bounds.tight_s(depth, node)
        if tight is None:
            self.settle(depth, node, bound)
        else:
            self.push_node(depth, node, max(bound, tight), _NODE)

    def settle(self, depth: int, node: Candidate, bound: float) -> None:
        """A node at the front under its tightest bound: expand it, or time a layout."""
        if depth < LEAF:
            self.expand(depth, node, bound)
        else:
            self.push(max(bound, self.bounds.leaf_s(node)), _STEP, depth, node)

    def evaluate(self, node: Candidate) -> None:
        """Memory first, then the full estimate: queue it as a row when it fits."""
        p, layout = self.tree.problem, apply_recipe(candidate_layout(node), self.recipe)
        try:
            memory = training_memory(
                p.model, p.cluster.gpu, layout, p.workload, self.assumptions.memory,
                domain_size=p.cluster.domain_size,
            )  # fmt: skip
            if memory.fits:
                self.estimated += 1
                e = estimate(
                    p.model, p.cluster, layout, p.workload, self.assumptions, memory=memory
                )
        except ValueError as error:  # a constraint of the core the rules do not know
            self.reject([Rejection(node, "estimate", str(error), 1)])
            return
        if memory.fits:
            self.push(e.step_time_s, _ROW, LEAF, e, tie=memory.peak_bytes - memory.gpu_bytes)
            return
        reason = (
            f"needs {memory.peak_bytes / GiB:.1f} GiB on stage {memory.peak_stage}, "
            f"more than the GPU's {memory.gpu_bytes / GiB:.1f} GiB"
        )
        extra = {"peak_bytes": memory.peak_bytes}
        self.rejected.append(rejection_row(Rejection(node, "memory", reason, 1), extra))
        self.covered += 1

    def total(self) -> int:
        """Complete layouts in the space: every mesh's subtree (rejected meshes included)."""
        meshes = self.tree.levels[0].expand(self.tree.problem, ROOT)
        return sum(self.tree.leaves_below(mesh, 0) for mesh in meshes)

    def run(self, budget_s: float = SEARCH_BUDGET_S, progress: Progress | None = None) -> None:
        """Pop until ``limit`` layouts are ranked; ValueError (one sentence) past the budget of
        time or queued nodes (explorer.limits), or when ``progress`` returns True."""
        start = time.perf_counter()
        deadline = start + budget_s
        total = self.total() if progress is not None else 0
        limit = None if self.limit == float("inf") else int(self.limit)
        self.expand(-1, ROOT, 0.0)
        popped = 0
        while self.queue and len(self.ranked) < self.limit:
            popped += 1
            if popped % _CHECK_EVERY == 0:
                _within_budget(deadline, budget_s, len(self.queue))
                if progress is not None:
                    now = SearchProgress(
                        covered=self.covered, total=total, ranked=len(self.ranked),
                        limit=limit, elapsed_s=time.perf_counter() - start, budget_s=budget_s,
                    )  # fmt: skip
                    if progress(now):
                        raise SearchStopped(
                            f"the search was stopped after {now.elapsed_s:.1f} s, with "
                            f"{now.covered:,} of {total:,} layouts settled and {now.ranked} "
                            "ranked"
                        )
            self.pop()

    def pop(self) -> None:
        """Take the queue's best entry: rank a row, time a step, tighten or settle a node."""
        entry = heapq.heappop(self.queue)
        if entry.phase == _ROW:
            self.ranked.append(entry.item)
            self.covered += 1
        elif entry.phase == _STEP:
            self.evaluate(entry.item)
        elif entry.phase == _LOOSE:
            self.tighten(entry.depth, entry.item, entry.priority)
        else:
            self.settle(entry.depth, entry.item, entry.priority)

    def leftovers(self) -> None:
        """List what is still queued as slower than the ranked layouts."""
        last = self.ranked[-1].step_time_s if self.ranked else float("nan")
        for entry in sorted(self.queue):
            row = entry.phase == _ROW
            node = from_layout(entry.item.layout) if row else entry.item
            count = 1 if entry.depth == LEAF else self.tree.leaves_below(node, entry.depth)
            what = "its step time is" if row else "the step time is at least"
            reason = (
                f"not ranked: {what} {entry.priority:.4g} s, slower than the "
                f"{len(self.ranked)} ranked layouts (the last at {last:.4g} s)"
            )
            extra = {"step_time_s": entry.priority}
            self.rejected.append(rejection_row(Rejection(node, "slower", reason, count), extra))


_CHECK_EVERY = 256
"""Pops between two looks at the clock and the queue (a pop takes microseconds)."""


def _within_budget(deadline: float, budget_s: float, queued: int) -> None:
    """Raise ValueError (one sentence) once the search passes its time or memory budget."""
    if time.perf_counter() > deadline:
        raise ValueError(
            f"the search stopped after {budget_s:g} s, its time budget, with {queued:,} nodes "
            "still queued; narrow the search space (fewer schedules, ZeRO stages, micro-batch "
            "sizes) or rank fewer layouts"
        )
    if queued > MAX_QUEUED:
        raise ValueError(
            f"the search stopped with {queued:,} nodes queued, more than its memory budget of "
            f"{MAX_QUEUED:,}; narrow the search space or rank fewer layouts"
        )


_P = ParamSpec("_P")
_R = TypeVar("_R")


def without_gc(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` run with Python's cyclic garbage collector paused, as ``search`` runs: a search
    builds many small acyclic objects, freed by reference counting, and a collection only
    walks them (and the caches they fill) again. The pause lasts until ``fn`` has returned, so
    its locals are freed before collection resumes; the first collection after it walks what
    ``fn`` left alive (on the bench's DeepSeek-V3 mixed search, 2026-12-04: 11-18 ms, against
    the 100-230 ms that collections took inside it with the collector on)."""

    @wraps(fn)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        collecting = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if collecting:
                gc.enable()

    return paused


def search(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    *,
    num_gpus: int | None = None,
    space: SearchSpace | None = None,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    ranked: int | None = DEFAULT_RANKED,
    budget_s: float = SEARCH_BUDGET_S,
    recipe: LayoutRecipe | None = None,
    progress: Progress | None = None,
) -> SearchResult:
    """The ``ranked`` fastest layouts of ``model`` on ``num_gpus`` GPUs (None: every one).

    Raises ValueError (one sentence) for a bad GPU count, search space or ``ranked``, and when
    the search passes ``budget_s`` seconds or its budget of queued nodes. ``recipe``: the
    user's memory recipe, kept in every layout it applies to (``explorer.search.recipe``).
    ``progress``, when given, is called with a SearchProgress every few hundred steps (when
    the budget is checked); returning True stops the search with SearchStopped (a ValueError,
    one sentence).
    Source: module docstring (branch and bound over explorer.mesh; rows from
    explorer.estimate).
    """
    start = time.perf_counter()
    if ranked is not None and ranked < 1:
        raise ValueError(f"ranked must be at least 1 (or None for all), got {ranked}")
    gpus = cluster.world_size if num_gpus is None else num_gpus
    space = space or SearchSpace()
    if recipe is not None:  # a recipe that refines recompute fixes it
        space = recipe.space(space)
    problem = Problem(model=model, cluster=cluster, workload=workload, num_gpus=gpus, space=space)
    collecting = gc.isenabled()
    # The search builds many small acyclic objects: cyclic GC passes over them only cost time.
    # They are freed (by reference counting) before collection resumes, so none is owed later.
    gc.disable()
    try:
        limit = float("inf") if ranked is None else ranked
        run = _searcher(problem, assumptions, limit, recipe)
        run.run(budget_s, progress)
        run.leftovers()
        rejected = rejected_frame(run.rejected)
        if recipe is not None and recipe.moves_blocks:  # uneven stages can beat the even bound
            run.ranked.sort(key=lambda e: e.step_time_s)
        layouts, estimates, estimated = layouts_frame(run.ranked), tuple(run.ranked), run.estimated
        del run
    finally:
        if collecting:
            gc.enable()
    return SearchResult(
        evaluated=len(estimates) + int(rejected["num_layouts"].sum()),
        layouts=layouts,
        rejected=rejected,
        elapsed_s=time.perf_counter() - start,
        estimates=estimates,
        problem=problem,
        assumptions=assumptions,
        estimated=estimated,
    )


def _searcher(
    problem: Problem,
    assumptions: EstimateAssumptions,
    limit: float,
    recipe: LayoutRecipe | None = None,
) -> _Search:
    """A search of ``problem`` with its bounds, floors and the memory rule at the ZeRO level
    (floors that prune nothing under a recipe that can go below them)."""
    unpruned = recipe is not None and recipe.below_floors
    floor = (UnprunedFloor if unpruned else MemoryFloor)(problem, assumptions)
    rules = (("memory", floor.states_rule), ("memory", floor.layout_rule))
    tree = Tree(problem, {"zero": rules})
    return _Search(tree, Bounds(problem, assumptions, floor, tree), assumptions, limit, recipe)


def resumable_search(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    *,
    num_gpus: int | None = None,
    space: SearchSpace | None = None,
    assumptions: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS,
    budget_s: float = SEARCH_BUDGET_S,
) -> Callable[[int], tuple[tuple[Estimate, ...], int]]:
    """``search`` that can be asked for more: ``rank(k)`` returns what ``search(...,
    ranked=k)`` would, its estimates and ``evaluated``, going on from where the last call
    stopped. The queue pops in the same order whatever the limit (``_Search.run`` stops right
    after the K-th row), so a longer search's first K are the K search's; a K below one asked
    before is that prefix. No recipe, no progress callback; each call has its own budget.
    Raises ValueError (one sentence) as ``search`` does.
    """
    gpus = cluster.world_size if num_gpus is None else num_gpus
    problem = Problem(model=model, cluster=cluster, workload=workload, num_gpus=gpus,
                      space=space or SearchSpace())  # fmt: skip
    run = _searcher(problem, assumptions, 0.0)
    started = False

    def rank(k: int) -> tuple[tuple[Estimate, ...], int]:
        nonlocal started
        if k < 1:
            raise ValueError(f"ranked must be at least 1, got {k}")
        collecting = gc.isenabled()
        gc.disable()  # as in ``search``
        try:
            if not started:
                run.expand(-1, ROOT, 0.0)
                started = True
            deadline, popped = time.perf_counter() + budget_s, 0
            while run.queue and len(run.ranked) < k:  # the loop of ``_Search.run``
                popped += 1
                if popped % _CHECK_EVERY == 0:
                    _within_budget(deadline, budget_s, len(run.queue))
                run.pop()
        finally:
            if collecting:
                gc.enable()
        # ``evaluated``: the layouts settled and those under what is still queued (``leftovers``)
        queued = sum(1 if e.depth == LEAF else run.tree.leaves_below(e.item, e.depth)
                     for e in run.queue)  # fmt: skip
        return tuple(run.ranked[:k]), run.covered + queued

    return rank
