"""Redundant experts (EPLB) and expert load imbalance under expert parallelism."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from explorer.memory.serving import ServingLayout, stage_shapes, weight_bytes_per_param
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions, estimate_serving, layout_problem
from explorer.serving.experts import (
    expert_imbalance,
    fewest_redundant_experts,
    rank_load_imbalance,
)
from explorer.serving.layouts import layout_warnings, with_redundant_experts
from explorer.specs import ClusterSpec, ServingWorkload

DEEPSEEK_V3 = load_model("deepseek-v3")
H200_18_NODES = ClusterSpec(gpu=load_gpu("h200"), num_nodes=18)
A = ServingAssumptions()
EPLB_32 = ServingAssumptions(redundant_experts=32)


@pytest.mark.parametrize(
    ("ep", "assumptions", "redundant", "per_gpu"),
    [
        pytest.param(72, A, 32, 4, id="sglang-blog-ep72-288-experts"),
        pytest.param(144, A, 32, 2, id="deepseek-ep144"),
        pytest.param(32, EPLB_32, 32, 9, id="deepseek-v3-report-3.4-prefill-8-plus-1-per-gpu"),
        pytest.param(32, A, 0, 8, id="ep32-divides-256"),
        pytest.param(12, A, 8, 22, id="ep12"),
    ],
)
def test_redundant_experts_make_ep_degrees_that_do_not_divide_256_valid(
    ep, assumptions, redundant, per_gpu
):
    layout = with_redundant_experts(DEEPSEEK_V3, ServingLayout(ep=ep), assumptions)
    assert layout.redundant_experts == redundant
    assert (256 + redundant) / ep == per_gpu
    assert layout_problem(DEEPSEEK_V3, H200_18_NODES, layout, assumptions) == ""


def test_without_redundant_experts_ep72_is_rejected_with_the_count():
    reason = layout_problem(DEEPSEEK_V3, H200_18_NODES, ServingLayout(ep=72), A)
    assert reason == "EP 72 does not divide the 256 routed experts"
    odd = ServingLayout(ep=72, redundant_experts=8)
    assert "256 routed + 8 redundant" in layout_problem(DEEPSEEK_V3, H200_18_NODES, odd, A)
    assert fewest_redundant_experts(load_model("llama-3.1-70b"), 8) == 0  # dense: none


def test_redundant_experts_add_their_weights_to_each_gpu():
    # EP 8 holds 32 experts a GPU; with 32 redundant, 36: 4 more experts x 58 MoE blocks of
    # 3 x 7168 x 2048 fp8 weights (with 128x128 fp32 block scales)
    base, eplb = (
        stage_shapes(DEEPSEEK_V3, ServingLayout(ep=8, redundant_experts=r), "fp8", "bf16", A.memory)
        for r in (0, 32)
    )
    bpp = weight_bytes_per_param("fp8", A.memory)
    extra = 4 * 58 * 3 * 7168 * 2048 * bpp
    assert eplb[0].weights_bytes - base[0].weights_bytes == pytest.approx(extra, rel=1e-9)
    warnings = layout_warnings(
        DEEPSEEK_V3, H200_18_NODES, ServingLayout(ep=8, redundant_experts=32)
    )
    assert any("32 redundant experts over EP 8" in w for w in warnings)


def test_random_routing_imbalance_matches_a_monte_carlo_of_top_k_routing():
    # 4096 tokens x 8 copies over EP 16 ranks of 16 experts each (uniform routing)
    rng = np.random.default_rng(0)
    tokens, ep, experts, k = 16 * 256, 16, 256, 8
    ratios = []
    for _ in range(20):
        picks = np.argsort(rng.random((tokens, experts)), axis=1)[:, :k]  # k distinct experts
        per_rank = np.bincount((picks // (experts // ep)).ravel(), minlength=ep)
        ratios.append(per_rank.max() / per_rank.mean())
    formula = rank_load_imbalance(tokens * k / ep, 16, ep, 0.0)  # m = 2048 copies per rank
    assert formula == pytest.approx(1 + math.sqrt(2 * math.log(16) / 2048), rel=1e-12)
    assert float(np.mean(ratios)) == pytest.approx(formula, rel=0.03)


@pytest.mark.parametrize(("cv", "ep", "slots"), [(1.68, 32, 256), (0.5, 32, 256), (0.084, 36, 288)])
def test_popularity_imbalance_matches_a_monte_carlo_of_skewed_experts(cv, ep, slots):
    # expert popularity drawn from a gamma law of that coefficient of variation, 1024 copies
    # a rank on average, Poisson counts per expert, experts packed in order onto ranks
    rng = np.random.default_rng(1)
    ratios = []
    for _ in range(200):
        weights = rng.gamma(1 / cv**2, size=slots)
        loads = rng.poisson(1024 * ep * weights / weights.sum()).reshape(ep, -1).sum(axis=1)
        ratios.append(loads.max() / loads.mean())
    formula = rank_load_imbalance(1024, slots / ep, ep, cv)
    assert float(np.mean(ratios)) == pytest.approx(formula, rel=0.12)


@pytest.mark.parametrize(
    ("ep", "cv", "published"),
    [
        pytest.param(32, 1.68, 1 + 1.564272, id="trtllm-eplb-readme-ep32-static"),
        pytest.param(36, 0.084, 1 + 0.115378, id="trtllm-eplb-readme-ep36-288-slots"),
    ],
)
def test_the_named_spreads_give_back_the_published_imbalance(ep, cv, published):
    # TensorRT-LLM examples/ep_load_balancer: DeepSeek-R1, 1024 copies and 8 experts a rank
    assert rank_load_imbalance(1024, 8, ep, cv) == pytest.approx(published, rel=0.01)


def test_redundant_experts_swap_the_popularity_spread_for_the_balanced_one():
    a = A
    static = expert_imbalance(DEEPSEEK_V3, 32, 0, 128, a.expert_load_cv, a.balanced_load_cv)
    eplb = expert_imbalance(DEEPSEEK_V3, 32, 32, 128, a.expert_load_cv, a.balanced_load_cv)
    assert static == pytest.approx(rank_load_imbalance(1024, 8, 32, 1.68), rel=1e-12)
    assert eplb == pytest.approx(rank_load_imbalance(1024, 9, 32, 0.084), rel=1e-12)
    assert static > 2.5 > 1.2 > eplb
    assert expert_imbalance(DEEPSEEK_V3, 1, 0, 1, 1.68, 0.084) == 1.0  # no EP: no imbalance


def test_imbalance_slows_the_moe_prefill_only_on_its_expert_share():
    workload = ServingWorkload(prompt_len=4096, output_len=1024, concurrency=8, weights_dtype="fp8")
    cluster = ClusterSpec(gpu=load_gpu("h200"), num_nodes=4)
    layout = ServingLayout(ep=32)
    even = replace(A, expert_load_cv=0.0)
    skewed, flat = (
        estimate_serving(DEEPSEEK_V3, cluster, layout, workload, a).prefill for a in (A, even)
    )
    ratio = skewed.compute_s / flat.compute_s
    # at 8192 tokens a group the routed experts' FLOPs run ~2.6x, the rest as before
    assert 1.5 < ratio < rank_load_imbalance(8192 * 8, 8, 32, 1.68)
