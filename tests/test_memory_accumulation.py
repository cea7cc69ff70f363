"""ZeRO-2 gradients accumulated unsharded and reduce-scattered once a step
(explorer.memory.accumulation), against hand-worked schedules and bytes.

Llama 3 405B at TP 8: one block holds, per GPU, q and o 16,384 x 16,384 / 8 = 33,554,432
each, k and v 16,384 x 1,024 / 8 = 2,097,152 each, gate, up and down 16,384 x 53,248 / 8 =
109,051,904 each, and two 16,384-wide norms: 398,491,648 parameters; rank 1 of PP 16 with
one-layer chunks holds 8 blocks, 3,187,933,184 parameters, 12,751,732,736 B of FP32 gradients.
"""

from __future__ import annotations

from dataclasses import replace

from explorer.comm import CommAssumptions
from explorer.estimate import EstimateAssumptions
from explorer.memory import TrainingAssumptions, training_memory
from explorer.memory.accumulation import accumulation_peak, first_backwards
from explorer.published_runs.scenario import scenario
from explorer.published_runs.table import load_published_runs

RUNS = {r.id: r for r in load_published_runs().run}
BLOCK_PARAMS = 2 * 33_554_432 + 2 * 2_097_152 + 3 * 109_051_904 + 2 * 16_384
RANK_1_PARAMS = 8 * BLOCK_PARAMS


def test_block_parameters_by_hand():
    assert BLOCK_PARAMS == 398_491_648 and RANK_1_PARAMS * 4 == 12_751_732_736


def test_each_chunks_first_backward_in_groups_of_n():
    # PP 16, V 8, N 16: chunk 7 takes backwards 1-16, chunk 6 17-32, ..., chunk 0 113-128
    assert first_backwards(16, 32, 8) == (1, 17, 33, 49, 65, 81, 97, 113)
    # Figure 6's 4 ranks, 10 micro-batches, N = 5, V = 2: chunk 1 from 1, chunk 0 from 6
    assert first_backwards(4, 10, 2) == (1, 6)


def test_32_micro_batches_reach_every_chunk_before_the_peak_ends():
    # rank 1: 141 chunk sets in flight, 256 + 1 - 141 = 116 steady backwards >= 113
    assert accumulation_peak(16, 32, 8, 141, 1.0, 1.0) == (0, 8)


def test_16_micro_batches_hold_one_chunks_gradients_at_the_peak():
    # every forward first (128 sets): backward 1 on the peak holds chunk 7's gradients; at
    # backward 17 chunk 6's come with 16 sets freed: 2 G - 16 A < G while G < 16 A
    assert accumulation_peak(16, 16, 8, 128, 0.5, 1.5) == (0, 1)
    # rank 15 (113 sets, 16 steady backwards): backward 17 frees one set and adds a chunk's
    # gradients, higher where G > A (2 x 1.5 - 0.5 > 1.5)
    assert accumulation_peak(16, 16, 8, 113, 0.5, 1.5) == (1, 2)
    assert accumulation_peak(16, 16, 8, 113, 2.0, 1.5) == (0, 1)


def test_meta_rows_count_the_fp32_accumulation_where_comm_reduces_once_a_step():
    s = scenario(RUNS["llama3-405b-8192gpu-tp8-pp16"])
    assert s.assumptions.comm.zero2_grad_sync_per_step
    assert s.assumptions.memory.zero2_accumulates_unsharded
    memory = training_memory(s.model, s.cluster.gpu, s.layout, s.workload, s.assumptions.memory)
    rank_1 = memory.stages[1]
    assert rank_1.num_params == RANK_1_PARAMS
    assert rank_1.breakdown.gradients == RANK_1_PARAMS * 4  # every chunk, unsharded, FP32
    # the optimizer step reads the reduce-scattered shards: 4 B / 64 DP ranks
    assert rank_1.phase("optimizer_step").breakdown.gradients == RANK_1_PARAMS * 4 / 64


def test_sharded_zero2_keeps_its_sharded_gradients():
    s = scenario(RUNS["llama3-405b-8192gpu-tp8-pp16"])
    off = replace(s.assumptions.memory, zero2_accumulates_unsharded=False)
    memory = training_memory(s.model, s.cluster.gpu, s.layout, s.workload, off)
    assert memory.stages[1].breakdown.gradients == RANK_1_PARAMS * 4 / 64


def test_one_micro_batch_accumulates_nothing():
    s = scenario(RUNS["llama3-405b-8192gpu-tp8-pp16"])
    one = replace(s.workload, global_batch_size=64)  # 64 DP ranks x 1 micro-batch
    layout = replace(s.layout, schedule="1f1b", virtual_stages=1, pipeline_layout=None)
    memory = training_memory(s.model, s.cluster.gpu, layout, one, s.assumptions.memory)
    # the one backward reduce-scatters as it goes: sharded FP32 gradients, 4 B / 64 DP ranks
    assert all(st.breakdown.gradients == st.num_params * 4 / 64 for st in memory.stages)


def test_either_switch_turns_on_both():
    # a gradient reduced once a step accumulates unsharded until then, and the reverse
    for a in (
        EstimateAssumptions(comm=CommAssumptions(zero2_grad_sync_per_step=True)),
        EstimateAssumptions(memory=TrainingAssumptions(zero2_accumulates_unsharded=True)),
    ):
        assert a.comm.zero2_grad_sync_per_step and a.memory.zero2_accumulates_unsharded
    default = EstimateAssumptions()
    assert not default.comm.zero2_grad_sync_per_step
    assert not default.memory.zero2_accumulates_unsharded
