"""Named precision policies: the bytes per element of every training state, with sources."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from explorer.specs import GradDType, Precision, PrecisionPolicy
from explorer.units import BYTES_PER_DTYPE

NVFP4_BYTES_PER_ELEMENT = 0.5 + 1 / 16
"""Bytes per element of one NVFP4 copy: a 4-bit E2M1 value and a 1-byte E4M3 scale per 16
elements (the FP32 tensor scale is one per tensor). Source: Transformer Engine
NVFP4BlockScaling docstring; docs/features/low_precision_training/nvfp4/nvfp4.rst."""
LOW_PRECISION_COMPUTE = ("fp8", "fp4")
"""GEMM formats under which only the linear layers' GEMMs run low-precision: the router, the LM
head and the attention core stay in BF16 (explorer.compute.kernels)."""

_POLICIES = MappingProxyType(
    {
        "fp32": PrecisionPolicy(
            name="fp32",
            param_bytes=4,
            grad_bytes=4,
            master_bytes=0,  # the fp32 weights are the master copy
            optimizer_bytes=8,  # Adam m and v in fp32
            activation_bytes=4,
            compute="tf32",
            source="Plain fp32 Adam (PyTorch defaults); GEMMs in TF32 on tensor cores.",
        ),
        "bf16-mixed": PrecisionPolicy(
            name="bf16-mixed",
            param_bytes=2,
            grad_bytes=4,  # Megatron-LM: fp32 main grads (--accumulate-allreduce-grads-in-fp32)
            master_bytes=4,
            optimizer_bytes=8,
            activation_bytes=2,
            compute="bf16",
            source=(
                "Mixed precision (Micikevicius et al. 2018, arXiv:1710.03740); ZeRO K = 12 "
                "(arXiv:1910.02054 sec. 3.1); fp32 main grads as in Megatron-LM."
            ),
        ),
        "bf16-pure": PrecisionPolicy(
            name="bf16-pure",
            param_bytes=2,
            grad_bytes=2,
            master_bytes=0,
            optimizer_bytes=4,  # Adam m and v in bf16
            activation_bytes=2,
            compute="bf16",
            source="Everything in bf16, no master copy (e.g. torch.optim.AdamW on bf16 params).",
        ),
        "fp8-mixed": PrecisionPolicy(
            name="fp8-mixed",
            param_bytes=2,  # bf16 weights; FP8 casts are transient
            grad_bytes=4,  # fp32 gradients for batch accumulation
            master_bytes=4,
            optimizer_bytes=4,  # bf16 Adam moments
            activation_bytes=2,
            compute="fp8",
            source="DeepSeek-V3 report (arXiv:2412.19437) sec. 3.3.3: FP8 GEMMs, fp32 master "
            "weights and grads, bf16 AdamW moments.",
        ),
        "nvfp4-mixed": PrecisionPolicy(
            name="nvfp4-mixed",
            param_bytes=2,  # bf16 weights; the NVFP4 copies are the gemm_weight_copy_bytes
            grad_bytes=4,  # fp32 main grads (Megatron-LM default; grad_dtype bf16 overrides)
            master_bytes=4,
            optimizer_bytes=8,  # fp32 Adam moments (Megatron-Bridge bf16_mixed underneath)
            activation_bytes=2,
            compute="fp4",
            gemm_input_bytes=NVFP4_BYTES_PER_ELEMENT,
            gemm_weight_copy_bytes=2 * NVFP4_BYTES_PER_ELEMENT,
            source=(
                "NVIDIA, Pretraining LLMs with NVFP4 (arXiv:2509.25149); Transformer Engine "
                "NVFP4BlockScaling (transformer_engine/common/recipe/__init__.py): the linear "
                "layers' Fprop, Dgrad and Wgrad GEMMs in NVFP4 (E2M1, an E4M3 scale per 16 "
                "elements, an FP32 scale per tensor; 16 x 16 blocks for weights; random "
                "Hadamard transforms on the Wgrad inputs; stochastic rounding of gradients); "
                "attention, norms, the router and the LM head in BF16; Megatron-Bridge "
                "bf16_with_nvfp4_mixed (training/mixed_precision.py): no blocks kept in BF16 "
                "(first_last_layers_bf16 False)."
            ),
        ),
    }
)


def precision_policy(name: Precision, grad_dtype: GradDType | None = None) -> PrecisionPolicy:
    """The named policy, with the gradient buffer dtype overridden when one is given."""
    if name not in _POLICIES:
        raise ValueError(f"unknown precision {name!r}; choose one of {', '.join(_POLICIES)}")
    policy = _POLICIES[name]
    if grad_dtype is None:
        return policy
    return replace(policy, grad_bytes=BYTES_PER_DTYPE[grad_dtype])
