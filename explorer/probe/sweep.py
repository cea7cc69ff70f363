"""What the probe measures (shapes, sizes, repeats) and the counts it divides by. Pure.

Three sweeps. ``CUDA``, one GPU in well under two minutes by design: 96 GEMMs (4 dtypes x 4
widths x 6 token counts; the largest, 16384^3, is 8.8 TFLOP, about 7-25 ms on an H100 from
fp8 to tf32), about 21 TFLOP per dtype per pass, 13 passes: a few seconds; 8 attention shapes
(the largest 3.8 TFLOP forward plus backward); copies of 1 GiB; 24 collective points of at
most 1 GiB (milliseconds each on NVLink); start-up (CUDA context, NCCL) dominates. Not yet
timed on a GPU. ``CPU``: the same code at sizes a CPU finishes in about 15 s of measurement
(14.2 s on a loaded 2-core AMD EPYC). ``QUICK``: under a second of measurement, for tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep:
    """Shapes and sizes of one probe run."""

    gemm_dtypes: tuple[str, ...]
    """GEMM formats tried (fp8 only where torch._scaled_mm runs on the device)."""
    gemm_widths: tuple[int, ...]
    """n = k of the square weight (hidden size, or a TP-split share of it)."""
    gemm_tokens: tuple[int, ...]
    """m: token rows (micro-batch x sequence per GPU, or a decode batch)."""
    attention_dtype: str
    attention_seq_lens: tuple[int, ...]
    attention_head_dims: tuple[int, ...]
    attention_tokens: int
    """batch x seq_len held fixed, so the batch is attention_tokens / seq_len (at least 1)."""
    attention_heads: int
    memory_bytes: tuple[int, ...]
    """Buffer sizes of the copy and triad kernels (each far beyond the GPU's L2 cache)."""
    collective_bytes: tuple[int, ...]
    """Message sizes (nccl-tests' size) of each collective."""
    warmup: int
    repeats: int


MiB = 1 << 20

CUDA = Sweep(
    gemm_dtypes=("bf16", "fp16", "tf32", "fp8"),
    gemm_widths=(1024, 4096, 8192, 16384),
    gemm_tokens=(16, 128, 1024, 4096, 8192, 16384),
    attention_dtype="bf16",
    attention_seq_lens=(1024, 4096, 8192, 16384),
    attention_head_dims=(64, 128),
    attention_tokens=16384,
    attention_heads=16,
    memory_bytes=(256 * MiB, 1024 * MiB),
    collective_bytes=tuple(MiB << (2 * i) for i in range(6)),  # 1 MiB ... 1 GiB, x4
    warmup=3,
    repeats=10,
)
CPU = Sweep(
    gemm_dtypes=("bf16", "fp32"),
    gemm_widths=(128, 256, 512, 1024),
    gemm_tokens=(16, 128, 512, 1024),
    attention_dtype="fp32",
    attention_seq_lens=(256, 512, 1024),
    attention_head_dims=(64, 128),
    attention_tokens=1024,
    attention_heads=4,
    memory_bytes=(64 * MiB,),
    collective_bytes=(64 << 10, MiB, 4 * MiB),
    warmup=2,
    repeats=5,
)
QUICK = Sweep(
    gemm_dtypes=("bf16", "fp32"),
    gemm_widths=(64, 256),
    gemm_tokens=(16, 256),
    attention_dtype="fp32",
    attention_seq_lens=(128,),
    attention_head_dims=(32,),
    attention_tokens=128,
    attention_heads=2,
    memory_bytes=(4 * MiB,),
    collective_bytes=(4 << 10, 64 << 10),
    warmup=1,
    repeats=3,
)


def sweep_for(kind: str, quick: bool) -> Sweep:
    """The sweep of a run on ``kind`` ("cuda" or "cpu"); ``quick`` is the tests' tiny one."""
    if quick:
        return QUICK
    return CUDA if kind == "cuda" else CPU


def gemm_flops(m: int, n: int, k: int) -> float:
    """FLOPs of C[m, n] = A[m, k] @ B[k, n]: one multiply-add (2 FLOPs) per m n k."""
    return 2.0 * m * n * k


def attention_forward_flops(
    batch: int, heads: int, seq_len: int, head_dim: int, causal: bool
) -> float:
    """FLOPs of an attention forward: QK^T and PV, 2 x 2 b h s^2 d, halved when causal.

    Source: FlashAttention-2 (Dao 2023, arXiv:2307.08691) sec. 4.1, the benchmark's count.
    """
    flops = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return flops / 2 if causal else flops


def attention_backward_flops(forward_flops: float) -> float:
    """FLOPs of the attention backward: 2.5 x the forward (five matmuls for the forward's two).

    Source: FlashAttention-2 (Dao 2023, arXiv:2307.08691) sec. 4.1.
    """
    return 2.5 * forward_flops


def bus_factor(kind: str, num_ranks: int) -> float:
    """busbw / algbw of a collective on n ranks: all-reduce 2(n-1)/n, all-gather,
    reduce-scatter and all-to-all (n-1)/n.

    Source: NVIDIA nccl-tests, doc/PERFORMANCE.md ("Bus bandwidth").
    """
    n = num_ranks
    if n < 2:
        raise ValueError(f"a collective needs at least 2 ranks, got {n}")
    if kind == "all-reduce":
        return 2 * (n - 1) / n
    if kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    raise ValueError(f"no bus factor for collective {kind!r}")
