"""Disaggregated prefill and decode: the KV transfer by hand, the balanced split, the bound."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.memory.serving import ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions
from explorer.serving.disaggregated import (
    PoolRate,
    best_split,
    decode_rate,
    disaggregate,
    kv_transfer,
    plan_disaggregated,
    prefill_rate,
)
from explorer.serving.latency import EngineStep
from explorer.specs import ClusterSpec, ServingWorkload

LLAMA_70B = load_model("llama-3.1-70b")
DEEPSEEK_V3 = load_model("deepseek-v3")
H100_TWO_NODES = ClusterSpec(gpu=load_gpu("h100-sxm"), num_nodes=2)
H200_TWO_NODES = ClusterSpec(gpu=load_gpu("h200"), num_nodes=2)
A = ServingAssumptions()
W = ServingWorkload(prompt_len=2000, output_len=1000, concurrency=64, weights_dtype="fp8")


def test_kv_transfer_of_one_deepseek_prompt_matches_the_hand_count():
    # MLA latent + rope key: (512 + 64) x 61 blocks x 1 byte (fp8 KV) = 35,136 bytes a token;
    # 2000 tokens = 70,272,000 bytes over TP2's 2 NICs of 50 GB/s: at least 0.70272 ms, and
    # a 35 MB message each reaches most of the line rate (the fabric model of explorer.comm)
    w = replace(W, kv_dtype="fp8")
    t = kv_transfer(DEEPSEEK_V3, H200_TWO_NODES, ServingLayout(tp=2, ep=4), w, A)
    assert t.bytes_per_request == 70_272_000
    line_rate_s = 70_272_000 / (2 * 50e9)
    assert line_rate_s < t.seconds < 1.2 * line_rate_s
    assert t.bandwidth_bytes_per_s == pytest.approx(70_272_000 / t.seconds, rel=1e-12)


def test_a_windowed_model_sends_only_its_windows_kv():
    from explorer.presets import load_model

    mistral = load_model("mistral-7b")  # a window of 4096 on all 32 blocks, 4,096 bytes each
    w = replace(W, prompt_len=16_384, weights_dtype="bf16")
    t = kv_transfer(mistral, H200_TWO_NODES, ServingLayout(), w, A)
    assert t.bytes_per_request == 32 * 4096 * 4096  # 536,870,912, not 16,384 x 131,072


def test_prefill_rate_is_the_step_over_the_prompt_tokens_it_packs():
    layout = ServingLayout(tp=2)
    r = prefill_rate(LLAMA_70B, H100_TWO_NODES, layout, W, A)
    assert r is not None
    step = EngineStep(LLAMA_70B, H100_TWO_NODES, layout, W, A).seconds(0, 8192, 0.0, 1000.0)
    transfer = kv_transfer(LLAMA_70B, H100_TWO_NODES, layout, W, A).seconds
    # overlapped: the slower of compute (8192 tokens a step, 2000 a request) and the NICs
    assert r.requests_per_s == pytest.approx(1 / max(step * 2000 / 8192, transfer), rel=1e-12)
    serial = prefill_rate(
        LLAMA_70B, H100_TWO_NODES, layout, W, replace(A, kv_transfer_overlap=False)
    )
    assert serial is not None
    assert serial.requests_per_s == pytest.approx(1 / (step * 2000 / 8192 + transfer), rel=1e-12)


def test_decode_rate_is_the_decode_only_step_at_the_concurrency():
    layout = ServingLayout(tp=4)
    r = decode_rate(LLAMA_70B, H100_TWO_NODES, layout, W, A)
    assert r is not None
    step = EngineStep(LLAMA_70B, H100_TWO_NODES, layout, W, A).seconds(64, 0, 2500.0, 0.0)
    assert r.requests_per_s == pytest.approx(64 / step / 1000, rel=1e-12)


def test_a_pool_that_holds_no_sequence_has_no_rate():
    # 671B parameters in fp8 do not fit one H100
    assert decode_rate(DEEPSEEK_V3, H100_TWO_NODES, ServingLayout(), W, A) is None
    assert prefill_rate(DEEPSEEK_V3, H100_TWO_NODES, ServingLayout(), W, A) is None


def _pool(gpus: int, rate: float) -> PoolRate:
    return PoolRate(ServingLayout(tp=gpus), rate, 0.01, 1)


def test_best_split_balances_the_pools_by_hand():
    # prefill 3 req/s on 1 GPU, decode 1 req/s on 2 GPUs, 16 GPUs: n_p prefill + 2 n_d <= 16;
    # n_p = 4 serves min(12, 6 x 1) = 6 on 16 GPUs, n_p = 2 serves min(6, 7) = 6 on 2 + 12 = 14
    assert best_split(_pool(1, 3.0), _pool(2, 1.0), 16) == (2, 6)
    # one of each must fit
    assert best_split(_pool(8, 3.0), _pool(16, 1.0), 16) is None


@settings(max_examples=40, deadline=None)
@given(
    rp=st.floats(0.01, 100.0),
    rd=st.floats(0.01, 100.0),
    gp=st.sampled_from([1, 2, 4, 8]),
    gd=st.sampled_from([1, 2, 4, 8]),
    n=st.sampled_from([16, 24, 32]),
)
def test_disaggregation_never_beats_the_better_of_its_pools_bounds(rp, rd, gp, gd, n):
    p, d = _pool(gp, rp), _pool(gd, rd)
    split = best_split(p, d, n)
    assert split is not None
    served = min(split[0] * rp, split[1] * rd)
    per_gpu = served / (split[0] * gp + split[1] * gd)
    bounds = (rp / gp, rd / gd)
    # the pair's rate per GPU is at most the harmonic combination, below either pool's rate
    assert per_gpu <= 1 / (1 / bounds[0] + 1 / bounds[1]) * (1 + 1e-9)
    assert per_gpu <= max(bounds)


def test_planned_pairs_stay_under_their_pool_bounds_and_report_the_ratio():
    plans = plan_disaggregated(LLAMA_70B, H100_TWO_NODES, 16, W, A)
    assert plans
    for plan in plans:
        assert plan.gpus <= 16
        assert plan.tokens_per_s_per_gpu <= min(plan.pool_bounds_tokens_per_s_per_gpu) * (1 + 1e-9)
        # at the balanced ratio both pools serve the same requests per second per GPU share
        ratio = plan.balanced_ratio
        share_p = ratio / (1 + ratio)
        p_rate = share_p * plan.prefill.requests_per_s_per_gpu
        d_rate = (1 - share_p) * plan.decode.requests_per_s_per_gpu
        assert p_rate == pytest.approx(d_rate, rel=1e-9)
    best = plans[0]
    assert best.tokens_per_s_per_gpu == max(p.tokens_per_s_per_gpu for p in plans)
    # ITL is the decode pool's step, TTFT at least the prefill alone
    assert best.itl_s == best.decode.step_s
    assert best.ttft_s > best.transfer.seconds / LLAMA_70B.num_hidden_layers


def test_serial_transfer_adds_the_whole_transfer_to_ttft():
    layout_p, layout_d = ServingLayout(tp=2), ServingLayout(tp=4)
    rates = []
    for a in (A, replace(A, kv_transfer_overlap=False)):
        p = prefill_rate(LLAMA_70B, H100_TWO_NODES, layout_p, W, a)
        d = decode_rate(LLAMA_70B, H100_TWO_NODES, layout_d, W, a)
        assert p is not None and d is not None
        rates.append(disaggregate(LLAMA_70B, H100_TWO_NODES, p, d, 16, W, a))
    over, serial = rates
    assert over is not None and serial is not None
    seconds = over.transfer.seconds
    assert serial.ttft_s - over.ttft_s == pytest.approx(
        seconds * (1 - 1 / LLAMA_70B.num_hidden_layers), rel=1e-9
    )


def test_prefix_cache_hits_shrink_the_prefill_pools_work():
    layout = ServingLayout(tp=2)
    plain = prefill_rate(
        LLAMA_70B, H100_TWO_NODES, layout, W, replace(A, kv_transfer_overlap=False)
    )
    half = prefill_rate(
        LLAMA_70B,
        H100_TWO_NODES,
        layout,
        W,
        replace(A, kv_transfer_overlap=False, prefix_cache_hit_rate=0.5),
    )
    assert plain is not None and half is not None
    assert half.requests_per_s > plain.requests_per_s
