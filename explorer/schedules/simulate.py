"""The simulator: a schedule's actions and per-stage durations in, a timed step out.

Rules (see ``engine.py``): a stage runs its actions one at a time, in its list order, each as
soon as its input is there. F of (micro-batch, chunk) waits for F at the previous route position
(+ p2p when that is another stage); B waits for B at the next route position (+ p2p), or for its
own F at the end of the route (the loss); W waits for its own B. A chunk's pass takes the time
of the stage's layers / V.

In-flight rule: a (micro-batch, chunk) activation set is held from the start of its F to the
end of the last backward piece that needs it: B for schedules without split backward (GPipe,
1F1B, interleaved), W for ZB-H1 and DualPipe. Counts are in stage-equivalent micro-batches:
chunk sets / V.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from explorer.schedules.actions import KINDS, Kind, Schedule
from explorer.schedules.builders import build_schedule
from explorer.schedules.engine import RawTimeline, compile_orders, run
from explorer.schedules.times import StageTimes
from explorer.specs import ScheduleName


class Event(NamedTuple):
    """One timed action."""

    stage: int
    kind: Kind
    microbatch: int
    chunk: int
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class EventTable:
    """Every timed action as columns, per stage in execution order, stage 0 first."""

    stage: tuple[int, ...]
    kind: tuple[Kind, ...]
    microbatch: tuple[int, ...]
    chunk: tuple[int, ...]
    start_s: tuple[float, ...]
    """Start of each action, s."""
    end_s: tuple[float, ...]
    """End of each action, s."""

    def __len__(self) -> int:
        return len(self.stage)

    def __iter__(self) -> Iterator[Event]:
        columns = (self.stage, self.kind, self.microbatch, self.chunk, self.start_s, self.end_s)
        return map(Event, *columns)

    def __getitem__(self, index: int) -> Event:
        return Event(
            self.stage[index],
            self.kind[index],
            self.microbatch[index],
            self.chunk[index],
            self.start_s[index],
            self.end_s[index],
        )


@dataclass(frozen=True, slots=True)
class InflightCurve:
    """A step function: ``count[i]`` activation sets (stage-equivalents) from ``times_s[i]``."""

    times_s: tuple[float, ...]
    """Times the count changes, s; the first is 0."""
    count: tuple[float, ...]
    """Activation sets held from each time on, stage-equivalent micro-batches."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """A simulated training step: every action's start and end, bubble and activation peaks."""

    schedule: Schedule
    times: StageTimes
    events: EventTable
    """Every action with its start and end, s."""
    makespan_s: float
    """End of the last action, s."""
    busy_s: tuple[float, ...]
    """Compute time on each stage, s."""
    inflight: tuple[InflightCurve, ...]
    """Activation sets held on each stage over time, stage-equivalent micro-batches."""
    peak_inflight: tuple[float, ...]
    """Most activation sets held at once on each stage, stage-equivalent micro-batches."""

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the stages' time, 1 - busy / (P * makespan), a fraction."""
        if self.makespan_s == 0:
            return 0.0
        return 1.0 - sum(self.busy_s) / (len(self.busy_s) * self.makespan_s)

    @property
    def idle_s(self) -> tuple[float, ...]:
        """Idle time of each stage within the step, s."""
        return tuple(self.makespan_s - busy for busy in self.busy_s)

    @property
    def parameter_copies(self) -> tuple[int, ...]:
        """Copies of one stage's parameters each stage holds."""
        return self.schedule.parameter_copies


def _columns(raw: RawTimeline, schedule: Schedule) -> dict[str, np.ndarray]:
    """Decode the engine's action ids into stage, kind, micro-batch and chunk columns."""
    per_mb = schedule.num_chunks * schedule.stages
    kind, rest = np.divmod(raw.ids, schedule.microbatches * per_mb)
    microbatch, rest = np.divmod(rest, per_mb)
    chunk, stage = np.divmod(rest, schedule.stages)
    return {
        "stage": stage,
        "kind": kind,
        "microbatch": microbatch,
        "chunk": chunk,
        "start_s": np.array(raw.starts_s, dtype=float),
        "end_s": np.array(raw.ends_s, dtype=float),
    }


def _curve(acquire_s: np.ndarray, release_s: np.ndarray, virtual: int) -> InflightCurve:
    """Step function of activation sets held, from acquisition and release times (s)."""
    times = np.concatenate([acquire_s, release_s])
    deltas = np.concatenate([np.ones(len(acquire_s)), -np.ones(len(release_s))])
    order = np.lexsort((deltas, times))  # at equal times, releases first
    times, count = times[order], np.cumsum(deltas[order]) / virtual
    keep = np.append(times[1:] != times[:-1], True)
    times, count = times[keep], count[keep]
    if len(times) == 0 or times[0] > 0:
        times, count = np.insert(times, 0, 0.0), np.insert(count, 0, 0.0)
    return InflightCurve(times_s=tuple(times.tolist()), count=tuple(count.tolist()))


def _curves(columns: dict[str, np.ndarray], schedule: Schedule) -> tuple[InflightCurve, ...]:
    """Activation sets held on each stage over time (the in-flight rule above)."""
    release = KINDS.index("W" if schedule.split_backward else "B")
    stage, kind = columns["stage"], columns["kind"]
    curves = []
    for s in range(schedule.stages):
        acquire = columns["start_s"][(stage == s) & (kind == 0)]
        freed = columns["end_s"][(stage == s) & (kind == release)]
        curves.append(_curve(acquire, freed, schedule.virtual))
    return tuple(curves)


def _table(columns: dict[str, np.ndarray]) -> EventTable:
    kinds = np.array(KINDS)[columns["kind"]]
    return EventTable(
        stage=tuple(columns["stage"].tolist()),
        kind=tuple(kinds.tolist()),
        microbatch=tuple(columns["microbatch"].tolist()),
        chunk=tuple(columns["chunk"].tolist()),
        start_s=tuple(columns["start_s"].tolist()),
        end_s=tuple(columns["end_s"].tolist()),
    )


def simulate(schedule: Schedule, times: StageTimes) -> Timeline:
    """Time one training step of ``schedule`` with ``times``: events, makespan (s), bubble.

    Source: dependency rules of Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2 and
    Qi et al. 2024 (arXiv:2401.10241) sec. 2; the event-driven sweep in ``engine.py``.
    """
    if times.stages != schedule.stages:
        raise ValueError(f"times are for {times.stages} stages, the schedule has {schedule.stages}")
    orders = [[(a.kind, a.microbatch, a.chunk) for a in acts] for acts in schedule.actions]
    compiled = compile_orders(schedule.route, orders, schedule.pairs, schedule.microbatches)
    columns = _columns(run(compiled, times), schedule)
    durations = columns["end_s"] - columns["start_s"]
    busy = np.bincount(columns["stage"], weights=durations, minlength=schedule.stages)
    curves = _curves(columns, schedule)
    return Timeline(
        schedule=schedule,
        times=times,
        events=_table(columns),
        makespan_s=float(columns["end_s"].max(initial=0.0)),
        busy_s=tuple(busy.tolist()),
        inflight=curves,
        peak_inflight=tuple(max(c.count) for c in curves),
    )


@lru_cache(maxsize=1024)
def peak_inflight(
    name: ScheduleName, stages: int, microbatches: int, virtual: int = 1
) -> tuple[float, ...]:
    """Peak activation sets held on each stage, stage-equivalent micro-batches (unit times).

    Simulated with F = B = W = 1 (B = 2 where W is not split); for the memory model.
    Source: the in-flight rule of this module; closed forms in
    ``explorer.partition.inflight_microbatches``.
    """
    schedule = build_schedule(name, stages, microbatches, virtual)
    times = StageTimes.uniform(stages, forward_s=1.0, backward_s=1.0, weight_s=1.0)
    return simulate(schedule, times).peak_inflight
