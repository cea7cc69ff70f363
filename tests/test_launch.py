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


def test_megatron_block_recompute_of_every_block_names_the_chunk_size():
    # 80 blocks on PP 4 x V 2: 10 per chunk, so "all of them" is --recompute-num-layers 10
    layout = Layout(pp=4, virtual_stages=2, schedule="interleaved", recompute="full",
                    recompute_method="block")  # fmt: skip
    assert "--recompute-num-layers 10" in megatron_arguments(layout, WORKLOAD, 80)


def test_megatron_arguments_keep_what_megatron_has_no_flag_for_in_comments():
    ops = Layout(recompute="selective", recompute_ops=True)
    assert "--recompute-granularity selective" in megatron_arguments(ops, WORKLOAD, 32)
    every = Layout(recompute="full", recompute_every=2)
    args = megatron_arguments(every, WORKLOAD, 32)
    assert "--recompute-granularity full" in args
    assert any(a.startswith("# explorer: recompute_every=2") for a in args)
    hsdp = Layout(dp=16, zero=3, dp_shard=4, reshard_after_forward=False)
    args = megatron_arguments(hsdp, WORKLOAD, 32)
    assert "--num-distributed-optimizer-instances 4" in args  # 16 / 4 ranks per group
    assert any(a.startswith("# explorer: reshard_after_forward=off") for a in args)
    assert not any("instances" in a for a in megatron_arguments(Layout(dp=8), WORKLOAD, 32))


def test_megatron_layout_string_for_uneven_stages_places_the_mtp_module_last():
    # the middle ranks differ (16 and 15 blocks), so first/last counts cannot say it
    layout = Layout(pp=4, stage_layers=(15, 16, 15, 15))
    args = megatron_arguments(layout, WORKLOAD, 61, mtp_layers=1)
    stages = ["E" + "t" * 15, "t" * 16, "t" * 15, "t" * 15 + "mL"]
    assert f'--pipeline-model-parallel-layout "{"|".join(stages)}"' in args
    assert "# explorer: stage_layers=15,16,15,15: the blocks per rank these flags spell" in args


def test_torchtitan_zero_2_and_reshard_off_zero_3_read_apart():
    zero2 = tomllib.loads(torchtitan_config(Layout(dp=8, zero=2), WORKLOAD))
    kept = tomllib.loads(torchtitan_config(Layout(dp=8, zero=3, reshard_after_forward=False),
                                           WORKLOAD))  # fmt: skip
    assert zero2["parallelism"]["fsdp_reshard_after_forward"] == "never"
    assert kept["parallelism"]["fsdp_reshard_after_forward"] == "never"
    assert "# explorer: zero=2" in torchtitan_config(Layout(dp=8, zero=2), WORKLOAD)
