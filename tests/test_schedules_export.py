"""The torchtitan export names the pipeline schedule the tool modelled, and reads back to it."""

from __future__ import annotations

import tomllib

import pytest

from explorer.importers.torchtitan import read_torchtitan
from explorer.launch import rank_layers, torchtitan_config
from explorer.specs import Layout, TrainingWorkload

WORKLOAD = TrainingWorkload(seq_len=4096, global_batch_size=256)


@pytest.mark.parametrize(
    ("schedule", "torch_name"),
    [
        pytest.param("zb-v", "ZBVZeroBubble", id="torch-schedules-ScheduleZBVZeroBubble"),
        pytest.param("dualpipev", "DualPipeV", id="torch-schedules-ScheduleDualPipeV"),
    ],
)
def test_v_shaped_schedules_export_torchs_own_class_and_read_back(schedule, torch_name):
    layout = Layout(dp=8, tp=8, pp=4, zero=1, schedule=schedule, micro_batch_size=1)
    text = torchtitan_config(layout, WORKLOAD, num_layers=80)
    assert tomllib.loads(text)["parallelism"]["pipeline_parallel_schedule"] == torch_name
    assert f"schedule={schedule}" not in text  # torch runs what the tool modelled: no comment
    assert read_torchtitan(text, num_gpus=256).layout.schedule == schedule


def test_dualpipe_export_says_torch_runs_dualpipev_instead_and_reads_back_to_dualpipe():
    layout = Layout(dp=8, tp=8, pp=4, zero=1, schedule="dualpipe", micro_batch_size=1)
    text = torchtitan_config(layout, WORKLOAD, num_layers=80)
    assert "# explorer: schedule=dualpipe" in text
    assert read_torchtitan(text, num_gpus=256).layout.schedule == "dualpipe"


def test_v_shaped_ranks_hold_chunks_r_and_2p_minus_1_minus_r():
    # 10 blocks on 2P = 8 chunks: ceil = 2 each, 6 taken off the ends first (0, 7, 1, 6, 2, 5)
    # gives 1 1 1 2 2 1 1 1; rank r holds chunks r and 7 - r: 2, 2, 2, 4.
    layout = Layout(pp=4, schedule="zb-v")
    assert rank_layers(layout, 10) == (2, 2, 2, 4)
    assert sum(rank_layers(layout, 80)) == 80
