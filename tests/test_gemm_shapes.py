"""The GEMM model against OpenXLA's measured H100 table: 375 BF16 shapes (b x m x n x k, each
256-4096), median CUPTI kernel times (validation/gemm_shapes_h100.csv). The fixed time per
kernel (``KernelFigures.kernel_fixed_s``) is recomputed here from the table, and the model with
it must hold every size class of the table; without it the small shapes are far too fast."""

from __future__ import annotations

import csv
import dataclasses
import statistics
from pathlib import Path

import pytest

from explorer.compute.gemm import gemm_efficiency
from explorer.presets import load_gpu
from explorer.specs import GpuSpec

TABLE = Path(__file__).resolve().parents[1] / "validation" / "gemm_shapes_h100.csv"
H100 = load_gpu("h100-sxm")


def _rows() -> list[tuple[int, int, int, int, float]]:
    lines = [line for line in TABLE.read_text().splitlines() if not line.startswith("#")]
    return [
        (int(r["b"]), int(r["m"]), int(r["n"]), int(r["k"]), float(r["flops_per_s"]))
        for r in csv.DictReader(lines)
    ]


ROWS = _rows()


def _with_fixed(seconds: float) -> GpuSpec:
    assert H100.kernels is not None
    return dataclasses.replace(
        H100, kernels=dataclasses.replace(H100.kernels, kernel_fixed_s=seconds)
    )


def _modelled_s(gpu: GpuSpec, b: int, m: int, n: int, k: int) -> float:
    """The model's time of a batched GEMM: b x m rows against one n x k weight's tiles (the
    batch adds rows, as a grouped GEMM's groups do)."""
    return 2.0 * b * m * n * k / (gemm_efficiency(b * m, n, k, "bf16", gpu) * gpu.bf16_flops_per_s)


def _median_residual_s(gpu: GpuSpec) -> float:
    return statistics.median(
        2.0 * b * m * n * k / flops - _modelled_s(gpu, b, m, n, k) for b, m, n, k, flops in ROWS
    )


def _size_class(b: int, m: int, n: int, k: int) -> int:
    smallest = min(b * m, n, k)
    return max(c for c in (256, 512, 1024, 2048) if smallest >= c)


def _ratios(gpu: GpuSpec) -> dict[int, list[float]]:
    """Modelled over measured FLOP/s by size class (the smallest dimension, b x m counted)."""
    found: dict[int, list[float]] = {256: [], 512: [], 1024: [], 2048: []}
    for b, m, n, k, flops in ROWS:
        model = 2.0 * b * m * n * k / _modelled_s(gpu, b, m, n, k)
        found[_size_class(b, m, n, k)].append(model / flops)
    return found


def test_the_table_is_the_h100s_375_shapes_and_its_large_ones_match_mamf():
    assert len(ROWS) == 375 and {b for b, *_ in ROWS} == {1, 2, 4}
    # 4096 cubed and its batches: 786-811 TFLOP/s, H100 SXM's MAMF best shape 794.5 (sm_90 read
    # as H100 SXM: an H100 PCIe or NVL runs about a quarter lower)
    large = [f for b, m, n, k, f in ROWS if (m, n, k) == (4096, 4096, 4096)]
    assert len(large) == 3 and all(780e12 < f < 815e12 for f in large)


def test_the_presets_fixed_time_per_kernel_zeroes_the_median_residual():
    # the fixed point: the median of measured - modelled time is zero with the anchor re-solved
    assert H100.kernels is not None
    fixed = 0.0
    for _ in range(10):
        fixed += _median_residual_s(_with_fixed(fixed))
    assert fixed == pytest.approx(H100.kernels.kernel_fixed_s, rel=1e-3)
    assert fixed == pytest.approx(5.3825e-6, rel=1e-3)
    for name in ("h200", "h800"):  # the same GH100 silicon
        other = load_gpu(name).kernels
        assert other is not None and other.kernel_fixed_s == H100.kernels.kernel_fixed_s


def test_with_the_fixed_time_every_size_class_is_modelled_within_its_spread():
    for size, ratios in _ratios(H100).items():
        ordered = sorted(ratios)
        median = statistics.median(ordered)
        p10, p90 = ordered[len(ordered) // 10], ordered[9 * len(ordered) // 10]
        assert 0.98 < median < 1.02, (size, median)
        assert p90 - p10 < {256: 0.35, 512: 0.2, 1024: 0.1, 2048: 0.06}[size], (size, p10, p90)


def test_without_it_the_small_shapes_run_far_too_fast():
    medians = {size: statistics.median(r) for size, r in _ratios(_with_fixed(0.0)).items()}
    assert medians[2048] < 1.05  # the large shapes were right already
    assert medians[1024] > 1.15 and medians[512] > 1.7 and medians[256] > 2.5


def test_the_fixed_time_leaves_the_mamf_anchor_exact():
    # the anchor's measured time is reproduced with the fixed time taken out of it first
    assert H100.kernels is not None
    (point,) = [p for p in H100.kernels.gemms if p.dtype == "bf16"]
    assert gemm_efficiency(point.m, point.n, point.k, "bf16", H100) == pytest.approx(
        point.efficiency, rel=1e-9
    )
    # and FP8 GEMMs carry their fixed work in DeepGEMM's per-wave figure: unchanged by it
    fp8 = gemm_efficiency(1024, 4096, 1024, "fp8", H100)
    assert fp8 == gemm_efficiency(1024, 4096, 1024, "fp8", _with_fixed(0.0))


def test_a_measured_kernel_shorter_than_the_fixed_time_drops_it_and_a_longer_one_keeps_it():
    from explorer.compute.gemm import with_measured_gemms
    from explorer.specs import GemmPoint

    assert H100.kernels is not None
    # 256 x 256 x 256 at 10% of the BF16 peak: 3.39 us, below the preset's 5.3825 us
    quick = GemmPoint(m=256, n=256, k=256, dtype="bf16", efficiency=0.1)
    dropped = with_measured_gemms(H100, [quick])
    assert dropped.kernels is not None and dropped.kernels.kernel_fixed_s == 0.0
    assert gemm_efficiency(256, 256, 256, "bf16", dropped) == pytest.approx(0.1, rel=1e-9)
    # 2048 x 2048 x 2048 at 60%: 28.9 us, the preset's figure kept and the point reproduced
    slow = GemmPoint(m=2048, n=2048, k=2048, dtype="bf16", efficiency=0.6)
    kept = with_measured_gemms(H100, [slow])
    assert kept.kernels is not None
    assert kept.kernels.kernel_fixed_s == H100.kernels.kernel_fixed_s
    assert gemm_efficiency(2048, 2048, 2048, "bf16", kept) == pytest.approx(0.6, rel=1e-9)
