"""Pipeline schedules as data (GPipe, 1F1B, interleaved 1F1B, ZB-H1, DualPipe) and their timing.

``build_schedule`` gives each stage's ordered actions; ``simulate`` times them with per-stage
durations and a point-to-point transfer time; ``step_time`` gives its makespan and busy times
alone, fast (the estimate's path); ``peak_inflight`` is the oracle of the memory model's
closed forms (explorer.partition).
"""

from explorer.schedules.actions import KINDS, Action, Kind, Schedule
from explorer.schedules.builders import build_schedule, group_size
from explorer.schedules.periodic import StepTime, step_time
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
    "StepTime",
    "Timeline",
    "build_schedule",
    "group_size",
    "peak_inflight",
    "simulate",
    "step_time",
]
