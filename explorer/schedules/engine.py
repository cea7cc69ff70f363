"""The event-driven core of the simulator: start and end of every action, fast.

Each action gets an integer id, ``kind * M*C*P + microbatch * C*P + chunk * P + stage`` (C
chunks per stage), so its end time lives in a flat list. A template per (stage, kind, chunk)
holds what does not depend on the micro-batch: the id offset, the dependency's offset, the p2p
delay and the duration. The stages are swept in turn, each running its actions in order for as
long as their inputs are there; a sweep with no progress means a deadlock.
Source: dependency rules of Narayanan et al. 2021 (arXiv:2104.04473) sec. 2.2 and Qi et al. 2024
(arXiv:2401.10241) sec. 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.schedules.actions import KINDS, Kind, Schedule
from explorer.schedules.times import StageTimes

_Template = tuple[int, int, float, float]
"""(own id offset, dependency id offset or -1, delay s, duration s)."""


@dataclass(frozen=True, slots=True)
class RawTimeline:
    """Per stage, in execution order: action ids, start times (s) and end times (s)."""

    ids: list[list[int]]
    starts_s: list[list[float]]
    ends_s: list[list[float]]


def dependency(
    schedule: Schedule, kind: Kind, stage: int, chunk: int
) -> tuple[Kind, int, int] | None:
    """(kind, stage, chunk) whose end a ``kind`` pass on (stage, chunk) waits for.

    F waits for F one route position back, B for B one position on (or for its own F at the end
    of the route: the loss), W for its own B. None for the F at the start of a route.
    """
    if kind == "W":
        return "B", stage, chunk
    there = schedule.neighbour(stage, chunk, -1 if kind == "F" else 1)
    if there is None:
        return None if kind == "F" else ("F", stage, chunk)
    return kind, there[0], there[1]


def action_id(schedule: Schedule, kind: Kind, microbatch: int, chunk: int, stage: int) -> int:
    """The flat integer id of one action (see the module docstring)."""
    per_mb = schedule.num_chunks * schedule.stages
    return (
        (KINDS.index(kind) * schedule.microbatches + microbatch) * per_mb
        + chunk * schedule.stages
        + stage
    )


def templates(schedule: Schedule, times: StageTimes) -> list[dict[tuple[Kind, int], _Template]]:
    """Per stage, (kind, chunk) to the micro-batch-free part of an action's timing."""
    split = schedule.split_backward
    result = []
    for stage in range(schedule.stages):
        table = {}
        for kind in KINDS:
            for chunk in range(schedule.num_chunks):
                dep = dependency(schedule, kind, stage, chunk)
                hop = dep is not None and dep[1] != stage  # p2p only between stages
                part = schedule.position(stage, chunk) % schedule.stages  # which layers
                table[kind, chunk] = (
                    action_id(schedule, kind, 0, chunk, stage),
                    -1 if dep is None else action_id(schedule, dep[0], 0, dep[2], dep[1]),
                    times.p2p_s if hop else 0.0,
                    times.duration_s(kind, part, split, schedule.virtual),
                )
        result.append(table)
    return result


def run(schedule: Schedule, times: StageTimes) -> RawTimeline:
    """Start and end of every action, each stage running its list in order, one at a time.

    An F&B pair's F (``schedule.pairs``) also waits for its B's input.
    """
    table = templates(schedule, times)
    per_mb = schedule.num_chunks * schedule.stages
    end = [-1.0] * (len(KINDS) * schedule.microbatches * per_mb)  # -1: not run yet
    raw = RawTimeline([[] for _ in table], [[] for _ in table], [[] for _ in table])
    pairs = [frozenset(p) for p in schedule.pairs] or [frozenset()] * schedule.stages
    free = [0.0] * schedule.stages
    total, done = sum(len(a) for a in schedule.actions), 0
    while done < total:
        before = done
        for stage, actions in enumerate(schedule.actions):
            ids, starts, ends = raw.ids[stage], raw.starts_s[stage], raw.ends_s[stage]
            here, paired, clock = table[stage], pairs[stage], free[stage]
            first = i = len(ids)
            while i < len(actions):
                a = actions[i]
                own, dep, delay, duration = here[a.kind, a.chunk]
                base = a.microbatch * per_mb
                ready = 0.0 if dep < 0 else end[dep + base]
                if ready < 0:
                    break
                ready += delay
                if paired and i in paired:
                    b = actions[i + 1]
                    _, dep_b, delay_b, _ = here[b.kind, b.chunk]
                    ready_b = end[dep_b + b.microbatch * per_mb]
                    if ready_b < 0:
                        break
                    ready = max(ready, ready_b + delay_b)
                starts.append(max(clock, ready))
                clock = starts[-1] + duration
                ends.append(clock)
                ids.append(own + base)
                end[own + base] = clock
                i += 1
            free[stage] = clock
            done += i - first
        if done == before:
            raise RuntimeError("the schedule deadlocks: an action waits for one that never runs")
    return raw
