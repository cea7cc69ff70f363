"""The makespan and busy times of a step, fast: long steady states are timed from a shorter step.

1F1B, ZB-H1, DualPipe, ZB-V and DualPipeV run a warm-up, then one group of actions over and over
(an *iteration* per stage: F B; F B W; F0 B1 W1 F1 B0 W0; F0 B0 W0 F1 B1 W1), then a cool-down.
A step with delta more micro-batches (delta = 2 for DualPipe, one per direction) runs one more
iteration on every stage and is otherwise the same (``steady_part``). From iteration k0 on, an
iteration's actions wait only for actions of the last R iterations, the same ones each time, so
the end times of the last R iterations follow S_k = G(S_{k-1}), with G the same max-plus map
every time: it never lowers an output when an input rises, and adds c to every output when c is
added to every input. Hence once S_j = S_{j-1} + lambda, each later iteration ends lambda after
the one before; when S_j - S_{j-1} lies within [lambda - e, lambda + e], n more iterations drift
at most n e from that. So a step with n delta more micro-batches than a simulated one ends n
lambda later (within n e, e below 2^-45 of the makespan: rounding) and keeps every stage busy n
iterations' durations longer. ``step_time`` simulates the shortest step whose steady state
settles so and extrapolates; other schedules and short steps are simulated in full, to the last
bit.
tests/test_schedules.py checks it against ``simulate`` over schedules, shapes and times.
Source: max-plus algebra of timed event graphs, eventually periodic x(k+1) = A x(k)
(Baccelli, Cohen, Olsder and Quadrat 1992, "Synchronization and Linearity", ch. 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from explorer.schedules.builders import require_valid
from explorer.schedules.engine import Compiled, compile_named, durations_at, sweep
from explorer.schedules.times import StageTimes
from explorer.specs import ScheduleName

SHAPES: dict[str, tuple[int, int]] = {
    "1f1b": (2, 1), "zb-h1": (3, 1), "dualpipe": (6, 2), "zb-v": (6, 1), "dualpipev": (6, 1),
}  # fmt: skip
"""Schedule -> (actions per iteration, micro-batches per iteration)."""

SETTLED = 2.0**-45
"""Largest spread of S_j - S_{j-1}, as a share of the makespan, taken as settled (about 30
rounding steps of the end times)."""


def tries(stages: int, name: ScheduleName = "zb-h1") -> tuple[int, ...]:
    """Steady iterations of the shorter steps tried for schedule ``name``, in turn (a choice of
    speed, not of the result: every try that settles extrapolates to the same step within
    rounding, ``tests/test_periodic.py``; one that does not costs its simulation). ZB-H1 looks
    back P iterations and settles within a few P (3P when the last stage is 3x the others);
    with stages of unequal times (pipelines across GPU types: the bench's Llama 3.1 405B on
    H100 + A100 at P = 64) it settled at iteration P + 2 in 14 of 19 steps and by 2.25P in the
    rest, so P + 16 and 2P + 32 come before 4P + 32 (steps of 2P + 16 and 3P + 32 micro-batches
    in place of 5P + 32); DualPipe settles in 16 or P + 16 on the bench's stage times. ZB-V
    and DualPipeV skip P + 16: on the bench's mixed and straggler searches and its two plain
    searches it settled 29 of the 77 DualPipeV steps and 2 of the 44 ZB-V steps that 16 did
    not settle (most of them at P = 4, where every try is cheap), and the failed ones cost more
    than the successes saved (``python -m explorer.bench``'s cases, 2026-12-04). The same for
    every M, so their compiled schedules serve every layout with the same P."""
    first = () if name in ("zb-v", "dualpipev") else (stages + 16,)
    return (16, *first, 2 * stages + 32, 4 * stages + 32, 16 * stages + 128, 64 * stages + 512)


class StepTime(NamedTuple):
    """What the estimate needs of a simulated step."""

    makespan_s: float
    """End of the last action, s."""
    busy_s: tuple[float, ...]
    """Compute time on each stage, s."""


def steady_part(name: str, stages: int, stage: int, microbatches: int) -> tuple[int, int]:
    """(position of the first steady iteration on ``stage``, iterations) for M micro-batches.

    Source: explorer.schedules.builders (1F1B, ZB-H1), dualpipe (steps 1-3, then step 4; for
    DualPipeV with P ranks for P/2 and M for M/2) and vshape (ZB-V: warm-up 2(P-r)-1 + 2r +
    3(P-r) actions, then F0 B0 W0 F1 B1 W1 until the forwards run out).
    """
    if name == "zb-v":
        return 5 * stages - 3 * stage - 1, microbatches - 2 * stages + stage + 1
    if name == "dualpipev":
        warmup = 2 * (stages - stage - 1) + 2 * (stage + 1) + 3 * (stages - stage - 1)
        return warmup, microbatches - 2 * stages + stage + 1
    if name == "dualpipe":
        half, rank = stages // 2, min(stage, stages - 1 - stage)
        warmup = 2 * (half - rank - 1) + 2 * (rank + 1) + 3 * (half - rank - 1)
        return warmup, microbatches // 2 - stages + rank + 1
    warmup = min(stages - stage - 1, microbatches)
    if name == "zb-h1":
        deferred = min(stage, microbatches - warmup)
        return warmup + 2 * deferred, microbatches - warmup - deferred
    return warmup, microbatches - warmup


@dataclass(frozen=True, slots=True, eq=False)
class Steady:
    """The steady part of one compiled step: where its iterations lie and what they wait for."""

    compiled: Compiled
    period: int
    """Actions per iteration, L."""
    first: np.ndarray
    """Position of iteration 0 on each stage."""
    count: int
    """Iterations every stage runs (the fewest of any stage)."""
    settled: int
    """First iteration from which every iteration is the last one shifted (k0)."""
    memory: int
    """Iterations an action may look back, plus one (R)."""
    latest: int
    """Last iteration whose state all later actions may be computed from."""


def _iterations(c: Compiled, first: np.ndarray, counts: np.ndarray, period: int) -> np.ndarray:
    """Iteration of every position: -1 before the steady part, -2 after it."""
    rel = np.arange(len(c.deps)) - first[c.stage]
    it = rel // period
    it[rel < 0] = -1
    it[it >= counts[c.stage]] = -2
    return it


def _edges(c: Compiled) -> tuple[np.ndarray, np.ndarray]:
    """(waiting position, awaited position) of every dependency, the stage order included."""
    deps, pairs = np.array(c.deps), np.array(c.pair_deps)
    own = np.arange(len(deps))
    previous = own[1:][c.stage[1:] == c.stage[:-1]]
    waiting = np.concatenate([own[deps >= 0], own[pairs >= 0], previous])
    awaited = np.concatenate([deps[deps >= 0], pairs[pairs >= 0], previous - 1])
    return waiting, awaited


def _unshifted(c: Compiled, it: np.ndarray, period: int) -> np.ndarray:
    """Iterations whose next iteration is not theirs shifted by one (slot or dependency)."""
    p = np.flatnonzero(it >= 0)
    p = p[p + period < len(it)]
    p = p[(c.stage[p + period] == c.stage[p]) & (it[p + period] == it[p] + 1)]
    bad = c.slots[p + period] != c.slots[p]
    for deps in (np.array(c.deps), np.array(c.pair_deps)):
        now, then = deps[p], deps[p + period]
        known = np.maximum(now, 0), np.clip(then, 0, len(it) - 1)
        moved = (now >= 0) & (then == now + period) & (it[known[0]] >= 0)
        moved &= (it[known[1]] == it[known[0]] + 1) & (c.stage[known[1]] == c.stage[known[0]])
        bad |= ~(((now < 0) & (then < 0)) | moved)
    return it[p[bad]]


def analyse(c: Compiled, name: str, microbatches: int) -> Steady | None:
    """The steady part of compiled step ``c`` of schedule ``name``; None when it has none
    that the extrapolation can use (an action waits for a later iteration or the cool-down)."""
    period, stages = SHAPES[name][0], c.route.stages
    parts = [steady_part(name, stages, s, microbatches) for s in range(stages)]
    first = np.array([c.offsets[s] + a for s, (a, _) in enumerate(parts)])
    counts = np.array([k for _, k in parts])
    it = _iterations(c, first, counts, period)
    waiting, awaited = _edges(c)
    at, of = it[waiting], it[awaited]
    steady = at >= 0
    lag = at[steady] - of[steady]
    if np.any(of[steady] == -2) or np.any(lag[of[steady] >= 0] < 0):
        return None
    head = of[(at == -1) & (of >= 0)]  # steady actions the warm-up waits for
    early = np.concatenate([at[steady][of[steady] == -1], _unshifted(c, it, period), head, [-1]])
    memory = int(lag[of[steady] >= 0].max(initial=0)) + 1
    tail = of[(at == -2) & (of >= 0)]  # the cool-down's needs in the steady part
    latest = min(int(counts.min()) - 1, int(tail.min(initial=counts.max())) + memory - 1)
    settled = max(int(early.max()) + 1, memory)
    if settled > latest:
        return None
    return Steady(c, period, first, int(counts.min()), settled, memory, latest)


@lru_cache(maxsize=64)
def _steady(name: ScheduleName, stages: int, microbatches: int) -> Steady | None:
    return analyse(compile_named(name, stages, microbatches, 1), name, microbatches)


def _settled_at(s: Steady, ends: np.ndarray) -> tuple[int, float] | None:
    """(first iteration j with S_j - S_{j-1} settled, lambda in s), or None."""
    k = np.arange(s.count)[:, None, None]
    index = s.first[None, :, None] + k * s.period + np.arange(s.period)[None, None, :]
    steps = np.diff(ends[index], axis=0).reshape(s.count - 1, -1)  # row i: iteration i + 1
    lows = np.lib.stride_tricks.sliding_window_view(steps.min(axis=1), s.memory)
    highs = np.lib.stride_tricks.sliding_window_view(steps.max(axis=1), s.memory)
    spread = highs.max(axis=1) - lows.min(axis=1)  # entry i: iterations i + 1 .. i + R
    j = np.arange(len(spread)) + s.memory  # the window's last iteration
    ok = np.flatnonzero((spread <= SETTLED * ends.max()) & (j >= s.settled) & (j <= s.latest))
    if len(ok) == 0:
        return None
    i = ok[0]
    return int(j[i]), float(highs[i].max() + lows[i].min()) / 2


def _full(
    name: ScheduleName, stages: int, microbatches: int, virtual: int, times: StageTimes
) -> tuple[Compiled, np.ndarray, np.ndarray]:
    """The compiled step, every end (s) and the busy time per stage (s), simulated in full."""
    compiled = compile_named(name, stages, microbatches, virtual)
    starts, end = sweep(compiled, times)
    busy = np.bincount(compiled.stage, weights=end - starts, minlength=stages)
    return compiled, end, busy


class _Settled(NamedTuple):
    """A shorter step whose steady state settled: what a longer step is extrapolated from."""

    makespan_s: float
    busy_s: np.ndarray
    step_s: float
    """lambda: how much later each further iteration ends, s."""
    per_iteration_s: np.ndarray
    """Compute time of one iteration on each stage, s."""


@lru_cache(maxsize=4096)
def _short(name: ScheduleName, stages: int, short: int, times: StageTimes) -> _Settled | None:
    """The step of ``short`` micro-batches simulated in full, if its steady state settles
    (cached: every longer step with the same ``times`` is extrapolated from it, as the speed
    split's and the uneven batch's micro-batch counts are)."""
    steady = _steady(name, stages, short)
    if steady is None:  # too few iterations to settle within
        return None
    _, end, busy = _full(name, stages, short, 1, times)
    found = _settled_at(steady, end)
    if found is None:
        return None
    rows = steady.first[:, None] + SHAPES[name][0] * steady.settled + np.arange(SHAPES[name][0])
    durations = durations_at(steady.compiled, times, rows)
    return _Settled(float(end.max()), busy, found[1], durations.sum(axis=1))


def extrapolated(
    name: ScheduleName, stages: int, microbatches: int, times: StageTimes
) -> StepTime | None:
    """The step from a shorter one whose steady state settles, or None (module docstring)."""
    delta = SHAPES[name][1]
    least = stages if name in ("1f1b", "zb-h1") else 2 * stages  # warm-up and cool-down as M
    for extra in tries(stages, name):
        short = least + delta * extra
        if short >= microbatches:
            return None
        found = _short(name, stages, short, times)
        if found is not None:
            n = (microbatches - short) // delta
            busy = found.busy_s + n * found.per_iteration_s
            return StepTime(found.makespan_s + n * found.step_s, tuple(busy.tolist()))
    return None


def step_time(
    name: ScheduleName, stages: int, microbatches: int, virtual: int, times: StageTimes
) -> StepTime:
    """Makespan and busy time per stage of schedule ``name`` with ``times`` (s), as
    ``simulate`` gives them: extrapolated from a shorter step's steady state where one settles
    (equal within SETTLED x the makespan per extra iteration), else simulated to the last bit.
    No actions, events or in-flight curves are built; compiled once per (P, M, V).

    Raises ValueError (one sentence) when P, M or V do not suit the schedule.
    """
    require_valid(name, stages, microbatches, virtual)
    if times.stages != stages:
        raise ValueError(f"times are for {times.stages} stages, the schedule has {stages}")
    if name in SHAPES and stages > 1:
        found = extrapolated(name, stages, microbatches, times)
        if found is not None:
            return found
    _, end, busy = _full(name, stages, microbatches, virtual, times)
    return StepTime(float(end.max(initial=0.0)), tuple(busy.tolist()))
