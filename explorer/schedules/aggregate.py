"""A long timeline at a coarser granularity: busy time per stage, time bin and action kind.

A schedule diagram of thousands of actions draws each bar a pixel or two wide and hides its
labels. Above ``MAX_ACTIONS_PER_ROW`` actions on a stage row, the diagram draws instead, for
each stage and each of ``bins`` equal time bins, the seconds spent in F, B and W inside the bin
(exact: the sum of the actions' overlaps with it) and the micro-batches it touched. Nothing is
estimated here; the bins only add up the simulator's events (``explorer.schedules.simulate``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.schedules.actions import KINDS
from explorer.schedules.simulate import Timeline

MAX_ACTIONS_PER_ROW = 64
"""Most actions on one stage row that the diagram draws one bar each. A named assumption of
the drawing, not of any estimate: a chart about 1,000 px wide then gives each bar at least
~15 px, enough for its micro-batch number (Plotly hides text below ``uniformtext.minsize``)."""
DEFAULT_BINS = 96
"""Time bins of an aggregated diagram across the window drawn (about 10 px each)."""


@dataclass(frozen=True, slots=True, eq=False)
class BinnedTimeline:
    """Busy seconds per (stage, kind, bin) and the micro-batches each (stage, bin) touched."""

    edges_s: np.ndarray
    """Bin edges, s: ``bins + 1`` increasing times from the window's start to its end."""
    busy_s: np.ndarray
    """Seconds of each kind (``KINDS`` order) in each bin, shape (stages, 3, bins)."""
    first_microbatch: np.ndarray
    """Lowest micro-batch of an action overlapping the bin, -1 where none; (stages, bins)."""
    last_microbatch: np.ndarray
    """Highest micro-batch of an action overlapping the bin, -1 where none; (stages, bins)."""

    @property
    def width_s(self) -> np.ndarray:
        """Width of each bin, s."""
        return np.diff(self.edges_s)


def actions_per_row(timeline: Timeline, start_s: float = 0.0, end_s: float | None = None) -> int:
    """Most actions on one stage that overlap the window [start_s, end_s] (s)."""
    end = timeline.makespan_s if end_s is None else end_s
    stage = np.asarray(timeline.events.stage, dtype=int)
    starts = np.asarray(timeline.events.start_s, dtype=float)
    ends = np.asarray(timeline.events.end_s, dtype=float)
    inside = (starts < end) & (ends > start_s)
    counts = np.bincount(stage[inside], minlength=timeline.schedule.stages)
    return int(counts.max(initial=0))


def needs_binning(timeline: Timeline, start_s: float = 0.0, end_s: float | None = None) -> bool:
    """True when a stage row of the window holds more actions than one bar each can show."""
    return actions_per_row(timeline, start_s, end_s) > MAX_ACTIONS_PER_ROW


def _busy_before(starts: np.ndarray, ends: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Seconds of the (non-overlapping, start-sorted) actions spent before each time."""
    if len(starts) == 0:
        return np.zeros(len(times))
    done = np.concatenate([[0.0], np.cumsum(ends - starts)])
    k = np.searchsorted(starts, times, side="right")  # actions started by each time
    running = np.where(k > 0, np.maximum(ends[np.maximum(k - 1, 0)] - times, 0.0), 0.0)
    return done[k] - running


def bin_timeline(
    timeline: Timeline,
    bins: int = DEFAULT_BINS,
    start_s: float = 0.0,
    end_s: float | None = None,
) -> BinnedTimeline:
    """The window [start_s, end_s] (s; the whole step by default) of ``timeline`` in ``bins``
    equal bins: busy seconds per stage, kind and bin, and the micro-batch range of each bin.

    A stage runs one action at a time (``explorer.schedules.engine``), so its actions of one
    kind sorted by start never overlap and the busy time before t is a prefix sum.
    """
    end = timeline.makespan_s if end_s is None else end_s
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    if not end > start_s:
        raise ValueError(f"the window must end after it starts, got {start_s} to {end} s")
    edges = np.linspace(start_s, end, bins + 1)
    stages = timeline.schedule.stages
    ev = timeline.events
    stage = np.asarray(ev.stage, dtype=int)
    kind = np.asarray([KINDS.index(k) for k in ev.kind], dtype=int)
    mb = np.asarray(ev.microbatch, dtype=int)
    starts = np.asarray(ev.start_s, dtype=float)
    ends = np.asarray(ev.end_s, dtype=float)
    busy = np.zeros((stages, len(KINDS), bins))
    first = np.full((stages, bins), -1, dtype=int)
    last = np.full((stages, bins), -1, dtype=int)
    for s in range(stages):
        mine = stage == s
        for k in range(len(KINDS)):
            sel = mine & (kind == k)
            order = np.argsort(starts[sel], kind="stable")
            before = _busy_before(starts[sel][order], ends[sel][order], edges)
            busy[s, k] = np.diff(before)
        order = np.argsort(starts[mine], kind="stable")
        s_start, s_end, s_mb = starts[mine][order], ends[mine][order], mb[mine][order]
        lo = np.searchsorted(s_end, edges[:-1], side="right")  # first action ending after e0
        hi = np.searchsorted(s_start, edges[1:], side="left")  # actions starting before e1
        for b in np.flatnonzero(hi > lo):
            touched = s_mb[lo[b] : hi[b]]
            first[s, b], last[s, b] = touched.min(), touched.max()
    return BinnedTimeline(edges_s=edges, busy_s=busy, first_microbatch=first, last_microbatch=last)
