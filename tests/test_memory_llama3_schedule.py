"""Llama 3 405B pre-training (arXiv:2407.21783 sec. 3.3.2, Table 4) as Meta's schedule holds it.

The paper's schedule runs N contiguous micro-batches per model chunk, N tunable (Figure 6: 4
ranks, 10 micro-batches, N = 5); torch.distributed.pipelining's ScheduleFlexibleInterleaved1F1B
(whose docstring example is that case) sets N = M / max(1, M // PP) and runs (V - 1) N +
2 (PP - 1 - rank) warm-up forwards, the order explorer.schedules' interleaved schedule runs.
V = 8: one-layer chunks (sec. 3.3.2: taking one layer off the first stage leaves its first chunk
only the embedding; 126 + 2 = 16 x 8 slots), and Table 4's 430 -> 400 TFLOP/s from 32 to 16
micro-batches bounds the bubble (PP - 1) / (V M), giving V >= 5.78.

Hand-worked block: s = 8,192 tokens, TP 8 with SP, h = 16,384, 8 KV heads of 128, f = 53,248.
Six h-wide bf16 tensors of 8,192 x 16,384 / 8 = 16,777,216 elements (both norm inputs, the QKV
and MLP inputs, the query, the attention output), key and value 2 x 1,048,576, gate and up
109,051,904, the SwiGLU product 54,525,952: 266,338,304 bf16 elements, plus 131,072 fp32
log-sum-exp values, = 533,200,896 B per block and micro-batch.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.estimate import estimate
from explorer.partition import inflight_microbatches
from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs
from explorer.schedules import group_size
from explorer.schedules.builders import interleaved_order
from explorer.units import GiB

RUNS = {r.id: r for r in load_published_runs().run}
BLOCK = 533_200_896


def _memory(run_id: str):
    s = scenario(RUNS[run_id])
    return estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions).memory


def test_the_papers_figure_6_group_and_table_4s_groups():
    assert group_size(4, 10) == 5  # Figure 6: "in this case N = 5" over micro-batches 0-9
    assert group_size(16, 32) == 16  # 8,192 GPUs: 32 sequences per DP group (Table 4)
    assert group_size(16, 16) == 16  # 16,384 GPUs: 16


# ScheduleFlexibleInterleaved1F1B's order for Figure 6's case (4 ranks, 2 chunks, 10
# micro-batches, N = 5), steps 00-16 of the ALL_RANK_ACTIONS table printed in pytorch/pytorch PR
# 129597 ("Implemented flexible PP schedule", moved from PiPPy PR 1129), idle steps dropped; stage
# s of rank r is chunk s // 4. One string per rank: kind, micro-batch, chunk.
FLEX_PP_PR_129597 = (
    "F0c0 F1c0 F2c0 F3c0 F4c0 F0c1 F1c1 F2c1 F3c1 F4c1 F5c0 F6c0 B0c1 F7c0",
    "F0c0 F1c0 F2c0 F3c0 F4c0 F0c1 F1c1 F2c1 F3c1 F4c1 B0c1 F5c0 B1c1 F6c0",
    "F0c0 F1c0 F2c0 F3c0 F4c0 F0c1 F1c1 F2c1 B0c1 F3c1 B1c1 F4c1 B2c1 F5c0",
    "F0c0 F1c0 F2c0 F3c0 F4c0 F0c1 B0c1 F1c1 B1c1 F2c1 B2c1 F3c1 B3c1 F4c1",
)


@pytest.mark.parametrize("rank", range(4))
def test_the_interleaved_order_is_torchs_flexible_schedule_on_figure_6(rank):
    # (V - 1) N + 2 (PP - 1 - rank) warm-up forwards: 11, 9, 7, 5, then one forward, one backward
    printed = FLEX_PP_PR_129597[rank].split()
    ours = [f"{kind}{mb}c{chunk}" for kind, mb, chunk in interleaved_order(4, rank, 10, 2)]
    assert ours[: len(printed)] == printed


def test_rank_1_holds_141_one_layer_chunks_at_32_micro_batches():
    # warm-up 7 x 16 + 2 x (16 - 1 - 1) = 140 forwards, one more before the first backward
    inflight = inflight_microbatches("interleaved", 16, 32, 8)
    assert inflight[1] * 8 == 141
    memory = _memory("llama3-405b-8192gpu-tp8-pp16")
    stage = memory.stages[1]
    assert len(stage.layers) == 8 and stage.microbatches_in_flight == 141 / 8
    assert stage.breakdown.activations == pytest.approx(141 * BLOCK, rel=1e-12)
    assert memory.peak_stage == 1


def test_at_v_2_the_same_schedule_holds_45_four_layer_chunks_on_rank_1():
    # warm-up 1 x 16 + 2 x 14 = 44 forwards + 1: 180 blocks, 89.4 GiB of activations alone
    inflight = inflight_microbatches("interleaved", 16, 32, 2)
    assert inflight[1] * 2 == 45
    assert 45 * 4 * BLOCK / GiB == pytest.approx(89.38, abs=0.01)


def test_sixteen_micro_batches_run_every_forward_before_the_first_backward():
    # 16,384 GPUs: warm-up 7 x 16 + 30 = 142 exceeds the 16 x 8 = 128 chunk forwards of a step
    assert inflight_microbatches("interleaved", 16, 16, 8)[1] == 16
    stage = _memory("llama3-405b-16384gpu-tp8-pp16").stages[1]
    assert stage.breakdown.activations == pytest.approx(16 * 8 * BLOCK, rel=1e-12)


def _with_headroom(run_id: str, headroom: float, *, per_step: bool = True):
    s = scenario(RUNS[run_id])
    memory = replace(
        s.assumptions.memory, headroom_fraction=headroom, zero2_accumulates_unsharded=per_step
    )
    comm = replace(s.assumptions.comm, zero2_grad_sync_per_step=per_step)
    a = replace(s.assumptions, memory=memory, comm=comm)
    return estimate(s.model, s.cluster, s.layout, s.workload, a)


def test_the_8192_gpu_row_does_not_fit_even_without_headroom():
    # rank 1's tensors: 83,470,909,440 B with sharded gradients (3,187,933,184 x 4 / 64 =
    # 199,245,824 B of them), less those, plus the FP32 accumulation the once-a-step
    # reduce-scatter implies, 3,187,933,184 x 4 = 12,751,732,736 B: 96,023,396,352 B against
    # the H100's 85,520,809,984 B (explorer.memory.accumulation)
    result = _with_headroom("llama3-405b-8192gpu-tp8-pp16", 0.0)
    stage = result.memory.stages[1]
    tensors = stage.total_bytes - stage.breakdown.headroom
    assert tensors == pytest.approx(83_470_909_440 - 199_245_824 + 12_751_732_736, rel=1e-12)
    assert not result.fits


@pytest.mark.parametrize(("headroom", "fits"), [(0.02, True), (0.03, False), (0.05, False)])
def test_reduced_every_micro_batch_the_8192_gpu_row_fits_below_2_4_percent(headroom, fits):
    # the other reading (FSDP SHARD_GRAD_OP, a reduce-scatter per micro-batch into sharded
    # gradients): 83,470,909,440 B of tensors on a 79.65 GiB H100, 2.397% spare
    result = _with_headroom("llama3-405b-8192gpu-tp8-pp16", headroom, per_step=False)
    assert result.fits is fits


@pytest.mark.parametrize(
    "run_id", ["llama3-405b-16384gpu-tp8-pp16", "llama3-405b-16384gpu-cp16-128k"]
)
def test_the_16384_gpu_rows_fit_with_one_chunks_accumulation(run_id):
    # every forward runs before the first backward (16 micro-batches): at the peak one of
    # rank 1's eight one-layer chunks has begun its backward, 3,187,933,184 x 4 / 8 B
    result = _with_headroom(run_id, 0.05)
    stage = result.memory.stages[1]
    assert stage.breakdown.gradients == 1_593_966_592
    assert stage.breakdown.activations == pytest.approx(16 * 8 * BLOCK, rel=1e-12)
    assert result.fits
