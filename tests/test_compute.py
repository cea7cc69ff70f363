"""Compute time per stage and micro-batch: FLOP ledger, kernel efficiency, optimizer step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hand_models import H100_LIKE as H100
from hypothesis import given
from hypothesis import strategies as st

from explorer.compute import (
    ComputeAssumptions,
    ComputeContext,
    gemm_efficiency,
    optimizer_bytes_per_param,
    optimizer_step_s,
    pass_times,
    peak_flops_per_s,
    stage_work,
)
from explorer.counting import param_counts
from explorer.flops import forward_flops_per_token
from explorer.partition import pipeline_plan
from explorer.precision import precision_policy
from explorer.presets import load_gpu
from explorer.specs import Layout, ModelSpec, TrainingWorkload

REL = 1e-9
"""Exact ledgers: only float rounding."""

DENSE = ModelSpec(
    num_hidden_layers=16,
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=128256,
)
MOE = replace(
    DENSE,
    n_routed_experts=64,
    num_experts_per_tok=4,
    moe_intermediate_size=1408,
    n_shared_experts=2,
    first_k_dense_replace=1,
)
WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=64)
FLAT = ComputeAssumptions(max_efficiency=0.5, attention_efficiency=0.5)
"""Every GEMM and attention kernel held at 0.5 of peak (below what any shape here reaches):
FLOPs alone set the time."""


def _context(layout: Layout, model: ModelSpec = DENSE, **kw: Any) -> ComputeContext:
    return ComputeContext(model=model, gpu=H100, layout=layout, workload=WORKLOAD, **kw)


def _whole(model: ModelSpec, first: bool = True, last: bool = True):
    return stage_work(model, tuple(range(model.num_hidden_layers)), 4096, first, last)


# --- stage work -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", [DENSE, MOE], ids=["dense", "moe"])
def test_stage_flops_add_up_to_the_model_forward(model: ModelSpec) -> None:
    expected = forward_flops_per_token(model, 4096).total
    assert _whole(model).forward_flops == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("model", [DENSE, MOE], ids=["dense", "moe"])
def test_stage_parameters_add_up_to_the_model_count(model: ModelSpec) -> None:
    layout = Layout(pp=4)
    stages = [
        stage_work(model, p.layers, 4096, p.has_embedding, p.has_head)
        for p in pipeline_plan(model, layout)
    ]
    held = sum(s.dense_params + s.expert_params for s in stages)
    assert held == pytest.approx(param_counts(model).total, rel=REL)


def test_routed_experts_are_apart_from_dense_work() -> None:
    work = _whole(MOE)
    per_layer = 2 * 4 * 3 * 4096 * 1408  # top-k x SwiGLU matrices x h x ffn, 2 per MAC
    assert work.expert_flops == pytest.approx(per_layer * MOE.num_moe_layers, rel=REL)
    assert work.num_moe_layers == 15


# --- kernel efficiency and peaks ------------------------------------------------------------


@given(
    m=st.integers(1, 2**17),
    n=st.integers(1, 2**17),
    k=st.integers(1, 2**17),
    dtype=st.sampled_from(["bf16", "fp8", "tf32"]),
)
def test_gemm_efficiency_is_a_share_of_peak_for_any_shape(m: int, n: int, k: int, dtype) -> None:
    for gpu in (H100, load_gpu("h100-sxm"), load_gpu("mi300x")):
        assert 0 < gemm_efficiency(m, n, k, dtype, gpu, 3e12) <= 1


def test_peaks_follow_the_gemm_format() -> None:
    assert peak_flops_per_s(H100, "fp8") == 1979e12
    assert peak_flops_per_s(H100, "tf32") == 989e12 / 2
    assert peak_flops_per_s(replace(H100, fp8_flops_per_s=None), "fp8") == 989e12


def test_assumptions_reject_an_efficiency_above_one_and_a_scale_of_zero() -> None:
    with pytest.raises(ValueError, match="gemm_efficiency_scale"):
        ComputeAssumptions(gemm_efficiency_scale=0.0)
    with pytest.raises(ValueError, match="max_efficiency"):
        ComputeAssumptions(max_efficiency=1.5)


# --- pass times -----------------------------------------------------------------------------


def test_backward_is_twice_the_forward_gemms_and_two_and_a_half_the_attention() -> None:
    # FLAT: every kernel at the same share, so only FLOPs and bytes count. GEMMs: input and
    # weight gradients 1 x the forward each; FlashAttention backward 2.5 x the forward FLOPs;
    # memory-bound bytes 2 x, in the input gradient.
    work = _whole(DENSE)
    t = pass_times(work, _context(Layout(), assumptions=FLAT))
    attention = t.attention_forward_s
    bandwidth = 3.35e12 * FLAT.hbm_efficiency
    # RoPE (TE FusedRoPEFunc, Megatron-Core rope_utils) reads and writes q and k once each way;
    # Megatron-Core's fp32 cross-entropy moves 26 B per logit forward, 14 B backward
    rope = 16 * 2 * (4096 + 1024) * 4096 * 2 / bandwidth
    loss_f, loss_b = (26 * 4096 * 128256 / bandwidth, 14 * 4096 * 128256 / bandwidth)
    memory = t.forward_s - t.weight_s - attention - rope - loss_f
    expected = t.weight_s + 2.5 * attention + 2 * memory + rope + loss_b
    assert t.backward_input_s == pytest.approx(expected, rel=REL)
    assert t.recompute_s == 0.0


def test_full_recompute_repeats_the_blocks_forward_and_selective_the_attention() -> None:
    work = _whole(DENSE, first=False, last=False)  # no head: blocks only
    full = pass_times(work, _context(Layout(recompute="full")))
    selective = pass_times(work, _context(Layout(recompute="selective")))
    assert full.recompute_s == pytest.approx(full.forward_s, rel=REL)
    assert selective.recompute_s == pytest.approx(selective.attention_forward_s, rel=REL)


def test_forward_time_is_flops_over_peak_times_efficiency() -> None:
    work = _whole(DENSE, first=False, last=False)
    ctx = _context(Layout(), assumptions=FLAT)
    gemm = work.block_flops * 4096 / (989e12 * 0.5)
    # memory-bound: 10 h (norms, residuals) + 3 f (SwiGLU) per layer, 2 bytes, 4096 tokens
    # and RoPE's pass over q (4096) and k (1024 wide), 2 (q + k) elements (TE FusedRoPEFunc)
    elements = 16 * (10 * 4096 + 3 * 14336 + 2 * (4096 + 1024)) * 4096
    memory = elements * 2 / (3.35e12 * FLAT.hbm_efficiency)
    assert pass_times(work, ctx).forward_s == pytest.approx(gemm + memory, rel=REL)


def test_doubling_tp_halves_the_time_when_efficiency_does_not_depend_on_size() -> None:
    work = _whole(DENSE)
    one = pass_times(work, _context(Layout(tp=2), assumptions=FLAT)).forward_s
    two = pass_times(work, _context(Layout(tp=4), assumptions=FLAT)).forward_s
    assert two == pytest.approx(one / 2, rel=REL)


def test_small_per_gpu_gemms_run_at_lower_efficiency() -> None:
    narrow = pass_times(_whole(DENSE), _context(Layout(tp=8)))
    wide = pass_times(_whole(DENSE), _context(Layout(tp=1)))
    assert narrow.dense_efficiency < wide.dense_efficiency


def test_classic_attention_moves_the_score_matrix_through_hbm() -> None:
    work = _whole(DENSE)
    flash = pass_times(work, _context(Layout()))
    classic = pass_times(work, _context(Layout(), flash_attention=False))
    assert classic.forward_s > flash.forward_s


def test_fp8_speeds_up_linear_layers_but_not_attention() -> None:
    work = _whole(DENSE)
    bf16 = pass_times(work, _context(Layout()))
    fp8_workload = replace(WORKLOAD, precision="fp8-mixed")
    fp8 = pass_times(work, replace(_context(Layout()), workload=fp8_workload))
    assert fp8.forward_s < bf16.forward_s
    assert fp8.attention_forward_s == pytest.approx(bf16.attention_forward_s, rel=REL)


def test_expert_imbalance_slows_the_busiest_gpu() -> None:
    work = _whole(MOE)
    even = pass_times(work, _context(Layout(ep=8, dp=8), MOE))
    skewed = pass_times(work, _context(Layout(ep=8, dp=8), MOE, moe_imbalance=1.25))
    assert skewed.forward_s > even.forward_s


def test_dualpipe_with_ep_computes_on_the_sms_its_all_to_alls_leave() -> None:
    # DeepSeek-V3 sec. 3.2.2: 20 of 132 SMs run dispatch and combine; GEMMs and attention get
    # the other 112, so they take 132 / 112 as long; memory-bound kernels are unchanged.
    # FLAT: forward GEMMs take as long as the weight-gradient ones (same FLOPs, same share)
    work, share = _whole(MOE), 20 / 132
    sms = replace(FLAT, comm_sm_share=share)
    layout = Layout(ep=8, dp=8, pp=2, schedule="dualpipe")
    free = pass_times(work, _context(layout, MOE, assumptions=FLAT))
    held = pass_times(work, _context(layout, MOE, assumptions=sms))
    assert held.weight_s == pytest.approx(free.weight_s * 132 / 112, rel=REL)  # GEMMs only
    assert held.attention_forward_s == pytest.approx(free.attention_forward_s * 132 / 112)
    memory_bound = free.forward_s - free.weight_s - free.attention_forward_s
    assert held.forward_s - held.weight_s - held.attention_forward_s == pytest.approx(
        memory_bound, rel=REL
    )
    for plain in (Layout(ep=8, dp=8, pp=2), Layout(dp=8, pp=2, schedule="dualpipe")):
        unchanged = pass_times(work, _context(plain, MOE, assumptions=sms))
        assert unchanged == pass_times(work, _context(plain, MOE, assumptions=FLAT))


def test_assumptions_reject_a_comm_sm_share_of_one() -> None:
    with pytest.raises(ValueError, match="comm_sm_share"):
        ComputeAssumptions(comm_sm_share=1.0)


# --- optimizer step -------------------------------------------------------------------------


def test_mixed_precision_adam_moves_34_bytes_per_parameter() -> None:
    # master w r/w 8 + m, v r/w 16 + grad read twice 8 + bf16 copy written 2
    assert optimizer_bytes_per_param(precision_policy("bf16-mixed")) == 34


def test_distributed_optimizer_divides_the_step_by_the_data_parallel_ranks() -> None:
    work = _whole(DENSE)
    plain = optimizer_step_s(work, _context(Layout(dp=8, tp=2)))
    sharded = optimizer_step_s(work, _context(Layout(dp=8, tp=2, zero=1)))
    assert sharded == pytest.approx(plain / 8, rel=REL)
    per_gpu = work.dense_params / 2
    expected = per_gpu * 34 / (3.35e12 * 0.8)
    assert plain == pytest.approx(expected, rel=REL)


def test_a_slower_attention_kernel_slows_only_the_attention_core() -> None:
    work = _whole(DENSE)
    base = pass_times(work, _context(Layout()))
    slow = pass_times(
        work, _context(Layout(), assumptions=ComputeAssumptions(attention_efficiency=0.3))
    )
    extra = slow.forward_s - base.forward_s
    assert extra == pytest.approx(slow.attention_forward_s - base.attention_forward_s, rel=REL)
    assert slow.attention_forward_s > base.attention_forward_s
