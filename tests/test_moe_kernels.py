"""Routed-expert GEMMs: per-expert cuBLAS calls (Transformer Engine GroupedLinear) and the
grouped GEMM's efficiency by tokens per expert."""

from __future__ import annotations

import pytest

from explorer.compute import ComputeAssumptions
from explorer.compute.gemm import peak_flops_per_s
from explorer.compute.kernels import Gemm, expert_gemms, gemm_times
from explorer.presets import load_gpu, load_model
from explorer.specs import Layout

B200 = load_gpu("b200")
QWEN3 = load_model("qwen3-235b-a22b")
BANDWIDTH = B200.hbm_bytes_per_s * 0.8


def test_default_call_time_is_the_published_per_expert_figure() -> None:
    # NVIDIA/TransformerEngine PR #3134: 8 experts x 128 tokens, multi-stream cuBLAS 0.267 ms
    per_expert = 0.267e-3 / 8
    assert ComputeAssumptions().grouped_gemm_call_s == pytest.approx(per_expert, rel=0.02)


def test_expert_gemms_issue_one_call_per_local_expert() -> None:
    # Qwen3-235B: 128 experts, top-8, expert width 1536; EP8 holds 16 experts per GPU
    router, up, down = expert_gemms(QWEN3, Layout(dp=8, ep=8), tokens=4096)
    assert (router.calls, up.calls, down.calls) == (1, 16, 16)
    # tokens per expert: 4096 x 8 x 8 / 128 = 2048
    assert (up.m, up.n, up.k, up.groups) == (2048, 3072, 4096, 16)
    assert (down.m, down.n, down.k) == (2048, 4096, 1536)


def test_sixteen_per_expert_calls_bound_a_b200_grouped_gemm_from_below() -> None:
    # hand-worked: 16 calls x 33 us = 528 us per pass per grouped GEMM; the up projection's
    # FLOPs take 2 x 2048 x 3072 x 4096 x 16 / 4.5e15 = 183 us even at the full FP8 peak
    gemms = tuple(expert_gemms(QWEN3, Layout(dp=8, ep=8), tokens=4096)[1:])
    _, floored = gemm_times(gemms, "fp8", B200, BANDWIDTH, call_s=33e-6)
    assert floored.forward_s == pytest.approx(2 * 16 * 33e-6)
    assert floored.dgrad_s == pytest.approx(2 * 16 * 33e-6)
    assert floored.wgrad_s == pytest.approx(2 * 16 * 33e-6)
    full_peak = 2 * 2048 * 3072 * 4096 * 16 / peak_flops_per_s(B200, "fp8")
    assert full_peak == pytest.approx(183e-6, rel=0.01)


def test_four_local_experts_with_many_tokens_keep_their_flop_time() -> None:
    # DeepSeek-V3 at EP64: 4 local experts of 4096 x 8 x 64 / 256 = 8192 tokens; even at the
    # full FP8 peak each grouped GEMM takes longer than 4 x 33 us, so the floor never binds
    deepseek = load_model("deepseek-v3")
    gemms = tuple(expert_gemms(deepseek, Layout(dp=64, ep=64), tokens=4096)[1:])
    assert [g.m for g in gemms] == [8192, 8192]
    smallest = min(g.flops for g in gemms) / peak_flops_per_s(B200, "fp8")
    assert smallest > 4 * 33e-6
    _, free = gemm_times(gemms, "fp8", B200, BANDWIDTH)
    _, floored = gemm_times(gemms, "fp8", B200, BANDWIDTH, call_s=33e-6)
    assert floored == free


@pytest.mark.parametrize("call_s", [0.0, 33e-6])
def test_grouped_gemm_efficiency_rises_with_tokens_per_expert(call_s: float) -> None:
    # 16 local experts of the Qwen3-235B up projection, 64 to 8192 tokens each
    peak = peak_flops_per_s(B200, "fp8")
    shares = []
    for m in (64, 256, 1024, 4096, 8192):
        g = Gemm(m, 3072, 4096, 16, expert=True, calls=16)
        _, t = gemm_times((g,), "fp8", B200, BANDWIDTH, call_s=call_s)
        shares.append(g.flops / (t.forward_s * peak))
    assert shares == sorted(shares)
    assert shares[0] < 0.5 * shares[-1]


def test_only_megatron_core_runs_pay_per_expert_calls() -> None:
    from explorer.published_runs.scenario import scenario
    from explorer.published_runs.table import load_published_runs

    runs = {r.id: r for r in load_published_runs().run}
    mbridge = scenario(runs["mbridge-25.11-b200-qwen3-235b-mxfp8"]).assumptions.compute
    deepseek = scenario(runs["deepseek-v3-report-2048-h800"]).assumptions.compute
    assert mbridge.grouped_gemm_call_s == ComputeAssumptions().grouped_gemm_call_s
    assert deepseek.grouped_gemm_call_s == 0.0  # DeepGEMM: one launch for all experts


def test_the_dispatchers_sort_by_local_expert_moves_four_k_h_per_token() -> None:
    from explorer.compute.moe import chunk_sort_elements

    # Qwen3-235B: top-8, h 4096; the sort and the unsort each read and write 8 copies
    assert chunk_sort_elements(QWEN3, Layout(dp=8, ep=8)) == 4 * 8 * 4096
    assert chunk_sort_elements(QWEN3, Layout(tp=2, dp=16, ep=32)) == 4 * 8 * 4096 / 2
    assert chunk_sort_elements(QWEN3, Layout(dp=128, ep=128)) == 0.0  # one expert per GPU


def test_the_sort_costs_its_bytes_over_hbm_in_forward_and_backward() -> None:
    from dataclasses import replace

    from explorer.compute import ComputeContext, pass_times, stage_work
    from explorer.specs import TrainingWorkload

    layout = Layout(dp=8, ep=8)
    work = stage_work(QWEN3, tuple(range(12)), 4096, False, False)  # 12 MoE blocks
    workload = TrainingWorkload(seq_len=4096, global_batch_size=64, precision="bf16-mixed")
    ctx = ComputeContext(model=QWEN3, gpu=B200, layout=layout, workload=workload)
    off = replace(ctx, assumptions=replace(ctx.assumptions, ep_chunk_sort=False))
    on, without = pass_times(work, ctx), pass_times(work, off)
    # hand-worked: 4 x 8 x 4096 elements x 4096 tokens x 2 bytes / (8 TB/s x 0.8) per block
    per_block = 4 * 8 * 4096 * 4096 * 2 / (8e12 * 0.8)
    assert per_block == pytest.approx(167.8e-6, rel=1e-3)
    assert on.forward_s - without.forward_s == pytest.approx(12 * per_block)
    assert on.backward_input_s - without.backward_input_s == pytest.approx(12 * per_block)
    assert on.weight_s == without.weight_s
