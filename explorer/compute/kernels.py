"""GEMM efficiency and tensor-core peaks: the achievable FLOP rate of one GPU.

Kernel efficiency is a named model: a ceiling times a saturating function of the per-GPU GEMM
size, x / (x + x_half), with x = tokens in the GEMM x hidden / tp. Large GEMMs approach the
ceiling; small ones (short micro-batches, wide TP, fine-grained experts) lose to tile and
wave quantisation and launch overhead. Source for the shape: NVIDIA Deep Learning Performance
guide, "Matrix Multiplication Background"; ceiling and x_half are assumptions
(explorer.compute.assumptions), checked against published runs in tests/test_calibration.py.
"""

from __future__ import annotations

from explorer.compute.assumptions import ComputeAssumptions
from explorer.specs import GpuSpec, Layout, ModelSpec


def kernel_efficiency(gemm_size: float, assumptions: ComputeAssumptions) -> float:
    """Achieved share of peak for a per-GPU GEMM of ``gemm_size`` elements (tokens x width).

    Source: the saturating model of this module's docstring: e_max x / (x + x_half).
    """
    if gemm_size <= 0:
        return assumptions.max_efficiency
    half = assumptions.half_efficiency_size
    return assumptions.max_efficiency / (1 + half / gemm_size)  # monotone in floating point


def peak_flops_per_s(gpu: GpuSpec, compute: str) -> float:
    """Dense tensor-core peak of ``gpu`` for a GEMM format (tf32, bf16, fp8), FLOP/s.

    Source: vendor data sheets via GpuSpec; TF32 defaults to half of BF16 and FP8 without
    tensor cores falls back to BF16.
    """
    if compute == "fp8" and gpu.fp8_flops_per_s:
        return gpu.fp8_flops_per_s
    if compute == "tf32":
        return gpu.tf32_flops_per_s or gpu.bf16_flops_per_s / 2
    return gpu.bf16_flops_per_s


def dense_gemm_size(layout: Layout, model: ModelSpec, seq_len: int) -> float:
    """Per-GPU size of the dense GEMMs: tokens per micro-batch (per CP rank) x hidden / tp."""
    tokens = layout.micro_batch_size * seq_len / layout.cp
    return tokens * model.hidden_size / layout.tp


def expert_gemm_size(layout: Layout, model: ModelSpec, seq_len: int) -> float:
    """Per-GPU size of one routed expert's GEMM: tokens per expert x hidden / etp.

    Tokens per expert: each of ep x etp ranks sends b s / (cp tp) tokens x top-k, spread
    over the n_routed_experts (Megatron-Core's all-to-all token dispatcher).
    """
    if not model.is_moe:
        return 0.0
    local = layout.micro_batch_size * seq_len / (layout.cp * layout.tp)
    per_expert = local * model.num_experts_per_tok * layout.ep * layout.etp
    per_expert /= model.n_routed_experts
    return per_expert * model.hidden_size / layout.etp
