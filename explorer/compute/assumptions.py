"""Named, adjustable assumptions of the compute-time model, with their sources."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeAssumptions:
    """Kernel efficiencies and FLOP conventions behind compute times."""

    max_efficiency: float = 0.75
    """Ceiling on the achieved share of dense tensor-core peak for large GEMMs (attention core
    included). An assumption: cuBLAS reaches 75-90% of dense peak on large bf16 GEMMs (NVIDIA
    Deep Learning Performance guide, "Matrix Multiplication Background"); a training step's
    GEMMs include awkward shapes and stream interference, so 0.75."""
    half_efficiency_size: float = 2.0**18
    """Per-GPU GEMM size x (tokens x hidden / tp, elements) at which GEMM efficiency is half
    the ceiling. An assumption: x = 2^18 is 256 tokens x 1024 columns, about where a GEMM's
    output tiles (128 x 128 or 128 x 256) stop filling the 108-132 SMs of an A100 / H100 (wave
    quantisation, NVIDIA DL Performance guide)."""
    attention_efficiency: float | None = None
    """Achieved share of peak in the attention core (FlashAttention); None means the dense
    GEMM efficiency. FlashAttention-2 reaches ~70% of A100 peak in the forward pass (Dao 2023,
    arXiv:2307.08691, sec. 4.1) but ~35-40% of H100's; FlashAttention-3 ~75% of H100's (Shah
    et al. 2024, arXiv:2407.08608, sec. 4.1): set it for the kernel you run."""
    hbm_efficiency: float = 0.8
    """Achieved share of HBM bandwidth in memory-bound kernels (norms, activations, softmax,
    the optimizer step). An assumption: STREAM-like kernels reach 80-90% of HBM peak."""
    causal_attention_flops: bool = True
    """Causal attention executes (and MFU counts) half the s x s scores, as FlashAttention
    skips masked blocks (Dao 2023, arXiv:2307.08691, sec. 3.1) and Megatron-LM counts. False:
    the classic attention core computes the whole matrix (Narayanan et al. 2021 and
    Korthikanti et al. 2022 count it whole)."""
    comm_sm_share: float = 0.0
    """Share of the GPU's SMs that communication kernels hold while DualPipe overlaps the EP
    all-to-alls with compute (DualPipe, PP > 1, EP > 1); the GEMM and attention kernels run
    on the rest and take 1 / (1 - share) as long (memory-bound kernels are left as they are:
    HBM, not SMs, limits them). 0 models no reservation. DeepSeek-V3 on H800: 20 of 132 SMs
    (0.152). Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.2."""
    fp8_attention: bool = False
    """Under an fp8 policy the attention core also runs in FP8. False: FP8 for the linear
    layers only, attention in BF16 (Transformer Engine's default; DeepSeek-V3 report,
    arXiv:2412.19437, sec. 3.3: FP8 for the Fprop/Dgrad/Wgrad GEMMs of linear layers)."""

    def __post_init__(self) -> None:
        for name in ("max_efficiency", "hbm_efficiency"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if not 0 <= self.comm_sm_share < 1:
            raise ValueError(f"comm_sm_share must be in [0, 1), got {self.comm_sm_share!r}")
        attention = self.attention_efficiency
        if attention is not None and not 0 < attention <= 1:
            raise ValueError(f"attention_efficiency must be in (0, 1], got {attention!r}")
        if self.half_efficiency_size < 0:
            raise ValueError(
                f"half_efficiency_size must be zero or more, got {self.half_efficiency_size}"
            )


DEFAULT_COMPUTE_ASSUMPTIONS = ComputeAssumptions()
"""The defaults above."""
