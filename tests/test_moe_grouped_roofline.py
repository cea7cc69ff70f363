"""The grouped GEMM's roofline: each expert reads its own tokens and weights, and a
single-launch grouped kernel reaches DeepGEMM's published grouped bandwidth (README at commit
78cacf7, H800)."""

from __future__ import annotations

import pytest

from explorer.compute.gemm import traffic_bytes
from explorer.compute.kernels import Gemm, gemm_times
from explorer.compute.moe import grouped_gemm_bandwidth
from explorer.presets import load_gpu

H800 = load_gpu("h800")
BANDWIDTH = H800.hbm_bytes_per_s * 0.8  # 2680 GB/s: DeepGEMM's normal GEMMs' 2604-2668 GB/s


def _tflops(groups: int, m: int, n: int, k: int, call_s: float = 0.0) -> float:
    g = Gemm(m, n, k, groups, expert=True, calls=groups)
    _, t = gemm_times((g,), "fp8", H800, BANDWIDTH, call_s=call_s, recipe="blockwise")
    return g.flops / t.forward_s / 1e12


def test_each_group_reads_its_own_tokens() -> None:
    # 4 experts x 256 tokens x 7168 -> 2048, FP8: per expert 256 x 2048 + 2048 x 7168 bytes
    # read, 256 x 7168 x 2 written: 18,874,368 bytes; 75,497,472 for the four, where one
    # 256 x 28672 x 2048 GEMM reads the 256 x 2048 rows once: 73,924,608
    assert 4 * traffic_bytes(256, 7168, 2048, "fp8") == 75_497_472
    assert traffic_bytes(256, 4 * 7168, 2048, "fp8") == 73_924_608
    per_expert_calls = grouped_gemm_bandwidth(256, 7168, 2048, 4, "fp8", 1.0, False)
    assert per_expert_calls == pytest.approx(73_924_608 / 75_497_472)
    one_launch = grouped_gemm_bandwidth(256, 7168, 2048, 4, "fp8", 1.0, True)
    assert one_launch == pytest.approx(per_expert_calls * 2064 / 2668)


def test_the_most_weight_bound_masked_row_follows_deepgemm() -> None:
    # DeepGEMM masked layout, 4 groups x 256 x 4096 x 7168: 932 TFLOPS (the one-GEMM roofline
    # at the plain GEMMs' bandwidth gave 1174, +26%)
    assert _tflops(4, 256, 4096, 7168) == pytest.approx(932, rel=0.06)


@pytest.mark.parametrize(
    ("groups", "m", "n", "k", "tflops"),
    [(4, 8192, 4096, 7168, 1297), (4, 8192, 7168, 2048, 1099), (8, 4096, 4096, 7168, 1288),
     (8, 4096, 7168, 2048, 1093)],
)  # fmt: skip
def test_compute_bound_contiguous_rows_keep_deepgemms_rates(
    groups: int, m: int, n: int, k: int, tflops: float
) -> None:
    # DeepGEMM contiguous layout: 343-743 GB/s, far below either bandwidth
    assert _tflops(groups, m, n, k) == pytest.approx(tflops, rel=0.05)


def test_fewer_tokens_per_expert_run_further_below_peak() -> None:
    # the same four experts' weights, 256 -> 8192 tokens each
    rates = [_tflops(4, m, 4096, 7168) for m in (256, 1024, 4096, 8192)]
    assert rates == sorted(rates)
    assert rates[0] < 0.75 * rates[-1]
