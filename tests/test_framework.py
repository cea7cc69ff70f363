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
    # the fused ledger: norms, residuals and SwiGLU once each, and RoPE's one pass over q and k
    assert 2 * fused.blocks == pytest.approx(2 * (10 * H + 3 * F + 2 * (Q + KV)), rel=REL)
    # backward twice the norms', residuals' and SwiGLU's; RoPE's backward one pass as its forward
    assert fused.backward == pytest.approx(2 * (10 * H + 3 * F) + 2 * (Q + KV), rel=REL)


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


def test_dtensor_sp_collectives_copy_their_whole_buffer_once_each(monkeypatch) -> None:
    # batch-first SP on dim 1: every all-gather and reduce-scatter reads and writes its whole
    # buffer once (torch.cat of the chunks); 4 per block forward, 4 backward and the 2
    # all-gathers again under op-level SAC
    work = _work(first=False, last=False)
    layout = Layout(tp=8, micro_batch_size=2, recompute="selective", recompute_ops=True)
    copies = pass_times(work, _ctx("torchtitan", layout))
    plain = replace(FRAMEWORKS["torchtitan"], tp_chunk_cat=False)
    monkeypatch.setitem(FRAMEWORKS, "torchtitan", plain)
    pass_times.cache_clear()
    none = pass_times(work, _ctx("torchtitan", layout))
    pass_times.cache_clear()
    one = 2 * (2 * 8192 * H * 2) / BANDWIDTH  # read + write b s h bf16
    layers = LLAMA.num_hidden_layers
    assert copies.forward_s - none.forward_s == pytest.approx(4 * layers * one, rel=1e-6)
    gap = copies.backward_input_s - none.backward_input_s
    assert gap == pytest.approx((4 + 2) * layers * one, rel=1e-6)
    assert not FRAMEWORKS["megatron"].tp_chunk_cat  # sequence-first: gathers dim 0


def test_the_fp32_losses_move_14_plus_22_bytes_torchtitan_and_26_plus_14_megatron() -> None:
    # torchtitan, forward: logits.float() 2+4, log_softmax 4+4; backward: nll_loss_backward's
    # zero-filled 4, log_softmax_backward 8+4, the cast back 4+2
    titan_f, titan_b = (2 + 4) + (4 + 4), 4 + (8 + 4) + (4 + 2)
    # Megatron-Core (fusions/fused_cross_entropy.py), forward: upcast and max 2+4, exp in place
    # 4+4, row sum 4, div_ 4+4; backward: scale in place 4+4, cast to bf16 4+2
    mcore_f, mcore_b = (2 + 4) + (4 + 4) + 4 + (4 + 4), (4 + 4) + (4 + 2)
    assert (titan_f, titan_b, mcore_f, mcore_b) == (14, 22, 26, 14)
    forward, backward = titan_f - mcore_f, titan_b - mcore_b
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


# --- FSDP1's flat gradient and the compute lost beside overlapped collectives ---------------


def test_fsdp1_flat_gradient_moves_10_bytes_per_parameter_in_backward_with_fp32_reduce() -> None:
    # the backward of the flat parameter's split views is a cat of the bf16 gradients (read 2,
    # write 2); the post-backward hook casts the flat gradient to the fp32 reduce dtype (read
    # 2, write 4): 10 bytes per unsharded parameter and micro-batch, none in forward
    work = _work(first=False, last=False)
    zero3 = Layout(dp=8, zero=3, micro_batch_size=2)
    zero1 = replace(zero3, zero=1)
    three = pass_times(work, _ctx("pytorch-fsdp1", zero3))
    one = pass_times(work, _ctx("pytorch-fsdp1", zero1))
    params = work.dense_params
    assert three.forward_s == pytest.approx(one.forward_s, rel=REL)
    gap = three.backward_input_s - one.backward_input_s
    assert gap == pytest.approx((2 + 2 + 2 + 4) * params / BANDWIDTH, rel=1e-6)


def test_fsdp1_with_bf16_reduce_only_gathers_the_flat_gradient() -> None:
    # Composer's mixed_precision PURE reduces in bf16: no cast, the cat's 4 bytes remain
    work = _work(first=False, last=False)
    bf16 = TrainingWorkload(seq_len=8192, global_batch_size=16, grad_dtype="bf16")

    def backward(zero: int) -> float:
        layout = Layout(dp=8, zero=zero, micro_batch_size=2)
        a = ComputeAssumptions(framework="pytorch-fsdp1")
        ctx = ComputeContext(model=LLAMA, gpu=H100, layout=layout, workload=bf16, assumptions=a)
        return pass_times(work, ctx).backward_input_s

    gap = backward(3) - backward(1)
    assert gap == pytest.approx(4 * work.dense_params / BANDWIDTH, rel=1e-6)


def _dp_calls(slowdown: float, zero: int = 3):
    from explorer.comm import CommAssumptions, StageContext, place_groups, stage_collectives
    from explorer.compute import PassTimes
    from explorer.precision import precision_policy
    from explorer.specs import ClusterSpec

    cluster = ClusterSpec(gpu=H100, gpus_per_node=8, num_nodes=1, scale_out_bytes_per_s=50e9)
    layout = Layout(dp=8, zero=zero)
    ctx = StageContext(
        model=LLAMA,
        layout=layout,
        policy=precision_policy("bf16-mixed"),
        seq_len=8192,
        groups=place_groups(cluster, layout),
        assumptions=CommAssumptions(dp_overlap_slowdown=slowdown),
    )
    passes = PassTimes(
        forward_s=1.0, backward_input_s=1.0, weight_s=1.0, recompute_s=0.0,
        attention_forward_s=0.2, dense_efficiency=0.7,
    )  # fmt: skip
    work = _work(first=False, last=False)
    return [c for c in stage_collectives(work, passes, ctx) if c.axis == "dp"], passes


def test_a_hidden_fsdp_collective_costs_0_159_s_of_compute_per_second_it_hides() -> None:
    # compute 18.9% slower beside a collective (arXiv:2507.03114): a second of communication
    # covers 1 / 1.189 s of standalone compute, so it costs 1 - 1 / 1.189 = 0.15896 s
    free, passes = _dp_calls(0.0)
    slowed, _ = _dp_calls(0.189)
    lost = 0.189 / 1.189
    assert lost == pytest.approx(0.158957, abs=1e-6)
    assert len(free) == len(slowed) == 3  # gather forward, gather backward, scatter backward
    for a, b in zip(free, slowed, strict=True):
        assert a.time_s == b.time_s and a.hidden_s > 0  # the 1 s passes hide them
        assert b.exposed_s - a.exposed_s == pytest.approx(lost * a.hidden_s, rel=1e-9)
        assert b.exposed_for(passes) == pytest.approx(b.exposed_s, rel=1e-12)


def test_an_exposed_collective_costs_no_contention_and_the_slowdown_is_bounded() -> None:
    # with nothing to hide behind (dp_overlap 0 as the Narayanan calibration runs it) the
    # slowdown changes nothing; a slowdown outside [0, 1] is refused in one sentence
    from explorer.comm import CommAssumptions

    calls, passes = _dp_calls(0.189)
    none = [c.exposed_for(replace(passes, forward_s=0.0, backward_input_s=0.0, weight_s=0.0,
                                  attention_forward_s=0.0)) for c in calls]  # fmt: skip
    assert none == pytest.approx([c.time_s for c in calls], rel=1e-12)
    with pytest.raises(ValueError, match="dp_overlap_slowdown"):
        CommAssumptions(dp_overlap_slowdown=1.5)


def test_eager_bias_gradients_read_9h_per_token_of_an_mpt_block() -> None:
    # MPT (no_bias False): Wqkv's bias grad sums a 3h-wide output gradient, out_proj's h, the
    # FFN up projection's 4h and down projection's h: 9h read in backward, four reductions
    from explorer.compute.elementwise import block_ledger, eager_bias_grads
    from explorer.presets import load_model

    mpt = replace(
        load_model("gpt2"), hidden_size=4096, num_attention_heads=32, intermediate_size=16384
    )
    grads = eager_bias_grads(mpt, Layout())
    assert (grads.forward, grads.backward) == (0.0, 9 * 4096)
    assert (grads.forward_launches, grads.backward_launches) == (0, 4)
    plain = replace(mpt, attention_bias=False, attention_out_bias=False, mlp_bias=False)
    gap = block_ledger(mpt, Layout(), False, "eager", False).backward
    gap -= block_ledger(plain, Layout(), False, "eager", False).backward
    assert gap == 9 * 4096
    fused = block_ledger(mpt, Layout(), False, "fused", False)  # fused into TE's wgrad GEMM
    assert fused == block_ledger(plain, Layout(), False, "fused", False)
    # TP 8: the column-parallel q, k, v and up biases split, the row-parallel ones do not
    assert eager_bias_grads(mpt, Layout(tp=8, sequence_parallel=False)).backward == (
        (3 * 4096 + 16384) / 8 + 2 * 4096
    )


# --- LLM Foundry's 2023 kernels: FlashAttention v1 and the fused cross-entropy --------------


def test_flashattention_v1_tables_are_half_of_flashattention_2s() -> None:
    # FA2 paper (arXiv:2307.08691) abstract: around 2x over FlashAttention. A100: FA2 reaches
    # 73% of the peak forward at long lengths (fa2-a100), so v1 36.5%, inside the 25-40% the
    # paper gives FlashAttention; H100: FA2's backward 322 TFLOP/s at 16k (FA3 paper Fig. 6)
    curves = attention_curves()
    assert curves["fa1-a100"].forward[-1] == pytest.approx(0.73 / 2, abs=1e-4)
    assert 0.25 <= curves["fa1-a100"].forward[-1] <= 0.40
    assert curves["fa1-h100"].backward[-1] == pytest.approx(322 / 989.4 / 2, abs=1e-4)
    for gpu in ("a100", "h100"):
        v1, v2 = curves[f"fa1-{gpu}"], curves[f"fa2-{gpu}"]
        for name in ("forward", "forward_causal", "backward"):
            halves = [round(x / 2, 4) for x in getattr(v2, name)]
            assert list(getattr(v1, name)) == pytest.approx(halves, abs=1e-4)


def test_llm_foundry_runs_call_flashattention_v1_and_a_fused_cross_entropy() -> None:
    runs = {r.id: r for r in load_published_runs().run}
    h100 = scenario(runs["llmfoundry-h100-mpt-7b-2048-8gpu"]).assumptions.compute
    a100 = scenario(runs["llmfoundry-a100-mpt-7b-2048-8gpu"]).assumptions.compute
    assert (h100.framework, h100.attention_kernel) == ("pytorch-fsdp1", "fa1-h100")
    assert (a100.framework, a100.attention_kernel) == ("pytorch-fsdp1", "fa1-a100")
    assert not FRAMEWORKS["pytorch-fsdp1"].fp32_loss  # flash-attn's xentropy, not .float()
    # the attention core of a 65k-token MPT-7B micro-batch on H100 takes twice as long
    s = scenario(runs["llmfoundry-h100-mpt-7b-65536-8gpu"])
    v2 = replace(s.assumptions.compute, attention_kernel="fa2-h100")
    work = stage_work(s.model, tuple(range(s.model.num_hidden_layers)), 65536, False, False)

    def attention_s(a: ComputeAssumptions) -> float:
        ctx = ComputeContext(
            model=s.model, gpu=s.cluster.gpu, layout=s.layout, workload=s.workload, assumptions=a
        )
        return pass_times(work, ctx).attention_forward_s

    assert attention_s(s.assumptions.compute) == pytest.approx(2 * attention_s(v2), rel=1e-3)


def test_triton_flashattention_glue_moves_13h_per_token_in_backward_of_an_mpt_block() -> None:
    # zero the fp32 dq accumulator (4 bytes = 2 elements per q channel), copy it into dq (read
    # 2, write 1), read o and do (2), cat dq, dk, dv into the Wqkv gradient (read 3h, write
    # 3h): 2 + 3 + 2 + 6 = 13 elements per channel of h, four kernels, nothing in forward
    from explorer.compute.elementwise import block_ledger, triton_flash_attention_glue
    from explorer.presets import load_model

    mpt = replace(
        load_model("gpt2"), hidden_size=4096, num_attention_heads=32, intermediate_size=16384
    )
    glue = triton_flash_attention_glue(mpt, Layout())
    assert (glue.forward, glue.backward, glue.backward_launches) == (0.0, 13 * 4096, 4)
    with_glue = block_ledger(mpt, Layout(), False, "eager", False, triton_attention=True)
    without = block_ledger(mpt, Layout(), False, "eager", False)
    assert with_glue.backward - without.backward == 13 * 4096
    assert FRAMEWORKS["pytorch-fsdp1"].triton_attention
    assert not FRAMEWORKS["torchtitan"].triton_attention  # SDPA with separate q, k, v
    work = _work(first=False, last=False, model=mpt)
    fused = stage_traffic(work, mpt, Layout(), 2048, True, False, "fused", triton_attention=True)
    assert fused == stage_traffic(work, mpt, Layout(), 2048, True, False, "fused")
