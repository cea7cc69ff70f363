"""The event-driven core of the simulator: start and end of every action, fast.

A schedule is first *compiled*: its actions laid out stage by stage in run order (a flat
*position* each), with the position each one waits for resolved once. Each action has an id,
``kind * M*C*P + microbatch * C*P + chunk * P + stage`` (C chunks per stage), and a *slot*,
``(stage * 3 + kind) * C + chunk``, whose template holds what does not depend on the
micro-batch: the dependency, the p2p hop and the duration. Timing then sweeps the stages in
turn (up, then down: forwards flow up the stages, backwards down), each running its actions in
order for as long as their inputs are there; a sweep with no progress means a deadlock. Every
start is max(stage free, input ready + delay) and every end start + duration, whatever the
sweep order, so the times do not depend on how it is compiled.
A compiled schedule serves any durations: the estimate times many layouts of one (schedule,
P, M, V) with one compile (``compile_named``, cached). Later sweeps replay the first's order
without checking inputs; where many actions are independent (an action's *wave*: one more than
the latest wave it waits for, the stage's previous action included; hundreds of actions wide
on long pipelines), they time a whole wave per array operation: the same max and add on the
same numbers, so the same times to the last bit.
Source: dependency rules of Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2 and Qi et al. 2024
(arXiv:2401.10241) sec. 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, pairwise
from operator import itemgetter

import numpy as np

from explorer.schedules.actions import KINDS, Kind, Route
from explorer.schedules.builders import route_for, stage_orders
from explorer.schedules.times import StageTimes
from explorer.specs import ScheduleName

_Order = Sequence[tuple[Kind, int, int]]


@dataclass(frozen=True, slots=True)
class RawTimeline:
    """Every action by position (stage by stage, in run order): id, start (s) and end (s)."""

    ids: np.ndarray
    stage: np.ndarray
    starts_s: np.ndarray
    ends_s: np.ndarray


WAVE_WIDTH = 18
"""Fewest actions per wave, on average, for which a replay times waves as arrays: a wave's
few array operations cost about as much as 15 actions timed one by one. Replay one by one /
by waves, best of 7 (2026-12-04, this machine; 1F1B, ZB-H1, DualPipe, ZB-V, DualPipeV, M 2P +
16 and 4P + 32): 0.18-0.53 at 4-8 actions per wave (P 4, 8), 0.66-1.03 at 12-16 (P 16),
1.50-2.43 at 23-31 (P 32), 3.0-7.6 at 44-62 (P 64)."""


@dataclass(frozen=True, slots=True, eq=False)
class Waves:
    """A compiled schedule's positions in wave order, ready for ``_replay_waves``."""

    order: np.ndarray
    """Position at each wave-ordered index."""
    bounds: tuple[int, ...]
    """Wave w holds wave-ordered indices bounds[w] .. bounds[w + 1] - 1."""
    waits: tuple[np.ndarray, ...]
    """Per wave-ordered index, the wave-ordered index of what it waits for (its input, the
    stage's previous action, and where any the F&B pair's other input); n for none."""


@dataclass(frozen=True, slots=True, eq=False)
class Compiled:
    """A schedule's actions as flat arrays by position, ready to be timed with any durations."""

    route: Route
    microbatches: int
    split: bool
    """Whether W runs as separate actions (else B takes B + W)."""
    offsets: tuple[int, ...]
    """Stage s runs positions offsets[s] .. offsets[s + 1] - 1."""
    ids: np.ndarray
    """Action id per position (module docstring)."""
    stage: np.ndarray
    """Stage per position."""
    slots: np.ndarray
    """Template slot per position (module docstring)."""
    hops: np.ndarray
    """Per slot: whether the input comes from another stage (p2p applies)."""
    deps: list[int]
    """Per position, the position whose end it waits for; -1 for none."""
    pair_deps: list[int]
    """Per position, for the F of an F&B pair the position its B waits for; else -1."""
    runs: list[tuple[tuple[int, int, int], ...]] = field(default_factory=list)
    """Empty, or (filled by the first ``sweep``) one entry: (stage, first position, end
    position) of each stretch that sweep ran in turn, in its order. The order depends only on
    which inputs are there, not on the durations, so later sweeps replay it without checking
    inputs. (Threads that sweep at once may each append one; every entry is the same.)"""
    levels: list[list[int]] = field(default_factory=list)
    """Empty, or (filled by the first ``sweep``, emptied once ``waves`` is made) one entry:
    each position's wave, 1 + the latest wave of what it waits for (its input, its pair's,
    the stage's previous action)."""
    waves: list[Waves | None] = field(default_factory=list)
    """Empty, or (made on the first replay) one entry: the waves, None where too narrow to
    pay (``WAVE_WIDTH``)."""


def dependency(route: Route, kind: Kind, stage: int, chunk: int) -> tuple[Kind, int, int] | None:
    """(kind, stage, chunk) whose end a ``kind`` pass on (stage, chunk) waits for.

    F waits for F one route position back, B for B one position on (or for its own F at the end
    of the route: the loss), W for its own B. None for the F at the start of a route.
    """
    if kind == "W":
        return "B", stage, chunk
    there = route.neighbour(stage, chunk, -1 if kind == "F" else 1)
    if there is None:
        return None if kind == "F" else ("F", stage, chunk)
    return kind, there[0], there[1]


def _slot_dependencies(route: Route, microbatches: int) -> tuple[np.ndarray, np.ndarray]:
    """Per slot: the id (micro-batch 0) of the action it waits for, or -1; and its hop."""
    p, c = route.stages, route.num_chunks
    per_mb = c * p
    offsets, hops = [], []
    for stage in range(p):
        for kind in KINDS:
            for chunk in range(c):
                dep = dependency(route, kind, stage, chunk)
                if dep is None:
                    offsets.append(-1)
                else:
                    k, s, ch = dep
                    offsets.append(KINDS.index(k) * microbatches * per_mb + ch * p + s)
                hops.append(dep is not None and dep[1] != stage)
    return np.array(offsets, dtype=np.int64), np.array(hops, dtype=bool)


_KIND_CODES = np.zeros(256, dtype=np.int64)
_KIND_CODES[[ord(kind) for kind in KINDS]] = np.arange(len(KINDS))
"""Index in ``KINDS`` by the kind's ASCII code (F 0, B 1, W 2)."""


def _columns(orders: Sequence[_Order]) -> tuple[np.ndarray, ...]:
    """Stage, kind index, micro-batch and chunk of every position.

    The kinds, one letter each, are joined into one byte string and looked up by code: a
    column at C speed, without a dictionary look-up per action.
    """
    flat = list(chain.from_iterable(orders))
    letters = "".join(map(itemgetter(0), flat)).encode("ascii")
    kind = _KIND_CODES[np.frombuffer(letters, dtype=np.uint8)]

    def column(values: Iterable[int]) -> np.ndarray:
        return np.fromiter(values, dtype=np.int64, count=len(flat))

    stage = np.repeat(np.arange(len(orders), dtype=np.int64), [len(o) for o in orders])
    return stage, kind, column(map(itemgetter(1), flat)), column(map(itemgetter(2), flat))


def compile_orders(
    route: Route, orders: Sequence[_Order], pairs: Sequence[Sequence[int]], microbatches: int
) -> Compiled:
    """Compile per-stage orders (and DualPipe's F&B pairs) for timing.

    Raises RuntimeError when an action waits for one that never runs (a deadlock).
    """
    p, c = route.stages, route.num_chunks
    stage, kind, micro, chunk = _columns(orders)
    ids = ((kind * microbatches + micro) * c + chunk) * p + stage
    slots = (stage * 3 + kind) * c + chunk
    dep_offsets, hops = _slot_dependencies(route, microbatches)
    dep_ids = dep_offsets[slots]
    waits = dep_ids >= 0
    position = np.full(len(KINDS) * microbatches * c * p, -1, dtype=np.int64)
    position[ids] = np.arange(len(ids))
    deps = np.where(waits, position[np.where(waits, dep_ids + micro * c * p, 0)], -1)
    if np.any(waits & (deps < 0)):
        raise RuntimeError("the schedule deadlocks: an action waits for one that never runs")
    offsets = (0, *np.cumsum([len(o) for o in orders]).tolist())
    pair_deps = np.full(len(ids), -1, dtype=np.int64)
    for s, found in enumerate(pairs):
        at = offsets[s] + np.array(found, dtype=np.int64)
        pair_deps[at] = deps[at + 1]  # the F of an F&B pair also waits for its B's input
    split = bool(np.any(kind == 2))
    return Compiled(
        route, microbatches, split, offsets, ids, stage, slots, hops,
        deps.tolist(), pair_deps.tolist(),
    )  # fmt: skip


@lru_cache(maxsize=32)
def compile_named(name: ScheduleName, stages: int, microbatches: int, virtual: int) -> Compiled:
    """The compiled schedule ``name`` for P, M and V (cached; explorer.schedules.builders)."""
    orders, pairs = stage_orders(name, stages, microbatches, virtual)
    return compile_orders(route_for(name, stages, virtual), orders, pairs, microbatches)


def _slot_durations(compiled: Compiled, times: StageTimes) -> np.ndarray:
    """Per template slot: duration (s)."""
    route = compiled.route
    table = [
        times.duration_s(kind, route.part(stage, chunk), compiled.split, route.virtual)
        for stage in range(route.stages) for kind in KINDS for chunk in range(route.num_chunks)
    ]  # fmt: skip
    return np.array(table)


def _durations(compiled: Compiled, times: StageTimes) -> np.ndarray:
    """Per position: duration (s)."""
    return _slot_durations(compiled, times)[compiled.slots]


def durations_at(compiled: Compiled, times: StageTimes, positions: np.ndarray) -> np.ndarray:
    """Duration (s) of the actions at ``positions`` (any shape)."""
    return _slot_durations(compiled, times)[compiled.slots[positions]]


def position_durations(compiled: Compiled, times: StageTimes) -> tuple[list[float], list[float]]:
    """Per position: duration (s) and the p2p delay on its input (s)."""
    delays = np.where(compiled.hops, times.p2p_s, 0.0)
    return _durations(compiled, times).tolist(), delays[compiled.slots].tolist()


def sweep(compiled: Compiled, times: StageTimes) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (s) of every position, each stage running its actions in order.

    An F&B pair's F (``pair_deps``) also waits for its B's input. Without p2p time (as the
    estimate times schedules) a leaner loop does the same arithmetic: adding a zero delay
    changes no time; and a later sweep replays the first's order, by waves where they are wide
    (module docstring).
    """
    n = len(compiled.deps)
    if times.p2p_s == 0 and compiled.runs:
        waves = _waves(compiled)
        if waves is not None:
            return _replay_waves(waves, _durations(compiled, times))
        durations = _durations(compiled, times).tolist()
        starts, ends = [0.0] * n, [-1.0] * n + [0.0]
        _replay(compiled, durations, starts, ends)
        return np.array(starts), np.array(ends[:-1])
    durations, delays = position_durations(compiled, times)
    starts, ends = [0.0] * n, [-1.0] * n + [0.0]  # -1: not run; [-1]: no input
    levels = [0] * (n + 1)  # [-1]: no input, wave 0
    if times.p2p_s == 0:
        runs = _free_sweep(compiled, durations, starts, ends, levels)
    else:
        runs = _sweep_with_p2p(compiled, durations, delays, starts, ends, levels)
    if not compiled.runs:
        compiled.runs.append(tuple(runs))
        compiled.levels.append(levels)
    return np.array(starts), np.array(ends[:-1])


def _sweep_with_p2p(
    compiled: Compiled, durations: list[float], delays: list[float], starts: list[float],
    ends: list[float], levels: list[int],
) -> list[tuple[int, int, int]]:  # fmt: skip
    """Sweep the stages in turn with ``_stage`` until every action has run; the stretches
    each stage ran, in order. RuntimeError on a sweep with no progress (a deadlock)."""
    offsets = compiled.offsets
    at, clocks, last = list(offsets[:-1]), [0.0] * (len(offsets) - 1), [0] * (len(offsets) - 1)
    left, runs = len(compiled.deps), []
    while left:
        before = left
        for s, stop in enumerate(offsets[1:]):
            i, clocks[s], last[s] = _stage(
                compiled, durations, delays, starts, ends, levels, at[s], stop, clocks[s], last[s]
            )
            if i > at[s]:
                runs.append((s, at[s], i))
            left -= i - at[s]
            at[s] = i
        if left == before:
            raise RuntimeError("the schedule deadlocks: an action waits for one that never runs")
    return runs


def _free_sweep(
    compiled: Compiled, durations: list[float], starts: list[float], ends: list[float],
    levels: list[int],
) -> list[tuple[int, int, int]]:  # fmt: skip
    """``_sweep_with_p2p`` without p2p time, the stage loop written in place (``_stage``'s
    arithmetic less the zero delays, in the same order), without a call per stage and turn:
    ZB-H1 at P 64, M 128 made 12,096 such calls for its 24,576 actions."""
    deps, pair_deps, offsets = compiled.deps, compiled.pair_deps, compiled.offsets
    stages = len(offsets) - 1
    at, clocks, last = list(offsets[:-1]), [0.0] * stages, [0] * stages
    left, runs = len(deps), []
    up, down = range(stages), range(stages - 1, -1, -1)
    rounds = 0
    while left:
        before = left
        rounds += 1
        for s in up if rounds % 2 else down:  # forwards flow up the stages, backwards down
            first, stop = at[s], offsets[s + 1]
            i, clock, wave = first, clocks[s], last[s]
            while i < stop:
                d = deps[i]
                ready = ends[d]
                if ready < 0:
                    break
                latest = levels[d]
                q = pair_deps[i]
                if q >= 0:  # the F of an F&B pair also waits for its B's input
                    other = ends[q]
                    if other < 0:
                        break
                    if other > ready:
                        ready = other
                    if levels[q] > latest:
                        latest = levels[q]
                if ready > clock:
                    clock = ready
                wave = (latest if latest > wave else wave) + 1
                levels[i] = wave
                starts[i] = clock
                clock += durations[i]
                ends[i] = clock
                i += 1
            if i > first:
                runs.append((s, first, i))
                left -= i - first
                at[s], clocks[s], last[s] = i, clock, wave
        if left == before:
            raise RuntimeError("the schedule deadlocks: an action waits for one that never runs")
    return runs


def _waves(compiled: Compiled) -> Waves | None:
    """The compiled schedule's waves (made once, from the first sweep's levels, which are
    then freed), or None where they average fewer than ``WAVE_WIDTH`` actions."""
    if compiled.waves:
        return compiled.waves[0]
    try:
        found = compiled.levels[0]
    except IndexError:  # another thread (an app session) made the waves and freed the levels
        return compiled.waves[0]
    levels = np.array(found[:-1], dtype=np.int64)
    n = len(levels)
    made = None
    if n >= WAVE_WIDTH * int(levels.max(initial=1)):
        order = np.argsort(levels, kind="stable")
        cuts = np.flatnonzero(np.diff(levels[order])) + 1
        index = np.empty(n + 1, dtype=np.int64)  # position -> wave-ordered index; -1 -> n
        index[order], index[n] = np.arange(n), n
        previous = np.arange(n) - 1
        previous[list(compiled.offsets[:-1])] = -1  # a stage's first action follows none
        waits = [index[np.array(compiled.deps)[order]], index[previous[order]]]
        pairs = np.array(compiled.pair_deps)
        if np.any(pairs >= 0):
            waits.append(index[pairs[order]])
        made = Waves(order, (0, *cuts.tolist(), n), tuple(waits))
    compiled.waves.append(made)  # before the levels go: a thread that finds none finds this
    compiled.levels.clear()  # read once: a long schedule's list is tens of MB
    return compiled.waves[0]


def _replay_waves(waves: Waves, durations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_replay``'s arithmetic a wave at a time: every action's start is the max of the ends
    it waits for (0 for none), its end start + duration."""
    n = len(waves.order)
    ends, starts = np.zeros(n + 1), np.empty(n)  # ends[n]: no input
    took = durations[waves.order]
    first, *others = waves.waits
    for lo, hi in pairwise(waves.bounds):
        ready = ends[first[lo:hi]]
        for other in others:
            np.maximum(ready, ends[other[lo:hi]], out=ready)
        starts[lo:hi] = ready
        np.add(ready, took[lo:hi], out=ends[lo:hi])
    by_start, by_end = np.empty(n), np.empty(n)
    by_start[waves.order], by_end[waves.order] = starts, ends[:n]
    return by_start, by_end


def _replay(
    compiled: Compiled, durations: list[float], starts: list[float], ends: list[float]
) -> None:
    """``_free_sweep``'s arithmetic over the first sweep's stretches (``Compiled.runs``), in
    their order: every input has run by then, so none is checked."""
    deps, pair_deps = compiled.deps, compiled.pair_deps
    clocks = [0.0] * (len(compiled.offsets) - 1)
    for s, first, stop in compiled.runs[0]:
        clock = clocks[s]
        for i in range(first, stop):
            ready = ends[deps[i]]
            q = pair_deps[i]
            if q >= 0:  # the F of an F&B pair also waits for its B's input
                other = ends[q]
                if other > ready:
                    ready = other
            if ready > clock:
                clock = ready
            starts[i] = clock
            clock += durations[i]
            ends[i] = clock
        clocks[s] = clock


def _stage(
    compiled: Compiled,
    durations: list[float],
    delays: list[float],
    starts: list[float],
    ends: list[float],
    levels: list[int],
    i: int,
    stop: int,
    clock: float,
    wave: int,
) -> tuple[int, float, int]:
    """Run one stage from position ``i`` until an input is missing: (next position, clock,
    wave of the last run), p2p delays added to the inputs from other stages."""
    deps, pair_deps = compiled.deps, compiled.pair_deps
    while i < stop:
        d = deps[i]
        ready = ends[d]
        if ready < 0:
            break
        ready += delays[i]
        latest = levels[d]
        q = pair_deps[i]
        if q >= 0:
            other = ends[q]
            if other < 0:
                break
            other += delays[i + 1]
            if other > ready:
                ready = other
            if levels[q] > latest:
                latest = levels[q]
        if ready > clock:
            clock = ready
        wave = (latest if latest > wave else wave) + 1
        levels[i] = wave
        starts[i] = clock
        clock += durations[i]
        ends[i] = clock
        i += 1
    return i, clock, wave


def run(compiled: Compiled, times: StageTimes) -> RawTimeline:
    """Start and end of every action of a compiled schedule with ``times``."""
    starts, ends = sweep(compiled, times)
    return RawTimeline(compiled.ids, compiled.stage, starts, ends)
