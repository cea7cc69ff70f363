"""Serving steps as the kernels run them: MLA absorbed decode, GEMM efficiency by rows, DeepEP."""

from __future__ import annotations

import pytest

from explorer.memory.serving import ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions
from explorer.serving.assumptions import gemm_efficiency
from explorer.serving.latency import _Case, _slowest, _stage_flops
from explorer.serving.mla import absorbed_attention_flops_per_key
from explorer.specs import ClusterSpec, ServingWorkload

DEEPSEEK_V3 = load_model("deepseek-v3")
LLAMA_70B = load_model("llama-3.1-70b")
H200_NODE = ClusterSpec(gpu=load_gpu("h200"))
A = ServingAssumptions()


def test_absorbed_mla_attention_per_key_matches_the_hand_count():
    # 2 x 128 heads x (512 latent + 64 rope) scores + 2 x 128 x 512 values = 278,528 FLOPs
    assert absorbed_attention_flops_per_key(DEEPSEEK_V3) == 278_528


def test_decode_attention_of_deepseek_is_absorbed_and_prefill_is_not():
    f = _stage_flops(DEEPSEEK_V3, tuple(range(61)), True)
    assert f.decode_attention_per_key == 61 * 278_528
    # prefill keeps the non-absorbed form: 2 x 128 x (192 + 128) per key and block
    assert f.attention_per_key == 61 * 81_920
    dense = _stage_flops(LLAMA_70B, tuple(range(80)), True)
    assert dense.decode_attention_per_key == dense.attention_per_key


def test_gemm_efficiency_pads_rows_to_the_64_row_tensor_core_tile():
    big = A.prefill_compute_efficiency
    assert gemm_efficiency(A, 64, False) == big
    assert gemm_efficiency(A, 8, False) == pytest.approx(big * 8 / 64, rel=1e-12)
    assert gemm_efficiency(A, 65, True) == pytest.approx(big * 65 / 128, rel=1e-12)
    assert gemm_efficiency(A, 8192, True) == big
    # decode and prefill of the same rows run at the same efficiency (the shape decides)
    assert gemm_efficiency(A, 200, False) == gemm_efficiency(A, 200, True)


def test_a_single_sequence_decode_stays_memory_bound_despite_the_padding():
    # one row padded to 64 costs 64 rows of FLOPs, still under the weight read: the
    # memory-to-compute crossover of an fp8 GEMM on H200 (2 FLOPs and 1 byte a weight and
    # row) is 0.6 x 1979e12 / (2 x 0.8 x 4.8e12) = 155 rows, above the tile: 64 / 155 = 0.41
    w = ServingWorkload(prompt_len=1000, output_len=2, concurrency=1, weights_dtype="fp8")
    case = _Case(LLAMA_70B, H200_NODE, ServingLayout(), w, A)
    step = _slowest(case, 1.0, 1000.0, prefill=False)
    assert step.bound == "memory"
    assert step.compute_s < step.memory_s / 2
