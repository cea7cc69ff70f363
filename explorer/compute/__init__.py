"""Compute time per pipeline stage and micro-batch, and the optimizer step, in seconds.

``work`` says what a stage computes per token; ``kernels`` how fast GEMMs run; ``elementwise``
what memory-bound kernels move; ``passes`` turns them into forward / backward / weight /
recompute seconds and times the optimizer step; ``assumptions`` names every adjustable number.
"""

from explorer.compute.assumptions import DEFAULT_COMPUTE_ASSUMPTIONS, ComputeAssumptions
from explorer.compute.elementwise import Traffic, stage_traffic
from explorer.compute.kernels import (
    dense_gemm_size,
    expert_gemm_size,
    kernel_efficiency,
    peak_flops_per_s,
)
from explorer.compute.passes import (
    ComputeContext,
    PassTimes,
    optimizer_bytes_per_param,
    optimizer_step_s,
    pass_times,
)
from explorer.compute.work import StageWork, stage_work

__all__ = [
    "DEFAULT_COMPUTE_ASSUMPTIONS",
    "ComputeAssumptions",
    "ComputeContext",
    "PassTimes",
    "StageWork",
    "Traffic",
    "dense_gemm_size",
    "expert_gemm_size",
    "kernel_efficiency",
    "optimizer_bytes_per_param",
    "optimizer_step_s",
    "pass_times",
    "peak_flops_per_s",
    "stage_traffic",
    "stage_work",
]
