"""Compute time per pipeline stage and micro-batch, and the optimizer step, in seconds.

``work`` says what a stage computes per token; ``kernels`` which GEMMs a block runs per GPU,
``gemm`` how efficiently a GEMM of a shape and format runs on a GPU (anchored on measured
figures), ``attention`` the attention kernel's published figures; ``elementwise`` what
memory-bound kernels move and ``casts`` what FP8 casts add; ``passes`` turns them into forward
/ backward / weight / recompute seconds and times the optimizer step; ``assumptions`` names
every adjustable number. MFU and HFU (explorer.estimate) are defined on the dense peak of the
precision policy's GEMM format (``peak_flops_per_s``: BF16 for bf16 policies, FP8 for
fp8-mixed, TF32 for fp32), with the layers kept in BF16 counted against it too.
"""

from explorer.compute.assumptions import DEFAULT_COMPUTE_ASSUMPTIONS, ComputeAssumptions
from explorer.compute.attention import attention_share
from explorer.compute.casts import cast_bytes
from explorer.compute.elementwise import Traffic, stage_traffic
from explorer.compute.gemm import (
    gemm_efficiency,
    kernel_figures,
    peak_flops_per_s,
    with_measured_gemms,
)
from explorer.compute.kernels import Gemm, GemmTimes, block_gemms, gemm_times
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
    "Gemm",
    "GemmTimes",
    "PassTimes",
    "StageWork",
    "Traffic",
    "attention_share",
    "block_gemms",
    "cast_bytes",
    "gemm_efficiency",
    "gemm_times",
    "kernel_figures",
    "optimizer_bytes_per_param",
    "optimizer_step_s",
    "pass_times",
    "peak_flops_per_s",
    "stage_traffic",
    "stage_work",
    "with_measured_gemms",
]
