"""What the serving model assumes (efficiencies, overlap, engine memory) and what it leaves out."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from explorer.comm.collectives import LinkEfficiency
from explorer.memory.serving import MemoryAssumptions
from explorer.serving.kernels import DECODE_ATTENTION_COMPUTE_SHARE, DECODE_ATTENTION_HBM_SHARE

LEAVES_OUT = (
    "the engine's host time per step unless step_overhead_s sets it (the queueing of an "
    "engine under load is in explorer.serving.scheduler), KV sharing of cached prefixes "
    "between sequences, overlap of communication with compute other than two-batch overlap, "
    "decode attention's bandwidth at short KV lengths (its share is one figure), non-GEMM "
    "kernels (norms, activations, rotary), load imbalance between attention "
    "data-parallel groups, CPU sampling and detokenisation"
)
"""What the serving model leaves out, shown with every result."""


GraphSizes = Literal["vllm", "tensorrt-llm"]
CUDA_GRAPH_SIZES: dict[str, tuple[int, ...]] = {
    "vllm": (1, 2, 4, *range(8, 257, 8)),
    "tensorrt-llm": (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192),
}
"""Decode batch sizes each engine captures as CUDA graphs. Sources: vLLM
``_BATCH_SIZES_TO_CAPTURE`` = [1, 2, 4] + 8 x (1..32) (worker/model_runner.py); TensorRT-LLM
docs/source/performance/perf-overview.md, the ``cuda_graph_config`` of its llm_options.yml
(``enable_padding: true``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingAssumptions:
    """Adjustable efficiency assumptions of the serving model, with their sources."""

    memory: MemoryAssumptions = field(default_factory=MemoryAssumptions)
    """Engine memory assumptions (headroom, paged blocks, prefill chunk, runtime, buffers)."""
    prefill_compute_efficiency: float = 1.0
    """Most of the dense peak any serving GEMM reaches, over the kernel model's own ceiling
    (explorer.compute.gemm: each GEMM's share at its shape, capped at the GPU's best measured
    share, MAMF). 1: the kernel model alone; a calibration file sets it to its best measured
    GEMM's share (explorer.probe)."""
    hbm_efficiency: float = 0.8
    """Fraction of HBM bandwidth the GEMMs' weight and activation reads sustain (the roofline's
    memory term). Source: the training model's figure (explorer.compute.assumptions): DeepGEMM
    README, H800 memory-bound GEMM rows (M = 64-128): 2,604-2,668 GB/s of 3,350 (78-80%)."""
    decode_attention_hbm_efficiency: float = DECODE_ATTENTION_HBM_SHARE
    """Fraction of HBM bandwidth decode attention reads the KV cache at. Source:
    ``explorer.serving.kernels.DECODE_ATTENTION_HBM_SHARE`` (FlashMLA on H100: 2,826 of 3,352
    GB/s)."""
    decode_attention_compute_efficiency: float = DECODE_ATTENTION_COMPUTE_SHARE
    """Fraction of the dense peak a compute-bound decode attention kernel reaches (MLA's
    absorbed decode with many heads a GPU). Source:
    ``explorer.serving.kernels.DECODE_ATTENTION_COMPUTE_SHARE`` (FlashMLA: 660 TFLOPS on
    H800)."""
    links: LinkEfficiency = field(default_factory=LinkEfficiency)
    """Achievable share of NVLink and fabric bandwidth for collectives (explorer.comm)."""
    comm_overlap: float = 0.0
    """Fraction of collective time hidden under compute; 0 because TP all-reduces and EP
    all-to-alls sit between dependent GEMMs (overlap needs two-micro-batch tricks)."""
    expert_load_cv: float = 1.68
    """Coefficient of variation of routed tokens between experts when they stay where they
    were loaded. Source: TensorRT-LLM examples/ep_load_balancer/README.md, DeepSeek-R1 on EP32
    (8 experts a rank, 1024 token copies a rank): the hottest rank gets 1.564 x more than
    the mean; 1.564 = sqrt(2 ln 32) sqrt(cv^2 / 8 + 1 / 1024) gives cv = 1.68."""
    balanced_load_cv: float = 0.084
    """The same spread left after EPLB places redundant experts by load. Source: the same
    README, EP36 with 288 slots (8 a rank): the hottest rank 0.115 x over the mean, so
    0.115 = sqrt(2 ln 36) sqrt(cv^2 / 8 + 1 / 1024) gives cv = 0.084."""
    redundant_experts: int = 0
    """Redundant expert copies per MoE block that EPLB may place (0: only as many as an EP
    degree needs to divide the experts evenly). Source: DeepSeek-V3 report sec. 3.4 and
    SGLang's blog use 32 (256 + 32 = 288 slots: EP 32, 72, 144)."""
    allow_tp_across_nodes: bool = False
    """Accept TP groups larger than the scale-up domain (with a warning) instead of rejecting."""
    ep_fp8_dispatch: bool = True
    """Whether the EP dispatch sends tokens in FP8 (with 1 x 128 scales) when the expert GEMMs
    take FP8 or FP4 inputs; combine stays bf16. Source: DeepEP README (FP8 dispatching, BF16
    combining), as SGLang and TensorRT-LLM's wide-EP run DeepSeek."""
    kv_transfer_overlap: bool = True
    """Whether a disaggregated prefill pool sends each block's KV cache while the later blocks
    compute (layer-wise transfer: Splitwise, Patel et al. 2024, arXiv:2311.18677, sec. 4.3;
    Mooncake and NIXL transfer engines), so TTFT waits for the last block's share only and the
    NIC, not the prefill, limits the pool when it is slower; False sends the whole KV after
    the prefill (TTFT and the prefill replica's time per request both grow by the transfer)."""
    prefix_cache_hit_rate: float = 0.0
    """Share of each prompt's tokens found in the prefix cache (vLLM automatic prefix caching,
    SGLang RadixAttention, Zheng et al. 2024, arXiv:2312.07104): those tokens are not
    prefilled, so prefill tokens and TTFT shrink; their KV still takes memory per sequence
    (sharing between sequences is left out)."""

    experts_parallel_in_tp: bool = False
    """Whether, in a layout without attention data parallel (ep 1) and tp > 1, the MoE blocks
    hold whole experts on each TP rank (expert parallel over the TP group, E / tp experts a
    rank) instead of a 1 / tp slice of every expert. The weight bytes and FLOPs per GPU are
    the same; the busiest rank sets the pace (``experts.rank_load_imbalance`` over tp ranks).
    Source: TensorRT-LLM ``--tp N --ep N`` without ``enable_attention_dp``
    (moe_expert_parallel_size = tp: attention TP, experts EP on the same GPUs); vLLM's
    ``--enable-expert-parallel`` with TP likewise. False: TP-sharded experts (vLLM's
    default)."""
    chunked_prefill: bool = True
    """Whether a prompt may be split over steps under the token budget (vLLM V1 and SGLang
    chunk by default). ``False`` admits each prompt whole: a step holds its decodes and only
    as many whole prompts as the budget leaves room for, so with long prompts and short
    outputs fewer sequences can keep decoding (``explorer.serving.latency.whole_prompt_decodes``).
    Source: TensorRT-LLM's ``enable_chunked_prefill`` is off by default, and trtllm-bench
    throughput leaves it off unless asked (tensorrt_llm/bench/benchmark/utils/general.py,
    ``get_settings``)."""
    cuda_graphs: bool = True
    """Whether decode-only steps replay captured CUDA graphs (vLLM, SGLang and TensorRT-LLM do
    by default): no kernel is launched from the host, and each attention group's batch is
    padded up to the next captured size (``cuda_graph_sizes``), whose extra rows the
    GEMMs compute. A batch above the largest size, a step with prefill, or ``False``, runs
    eagerly: the step takes at least its host launches (``launch_s`` per kernel)."""
    cuda_graph_sizes: GraphSizes = "vllm"
    """Which engine's captured decode batch sizes (``CUDA_GRAPH_SIZES``): vLLM's 1, 2, 4 and
    8 to 256 in steps of 8, or TensorRT-LLM's perf-overview list up to 8192. Source: see
    ``CUDA_GRAPH_SIZES``."""
    cuda_graph_max: int | None = None
    """The largest decode batch captured, where the engine caps it: captured sizes above it are
    dropped and it is captured itself, so a batch above the last listed size pads to it
    rather than to the next listed one. Source: TensorRT-LLM ``_filter_cuda_graph_batch_sizes``
    (tensorrt_llm/_torch/pyexecutor/model_engine.py): sizes above min(max_batch_size,
    max_num_tokens) are dropped and, with padding, that bound is captured instead. None: the
    list as it stands."""
    launch_s: float = 4e-6
    """Host seconds to launch one kernel in an eager step. An assumption: a few microseconds
    a launch (NVIDIA, "Getting Started with CUDA Graphs", 2019, measures launch overheads of
    this order that graphs remove); not a measured figure of any engine."""
    kernels_per_block: int = 14
    """Kernels one transformer block launches in an eager decode step. An assumption from the
    block's operations: 2 norms, QKV, rotary + KV write, attention, output projection, 2
    all-reduces, gate-up, activation, down, residual adds, and the router with the expert
    permute and combine in a MoE block (fused kernels launch fewer)."""
    step_overhead_s: float = 0.0
    """Host seconds per engine step the GPU waits for (scheduling, sampling, detokenising)
    beyond what the engine overlaps with the previous step. An assumption: 0, as TensorRT-LLM's
    overlap scheduler (on by default), SGLang's zero-overhead batch scheduler (v0.4 blog) and
    vLLM V1's async scheduling run the next step's host work under the current one; without
    them it is large (vLLM v0.6.0 blog: scheduling took 29% of Llama 3 8B's time on H100)."""
    two_batch_overlap: bool = False
    """Two-batch overlap for expert-parallel layouts: each step's tokens run as two
    micro-batches, one's attention and experts computing while the other's EP dispatch and
    combine are on the wire. Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 3.4 (prefill
    and decode overlap two micro-batches); SGLang's large-scale EP blog (lmsys.org,
    2025-05-05, "two-batch overlap"). Each micro-batch reads the weights itself."""

    def __post_init__(self) -> None:
        if self.cuda_graph_sizes not in CUDA_GRAPH_SIZES:
            raise ValueError(
                f"cuda_graph_sizes must be one of {sorted(CUDA_GRAPH_SIZES)}, got "
                f"{self.cuda_graph_sizes!r}"
            )
        if not self.step_overhead_s >= 0 or not math.isfinite(self.step_overhead_s):
            raise ValueError(f"step_overhead_s must be at least 0, got {self.step_overhead_s}")
        if self.cuda_graph_max is not None and self.cuda_graph_max < 1:
            raise ValueError(f"cuda_graph_max must be at least 1, got {self.cuda_graph_max}")
        if not self.launch_s >= 0 or self.kernels_per_block < 0:
            raise ValueError("launch_s and kernels_per_block must be at least 0")
        for name in (
            "prefill_compute_efficiency",
            "hbm_efficiency",
            "decode_attention_hbm_efficiency",
            "decode_attention_compute_efficiency",
        ):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        for name in ("expert_load_cv", "balanced_load_cv"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be at least 0, got {getattr(self, name)}")
        if self.redundant_experts < 0:
            raise ValueError(f"redundant_experts must be at least 0, got {self.redundant_experts}")
        if not 0 <= self.prefix_cache_hit_rate < 1:
            raise ValueError(
                f"prefix_cache_hit_rate must be in [0, 1), got {self.prefix_cache_hit_rate}"
            )
        if not 0 <= self.comm_overlap <= 1:
            raise ValueError(f"comm_overlap must be in [0, 1], got {self.comm_overlap}")


def graph_batch(a: ServingAssumptions, seqs: float) -> float | None:
    """The captured CUDA-graph batch a decode-only step of ``seqs`` sequences (one attention
    group) replays: the smallest captured size at least ``seqs``; None runs it eagerly
    (graphs off, or more sequences than the largest size). Source: ``cuda_graphs``."""
    if not a.cuda_graphs or seqs <= 0:
        return None
    sizes = CUDA_GRAPH_SIZES[a.cuda_graph_sizes]
    if a.cuda_graph_max is not None:  # the engine's cap: listed sizes above it, then the cap
        sizes = (*(size for size in sizes if size < a.cuda_graph_max), a.cuda_graph_max)
    fits = [size for size in sizes if size >= seqs - 1e-9]
    return float(min(fits)) if fits else None
