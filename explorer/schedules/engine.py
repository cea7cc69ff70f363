"""The event-driven core of the simulator: start and end of every action, fast.

A schedule is first *compiled*: its actions laid out stage by stage in run order (a flat
*position* each), with the position each one waits for resolved once. Each action has an id,
``kind * M*C*P + microbatch * C*P + chunk * P + stage`` (C chunks per stage), and a *slot*,
``(stage * 3 + kind) * C + chunk``, whose template holds what does not depend on the
micro-batch: the dependency, the p2p hop and the duration. Timing then sweeps the stages in
turn, each running its actions in order for as long as their inputs are there; a sweep with no
progress means a deadlock. Every start is max(stage free, input ready + delay) and every end
start + duration, whatever the sweep order, so the times do not depend on how it is compiled.
A compiled schedule serves any durations: the estimate times many layouts of one (schedule,
P, M, V) with one compile (``compile_named``, cached).
Source: dependency rules of Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2 and Qi et al. 2024
(arXiv:2401.10241) sec. 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
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
    starts_s: list[float]
    ends_s: list[float]


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


def position_durations(compiled: Compiled, times: StageTimes) -> tuple[list[float], list[float]]:
    """Per position: duration (s) and the p2p delay on its input (s)."""
    route = compiled.route
    table = [
        times.duration_s(kind, route.part(stage, chunk), compiled.split, route.virtual)
        for stage in range(route.stages) for kind in KINDS for chunk in range(route.num_chunks)
    ]  # fmt: skip
    delays = np.where(compiled.hops, times.p2p_s, 0.0)
    return np.array(table)[compiled.slots].tolist(), delays[compiled.slots].tolist()


def sweep(compiled: Compiled, times: StageTimes) -> tuple[list[float], list[float]]:
    """Start and end (s) of every position, each stage running its actions in order.

    An F&B pair's F (``pair_deps``) also waits for its B's input. Without p2p time (as the
    estimate times schedules) a leaner loop does the same arithmetic: adding a zero delay
    changes no time.
    """
    durations, delays = position_durations(compiled, times)
    deps, offsets = compiled.deps, compiled.offsets
    starts, ends = [0.0] * len(deps), [-1.0] * len(deps) + [0.0]  # -1: not run; [-1]: no input
    if times.p2p_s == 0 and compiled.runs:
        _replay(compiled, durations, starts, ends)
        return starts, ends[:-1]
    step = _free_stage if times.p2p_s == 0 else _stage
    at, clocks = list(offsets[:-1]), [0.0] * (len(offsets) - 1)
    left, runs = len(deps), []
    while left:
        before = left
        for s, stop in enumerate(offsets[1:]):
            i, clocks[s] = step(compiled, durations, delays, starts, ends, at[s], stop, clocks[s])
            if i > at[s]:
                runs.append((s, at[s], i))
            left -= i - at[s]
            at[s] = i
        if left == before:
            raise RuntimeError("the schedule deadlocks: an action waits for one that never runs")
    if not compiled.runs:
        compiled.runs.append(tuple(runs))
    return starts, ends[:-1]


def _replay(
    compiled: Compiled, durations: list[float], starts: list[float], ends: list[float]
) -> None:
    """``_free_stage``'s arithmetic over the first sweep's stretches (``Compiled.runs``), in
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


def _free_stage(
    compiled: Compiled,
    durations: list[float],
    delays: list[float],
    starts: list[float],
    ends: list[float],
    i: int,
    stop: int,
    clock: float,
) -> tuple[int, float]:
    """Run one stage from position ``i`` until an input is missing: (next position, clock).

    Without p2p time (``_stage`` adds it): the estimate's hot loop.
    """
    deps, pair_deps = compiled.deps, compiled.pair_deps
    while i < stop:
        ready = ends[deps[i]]
        if ready < 0:
            break
        q = pair_deps[i]
        if q >= 0:  # the F of an F&B pair also waits for its B's input
            other = ends[q]
            if other < 0:
                break
            if other > ready:
                ready = other
        if ready > clock:
            clock = ready
        starts[i] = clock
        clock += durations[i]
        ends[i] = clock
        i += 1
    return i, clock


def _stage(
    compiled: Compiled,
    durations: list[float],
    delays: list[float],
    starts: list[float],
    ends: list[float],
    i: int,
    stop: int,
    clock: float,
) -> tuple[int, float]:
    """``_free_stage`` with p2p delays."""
    deps, pair_deps = compiled.deps, compiled.pair_deps
    while i < stop:
        ready = ends[deps[i]]
        if ready < 0:
            break
        ready += delays[i]
        q = pair_deps[i]
        if q >= 0:
            other = ends[q]
            if other < 0:
                break
            other += delays[i + 1]
            if other > ready:
                ready = other
        if ready > clock:
            clock = ready
        starts[i] = clock
        clock += durations[i]
        ends[i] = clock
        i += 1
    return i, clock


def run(compiled: Compiled, times: StageTimes) -> RawTimeline:
    """Start and end of every action of a compiled schedule with ``times``."""
    starts, ends = sweep(compiled, times)
    return RawTimeline(compiled.ids, compiled.stage, starts, ends)
