"""Named, adjustable assumptions of the compute-time model, with their sources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from explorer.compute.framework import FRAMEWORKS, ComputeFramework
from explorer.specs import Fp8Recipe, _HashOnce, hash_once

AttentionKernel = Literal[
    "fa3-h100", "fa2-h100", "fa2-a100", "fa1-a100", "fa1-h100", "fa4-b200", "fa4-gb200",
    "cudnn-h100", "cudnn-b200", "cudnn-gb200", "cudnn913-gb200", "cudnn917-b200",
]  # fmt: skip
"""Attention tables of presets/kernels/attention.toml a stack can call by name."""


@hash_once
@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeAssumptions(_HashOnce):
    """Kernel efficiencies and FLOP conventions behind compute times."""

    max_efficiency: float = 1.0
    """Ceiling on the achieved share of dense peak of every GEMM and attention kernel, on top
    of the kernel model (explorer.compute.gemm); 1 leaves the published kernel figures alone.
    Set it below them to cap what a slower stack reaches."""
    gemm_efficiency_scale: float = 1.0
    """Multiplies every GEMM's modelled efficiency (1 = the published figures; above 1 for a
    stack faster than them, the result still at most ``max_efficiency``). ``probe`` files set
    it from the user's measured GEMMs (explorer.probe.derive); measured points can also anchor
    the model directly (``explorer.compute.with_measured_gemms``)."""
    attention_efficiency: float | None = None
    """Achieved share of peak in the attention core, forward and backward; None means the
    GPU's published kernel figures by sequence length and causal mask (FA3 on H100-class,
    FA2 on A100; presets/kernels/attention.toml), or the GEMMs' efficiency where the GPU has
    none. FlashAttention-2 reaches ~35-40% of H100's peak (Dao 2023, arXiv:2307.08691);
    FlashAttention-3 ~65% at head dim 128 (Shah et al. 2024, arXiv:2407.08608, Fig. 5)."""
    hbm_efficiency: float = 0.8
    """Achieved share of HBM bandwidth in memory-bound kernels (norms, activations, RoPE,
    casts, MoE permutation, the optimizer step) and in the GEMM roofline. Source: DeepGEMM
    README, H800 memory-bound GEMM rows (M = 64-128): 2,604-2,668 GB/s of 3,350 (78-80%)."""
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
    fp8_recipe: Fp8Recipe | None = None
    """FP8 scaling recipe, which sets the cast and scaling traffic of every FP8 GEMM input
    (explorer.compute.casts); None means the GPU preset's default (per-tensor delayed on
    H100/H200, blockwise on H800 as DeepSeek-V3, MXFP8 on Blackwell)."""
    kernel_gap_s: float = 0.0
    """Idle time between two dependent kernels on the GPU, seconds per kernel launched (the
    framework's launch overhead where the CPU does not run ahead; 0 with CUDA graphs).
    Megatron-Core, torchtitan with torch.compile and DeepSpeed run ahead of the GPU for
    large micro-batches, so 0 by default; set 2e-6 to 5e-6 for eager small kernels (CUDA
    launch latency: NVIDIA CUDA C++ Best Practices Guide, "Asynchronous execution")."""
    framework: ComputeFramework = "megatron"
    """Training stack whose kernels run around the GEMMs (explorer.compute.framework): the
    memory-bound ledger of norms, RoPE, activations and residuals (Megatron-Core's fused TE
    kernels; torchtitan's eager ops; torch.compile's fused blocks), the fp32 loss, FSDP2's
    copies around its collectives, the optimizer's form and the CPU issue cost per kernel.
    megatron keeps the estimate's Megatron-Core figures."""
    fused_norm: bool = False
    """Under an eager profile the norms run as one kernel each (torchtitan's norm_type
    "fused_rmsnorm", a Triton kernel, torchtitan/models/norms.py) instead of the eager ops."""
    cuda_graphs: bool = False
    """The step runs as captured CUDA graphs: no kernel gaps and no CPU issue time (Megatron
    cuda_graph_impl "local" full_iteration; TE's per-layer graphs are partial and not this)."""
    kernel_issue_s: float | None = None
    """CPU seconds to issue one kernel (a pass lasts at least its kernels' issue time); None
    means the framework profile's figure (0 for megatron, 5 us for eager PyTorch stacks: a
    named assumption, explorer.compute.framework.EAGER_KERNEL_ISSUE_S)."""
    attention_kernel: AttentionKernel | None = None
    """An attention table of presets/kernels/attention.toml by id (fa3-h100, fa2-h100,
    fa2-a100) in place of the GPU preset's: the kernel the stack calls. PyTorch's SDPA
    (torchtitan) runs FlashAttention-2 on H100 before torch 2.9 (pytorch/pytorch#142132,
    #162073): fa2-h100. None: the GPU's."""
    fp8_attention: bool = False
    """Under an fp8 policy the attention core also runs in FP8. False: FP8 for the linear
    layers only, attention in BF16 (Transformer Engine's default; DeepSeek-V3 report,
    arXiv:2412.19437, sec. 3.3: FP8 for the Fprop/Dgrad/Wgrad GEMMs of linear layers)."""

    grouped_gemm_call_s: float = 33e-6
    """Shortest time of one local expert's GEMM call where a grouped GEMM runs as one cuBLAS
    call per local expert (Transformer Engine ``GroupedLinear``, Megatron-Core
    --moe-grouped-gemm: "launch multiple local GEMM kernels in multiple streams"), s: a
    grouped GEMM over E local experts lasts at least E x this in each pass, whatever its
    FLOPs. 0 for a single-launch grouped kernel (DeepGEMM, CUTLASS, torch._grouped_mm).
    Source: NVIDIA/TransformerEngine PR #3134, SM100 benchmark_grouped_linear (GEMM-only
    row): 8 experts x 128 tokens, N = K = 2048, multi-stream cuBLAS 0.267 ms, i.e. 33 us per
    expert, against 0.069 ms for one CUTLASS launch; the per-expert loop and its 4 streams:
    TE common/gemm/cublaslt_gemm.cu (multi_stream_cublas_gemm)."""

    ep_chunk_sort: bool = True
    """The MoE dispatcher sorts the received tokens by local expert and back (Megatron-Core's
    all-to-all dispatcher with more than one local expert: explorer.compute.moe); False for
    a dispatcher that hands them over grouped by expert (DeepEP, HybridEP)."""

    a2a_overlap: bool = False
    """EP all-to-alls run beside the compute outside DualPipe too, holding
    ``comm_sm_share`` of the SMs while they do (Megatron-Core
    --overlap-moe-expert-parallel-comm, "Batch-Level EP-A2A hiding" in its MoE README; with
    the flex dispatcher DeepEP's kernels take ``moe_deepep_num_sms`` = 20 SMs, HybridEP's 16:
    Megatron-Core transformer_config.py)."""

    def __post_init__(self) -> None:
        if self.grouped_gemm_call_s < 0:
            raise ValueError(
                f"grouped_gemm_call_s must be zero or more, got {self.grouped_gemm_call_s!r}"
            )
        if not self.gemm_efficiency_scale > 0:
            raise ValueError(
                f"gemm_efficiency_scale must be positive, got {self.gemm_efficiency_scale!r}"
            )
        for name in ("max_efficiency", "hbm_efficiency"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        if not 0 <= self.comm_sm_share < 1:
            raise ValueError(f"comm_sm_share must be in [0, 1), got {self.comm_sm_share!r}")
        attention = self.attention_efficiency
        if attention is not None and not 0 < attention <= 1:
            raise ValueError(f"attention_efficiency must be in (0, 1], got {attention!r}")
        if self.framework not in FRAMEWORKS:
            raise ValueError(
                f"framework must be one of {', '.join(FRAMEWORKS)}, got {self.framework!r}"
            )
        if self.kernel_issue_s is not None and not self.kernel_issue_s >= 0:
            raise ValueError(f"kernel_issue_s must be zero or more, got {self.kernel_issue_s!r}")
        if self.attention_kernel is not None:
            from explorer.presets import attention_curves

            if self.attention_kernel not in attention_curves():
                raise ValueError(
                    f"attention_kernel must be one of {', '.join(attention_curves())}, "
                    f"got {self.attention_kernel!r}"
                )
        if self.kernel_gap_s < 0:
            raise ValueError(f"kernel_gap_s must be zero or more, got {self.kernel_gap_s!r}")


DEFAULT_COMPUTE_ASSUMPTIONS = ComputeAssumptions()
"""The defaults above."""
