"""A serving step's kernels: GEMMs by shape, prefill attention by length, decode attention.

GEMMs: the training step's kernel model (explorer.compute.gemm: tile and wave quantisation,
the small-m tiles, per GPU and format, capped at the best measured share) gives each GEMM's
compute share at its m x n x k, without its own roofline; the serving step keeps the roofline
over the step's bytes (weights once, activations in and out) at achievable HBM bandwidth, so
a GEMM of few rows is memory-bound and one of many rows compute-bound (the crossover). The
shapes are the training ledger's (explorer.compute.kernels: attention projections as one
input GEMM of their total width and the output projection, gate-up and down, the router, the
routed experts as grouped GEMMs over the local experts); the LM head and the router stay BF16
(DeepSeek-V3 report, arXiv:2412.19437, sec. 3.3.1). Mamba blocks take the attention block's
GEMM shapes (their projections' FLOPs are in the stage's dense FLOPs): an approximation.
The memory-bound kernels between the GEMMs (norms, residual adds, the activation, MoE
permutation) move the training model's fused ledger of bytes (explorer.compute.elementwise),
one after another with the GEMMs.

Prefill attention: the GPU's attention table by sequence length and head dimension
(explorer.compute.attention, the forward causal share at the prompt's length).

Decode attention (one query token, or k + 1 in a speculative verify, against the KV cache):
a roofline of its own, the KV bytes at the decode kernel's bandwidth share and its FLOPs at
its compute share, so MLA's absorbed decode with many heads a GPU (h_q s_q rows a KV head) is
compute-bound and grouped-query decode memory-bound (FlashMLA deep-dive,
docs/20250422-new-kernel-deep-dive.md: compute-bound when h_q s_q >= 128 on H800). MLA's
query rows pad to FlashMLA's 64-row blocks (its kernel is "compute-intensive" from h_q s_q >=
64, README 2025.04.22). The KV length enters through the bytes and FLOPs only: the bandwidth
the kernels reach at short KV lengths is not modelled (no per-length figures are published in
a table; FlashInfer, arXiv:2501.01005, plots them).
"""

from __future__ import annotations

import math
from functools import lru_cache

from explorer.compute.attention import FP8_SHARE_RATIO, attention_share
from explorer.compute.elementwise import hidden_elements_per_layer, mlp_elements_per_layer
from explorer.compute.gemm import gemm_efficiency, kernel_figures, peak_flops_per_s
from explorer.compute.kernels import Gemm, attention_gemms, mlp_gemms
from explorer.compute.passes import attention_head_dim
from explorer.specs import GemmDType, GpuSpec, Layout, ModelSpec, WeightDType

DECODE_ATTENTION_HBM_SHARE = 2826 / 3352
"""Share of HBM bandwidth a memory-bound decode attention kernel reads the KV cache at.
Source: FlashMLA's benchmark (tests/test_flash_mla.py) on H100 SXM, b = 128, mean_sk = 4096,
h_q = 16, s_q = 1: 2,826 GB/s of 3,352 (run published in ai-bot-pro/achatbot PR #123); the
FlashMLA README's best is 3,000 GB/s of H800's 3,350 (0.896). Taken for every GPU and for
grouped-query decode kernels too: an assumption."""
DECODE_ATTENTION_COMPUTE_SHARE = 660 / 989.4
"""Share of the dense BF16 peak a compute-bound decode attention kernel reaches. Source:
FlashMLA README (2025.04.22 release): up to 660 TFLOPS on H800 SXM5 (989.4 dense); the earlier
kernel reached 580. Taken for every GPU: an assumption. FP8 KV: times FP8_SHARE_RATIO."""
DECODE_QUERY_BLOCK = 64
"""Query rows (heads x tokens a KV head) a FlashMLA block computes: h_q s_q below it is
padded. Source: FlashMLA README (2025.04.22): the kernel targets h_q s_q >= 64."""


def gemm_format(gpu: GpuSpec, weights_dtype: WeightDType) -> GemmDType:
    """The format serving GEMMs run in: fp8 where the GPU has FP8 tensor cores, NVFP4 / MXFP4
    as FP4 where it has FP4 ones (Blackwell), else BF16 (weight-only int8, int4 and FP4 on
    Hopper dequantise to BF16, as vLLM's Marlin kernels run them)."""
    if weights_dtype == "fp8" and gpu.fp8_flops_per_s:
        return "fp8"
    if weights_dtype in ("nvfp4", "mxfp4") and gpu.fp4_flops_per_s:
        return "fp4"
    return "bf16"


def _input_bytes(fmt: GemmDType) -> float:
    """Bytes per activation element a GEMM reads (its inputs are quantised to its format)."""
    return {"fp8": 1.0, "fp4": 0.5625}.get(fmt, 2.0)  # NVFP4: 0.5 + an E4M3 scale per 16


def _cost(
    gemms: list[tuple[Gemm, float, GemmDType]], gpu: GpuSpec, ceiling: float
) -> tuple[float, float]:
    """(seconds per FLOP, activation bytes per row) of ``gemms`` (each with its count and
    format): sum of FLOPs / (peak x share) over the sum of FLOPs; A (m k) in the input format
    and C (m n) in BF16 per row."""
    flops = seconds = moved = 0.0
    for g, count, fmt in gemms:
        share = min(ceiling, gemm_efficiency(g.m, g.n * g.groups, g.k, fmt, gpu))
        flops += count * g.flops
        seconds += count * g.flops / (peak_flops_per_s(gpu, fmt) * share)
        moved += count * g.groups * (_input_bytes(fmt) * g.k + 2.0 * g.n)
    return seconds / flops, moved


@lru_cache(maxsize=16384)
def dense_gemm_cost(
    model: ModelSpec,
    dense_blocks: int,
    moe_blocks: int,
    tp: int,
    rows: float,
    fmt: GemmDType,
    gpu: GpuSpec,
    ceiling: float = 1.0,
) -> tuple[float, float]:
    """(seconds per FLOP, activation bytes per row) of a stage's dense GEMMs (attention
    projections, dense and shared MLPs, router) at ``rows`` tokens per TP group: the blocks'
    GEMM shapes weighted by their counts (module docstring)."""
    m = max(rows, 1e-9)
    attention = [(g, 1.0, fmt) for g in attention_gemms(model, m, tp)]
    gemms: list[tuple[Gemm, float, GemmDType]] = []
    if dense_blocks:
        mlp = [(g, 1.0, fmt) for g in mlp_gemms(model, m, model.intermediate_size, tp)]
        gemms += [(g, c * dense_blocks, f) for g, c, f in attention + mlp]
    if moe_blocks:
        shared = model.shared_ffn_size
        block = list(attention)
        if shared:
            block += [(g, 1.0, fmt) for g in mlp_gemms(model, m, shared, tp)]
        block.append((Gemm(m, model.n_routed_experts, model.hidden_size), 1.0, "bf16"))
        gemms += [(g, c * moe_blocks, f) for g, c, f in block]
    return _cost(gemms, gpu, ceiling)


@lru_cache(maxsize=16384)
def expert_gemm_cost(
    model: ModelSpec,
    per_expert: float,
    width: float,
    groups: int,
    fmt: GemmDType,
    gpu: GpuSpec,
    ceiling: float = 1.0,
) -> tuple[float, float]:
    """(seconds per FLOP, activation bytes per routed copy) of a routed expert's gate-up and
    down GEMMs with ``per_expert`` copies each, ``width`` its FFN width on this GPU, grouped
    over ``groups`` local experts (their tiles share the waves, as explorer.compute.kernels)."""
    m = max(per_expert, 1e-9)
    up = (2 if model.ffn_kind == "swiglu" else 1) * width
    h = model.hidden_size
    pair = [(Gemm(m, up, h, groups), 1.0, fmt), (Gemm(m, h, width, groups), 1.0, fmt)]
    seconds, moved = _cost(pair, gpu, ceiling)
    return seconds, moved / groups


@lru_cache(maxsize=4096)
def logits_cost(
    model: ModelSpec, rows: float, tp: int, gpu: GpuSpec, ceiling: float = 1.0
) -> tuple[float, float]:
    """(seconds per FLOP, activation bytes per row) of the LM head in BF16 (rows x V/tp x h)."""
    head = Gemm(max(rows, 1e-9), model.vocab_size / tp, model.hidden_size)
    return _cost([(head, 1.0, "bf16")], gpu, ceiling)


@lru_cache(maxsize=4096)
def prefill_attention_share(
    model: ModelSpec, gpu: GpuSpec, length: float, fp8: bool, heads: float
) -> float:
    """Share of the attention peak a prefill's attention core reaches over a prompt of
    ``length`` tokens (causal forward, the GPU's table: explorer.compute.attention; FP8 with
    FP8_SHARE_RATIO); without a table, the BF16 GEMM share of P V with ``heads`` heads side by
    side, as the training model falls back."""
    curve = kernel_figures(gpu).attention
    length = max(length, 1.0)
    if curve is None:
        return gemm_efficiency(length, model.head_size * heads, length, "bf16", gpu)
    share = attention_share(curve, length, True, False, attention_head_dim(model))
    return share * FP8_SHARE_RATIO if fp8 else share


def decode_attention_flop_scale(model: ModelSpec, tp: int, tokens_per_seq: float) -> float:
    """Executed over counted FLOPs of a decode attention step: MLA's query rows a KV head
    (h_q / tp heads x tokens per sequence) pad to ``DECODE_QUERY_BLOCK``; 1 for other
    attention (memory-bound, its padding never binds)."""
    if not model.is_mla:
        return 1.0
    rows = model.num_attention_heads / tp * tokens_per_seq
    return DECODE_QUERY_BLOCK * math.ceil(rows / DECODE_QUERY_BLOCK - 1e-9) / rows


def decode_attention_compute_share(
    fp8: bool, share: float = DECODE_ATTENTION_COMPUTE_SHARE
) -> float:
    """Share of the attention peak a compute-bound decode attention kernel reaches: ``share``
    of the BF16 peak, or of the FP8 peak times FP8_SHARE_RATIO with an FP8 KV cache."""
    return share * FP8_SHARE_RATIO if fp8 else share


@lru_cache(maxsize=4096)
def elementwise_bytes_per_token(
    model: ModelSpec, dense_blocks: int, moe_blocks: int, tp: int
) -> float:
    """HBM bytes per token one GPU's memory-bound kernels move in a stage's forward (norms,
    residual adds, the MLP activation, MoE permutation), 2-byte elements: the training model's
    fused ledger (explorer.compute.elementwise: 2 norms and 2 residual adds, 10 h; SwiGLU 3 f
    / tp; MoE top-k permutation), without sequence parallelism (serving TP keeps the hidden
    state whole on each rank) or dropout."""
    layout = Layout(tp=tp, sequence_parallel=False)
    hidden = hidden_elements_per_layer(model, layout, dropout=False)
    dense = hidden + mlp_elements_per_layer(model, layout, moe=False) if dense_blocks else 0.0
    moe = hidden + mlp_elements_per_layer(model, layout, moe=True) if moe_blocks else 0.0
    return 2.0 * (dense_blocks * dense + moe_blocks * moe)
