"""Launch settings name the framework flags that reproduce a layout."""

from __future__ import annotations

import tomllib

import pytest

from explorer.launch import megatron_arguments, torchtitan_config
from explorer.specs import Layout, TrainingWorkload

WORKLOAD = TrainingWorkload(seq_len=8192, global_batch_size=512)


def test_megatron_arguments_carry_every_degree():
    layout = Layout(dp=4, tp=8, pp=4, cp=2, micro_batch_size=2, zero=1, recompute="selective")
    args = megatron_arguments(layout, WORKLOAD, num_layers=80)
    for flag in (
        "--tensor-model-parallel-size 8",
        "--pipeline-model-parallel-size 4",
        "--context-parallel-size 2",
        "--micro-batch-size 2",
        "--global-batch-size 512",
        "--sequence-parallel",
        "--use-distributed-optimizer",
        "--recompute-granularity selective",
        "--accumulate-allreduce-grads-in-fp32",
    ):
        assert flag in args


def test_interleaved_layout_sets_layers_per_virtual_stage():
    layout = Layout(tp=8, pp=4, virtual_stages=5, schedule="interleaved")
    assert "--num-layers-per-virtual-pipeline-stage 4" in megatron_arguments(layout, WORKLOAD, 80)


@pytest.mark.parametrize(("zero", "strategy"), [(2, "optim_grads"), (3, "optim_grads_params")])
def test_zero_2_and_3_use_megatron_fsdp(zero, strategy):
    args = megatron_arguments(Layout(dp=8, zero=zero), WORKLOAD, 32)
    assert f"--data-parallel-sharding-strategy {strategy}" in args


def test_torchtitan_config_is_valid_toml_with_fsdp_for_zero_3():
    layout = Layout(dp=16, tp=8, pp=2, zero=3, recompute="full", micro_batch_size=1)
    config = tomllib.loads(torchtitan_config(layout, WORKLOAD))
    assert config["parallelism"]["data_parallel_shard_degree"] == 16
    assert config["parallelism"]["data_parallel_replicate_degree"] == 1
    assert config["parallelism"]["pipeline_parallel_schedule"] == "1F1B"
    assert config["training"]["local_batch_size"] == 32
    assert config["activation_checkpoint"]["mode"] == "full"


def test_torchtitan_ddp_replicates_instead_of_sharding():
    config = tomllib.loads(torchtitan_config(Layout(dp=8), WORKLOAD))
    assert config["parallelism"]["data_parallel_replicate_degree"] == 8
    assert config["parallelism"]["data_parallel_shard_degree"] == 1
