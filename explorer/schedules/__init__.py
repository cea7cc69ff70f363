"""Pipeline schedules as data (GPipe, 1F1B, interleaved 1F1B, ZB-H1, DualPipe) and their timing.

``build_schedule`` gives each stage's ordered actions; ``simulate`` times them with per-stage
durations and a point-to-point transfer time; ``peak_inflight`` feeds the memory model.
"""

from explorer.schedules.actions import KINDS, Action, Kind, Schedule
from explorer.schedules.builders import build_schedule, group_size
from explorer.schedules.simulate import (
    Event,
    EventTable,
    InflightCurve,
    Timeline,
    peak_inflight,
    simulate,
)
from explorer.schedules.times import StageTimes

__all__ = [
    "KINDS",
    "Action",
    "Event",
    "EventTable",
    "InflightCurve",
    "Kind",
    "Schedule",
    "StageTimes",
    "Timeline",
    "build_schedule",
    "group_size",
    "peak_inflight",
    "simulate",
]
