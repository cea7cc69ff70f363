"""The schedule explorer's core (no streamlit): a long timeline in time bins, and each stage's
memory as the activation sets it holds times their bytes, against hand-worked figures."""

from __future__ import annotations

import numpy as np
import pytest
from test_activations import GPT_175B, SBH

from explorer.estimate import EstimateAssumptions
from explorer.estimate.explore import explore_schedule
from explorer.memory.assumptions import GPT_STYLE
from explorer.presets import load_cluster
from explorer.schedules import StageTimes, build_schedule, simulate
from explorer.schedules.aggregate import (
    MAX_ACTIONS_PER_ROW,
    actions_per_row,
    bin_timeline,
    needs_binning,
)
from explorer.specs import Layout, TrainingWorkload


def gpipe_one_stage():
    """GPipe on one stage, M = 3, F = 1 s, B = 2 s: F0 F1 F2 over [0, 3], B0 B1 B2 over [3, 9]."""
    times = StageTimes.uniform(1, forward_s=1.0, backward_s=2.0, weight_s=0.0)
    return simulate(build_schedule("gpipe", 1, 3), times)


def test_bins_hold_each_kinds_seconds_and_the_micro_batches_they_touch():
    binned = bin_timeline(gpipe_one_stage(), 3)  # bins [0, 3], [3, 6], [6, 9]
    assert binned.edges_s.tolist() == [0.0, 3.0, 6.0, 9.0]
    assert binned.busy_s[0].tolist() == [[3.0, 0.0, 0.0], [0.0, 3.0, 3.0], [0.0, 0.0, 0.0]]
    # B0 runs 3-5 and B1 5-7: the middle bin touches micro-batches 0 and 1, the last 1 and 2.
    assert binned.first_microbatch[0].tolist() == [0, 0, 1]
    assert binned.last_microbatch[0].tolist() == [2, 1, 2]


def test_a_bin_edge_inside_an_action_splits_its_seconds():
    binned = bin_timeline(gpipe_one_stage(), 2)  # edge at 4.5 s, inside B0 (3-5)
    assert binned.busy_s[0, 0].tolist() == [3.0, 0.0]  # F
    assert binned.busy_s[0, 1].tolist() == [1.5, 4.5]  # B: 3-4.5, then 4.5-9


def test_a_window_bins_only_its_part_of_the_step():
    binned = bin_timeline(gpipe_one_stage(), 2, start_s=2.0, end_s=4.0)  # F2 2-3, B0 from 3
    assert binned.busy_s[0, :, 0].tolist() == [1.0, 0.0, 0.0]
    assert binned.busy_s[0, :, 1].tolist() == [0.0, 1.0, 0.0]


def test_dualpipe_at_16_by_32_is_binned_and_its_bins_add_up_to_each_stages_busy_time():
    times = StageTimes.uniform(16, forward_s=1.0, backward_s=1.0, weight_s=1.0)
    timeline = simulate(build_schedule("dualpipe", 16, 32), times)
    # 32 micro-batches each way through 16 ranks, F, B and W each: 96 actions per rank.
    assert actions_per_row(timeline) == 96 > MAX_ACTIONS_PER_ROW
    assert needs_binning(timeline)
    binned = bin_timeline(timeline, 96)
    assert binned.busy_s.sum(axis=(1, 2)) == pytest.approx(np.array(timeline.busy_s), rel=1e-12)
    assert (binned.busy_s.sum(axis=1) <= binned.width_s * (1 + 1e-12)).all()  # one at a time
    small = simulate(build_schedule("1f1b", 4, 8), StageTimes.uniform(4, 1.0, 2.0))
    assert actions_per_row(small) == 16 and not needs_binning(small)


# GPT-3 175B with Korthikanti et al. 2022's conventions (GPT_STYLE), TP 8 with SP and selective
# recompute: 34 s b h / t bytes per layer (their Table 2); 96 layers on 8 stages, 12 each.
PER_SET = 12 * SBH * 34 / 8
CLUSTER = load_cluster("hgx-h100", 8)  # 64 GPUs = DP 1 x TP 8 x PP 8
LAYOUT = Layout(dp=1, tp=8, pp=2, sequence_parallel=True, recompute="selective")
WORKLOAD = TrainingWorkload(seq_len=2048, global_batch_size=8)  # replaced by the explorer


def explore(schedule, stages=8, microbatches=16, virtual=1):
    return explore_schedule(
        GPT_175B, CLUSTER, LAYOUT, WORKLOAD, EstimateAssumptions(memory=GPT_STYLE),
        schedule=schedule, stages=stages, microbatches=microbatches, virtual=virtual,
    )  # fmt: skip


def test_each_stages_activations_per_micro_batch_are_its_layers_times_korthikantis_bytes():
    x = explore("1f1b")
    assert x.layout.pp == 8 and x.microbatches == 16
    for stage in x.stages[1:]:  # stage 0 adds the embedding's output
        assert stage.bytes_per_set == pytest.approx(PER_SET, rel=1e-12)
    assert x.stages[0].bytes_per_set > PER_SET
    # 1F1B holds P - p micro-batches on stage p (Narayanan et al. 2021 sec. 2.2.1).
    assert [s.most_sets for s in x.stages] == [8, 7, 6, 5, 4, 3, 2, 1]


def test_gpipe_holds_every_micro_batch_so_a_stage_needs_that_many_more_sets():
    one_f_one_b, gpipe = explore("1f1b"), explore("gpipe")
    assert [s.most_sets for s in gpipe.stages] == [16] * 8
    # Stage 1: 16 sets instead of 7, 9 x 1.2 GiB more; the rest of its memory is the same.
    extra = gpipe.stages[1].peak_bytes - one_f_one_b.stages[1].peak_bytes
    assert extra == pytest.approx(9 * PER_SET, rel=1e-9)
    assert gpipe.stages[1].base_bytes == pytest.approx(one_f_one_b.stages[1].base_bytes)


def test_the_explorers_peak_is_the_memory_models_stage_total_and_its_states_are_inside():
    for schedule, virtual in (("1f1b", 1), ("interleaved", 2), ("zb-v", 1), ("dualpipe", 1)):
        x = explore(schedule, virtual=virtual)
        for live, memory in zip(x.stages, x.estimate.memory.stages, strict=True):
            assert live.peak_bytes == pytest.approx(memory.total_bytes, rel=1e-9), schedule
            assert 0 < live.states_bytes < live.base_bytes


def test_a_shape_the_schedule_cannot_run_is_one_sentence():
    with pytest.raises(ValueError, match="needs an even number of microbatches"):
        explore("dualpipe", stages=8, microbatches=9)  # DualPipe needs an even M >= 2P
