"""Framework profiles: eager and compiled memory-bound ledgers, FSDP2 copies, the fp32 loss,
foreach AdamW, CPU issue time and CUDA graphs (explorer.compute.framework)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hand_models import H100_LIKE as H100
from hand_models import LLAMA_LIKE_8B as LLAMA

from explorer.compute import ComputeAssumptions, ComputeContext, pass_times, stage_work
from explorer.compute.elementwise import eager_activation, eager_rmsnorm, stage_traffic
from explorer.compute.framework import FRAMEWORKS
from explorer.compute.passes import optimizer_step_s
from explorer.presets import attention_curves
from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs
from explorer.specs import Layout, TrainingWorkload

REL = 1e-9
H, Q, KV, F = 4096, 32 * 128, 8 * 128, 14336
"""Llama-3-8B's widths: hidden, q heads x head dim, kv heads x head dim, SwiGLU width."""
WORKLOAD = TrainingWorkload(seq_len=8192, global_batch_size=16)
BANDWIDTH = 3.35e12 * 0.8
"""The hand GPU's HBM at the default achievable share (compute.hbm_efficiency)."""


def _ctx(framework: str = "megatron", layout: Layout | None = None, **kw: object):
    a = ComputeAssumptions(framework=framework, **kw)  # type: ignore[arg-type]
    layout = layout or Layout(dp=8, zero=3, micro_batch_size=2)
    return ComputeContext(model=LLAMA, gpu=H100, layout=layout, workload=WORKLOAD, assumptions=a)


def _work(first: bool = True, last: bool = True, model=LLAMA):
    return stage_work(model, tuple(range(model.num_hidden_layers)), 8192, first, last)


# --- hand-worked eager kernels ----------------------------------------------------------------


def test_eager_rmsnorm_moves_36_bytes_forward_and_92_backward_per_channel() -> None:
    # forward, bytes read + written per channel: x.float() 2+4, pow 4+4, mean 4 (+eps and rsqrt
    # on one value per token), x*rsqrt 4+4, type_as 4+2, *weight 2+2
    forward = (2 + 4) + (4 + 4) + 4 + (4 + 4) + (4 + 2) + (2 + 2)
    # backward: *weight 2+2 and its weight grad 4+2 then a sum 2; type_as 2+4; x*rsqrt grads
    # 4+4 and 8+4 then a sum 4; mean's expand/divide 4; pow's x**1 4+4, *2 4+4, *grad 8+4;
    # the two fp32 grads of x added 8+4; the cast back 4+2
    backward = (4 + 6 + 2) + 6 + (8 + 12 + 4) + 4 + (8 + 8 + 12) + 12 + 6
    assert (forward, backward) == (36, 92)
    norm = eager_rmsnorm(H)
    assert 2 * norm.forward == pytest.approx(forward * H, rel=REL)  # 2-byte elements
    assert 2 * norm.backward == pytest.approx(backward * H, rel=REL)
    assert (norm.forward_launches, norm.backward_launches) == (8, 13)


def test_eager_swiglu_moves_10_bytes_forward_and_18_backward_per_ffn_channel() -> None:
    # silu reads and writes f (2+2); the product reads silu and w3's output, writes (4+2);
    # backward: two products (4+2 each) and silu_backward (4+2)
    forward, backward = (2 + 2) + (4 + 2), 2 * (4 + 2) + (4 + 2)
    act = eager_activation(LLAMA, F)
    assert 2 * act.forward == pytest.approx(forward * F, rel=REL)
    assert 2 * act.backward == pytest.approx(backward * F, rel=REL)


def test_an_eager_llama_block_is_the_sum_of_its_ops() -> None:
    # bytes per token: 2 RMSNorms (36 h), 2 residual adds (6 h), RoPE on q and k (20 each),
    # repeat_kv of k and v (read kv, write q: 2 kv + 2 q each), SwiGLU (10 f)
    by_hand = 2 * 36 * H + 2 * 6 * H + 20 * (Q + KV) + 2 * (2 * KV + 2 * Q) + 10 * F
    assert by_hand == 610_304
    one = replace(LLAMA, num_hidden_layers=1)
    traffic = stage_traffic(_work(False, False, one), one, Layout(), 8192, True, False, "eager")
    assert 2 * traffic.blocks == pytest.approx(by_hand, rel=REL)
    fused = stage_traffic(_work(False, False, one), one, Layout(), 8192, True, False)
    assert 2 * fused.blocks == pytest.approx(2 * (10 * H + 3 * F), rel=REL)  # today's ledger
    assert fused.backward == pytest.approx(2 * fused.blocks, rel=REL)


def test_torchtitan_fused_rmsnorm_runs_each_norm_as_one_kernel() -> None:
    one = replace(LLAMA, num_hidden_layers=1)
    work = _work(False, False, one)
    eager = stage_traffic(work, one, Layout(), 8192, True, False, "eager")
    fused_norm = stage_traffic(work, one, Layout(), 8192, True, False, "eager", fused_norm=True)
    assert 2 * (eager.blocks - fused_norm.blocks) == pytest.approx(2 * (36 - 4) * H, rel=REL)


# --- profiles against one another -------------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    [Layout(dp=8, zero=3, micro_batch_size=2), Layout(tp=2, dp=4, zero=3, micro_batch_size=1)],
    ids=["fsdp8", "tp2-fsdp4"],
)
def test_compiled_blocks_cost_no_more_than_eager_ones_and_no_less_than_fused(
    layout: Layout,
) -> None:
    work = _work()
    times = {f: pass_times(work, _ctx(f, layout)) for f in ("megatron", "torchtitan-compile",
                                                             "torchtitan")}  # fmt: skip
    for part in ("forward_s", "backward_input_s", "recompute_s"):
        fused, compiled, eager = (getattr(times[f], part) for f in times)
        assert fused <= compiled <= eager
    assert times["torchtitan"].forward_s > 1.1 * times["torchtitan-compile"].forward_s


def test_cuda_graphs_remove_kernel_gaps_and_cpu_issue_time() -> None:
    tiny = Layout(dp=8, zero=1, micro_batch_size=1)
    work = _work()
    slow = pass_times(work, _ctx("torchtitan", tiny, kernel_gap_s=5e-6, kernel_issue_s=1e-3))
    graphs = pass_times(
        work, _ctx("torchtitan", tiny, kernel_gap_s=5e-6, kernel_issue_s=1e-3, cuda_graphs=True)
    )
    none = pass_times(work, _ctx("torchtitan", tiny, kernel_issue_s=0.0))
    assert graphs == none
    assert slow.forward_s > 1.5 * graphs.forward_s


def test_a_pass_lasts_at_least_its_kernels_cpu_issue_time() -> None:
    # one second per kernel dwarfs the GPU time: forward = the blocks' kernels, per block 4
    # GEMMs (fused QKV and gate/up, explorer.compute.kernels), the attention kernel, and the
    # eager memory-bound ops: 2 norms x 8, 2 residuals, RoPE 2 x 3, repeat_kv 2, SwiGLU 2
    per_block = 4 + 1 + (2 * 8 + 2 + 2 * 3 + 2 + 2)
    times = pass_times(_work(), _ctx("torchtitan", kernel_issue_s=1.0))
    assert times.forward_s == pytest.approx(32 * per_block, rel=REL)


def test_eager_issue_cost_hides_behind_kernels_of_16k_tokens() -> None:
    # 5 us per kernel x 1,088 forward kernels = 5.4 ms, against seconds of GPU work
    work = _work()
    eager = pass_times(work, _ctx("torchtitan"))
    assert eager == pass_times(work, _ctx("torchtitan", kernel_issue_s=0.0))


def test_fsdp2_copies_move_4_bytes_forward_and_10_backward_per_parameter() -> None:
    # copy-out of each bf16 all-gather (read 2, write 2), in forward and again in backward; the
    # reduce-scatter copy-in reads the bf16 gradient (2) and writes it in fp32 (4)
    work = _work(first=False, last=False)
    zero3, zero1 = (
        Layout(dp=8, zero=3, micro_batch_size=2),
        Layout(dp=8, zero=1, micro_batch_size=2),
    )
    three, one = (
        pass_times(work, _ctx("torchtitan", zero3)),
        pass_times(work, _ctx("torchtitan", zero1)),
    )
    params = work.dense_params
    assert three.forward_s - one.forward_s == pytest.approx(4 * params / BANDWIDTH, rel=1e-6)
    gap = three.backward_input_s - one.backward_input_s
    assert gap == pytest.approx((4 + 2 + 4) * params / BANDWIDTH, rel=1e-6)
    fused_three = pass_times(work, _ctx("megatron", zero3))
    assert fused_three == pass_times(work, _ctx("megatron", zero1))  # no FSDP2 buffers


def test_fsdp2_under_pipeline_parallelism_gathers_once_per_step() -> None:
    work = _work(first=False, last=False)
    pp = Layout(dp=2, pp=4, zero=3, micro_batch_size=1)  # 16 / (2 x 1) = 8 micro-batches
    three = pass_times(work, _ctx("torchtitan", pp))
    one = pass_times(work, _ctx("torchtitan", replace(pp, zero=1)))
    assert three.forward_s - one.forward_s == pytest.approx(
        4 * work.dense_params / BANDWIDTH / 8, rel=1e-6
    )


def test_the_fp32_loss_moves_14_bytes_forward_and_22_backward_per_logit() -> None:
    # forward: logits.float() 2+4, log_softmax 4+4; backward: nll_loss_backward's zero-filled
    # 4, log_softmax_backward 8+4, the cast back 4+2
    forward, backward = (2 + 4) + (4 + 4), 4 + (8 + 4) + (4 + 2)
    layout = Layout(dp=8, zero=1, micro_batch_size=2)
    logits = 2 * 8192 * LLAMA.vocab_size  # per micro-batch
    last, inner = _work(), _work(first=True, last=False)

    def head(framework: str, part: str) -> float:
        at = lambda w: getattr(pass_times(w, _ctx(framework, layout)), part)  # noqa: E731
        return at(last) - at(inner)

    extra_f = head("torchtitan", "forward_s") - head("megatron", "forward_s")
    extra_b = head("torchtitan", "backward_input_s") - head("megatron", "backward_input_s")
    assert extra_f == pytest.approx(forward * logits / BANDWIDTH, rel=1e-6)
    assert extra_b == pytest.approx(backward * logits / BANDWIDTH, rel=1e-6)


def test_foreach_adamw_moves_96_bytes_per_parameter_against_34_fused() -> None:
    # fp32 weights w, moments s, gradients g (4 bytes each): weight decay 2w, lerp 2s+g,
    # mul 2s, addcmul 2s+2g, sqrt/div/add 3 x 2s, addcdiv 2w+2s; clip_grad_norm_ 3g
    foreach = 2 * 4 + (8 + 4) + 8 + (8 + 8) + 3 * 8 + (8 + 8) + 12
    assert foreach == 96
    work = _work()
    ratio = optimizer_step_s(work, _ctx("torchtitan")) / optimizer_step_s(work, _ctx("megatron"))
    assert ratio == pytest.approx(96 / 34, rel=REL)


def test_assumptions_reject_an_unknown_framework_and_a_negative_issue_cost() -> None:
    with pytest.raises(ValueError, match="framework must be one of"):
        ComputeAssumptions(framework="jax")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kernel_issue_s"):
        ComputeAssumptions(kernel_issue_s=-1e-6)
    assert set(FRAMEWORKS) == {"megatron", "torchtitan", "torchtitan-compile", "deepspeed",
                               "pytorch", "pytorch-fsdp1"}  # fmt: skip


# --- the SDPA kernel and the published runs ---------------------------------------------------


def test_fa2_on_h100_is_the_fa3_papers_fa2_bars_over_the_dense_peak() -> None:
    # Shah et al. 2024 (arXiv:2407.08608) Figs. 5-6, FA2 on H100 SXM5, head dim 128, TFLOP/s
    curve = attention_curves()["fa2-h100"]
    peak = 989.4
    for shares, published in (
        (curve.forward, [309, 350, 362, 368, 370, 370]),
        (curve.forward_causal, [191, 260, 298, 319, 333, 335]),
        (curve.backward, [214, 260, 291, 310, 318, 322]),
    ):
        assert [round(s * peak) for s in shares] == published


def test_sdpa_fa2_slows_the_attention_core_on_h100() -> None:
    work = _work()
    fa3 = pass_times(work, _ctx("torchtitan", attention_kernel="fa3-h100"))
    fa2 = pass_times(work, _ctx("torchtitan", attention_kernel="fa2-h100"))
    # causal forward at 8k: 602 against 333 TFLOP/s (FA3 paper Fig. 5)
    ratio = fa2.attention_forward_s / fa3.attention_forward_s
    assert ratio == pytest.approx(0.6084 / 0.3366, rel=1e-3)


def test_published_runs_pick_their_framework_profile() -> None:
    runs = {r.id: r for r in load_published_runs().run}

    def compute(run_id: str) -> ComputeAssumptions:
        return scenario(runs[run_id]).assumptions.compute

    eager = compute("torchtitan-2412-h100-llama31-8b-fsdp8")
    assert (eager.framework, eager.attention_kernel) == ("torchtitan", "fa2-h100")
    compiled = compute("torchtitan-2412-h100-llama31-8b-fsdp8-compile-float8")
    assert compiled.framework == "torchtitan-compile"
    a100 = compute("torchtitan-a100-llama3-8b-fsdp64-sac-op")
    assert (a100.framework, a100.fused_norm, a100.attention_kernel) == ("torchtitan", True, None)
    graphs = compute("mbridge-25.11-b200-llama3-8b-fp8cs")
    assert (graphs.framework, graphs.cuda_graphs) == ("megatron", True)
    partial = compute("mbridge-26.04.01-b200-deepseek-v3-mxfp8")
    assert not partial.cuda_graphs


def test_fsdp1_has_no_per_parameter_copies_and_learned_positions_no_rope() -> None:
    # FSDP1 gathers into the flat buffer its parameters view: nothing to copy per parameter;
    # a GPT-2 block (learned positions) has no RoPE, so its eager ledger is the RoPE-less one
    from explorer.compute.elementwise import block_ledger
    from explorer.presets import load_model
    from explorer.specs import Layout

    assert not FRAMEWORKS["pytorch-fsdp1"].fsdp2_copies
    assert FRAMEWORKS["pytorch"].fsdp2_copies
    gpt2 = load_model("gpt2")  # 12 heads of 64: q and k 768 wide each
    with_rope = replace(gpt2, learned_position_embeddings=False)
    layout = Layout()
    plain = block_ledger(gpt2, layout, False, "eager", False)
    roped = block_ledger(with_rope, layout, False, "eager", False)
    assert roped.forward - plain.forward == 10 * 768 + 10 * 768  # eager RoPE: 10 per channel
