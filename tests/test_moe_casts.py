"""The routed experts' low-precision casts read their BF16 input in kernels of their own
(Transformer Engine GroupedLinear's split_quantize): the bytes, hand-worked at Qwen3-235B's
B200 EP8 shape, and which published stacks pay them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.compute import ComputeContext, pass_times, stage_work
from explorer.compute.kernels import expert_gemms, gemm_times
from explorer.compute.moe import expert_cast_reread_bytes
from explorer.presets import load_gpu, load_model
from explorer.specs import Layout, TrainingWorkload

B200 = load_gpu("b200")
QWEN3 = load_model("qwen3-235b-a22b")
BANDWIDTH = B200.hbm_bytes_per_s * 0.8
LAYOUT = Layout(dp=8, ep=8)  # 16 local experts, 4096 x 8 x 8 / 128 = 2048 tokens each


def test_cast_elements_of_the_expert_gemms_at_qwen3_ep8() -> None:
    gemms = tuple(expert_gemms(QWEN3, LAYOUT, tokens=4096, fp8_dispatch=False)[1:])
    _, experts = gemm_times(gemms, "fp8", B200, BANDWIDTH)
    # forward inputs: dispatched tokens 2048 x 4096 and the SwiGLU output 2048 x 1536, 16 experts
    assert experts.cast_forward == 16 * 2048 * (4096 + 1536) == 184_549_376
    # backward output gradients: the down projection's 2048 x 4096, the up one's 2048 x 3072
    assert experts.cast_backward == 16 * 2048 * (4096 + 3072) == 234_881_024


def test_each_cast_element_is_read_once_more_in_bf16() -> None:
    forward, backward = expert_cast_reread_bytes(184_549_376, 234_881_024, 2.0)
    assert (forward, backward) == (369_098_752, 469_762_048)
    # at B200's achievable 6.4 TB/s: 57.7 us forward, 73.4 us backward per MoE block
    assert forward / BANDWIDTH == pytest.approx(57.67e-6, rel=1e-3)
    assert backward / BANDWIDTH == pytest.approx(73.40e-6, rel=1e-3)


def test_the_reread_lengthens_each_pass_by_its_bytes_over_hbm() -> None:
    work = stage_work(QWEN3, tuple(range(12)), 4096, False, False)  # 12 MoE blocks
    workload = TrainingWorkload(seq_len=4096, global_batch_size=64, precision="fp8-mixed")
    ctx = ComputeContext(model=QWEN3, gpu=B200, layout=LAYOUT, workload=workload)
    off = replace(ctx, assumptions=replace(ctx.assumptions, expert_cast_reads_input=False))
    on, without = pass_times(work, ctx), pass_times(work, off)
    assert on.forward_s - without.forward_s == pytest.approx(12 * 369_098_752 / BANDWIDTH)
    assert on.backward_input_s - without.backward_input_s == pytest.approx(
        12 * 469_762_048 / BANDWIDTH
    )
    assert on.weight_s == without.weight_s
    # the experts' own parts, which Megatron-Core's all-to-all overlap pairs with, carry it
    assert on.expert_forward_s - without.expert_forward_s == pytest.approx(
        12 * 369_098_752 / BANDWIDTH
    )


def test_bf16_experts_have_no_casts_to_reread() -> None:
    work = stage_work(QWEN3, tuple(range(12)), 4096, False, False)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=64, precision="bf16-mixed")
    ctx = ComputeContext(model=QWEN3, gpu=B200, layout=LAYOUT, workload=workload)
    off = replace(ctx, assumptions=replace(ctx.assumptions, expert_cast_reads_input=False))
    assert pass_times(work, ctx) == pass_times(work, off)


def test_only_transformer_engine_grouped_linear_stacks_reread() -> None:
    from explorer.published_runs.scenario import scenario
    from explorer.published_runs.table import load_published_runs

    runs = {r.id: r for r in load_published_runs().run}
    mbridge = scenario(runs["mbridge-25.11-b200-qwen3-235b-mxfp8"]).assumptions.compute
    deepseek = scenario(runs["deepseek-v3-report-2048-h800"]).assumptions.compute
    assert mbridge.expert_cast_reads_input
    assert not deepseek.expert_cast_reads_input  # FP8 dispatch: cast before the dispatch
