"""The candidate tree: one level per choice, children from divisor generators, rules per level.

Levels, root first: the dense mesh (tp, pp, cp, dp from the divisors of the GPU count), the
expert degrees (ep, etp), the micro-batch, the recompute policy, the pipeline schedule with its
virtual stages and the ZeRO stage. A rule runs at the first level where every field it reads
is known, so a rejection there covers the whole subtree: one row whose ``num_layouts`` is the
number of complete layouts below it. ``enumerate_layouts`` walks the tree depth first;
``explorer.search`` walks the same tree best first, bounding subtrees by step time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from itertools import product
from math import prod
from typing import NamedTuple

from explorer.mesh.rules import RULES, Rule
from explorer.mesh.space import Candidate, Problem, divisors
from explorer.specs import ScheduleName

ROOT = Candidate(tp=1, pp=1, cp=1, dp=1)
"""The tree's root, before any degree is chosen (the mesh level ignores it)."""


@cache
def pipelines(
    pp: int, schedules: tuple[ScheduleName, ...], max_virtual: int
) -> tuple[tuple[ScheduleName, int], ...]:
    """(schedule, virtual stages) pairs for ``pp`` stages.

    Without a pipeline every schedule is plain gradient accumulation: 1F1B alone. Interleaving
    starts at V = 2, since V = 1 is 1F1B itself (unless 1F1B is not in the space).
    """
    if pp == 1:
        return (("1f1b", 1),)
    low = 1 if "1f1b" not in schedules or max_virtual == 1 else 2
    plain = tuple((s, 1) for s in schedules if s != "interleaved")
    virtual = range(low, max_virtual + 1) if "interleaved" in schedules else range(0)
    return plain + tuple(("interleaved", v) for v in virtual)


def valid_pipelines(p: Problem, c: Candidate) -> tuple[tuple[ScheduleName, int], ...]:
    """The (schedule, virtual) pairs under node ``c`` that pass the ``layers`` rule and, once
    the micro-batch is known, the ``schedule`` rule (what a bound may range over)."""
    pairs = pipelines(c.pp, p.space.schedules, p.space.max_virtual)
    kinds = ("layers", "schedule") if c.mbs is not None else ("layers",)
    return tuple(
        (s, v)
        for s, v in pairs
        if all(RULES[k](p, c._replace(schedule=s, virtual=v)) is None for k in kinds)
    )


def _meshes(p: Problem, _root: Candidate) -> Iterator[Candidate]:
    """(tp, pp, cp, dp) with tp x pp x cp x dp = GPUs, from the divisors of the GPU count."""
    n, space = p.num_gpus, p.space
    tps, pps = space.tp_values or divisors(n), space.pp_values or divisors(n)
    for tp, pp, cp in product(tps, pps, p.cp_values):
        if n % (tp * pp * cp) == 0:
            yield Candidate(tp=tp, pp=pp, cp=cp, dp=n // (tp * pp * cp))


def expert_options(p: Problem) -> tuple[tuple[int, int], ...]:
    """(ep, etp) pairs: every divisor of the routed experts (or the space's values) x ETP."""
    if not p.model.is_moe:
        return ((1, 1),)
    eps = p.space.ep_values or divisors(p.model.n_routed_experts)
    return tuple(product(eps, p.space.etp_values))


def _experts(p: Problem, c: Candidate) -> Iterator[Candidate]:
    return (c._replace(ep=ep, etp=etp) for ep, etp in expert_options(p))


def _micro(p: Problem, c: Candidate) -> Iterator[Candidate]:
    return (c._replace(mbs=mbs) for mbs in p.space.micro_batch_sizes)


def _pipeline(p: Problem, c: Candidate) -> Iterator[Candidate]:
    pairs = pipelines(c.pp, p.space.schedules, p.space.max_virtual)
    return (c._replace(schedule=s, virtual=v) for s, v in pairs)


def _recompute(p: Problem, c: Candidate) -> Iterator[Candidate]:
    return (c._replace(recompute=r) for r in p.space.recomputes)


def _zero(p: Problem, c: Candidate) -> Iterator[Candidate]:
    return (c._replace(zero=z) for z in p.space.zero_stages)


class Level(NamedTuple):
    """One level of the tree: how a node's children are made and the rules they must meet."""

    name: str
    expand: Callable[[Problem, Candidate], Iterator[Candidate]]
    rules: tuple[tuple[str, Rule], ...]


def _rules(*kinds: str) -> tuple[tuple[str, Rule], ...]:
    return tuple((kind, RULES[kind]) for kind in kinds)


LEVELS: tuple[Level, ...] = (
    Level(
        "mesh",
        _meshes,
        _rules("tp-domain", "heads", "kv-heads", "hidden", "ffn", "layers", "sequence"),
    ),
    Level("experts", _experts, _rules("ep-dense", "experts", "ep-fold", "expert-ffn")),
    Level("micro-batch", _micro, _rules("batch")),
    Level("recompute", _recompute, ()),
    Level("pipeline", _pipeline, _rules("layers", "schedule")),
    Level("zero", _zero, _rules("zero-dp")),
)
"""The candidate tree, root first; a complete candidate is a node of the last level."""

LEAF = len(LEVELS) - 1
"""Depth of complete candidates."""


class Rejection(NamedTuple):
    """A candidate (complete, or a subtree with later fields None) and why it is rejected."""

    candidate: Candidate
    kind: str
    """The rule that failed (a key of ``RULES``, or one the search adds, e.g. memory)."""
    reason: str
    num_layouts: int
    """Complete layouts this row stands for (the leaves of the rejected subtree)."""


def _first_failure(
    p: Problem, c: Candidate, rules: tuple[tuple[str, Rule], ...]
) -> tuple[str, str] | None:
    for kind, rule in rules:
        reason = rule(p, c)
        if reason is not None:
            return kind, reason
    return None


class Tree:
    """The candidate tree of one problem, with extra rules the caller adds to named levels."""

    def __init__(
        self, problem: Problem, extra: Mapping[str, tuple[tuple[str, Rule], ...]] | None = None
    ) -> None:
        extra = extra or {}
        names = [lv.name for lv in LEVELS]
        if set(extra) - set(names):
            raise ValueError(f"no level named {sorted(set(extra) - set(names))}; see {names}")
        self.problem = problem
        self.levels = tuple(lv._replace(rules=lv.rules + extra.get(lv.name, ())) for lv in LEVELS)
        self._sizes: dict[tuple[int, int], int] = {}
        self._upper: dict[tuple[int, Candidate], tuple[list[Candidate], list[Rejection]]] = {}
        """Children of the first two levels (the meshes and their expert degrees), made once:
        the search's tier-0 bound of the whole expert level lists them before the search
        expands them (explorer.search.bounds.Bounds.degrees_s)."""

    def leaves_below(self, node: Candidate, depth: int) -> int:
        """Complete layouts under ``node`` at ``depth`` (they depend only on depth and pp)."""
        key = (depth, node.pp)
        if key not in self._sizes:
            below = self.levels[depth + 1 :]
            self._sizes[key] = prod(sum(1 for _ in lv.expand(self.problem, node)) for lv in below)
        return self._sizes[key]

    def children(self, depth: int, parent: Candidate) -> tuple[list[Candidate], list[Rejection]]:
        """Children of ``parent`` at level ``depth`` that pass its rules, and those that fail
        (new lists on every call)."""
        if depth < 2:
            found = self._upper.get((depth, parent))
            if found is None:
                found = self._upper[depth, parent] = self._children(depth, parent)
            return list(found[0]), list(found[1])
        return self._children(depth, parent)

    def _children(self, depth: int, parent: Candidate) -> tuple[list[Candidate], list[Rejection]]:
        level, p = self.levels[depth], self.problem
        passed, failed = [], []
        for child in level.expand(p, parent):
            failure = _first_failure(p, child, level.rules)
            if failure is None:
                passed.append(child)
            else:
                failed.append(Rejection(child, *failure, self.leaves_below(child, depth)))
        return passed, failed


@dataclass(frozen=True, slots=True)
class Enumeration:
    """Complete candidates that passed every rule, and the rejected subtrees."""

    valid: tuple[Candidate, ...]
    rejected: tuple[Rejection, ...]

    @property
    def considered(self) -> int:
        """Complete layouts considered: the valid ones plus every rejected row's count."""
        return len(self.valid) + sum(r.num_layouts for r in self.rejected)


def enumerate_layouts(
    problem: Problem, extra: Mapping[str, tuple[tuple[str, Rule], ...]] | None = None
) -> Enumeration:
    """Every candidate of the search space, split into valid leaves and rejected subtrees.

    ``extra`` adds rules to levels by name; they run after the level's own rules.
    """
    tree = Tree(problem, extra)
    valid: list[Candidate] = []
    rejected: list[Rejection] = []
    frontier = [(0, ROOT)]
    while frontier:
        depth, node = frontier.pop()
        passed, failed = tree.children(depth, node)
        rejected += failed
        if depth == LEAF:
            valid += passed
        else:
            frontier += [(depth + 1, child) for child in reversed(passed)]
    return Enumeration(valid=tuple(valid), rejected=tuple(rejected))
