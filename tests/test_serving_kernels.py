"""Serving steps as the kernels run them: MLA absorbed decode, GEMMs by shape, decode attention,
DeepEP."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.memory.serving import ServingLayout, stage_shapes
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions
from explorer.serving.deepep import copy_bytes, ep_exchange_s, nodes_reached
from explorer.serving.kernels import (
    decode_attention_flop_scale,
    dense_gemm_cost,
    elementwise_bytes_per_token,
)
from explorer.serving.latency import _Case, _comm_s, _compute_parts, _slowest, _stage_flops
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


def test_large_serving_gemms_reach_the_best_measured_share_and_one_row_a_64th_of_it():
    # H200 FP8: the MAMF table's best FP8 GEMM, 0.73445 of the dense FP8 peak, caps every
    # shape; a step of 8192 rows reaches it in Llama 70B's GEMMs (to 0.1%: wave quantisation)
    h200 = load_gpu("h200")
    per_flop, _ = dense_gemm_cost(LLAMA_70B, 80, 0, 1, 8192.0, "fp8", h200)
    assert 1 / (per_flop * 1979e12) == pytest.approx(0.73445, rel=1e-3)
    assert 1 / (per_flop * 1979e12) <= 0.73445
    # one row fills 1 of the 64 rows of the smallest tile: at most 0.73445 / 64 of the peak
    one, _ = dense_gemm_cost(LLAMA_70B, 80, 0, 1, 1.0, "fp8", h200)
    assert 1 / (one * 1979e12) <= 0.73445 / 64


def test_decode_attention_pads_mlas_query_rows_to_flashmlas_64_row_blocks():
    # h_q s_q: 128 heads at TP 1 fill two blocks; 16 heads at TP 8 fill a quarter of one;
    # 16 heads x 2 tokens (a verify step of one draft) half of one
    assert decode_attention_flop_scale(DEEPSEEK_V3, 1, 1.0) == 1.0
    assert decode_attention_flop_scale(DEEPSEEK_V3, 8, 1.0) == 4.0
    assert decode_attention_flop_scale(DEEPSEEK_V3, 8, 2.0) == 2.0
    assert decode_attention_flop_scale(LLAMA_70B, 8, 1.0) == 1.0  # not MLA: memory-bound


def test_mla_decode_attention_runs_at_flashmlas_published_rate():
    # one token at 4096 keys, 61 absorbed blocks of 278,528 FLOPs a key, at FlashMLA's 660
    # TFLOPS on H800 (BF16 KV); at TP 8 the 16 heads a GPU pad to 64 rows: 4 x the FLOPs / 8
    h800 = ClusterSpec(gpu=load_gpu("h800"))
    w = ServingWorkload(prompt_len=4096, output_len=2, concurrency=1, weights_dtype="fp8")
    f = _stage_flops(DEEPSEEK_V3, tuple(range(61)), True)
    flops = 61 * 278_528 * 4096
    for tp, scale in ((1, 1.0), (8, 4.0 / 8)):
        case = _Case(DEEPSEEK_V3, h800, ServingLayout(tp=tp), w, A)
        k = _compute_parts(case, f, 1.0, 4096.0, False, 1.0)
        assert k.attention == pytest.approx(flops * scale / 660e12, rel=1e-9)


def test_memory_bound_kernels_move_the_fused_ledgers_bytes():
    # Llama 70B per token and block: 2 norms and 2 residual adds 10 h = 81,920, SwiGLU
    # 3 f = 86,016 elements, 2 bytes each, 80 blocks: 26,869,760 bytes; TP 8 splits the
    # activation only
    assert elementwise_bytes_per_token(LLAMA_70B, 80, 0, 1) == 80 * 2 * (81_920 + 86_016)
    assert elementwise_bytes_per_token(LLAMA_70B, 80, 0, 8) == 80 * 2 * (81_920 + 86_016 / 8)


def test_a_single_sequence_decode_stays_memory_bound_despite_the_padding():
    # one row padded to 64 costs 64 rows of FLOPs, still under the weight read: the
    # memory-to-compute crossover of an fp8 GEMM on H200 (2 FLOPs and 1 byte a weight and
    # row) is 0.73445 x 1979e12 / (2 x 0.8 x 4.8e12) = 189 rows, above the tile: 64 / 189
    w = ServingWorkload(prompt_len=1000, output_len=2, concurrency=1, weights_dtype="fp8")
    case = _Case(LLAMA_70B, H200_NODE, ServingLayout(), w, A)
    step = _slowest(case, 1.0, 1000.0, prefill=False)
    assert step.bound == "memory"
    assert step.compute_s < step.memory_s / 2


def test_deepep_copy_bytes_fp8_dispatch_and_bf16_combine():
    # 7168 fp8 values + 56 fp32 scales = 7392 bytes; combine 7168 x 2
    assert copy_bytes(7168, True) == (7392.0, 14336.0)
    assert copy_bytes(7168, False) == (14336.0, 14336.0)


def test_node_limited_routing_caps_the_nodes_a_token_reaches():
    # 4 nodes: 4 (1 - (3/4)^8) = 3.5995...; 8 nodes: 8 (1 - (7/8)^8) = 5.25, capped at the
    # 4 groups' nodes (DeepSeek-V3: at most 4 nodes); 9 nodes: groups span 2 nodes, cap 8
    assert nodes_reached(DEEPSEEK_V3, 4) == pytest.approx(4 * (1 - 0.75**8), rel=1e-12)
    assert nodes_reached(DEEPSEEK_V3, 8) == 4.0
    assert nodes_reached(DEEPSEEK_V3, 9) == pytest.approx(9 * (1 - (8 / 9) ** 8), rel=1e-12)


def test_deepep_exchange_by_hand_on_deepseeks_h800_cluster():
    h800 = ClusterSpec(gpu=load_gpu("h800"), num_nodes=4)  # 50 GB/s NICs as DeepEP's
    ep32 = ServingLayout(ep=32)
    remote = 4 * (1 - 0.75**8) * 3 / 4  # copies a token sends over RDMA, once per node
    normal = ep_exchange_s(DEEPSEEK_V3, h800, ep32, 16384, False, True)
    assert normal == pytest.approx(16384 * remote * (7392 / 58e9 + 14336 / 57e9), rel=1e-12)
    low = ep_exchange_s(DEEPSEEK_V3, h800, ep32, 128, True, True)
    # DeepEP's EP32 low-latency row: 128 tokens, dispatch 155 us, combine 273 us
    assert low == pytest.approx(128 * 8 * (7392 / 48e9 + 14336 / 53e9), rel=1e-12)
    assert low == pytest.approx(155e-6 + 273e-6, rel=0.05)
    one_node = ClusterSpec(gpu=load_gpu("h800"))
    with pytest.raises(ValueError, match="across nodes"):
        ep_exchange_s(DEEPSEEK_V3, one_node, ServingLayout(ep=8), 4096, False, True)


def test_fp8_dispatch_cuts_a_one_node_exchange_by_its_bytes():
    # EP8 in one node (the fabric model's all-to-all): dispatch 7392 + combine 14336 bytes a
    # copy with FP8 dispatch against 2 x 14336 without, 0.758 of the bytes
    w = ServingWorkload(prompt_len=1000, output_len=2, concurrency=1, weights_dtype="fp8")
    seconds = []
    for a in (A, replace(A, ep_fp8_dispatch=False)):
        case = _Case(DEEPSEEK_V3, H200_NODE, ServingLayout(ep=8), w, a)
        shapes = stage_shapes(DEEPSEEK_V3, case.layout, "fp8", "bf16", a.memory)
        seconds.append(_comm_s(case, shapes[0], 4096.0))
    assert seconds[0] / seconds[1] == pytest.approx((7392 + 14336) / (2 * 14336), rel=0.1)
