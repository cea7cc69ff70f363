"""One training layout end to end: memory, compute, communication, schedule, throughput."""

from explorer.estimate.core import Estimate, bottleneck_part, estimate, time_step
from explorer.estimate.pipeline import PipelineModel, PipelineTime, pipeline_time
from explorer.estimate.report import estimate_dict, estimate_timeline
from explorer.estimate.stages import (
    DEFAULT_ESTIMATE_ASSUMPTIONS,
    EstimateAssumptions,
    StageTime,
)

__all__ = [
    "DEFAULT_ESTIMATE_ASSUMPTIONS",
    "Estimate",
    "EstimateAssumptions",
    "PipelineModel",
    "PipelineTime",
    "StageTime",
    "bottleneck_part",
    "estimate",
    "estimate_dict",
    "estimate_timeline",
    "pipeline_time",
    "time_step",
]
