"""FSDP as the PyTorch frameworks run it, each behaviour against a hand-worked figure.

NeMo AutoModel's MoE parallelizer (experts left out of FSDP when EP spans the DP ranks, fp32
unsharded gradients accumulated under pipelining, bf16 parameters with bf16 Adam moments), the
sharded gradients that do not exist while FSDP accumulates unsharded ones, the kept gathered
weights through every block's backward, and Adam's state bytes following the parameters' dtype.
"""

from __future__ import annotations

import dataclasses

import pytest
from hand_models import H100_LIKE
from hand_models import LLAMA_LIKE_8B as LLAMA
from test_activations import SMALL_MOE

from explorer.memory import training_memory
from explorer.memory.assumptions import PYTORCH_ASSUMPTIONS
from explorer.memory.states import stage_params
from explorer.partition import pipeline_plan
from explorer.specs import Layout, TrainingWorkload

EXACT = 1e-12  # sums of products of integers: only float rounding may differ
KEPT = "ZeRO-3 weights kept gathered after the forward"
UNSHARDED = "ZeRO-3 unsharded gradients under pipelining"

# EP 4 over DP 4: a one-rank expert-data-parallel group; PP 2 with 8 micro-batches
MOE_LAYOUT = Layout(pp=2, dp=4, ep=4, zero=3)
PURE = TrainingWorkload(seq_len=4096, global_batch_size=32, precision="bf16-pure")
AUTOMODEL = dataclasses.replace(
    PYTORCH_ASSUMPTIONS, fsdp_ignores_unsharded_experts=True, fsdp_accumulated_grad_bytes=4.0
)


def stage0(layout, workload, assumptions, model=SMALL_MOE):
    return training_memory(model, H100_LIKE, layout, workload, assumptions).stages[0]


def held0(layout, model=SMALL_MOE):
    return stage_params(model, layout, pipeline_plan(model, layout)[0])


def test_experts_outside_fsdp_are_never_gathered_nor_held_unsharded() -> None:
    held = held0(MOE_LAYOUT)
    assert held.expert > 0
    with_experts = dict(stage0(MOE_LAYOUT, PURE, PYTORCH_ASSUMPTIONS).temporary_parts)
    without = dict(stage0(MOE_LAYOUT, PURE, AUTOMODEL).temporary_parts)
    # bf16-pure: 2-byte gathered weights; unsharded gradients 2 bytes (the policy's) against
    # 4 (the fp32 reduce dtype FSDP2 accumulates in)
    assert with_experts[KEPT] == pytest.approx(2 * held.total, rel=EXACT)
    assert without[KEPT] == pytest.approx(2 * held.dense, rel=EXACT)
    assert with_experts[UNSHARDED] == pytest.approx(2 * held.total, rel=EXACT)
    assert without[UNSHARDED] == pytest.approx(4 * held.dense, rel=EXACT)


def test_only_gradients_outside_fsdp_exist_while_fsdp_accumulates_unsharded_ones() -> None:
    held = held0(MOE_LAYOUT)
    fsdp_only = stage0(MOE_LAYOUT, PURE, PYTORCH_ASSUMPTIONS)
    automodel = stage0(MOE_LAYOUT, PURE, AUTOMODEL)
    for phase in ("backward_start", "block_backward"):
        assert fsdp_only.phase(phase).breakdown.gradients == 0.0
        # the experts' bf16 gradients build up in place, one rank holding them whole
        assert automodel.phase(phase).breakdown.gradients == pytest.approx(2 * held.expert)
    # the step has every sharded gradient: dense 2 bytes over 4 ranks, experts whole
    step = automodel.phase("optimizer_step").breakdown.gradients
    assert step == pytest.approx(2 * held.dense / 4 + 2 * held.expert, rel=EXACT)


def test_kept_gathered_weights_and_unsharded_gradients_outlive_each_blocks_backward() -> None:
    layout = Layout(pp=2, dp=4, zero=3)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=8)
    stage = stage0(layout, workload, PYTORCH_ASSUMPTIONS, model=LLAMA)
    held = held0(layout, model=LLAMA).total
    parts = dict(stage.phase("block_backward").temporary_parts)
    parts.pop("pipeline receive buffers (one per micro-batch)")
    # stage 0 keeps both micro-batches' outputs: 2 x 4,096 tokens x 4,096 wide in bf16
    outputs = parts.pop("pipeline stage outputs (every micro-batch's, to the step's end)")
    assert outputs == 2 * 4096 * 4096 * 2
    assert parts == pytest.approx({KEPT: 2 * held, UNSHARDED: 4 * held}, rel=EXACT)


def test_without_pipelining_a_kept_stage_adds_one_units_gradient_in_a_blocks_backward() -> None:
    layout = Layout(dp=8, zero=3, reshard_after_forward=False)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=8)
    parts = dict(stage0(layout, workload, PYTORCH_ASSUMPTIONS, model=LLAMA).phase(
        "block_backward").temporary_parts)  # fmt: skip
    held = held0(layout, model=LLAMA).total
    assert parts[KEPT] == pytest.approx(2 * held, rel=EXACT)
    # the largest unit is [final norm, LM head] (4096 + 128256 x 4096), its gradient in fp32
    head = 4096 + 128256 * 4096
    assert parts["ZeRO-3 unsharded gradients"] == pytest.approx(4 * head, rel=EXACT)


@pytest.mark.parametrize(("state_bytes", "expected"), [(8.0, 8), (4.0, 4), (None, 4)])
def test_adam_state_bytes_follow_the_parameters_dtype(state_bytes, expected) -> None:
    # fp8-mixed's policy keeps bf16 moments (4 B); AdamW over torchtitan's fp32 shards keeps 8
    layout = Layout(dp=8, zero=3)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=8, precision="fp8-mixed")
    a = dataclasses.replace(PYTORCH_ASSUMPTIONS, optimizer_state_bytes=state_bytes)
    stage = stage0(layout, workload, a, model=LLAMA)
    held = held0(layout, model=LLAMA).total
    states = stage.phase("optimizer_step").breakdown.optimizer_states
    assert states == pytest.approx(expected * held / 8, rel=EXACT)


def test_negative_state_bytes_name_the_field() -> None:
    with pytest.raises(ValueError, match="optimizer_state_bytes"):
        dataclasses.replace(PYTORCH_ASSUMPTIONS, optimizer_state_bytes=-1.0)
    with pytest.raises(ValueError, match="fsdp_accumulated_grad_bytes"):
        dataclasses.replace(PYTORCH_ASSUMPTIONS, fsdp_accumulated_grad_bytes=-2.0)


RECV = "pipeline receive buffers (one per micro-batch)"


@pytest.mark.parametrize(
    ("virtual", "per_schedule", "buffers_stage0"),
    [
        pytest.param(1, None, 1, id="1f1b-first-rank-receives-only-gradients"),
        pytest.param(2, None, 3, id="interleaved-first-rank-two-chunks-less-one-input"),
        pytest.param(1, 2, 1, id="gradient-accumulation-repeats-a-two-microbatch-schedule"),
    ],
)
def test_torch_pipelining_keeps_a_receive_buffer_per_microbatch(
    virtual, per_schedule, buffers_stage0
) -> None:
    # PP 2 x DP 4, global batch 16: 4 micro-batches of one 4096-token sequence; a boundary
    # activation is 4096 x 4096 bf16 values
    schedule = "interleaved" if virtual > 1 else "1f1b"
    layout = Layout(pp=2, dp=4, zero=3, virtual_stages=virtual, schedule=schedule)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=16)
    a = dataclasses.replace(PYTORCH_ASSUMPTIONS, pipeline_schedule_microbatches=per_schedule)
    stage = stage0(layout, workload, a, model=LLAMA)
    count = per_schedule or 4
    parts = dict(stage.phase("optimizer_step").temporary_parts)
    assert parts[RECV] == pytest.approx(count * buffers_stage0 * 4096 * 4096 * 2, rel=EXACT)


def test_megatron_receives_each_transfer_into_a_fresh_buffer() -> None:
    from explorer.memory.assumptions import DEFAULT_TRAINING_ASSUMPTIONS

    layout = Layout(pp=2, dp=4, zero=1)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=16)
    stage = stage0(layout, workload, DEFAULT_TRAINING_ASSUMPTIONS, model=LLAMA)
    assert RECV not in dict(stage.phase("optimizer_step").temporary_parts)


def test_torchtitans_root_unit_gathers_the_embedding_with_the_head_at_the_loss_backward() -> None:
    # FSDP 8, one micro-batch: beside [norm, LM head] the root unit's 128256 x 4096 embedding
    # and the last block (kept after its forward: 4 x 4096^2 attention minus GQA's 3/4 of k, v,
    # 3 x 4096 x 14336 MLP, two norms) are gathered in bf16
    layout = Layout(dp=8, zero=3)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=8)
    titan = dataclasses.replace(PYTORCH_ASSUMPTIONS, fsdp_torchtitan_units=True)
    parts = dict(
        stage0(layout, workload, titan, model=LLAMA).phase("backward_start").temporary_parts
    )
    assert parts["ZeRO-3 root unit's embedding"] == pytest.approx(2 * 128256 * 4096, rel=EXACT)
    block = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert parts["ZeRO-3 last block kept gathered"] == pytest.approx(2 * block, rel=EXACT)
    plain = dict(stage0(layout, workload, PYTORCH_ASSUMPTIONS, model=LLAMA).phase(
        "backward_start").temporary_parts)  # fmt: skip
    assert "ZeRO-3 root unit's embedding" not in plain
