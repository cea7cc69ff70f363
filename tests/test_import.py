"""Importing users' launch settings: real recipe files, the export-import round trip, bad input,
the CLI's contract (``import --json``, ``--from-*`` on estimate / search / report)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from explorer.cli import main
from explorer.importers import RecipeError, read_megatron, read_torchtitan
from explorer.importers.megatron_table import TABLE as MEGATRON_TABLE
from explorer.importers.megatron_table import Unsupported
from explorer.importers.torchtitan_table import TABLE as TORCHTITAN_TABLE
from explorer.launch import (
    max_chunk_blocks,
    megatron_arguments,
    pipeline_layout_string,
    rank_layers,
    torchtitan_config,
)
from explorer.mesh import SearchSpace
from explorer.mesh.space import divisors
from explorer.precision import precision_policy
from explorer.presets import load_model, model_ids
from explorer.specs import (
    OFFLOAD_MODULES,
    PRECISIONS,
    RECOMPUTE_MODULES,
    SCHEDULES,
    Layout,
    TrainingWorkload,
)
from explorer.units import BYTES_PER_DTYPE

RECIPES = Path(__file__).parent / "recipes"


def megatron(name: str, gpus: int | None = None):
    return read_megatron((RECIPES / name).read_text(), gpus)


def torchtitan(name: str, gpus: int | None = None):
    return read_torchtitan((RECIPES / name).read_text(), gpus)


# ------------------------------------------------------------------------------ recipe files


def test_nemo_llama3_70b_recipe_reads_as_published():
    # NeMo-Framework-Launcher llama3_70b.yaml: 128 nodes x 8, TP4 PP4 VP5 CP2, GBS 2048, 8K
    got = megatron("nemo_llama3_70b.yaml")
    lay = got.layout
    assert (lay.tp, lay.pp, lay.cp, lay.dp, lay.virtual_stages) == (4, 4, 2, 32, 5)
    assert lay.schedule == "interleaved" and lay.zero == 1 and lay.sp
    assert (got.workload.seq_len, got.workload.global_batch_size) == (8192, 2048)
    assert got.model == "llama-3.1-70b" and got.num_gpus == 1024
    assert got.unsupported == ()


def test_nemo_llama3_405b_names_the_nearest_preset_and_the_field_that_differs():
    # the launcher's 405B config has 16 query groups; the published model has 8 KV heads
    got = megatron("nemo_llama3_1_405b.yaml")
    assert got.model is None
    assert (got.layout.dp, got.layout.virtual_stages, got.num_gpus) == (32, 7, 4608)
    (sentence,) = [s for s in got.unsupported if "match no preset" in s]
    assert "nearest: llama-3.1-405b, which has num_key_value_heads 8" in sentence


def test_bridge_deepseek_v3_recipe_reads_its_pipeline_layout_and_recompute_modules():
    got = megatron("bridge_deepseek_v3_h100_fp8.yaml", 1024)
    lay = got.layout
    assert (lay.tp, lay.pp, lay.ep, lay.etp, lay.dp, lay.virtual_stages) == (2, 8, 64, 1, 64, 4)
    assert lay.recompute == "selective" and lay.recompute_modules == ("mla_up_proj", "mlp")
    assert lay.pipeline_layout == "Et|(tt|)*30mL" and lay.stage_layers is None
    # Et|(tt|)*30mL: 32 chunks, chunk c on rank c mod 8; rank 0 holds 1+2+2+2 blocks, rank 7
    # 2+2+2+0 (its last chunk holds the MTP module and the loss)
    assert rank_layers(lay, 61) == (7, 8, 8, 8, 8, 8, 8, 6)
    assert got.workload.precision == "fp8-mixed" and got.workload.grad_dtype == "bf16"
    assert got.model == "deepseek-v3"
    # the one setting left without a field; bf16 moments are fp8-mixed's own
    assert got.unsupported == (
        "model.moe_token_dispatcher_type flex: the tool times all-to-all token dispatch and "
        "counts no DeepEP or all-gather dispatcher buffers.",
    )


def test_bridge_megatron_fsdp_override_is_zero_3():
    got = megatron("bridge_llama3_8b_megatron_fsdp.yaml", 8)
    assert (got.layout.zero, got.layout.dp, got.workload.seq_len) == (3, 8, 4096)
    assert "precision" not in got.given  # the overridden recipe sets it, not this file


def test_megatron_argument_line_reads_launcher_world_size_and_fp8():
    got = megatron("megatron_llama3_8b_h100_fp8.sh")
    assert (got.num_gpus, got.layout.dp, got.layout.zero) == (8, 8, 1)
    assert got.workload.precision == "fp8-mixed" and got.workload.grad_dtype == "bf16"
    assert got.model == "llama-3.1-8b"  # dense (no --num-experts), vocabulary 128256
    text = " ".join(got.unsupported)
    assert "--fp8-param-gather: FP8 weight copies" in text
    assert "--tiktoken-pattern" not in text


@pytest.mark.parametrize(
    ("name", "gpus", "expected"),
    [
        # llama3_8b.toml: FSDP over 64 A100, local batch 1, selective op
        ("torchtitan_llama3_8b.toml", 64, (1, 64, 3, 1, "selective", 64)),
        # llama3_70b.toml: TP 8, FSDP over the other 8, local batch 8, full AC
        ("torchtitan_llama3_70b.toml", 64, (8, 8, 3, 8, "full", 64)),
        ("torchtitan_llama3_405b.toml", 128, (8, 16, 3, 2, "full", 32)),
        ("torchtitan_deepseek_v3_671b.toml", 256, (1, 256, 3, 4, "selective", 1024)),
    ],
)
def test_torchtitan_train_configs(name, gpus, expected):
    got = torchtitan(name, gpus)
    lay = got.layout
    assert (lay.tp, lay.dp, lay.zero, lay.micro_batch_size, lay.recompute) == expected[:5]
    assert got.workload.global_batch_size == expected[5]
    assert got.model is not None
    # selective_ac_option 'op' is torchtitan's op-level SAC; no PP, so weights are resharded
    assert lay.recompute_ops == (lay.recompute == "selective") and lay.reshard_after_forward
    assert (lay.dp_shard, lay.recompute_every) == (None, 1)  # replicate 1: plain FSDP


def test_torchtitan_imports_pytorch_memory_behaviour_and_megatron_keeps_the_default():
    assert torchtitan("torchtitan_llama3_70b.toml", 64).assumptions == (
        ("memory.framework", "pytorch"),
    )
    assert megatron("nemo_llama3_70b.yaml").assumptions == ()


def test_torchtitan_float8_converter_is_fp8_and_says_what_it_cannot_count():
    got = torchtitan("torchtitan_llama3_405b.toml", 128)
    assert got.workload.precision == "fp8-mixed"
    assert any("enable_fsdp_float8_all_gather" in s for s in got.unsupported)


def test_torchtitan_hsdp_shards_within_a_group_and_replicates_across():
    text = "[parallelism]\ndata_parallel_replicate_degree = 4\ndata_parallel_shard_degree = 8\n"
    got = read_torchtitan(text)
    assert (got.layout.dp, got.layout.zero, got.layout.dp_shard, got.num_gpus) == (32, 3, 8, 32)
    assert not any("HSDP" in s for s in got.unsupported)
    # shard -1 takes the GPUs left over: 64 / replicate 4 = 16 per group
    got = read_torchtitan(text.replace("= 8", "= -1"), 64)
    assert (got.layout.dp, got.layout.dp_shard) == (64, 16)


def test_torchtitan_default_reshard_keeps_weights_under_pipeline_parallelism():
    text = "[parallelism]\ndata_parallel_shard_degree = 4\npipeline_parallel_degree = 2\n"
    lay = read_torchtitan(text).layout
    assert (lay.zero, lay.reshard_after_forward) == (3, False)
    lay = read_torchtitan(text.replace("= 2", "= 1")).layout
    assert (lay.zero, lay.reshard_after_forward) == (3, True)
    always = text + 'fsdp_reshard_after_forward = "always"\n'
    assert read_torchtitan(always).layout.reshard_after_forward
    never = text.replace("= 2", "= 1") + 'fsdp_reshard_after_forward = "never"\n'
    assert not read_torchtitan(never).layout.reshard_after_forward


def test_torchtitan_deals_out_layers_as_it_does_with_embedding_and_output_weights():
    # 32 layers, 4 stages, embedding and output weighted as one layer each: 34 effective,
    # 9/9/8/8 per stage, so 8 / 9 / 8 / 7 transformer blocks
    text = "[model]\nflavor = '8B'\n[parallelism]\npipeline_parallel_degree = 4\n"
    assert read_torchtitan(text, 4).layout.stage_layers == (8, 9, 8, 7)


@pytest.mark.parametrize(
    ("option", "recompute", "every", "ops"),
    [("op", "selective", 1, True), ("1", "full", 1, False), ("3", "full", 3, False)],
)
def test_torchtitan_selective_option_is_op_sac_or_every_nth_block(option, recompute, every, ops):
    text = f"[activation_checkpoint]\nmode = 'selective'\nselective_ac_option = '{option}'\n"
    lay = read_torchtitan(text, 8).layout
    assert (lay.recompute, lay.recompute_every, lay.recompute_ops) == (recompute, every, ops)


def test_megatron_offload_settings_read_into_the_layout():
    line = (
        "--fine-grained-activation-offloading --offload-modules core_attn attn_proj expert_fc1 "
        "--cpu-offloading --cpu-offloading-num-layers 3 "
        "--optimizer-cpu-offload --optimizer-offload-fraction 0.6"
    )
    got = read_megatron(line, 8)
    lay = got.layout
    assert lay.activation_offload == ("core_attn", "attn_proj", "expert_fc1")
    assert (lay.offload_layers, lay.optimizer_offload_fraction) == (3, 0.6)
    assert got.unsupported == ()
    # Megatron-LM's --optimizer-offload-fraction defaults to 1.0; without the switches nothing
    assert read_megatron("--optimizer-cpu-offload", 8).layout.optimizer_offload_fraction == 1.0
    off = read_megatron("--offload-modules core_attn --optimizer-offload-fraction 0.5", 8).layout
    assert (off.activation_offload, off.optimizer_offload_fraction) == ((), 0.0)


def test_megatron_recipe_yaml_reads_the_same_keys():
    text = (
        "model:\n  tensor_model_parallel_size: 2\n  fine_grained_activation_offloading: true\n"
        "  offload_modules: [moe_act]\n  recompute_granularity: full\n"
        "  recompute_method: uniform\n  recompute_num_layers: 2\n"
        "optimizer:\n  use_distributed_optimizer: true\n  optimizer_cpu_offload: true\n"
        "  optimizer_offload_fraction: 0.5\n"
        "ddp:\n  num_distributed_optimizer_instances: 2\n"
    )
    lay = read_megatron(text, 32).layout
    assert (lay.tp, lay.dp, lay.zero) == (2, 16, 1)
    assert lay.dp_shard == 16 // 2  # two optimizer instances, each sharded over 8 DP ranks
    assert (lay.recompute, lay.recompute_method, lay.recompute_num_layers) == ("full", "uniform", 2)
    assert (lay.activation_offload, lay.optimizer_offload_fraction) == (("moe_act",), 0.5)


def test_distributed_optimizer_instances_need_the_distributed_optimizer():
    got = read_megatron("--num-distributed-optimizer-instances 2", 8)
    assert got.layout.dp_shard is None
    assert any(s.startswith("--num-distributed-optimizer-instances 2: without") for s in
               got.unsupported)  # fmt: skip


def test_megatron_first_and_last_stage_layers_are_layout_fields():
    line = (
        "--pipeline-model-parallel-size 4 --num-layers 32 --hidden-size 4096 "
        "--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6"
    )
    lay = read_megatron(line, 4).layout
    assert (lay.first_stage_layers, lay.last_stage_layers, lay.stage_layers) == (6, 6, None)
    assert rank_layers(lay, 32) == (6, 10, 10, 6)  # the middle two share 32 - 12 = 20


def test_unknown_settings_are_named_in_one_sentence():
    got = read_megatron("--tensor-model-parallel-size 2 --frobnicate 3 --wibble", 8)
    assert got.layout.dp == 4
    assert got.unsupported[-1] == "Not known to the tool, so not read: --frobnicate, --wibble."


def test_block_recompute_of_some_layers_reads_its_method_and_count():
    line = (
        "--pipeline-model-parallel-size 4 --num-layers 80 --hidden-size 8192 "
        "--recompute-granularity full --recompute-method block --recompute-num-layers 5"
    )
    lay = read_megatron(line, 32).layout
    assert (lay.recompute, lay.recompute_method, lay.recompute_num_layers) == ("full", "block", 5)
    # 80 blocks on 4 ranks: 20 per chunk, so block 20 checkpoints all of them (None)
    whole = read_megatron(line.replace("layers 5", "layers 20"), 32).layout
    assert whole.recompute_num_layers is None
    uniform = line.replace("block", "uniform").replace("layers 5", "layers 2")
    lay = read_megatron(uniform, 32).layout
    assert (lay.recompute_method, lay.recompute_num_layers) == ("uniform", 2)


def test_launch_line_without_global_batch_takes_megatrons_default():
    got = read_megatron("--tensor-model-parallel-size 2 --micro-batch-size 3", 16)
    assert got.workload.global_batch_size == 3 * 8


def test_launcher_flags_stop_at_the_training_script():
    line = "torchrun --nproc-per-node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 8"
    got = read_megatron(line)
    assert (got.num_gpus, got.layout.dp) == (16, 2)


def test_override_list_reads_like_the_yaml():
    text = "model.tensor_model_parallel_size=4 train.global_batch_size=64 train.micro_batch_size=2"
    got = read_megatron(text, 16)
    assert (got.layout.tp, got.layout.dp, got.layout.micro_batch_size) == (4, 4, 2)


# ------------------------------------------------------------------------------ round trip


def _canonical(
    lay: Layout, work: TrainingWorkload, num_layers: int
) -> tuple[Layout, TrainingWorkload]:
    """One spelling of equivalent scenarios: SP is moot at TP 1, the schedule at PP 1,
    interleaved with one chunk is 1F1B, ZeRO over one rank is none, a gradient dtype equal to
    the precision's default; HSDP groups of all DP ranks (or without sharding) are none,
    resharding is moot below ZeRO-3, one block per uniform checkpoint is the default, and the
    block method over at least a chunk's blocks checkpoints all of them."""
    lay = replace(lay, sequence_parallel=lay.sequence_parallel or lay.tp == 1)
    if lay.dp * lay.cp == 1 or (lay.dp_shard or lay.dp) * lay.cp == 1:
        lay = replace(lay, zero=0)  # shard groups of one rank replicate
    if lay.pp == 1:
        lay = replace(lay, schedule="1f1b", virtual_stages=1, stage_layers=None)
    if lay.schedule == "dualpipe":  # torchtitan's DualPipeV has no per-stage layer setting
        lay = replace(lay, stage_layers=None)
    if lay.schedule == "interleaved" and lay.virtual_stages == 1:
        lay = replace(lay, schedule="1f1b")
    if lay.stage_layers is not None and lay.stage_layers == rank_layers(
        replace(lay, stage_layers=None), num_layers
    ):
        lay = replace(lay, stage_layers=None)  # the balanced split, spelled out
    if lay.zero == 0 or lay.dp_shard == lay.dp:
        lay = replace(lay, dp_shard=None)
    if lay.zero != 3:
        lay = replace(lay, reshard_after_forward=True)
    count = lay.recompute_num_layers
    if lay.recompute_method == "uniform" and count == 1:
        lay = replace(lay, recompute_num_layers=None)
    if lay.recompute_method == "block" and count and count >= max_chunk_blocks(lay, num_layers):
        lay = replace(lay, recompute_num_layers=None)
    grad = work.grad_dtype
    if grad is not None and (
        work.precision == "fp32"
        or precision_policy(work.precision).grad_bytes == BYTES_PER_DTYPE[grad]
    ):
        grad = None
    return lay, replace(work, grad_dtype=grad)


def _recipes(rng: random.Random, model, lay: Layout) -> dict[str, object]:
    """Memory-recipe fields for a sampled layout, each drawn as Layout allows it."""
    out: dict[str, object] = {}
    if lay.recompute == "selective":
        if rng.random() < 0.3:
            out["recompute_ops"] = True
        else:
            count = rng.randint(1, 3)
            out["recompute_modules"] = tuple(rng.sample(RECOMPUTE_MODULES, count))
    if lay.recompute == "full":
        pick = rng.choice(("uniform", "block", "every"))
        if pick == "every":
            out["recompute_every"] = rng.choice((2, 3))
        else:
            out["recompute_method"] = pick
            out["recompute_num_layers"] = rng.choice((None, 1, 2, 5, 200))
    if rng.random() < 0.3:
        out["activation_offload"] = tuple(rng.sample(OFFLOAD_MODULES, rng.randint(1, 3)))
    if rng.random() < 0.2:
        out["offload_layers"] = rng.choice((1, 2))
    if rng.random() < 0.2:
        out["optimizer_offload_fraction"] = rng.choice((0.25, 0.5, 1.0))
    if rng.random() < 0.5:
        out["reshard_after_forward"] = False
    if lay.dp > 1 and rng.random() < 0.4:
        out["dp_shard"] = rng.choice([d for d in divisors(lay.dp) if d < lay.dp])
    split = rng.random()
    n = model.num_hidden_layers
    v_shaped = lay.schedule in ("dualpipe", "zb-v", "dualpipev")
    if lay.pp > 1 and lay.stage_layers is None and split < 0.4:
        share = n // lay.pp
        if split < 0.2 and not v_shaped:
            layers = [share] * lay.pp
            layers[0] -= 1
            layers[-1] += n - sum(layers)
            mtp = model.num_nextn_predict_layers
            out["pipeline_layout"] = pipeline_layout_string(tuple(layers), lay.virtual_stages, mtp)
        else:
            out["first_stage_layers"] = max(share - 1, 0)
            if split < 0.3:  # two ranks: the last holds the rest
                out["last_stage_layers"] = n - share + 1 if lay.pp == 2 else max(share - 2, 0)
    return out


def _sample_layouts(model_id: str, count: int) -> list[tuple[Layout, TrainingWorkload]]:
    """Layouts drawn from the search space's choices (SearchSpace defaults) on 64 and 256 GPUs."""
    model, space, rng = load_model(model_id), SearchSpace(), random.Random(model_id)
    later = random.Random(f"{model_id}:later precisions")  # keeps rng's draws as they were
    out = []
    while len(out) < count:
        gpus = rng.choice((64, 256))
        tp = rng.choice([d for d in divisors(gpus) if d <= 8])
        pp = rng.choice([d for d in divisors(gpus // tp) if d <= min(16, model.num_hidden_layers)])
        cp = rng.choice([d for d in divisors(gpus // (tp * pp)) if d <= 2])
        dp = gpus // (tp * pp * cp)
        schedule = rng.choice(space.schedules) if pp > 1 else "1f1b"
        if schedule in ("zb-v", "dualpipev") and 2 * pp > model.num_hidden_layers:
            schedule = "1f1b"  # a V holds two chunks per rank
        fits = [v for v in (1, 2, 3, 4, 5) if pp * v <= model.num_hidden_layers]
        virtual = rng.choice(fits) if schedule == "interleaved" else 1
        ep = rng.choice([d for d in divisors(dp * cp * tp) if d <= 64]) if model.is_moe else 1
        etp = rng.choice([d for d in (1, 2) if (dp * cp * tp) % (ep * d) == 0])
        stage_layers = None
        if pp > 1 and rng.random() < 0.3:
            base = [model.num_hidden_layers // pp] * pp
            base[-1] += model.num_hidden_layers - sum(base) - 1
            base[0] += 1
            stage_layers = tuple(base)
        layout = Layout(
            dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, zero=rng.choice(space.zero_stages),
            recompute=rng.choice(space.recomputes), schedule=schedule, virtual_stages=virtual,
            micro_batch_size=rng.choice(space.micro_batch_sizes), stage_layers=stage_layers,
            sequence_parallel=rng.random() < 0.8,
        )  # fmt: skip
        layout = replace(layout, **_recipes(rng, model, layout))  # type: ignore[arg-type]
        gbs = layout.micro_batch_size * dp * rng.choice((1, 4, 16))
        precision = rng.choice(PRECISIONS[:4])
        if later.random() < 0.2:
            precision = later.choice(PRECISIONS[4:])
        work = TrainingWorkload(
            seq_len=rng.choice((4096, 8192)), global_batch_size=gbs,
            precision=precision, grad_dtype=rng.choice((None, "bf16", "fp32")),
        )  # fmt: skip
        out.append((layout, work))
    return out


@pytest.mark.parametrize("model_id", model_ids())
def test_megatron_arguments_read_back_to_the_same_scenario(model_id):
    model = load_model(model_id)
    for layout, work in _sample_layouts(model_id, 25):
        mtp = model.num_nextn_predict_layers
        text = "\n".join(megatron_arguments(layout, work, model.num_hidden_layers, mtp))
        got = read_megatron(text, layout.world_size, model)
        n = model.num_hidden_layers
        assert _canonical(got.layout, got.workload, n) == _canonical(layout, work, n), text


@pytest.mark.parametrize("model_id", model_ids())
def test_torchtitan_config_reads_back_to_the_same_scenario(model_id):
    model = load_model(model_id)
    for layout, work in _sample_layouts(model_id, 25):
        text = torchtitan_config(layout, work, model.num_hidden_layers)
        got = read_torchtitan(text, layout.world_size, model)
        n = model.num_hidden_layers
        assert _canonical(got.layout, got.workload, n) == _canonical(layout, work, n), text


def test_layout_string_puts_rank_chunks_in_stage_order():
    # 2 ranks of 3 and 5 layers in 2 chunks: stages r0c0, r1c0, r0c1, r1c1
    assert pipeline_layout_string((3, 5), 2) == "Ett|ttt|t|ttL"


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("--tensor-model-parallel-size eight", "--tensor-model-parallel-size"),
        ("--tensor-model-parallel-size $TP", "expand shell variables"),
        ("--pipeline-model-parallel-size 0", "--pipeline-model-parallel-size"),
        ("model:\n  tensor_model_parallel_size: [1\n", "not valid YAML"),
        ("--tensor-model-parallel-size 3", "does not divide the 8 GPUs"),
        ("--micro-batch-size 2 --global-batch-size 6", "global_batch_size 6"),
        ("--recompute-granularity partial", "recompute granularity"),
        ("--recompute-granularity selective --recompute-modules attn", "--recompute-modules"),
        ("--fine-grained-activation-offloading --offload-modules mlp", "--offload-modules"),
        ("--optimizer-cpu-offload --optimizer-offload-fraction 2", "--optimizer-offload-fraction"),
        (
            "--use-distributed-optimizer --num-distributed-optimizer-instances 3",
            "--num-distributed-optimizer-instances 3 does not divide",
        ),
        (
            "--pipeline-model-parallel-size 2 --num-layers 32 --hidden-size 4096 "
            "--pipeline-model-parallel-layout 'Et*15|t*16L'",
            "places 31 transformer blocks",
        ),
    ],
)
def test_bad_megatron_input_names_the_field(text, named):
    with pytest.raises(RecipeError, match=None) as info:
        read_megatron(text, 8)
    assert named in str(info.value)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[parallelism\n", "not valid TOML"),
        ("[parallelism]\ntensor_parallel_degree = 'x'\n", "tensor_parallel_degree"),
        ("[parallelism]\ndata_parallel_shard_degree = 3\n", "multiply to 3 GPUs"),
        ("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = 'Zig'\n",
         "pipeline_parallel_schedule"),
    ],
)  # fmt: skip
def test_bad_torchtitan_input_names_the_field(text, named):
    with pytest.raises(RecipeError) as info:
        read_torchtitan(text, 8)
    assert named in str(info.value)


# ------------------------------------------------------------------------------ CLI


def test_import_json_has_the_search_row_keys_and_unsupported(capsys):
    path = str(RECIPES / "bridge_deepseek_v3_h100_fp8.yaml")
    assert main(["import", "--megatron", path, "--gpus", "1024", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    keys = {"tp", "pp", "dp", "cp", "ep", "zero", "mbs", "recompute", "schedule", "virtual"}
    assert keys <= out["layout"].keys()
    assert out["layout"]["ep"] == 64 and out["unsupported"]


def test_import_bad_input_exits_2_with_one_sentence(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[parallelism]\ntensor_parallel_degree = 0\n")
    with pytest.raises(SystemExit) as info:
        main(["import", "--torchtitan", str(bad)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tensor_parallel_degree" in err


def test_estimate_from_megatron_takes_the_layout_and_flags_override(capsys):
    path = str(RECIPES / "nemo_llama3_70b.yaml")
    assert main(["estimate", "--gpu", "h100-sxm", "--from-megatron", path, "--json"]) == 0
    imported = json.loads(capsys.readouterr().out)
    assert imported["world_size"] == 1024 and imported["model"] == "Llama 3.1 70B"
    assert imported["imported"]["path"] == path
    args = ["estimate", "--gpu", "h100-sxm", "--from-megatron", path, "--dp", "4", "--json"]
    assert main(args) == 0
    overridden = json.loads(capsys.readouterr().out)
    assert overridden["world_size"] == 4 * 4 * 4 * 2  # --dp 4 over the imported TP4 PP4 CP2


def test_estimate_from_bridge_deepseek_recipe_carries_its_recompute_and_layout_string(capsys):
    # the recipe's memory fields reach the estimate: the same peak as the flags spelled out
    path = str(RECIPES / "bridge_deepseek_v3_h100_fp8.yaml")
    args = ["estimate", "--gpu", "h100-sxm", "--from-megatron", path, "--dp", "64", "--json"]
    assert main(args) == 0
    imported = json.loads(capsys.readouterr().out)
    flags = [
        "estimate", "--gpu", "h100-sxm", "--model", "deepseek-v3", "--seq", "4096",
        "--gbs", "8192", "--precision", "fp8-mixed", "--grad-dtype", "bf16", "--tp", "2",
        "--pp", "8", "--dp", "64", "--ep", "64", "--zero", "1", "--virtual", "4",
        "--schedule", "interleaved", "--recompute", "selective",
        "--recompute-modules", "mla_up_proj", "mlp", "--pipeline-layout", "Et|(tt|)*30mL",
        "--json",
    ]  # fmt: skip
    assert main(flags) == 0
    spelled = json.loads(capsys.readouterr().out)
    assert imported["peak_bytes"] == spelled["peak_bytes"]
    assert imported["fits"]  # 88.0 GiB without the recipe fields; 70.0 GiB with them


def test_search_from_torchtitan_takes_workload_model_and_gpus(capsys):
    path = str(RECIPES / "torchtitan_llama3_8b.toml")
    args = ["search", "--gpu", "h100-sxm", "--gpus", "8", "--from-torchtitan", path, "--top", "1"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_gpus"] == 8 and out["model"] == "Llama 3.1 8B"


def test_estimate_without_layout_or_import_still_requires_the_flags(capsys):
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--seq", "4096",
              "--gbs", "8"])  # fmt: skip
    assert info.value.code == 2
    assert "--tp" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the app


def test_app_paste_box_applies_the_imported_layout_and_shows_what_it_cannot_express():
    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parents[1] / "app.py")
    at = AppTest.from_file(app, default_timeout=60)
    at.session_state["import_open"] = True  # the paste box is drawn only when open
    at.run()
    at.radio(key="import_format").set_value("megatron").run()
    text = (
        "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --micro-batch-size 2 "
        "--global-batch-size 256 --seq-length 4096 --bf16 --enable-cuda-graph "
        "--recompute-granularity selective --recompute-modules mlp"
    )
    at.text_area(key="import_text").set_value(text).run()
    at.button(key="import_apply").click().run()
    assert not at.exception
    assert (at.number_input(key="in_tp").value, at.number_input(key="in_pp").value) == (4, 2)
    assert at.number_input(key="in_dp").value == 64 // 8  # the default cluster's 64 GPUs
    assert at.number_input(key="in_gbs").value == 256
    captions = [c.value for c in at.caption]
    assert any("--enable-cuda-graph: CUDA-graph memory is not counted" in c for c in captions)
    assert at.session_state["in_rc_modules"] == ("mlp",)  # the recipe reaches the scenario
    # a recipe that names its cluster sets the nodes: NeMo's Llama 3 70B on 128 x 8
    at.text_area(key="import_text").set_value((RECIPES / "nemo_llama3_70b.yaml").read_text())
    at.button(key="import_apply").click().run()
    assert not at.exception and not at.error
    assert (at.number_input(key="in_nodes").value, at.number_input(key="in_dp").value) == (128, 32)
    assert at.number_input(key="in_virtual").value == 5
    # torchtitan: FSDP over the cluster's GPUs, and PyTorch's memory behaviour as an assumption
    at.radio(key="import_format").set_value("torchtitan").run()
    at.text_area(key="import_text").set_value((RECIPES / "torchtitan_llama3_8b.toml").read_text())
    at.button(key="import_apply").click().run()
    assert not at.exception and not at.error
    assert at.selectbox(key="in_zero").value == 3
    assert ("memory.framework", "pytorch") in at.session_state["in_assume"]


@pytest.mark.parametrize(
    "name", [n for n, e in MEGATRON_TABLE.items() if isinstance(e, Unsupported)]
)
def test_each_unsupported_megatron_setting_gets_its_own_sentence(name):
    flag = "--" + name.replace("_", "-")
    got = read_megatron(f"--tensor-model-parallel-size 2 {flag} 7", 8)
    assert [s for s in got.unsupported if s.startswith(f"{flag} 7: ")], got.unsupported


@pytest.mark.parametrize(
    "name", [n for n, e in TORCHTITAN_TABLE.items() if isinstance(e, Unsupported)]
)
def test_each_unsupported_torchtitan_setting_gets_its_own_sentence(name):
    section, key = name.rsplit(".", 1)
    got = read_torchtitan(f"[{section}]\n{key} = 7\n", 8)
    assert [s for s in got.unsupported if s.startswith(f"{name} = 7: ")], got.unsupported


def test_report_from_megatron_reports_the_imported_layout(capsys, tmp_path):
    out = tmp_path / "report.json"
    path = str(RECIPES / "nemo_llama3_70b.yaml")
    args = ["report", "--gpu", "h100-sxm", "--from-megatron", path, "--output", str(out)]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["imported"]["framework"] == "megatron"
    report = json.loads(out.read_text())
    assert '"tp": 4' in json.dumps(report) and '"virtual_stages": 5' in json.dumps(report)


def test_estimate_dp_fills_a_torchtitan_shard_degree_of_minus_one(capsys):
    # llama3_8b.toml: shard -1, local batch 1, no global batch: --dp 8 makes 8 GPUs, GBS 8
    path = str(RECIPES / "torchtitan_llama3_8b.toml")
    args = ["estimate", "--gpu", "h100-sxm", "--from-torchtitan", path, "--dp", "8", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["world_size"] == 8 and out["microbatches"] == 1
    assert out["assumed"]["memory.framework"] == "pytorch"  # torchtitan runs PyTorch's memory


def test_torchtitan_without_gpu_count_leaves_dp_and_global_batch_open():
    got = torchtitan("torchtitan_llama3_8b.toml")
    assert "dp" not in got.given and "global_batch_size" not in got.given
    assert got.layout.zero == 3  # FSDP over the GPUs left over


def test_expert_tp_defaults_to_tp_as_in_megatron_core():
    line = "--tensor-model-parallel-size 4 --expert-model-parallel-size 8 --num-experts 64"
    got = read_megatron(line, 64)
    assert (got.layout.etp, got.layout.ep, got.layout.dp) == (4, 8, 16)


def test_torch_fsdp2_is_zero_3():
    assert read_megatron("--use-torch-fsdp2", 8).layout.zero == 3


def test_model_details_are_named_as_taken_from_the_preset():
    got = megatron("megatron_llama3_8b_h100_fp8.sh")
    (note,) = [n for n in got.notes if n.startswith("Model details come from")]
    assert "the preset llama-3.1-8b" in note and "--rotary-base" in note


def test_round_trip_sample_covers_the_search_space():
    sample = [pair for m in model_ids() for pair in _sample_layouts(m, 25)]
    lays = [lay for lay, _ in sample]
    assert {lay.schedule for lay in lays} == set(SCHEDULES)
    assert {lay.zero for lay in lays} == {0, 1, 2, 3}
    assert {lay.recompute for lay in lays} == {"none", "selective", "full"}
    assert any(lay.ep > 1 and lay.etp > 1 for lay in lays)
    assert any(lay.virtual_stages > 2 for lay in lays)
    assert any(lay.stage_layers for lay in lays) and any(lay.cp > 1 for lay in lays)
    assert {work.precision for _, work in sample} == set(PRECISIONS)
    # the memory recipes, each in the sample
    assert any(lay.recompute_modules != ("core_attn",) for lay in lays)
    assert any(lay.recompute_ops for lay in lays) and any(lay.recompute_every > 1 for lay in lays)
    assert any(lay.recompute_method == "block" and lay.recompute_num_layers for lay in lays)
    assert any(lay.recompute_method == "uniform" and lay.recompute_num_layers for lay in lays)
    assert any(lay.first_stage_layers is not None for lay in lays)
    assert any(lay.last_stage_layers is not None for lay in lays)
    assert any(lay.pipeline_layout and lay.virtual_stages > 1 for lay in lays)
    assert any(lay.pipeline_layout and "m" in lay.pipeline_layout for lay in lays)  # MTP
    assert any(lay.activation_offload for lay in lays) and any(lay.offload_layers for lay in lays)
    assert any(0 < lay.optimizer_offload_fraction < 1 for lay in lays)
    assert any(lay.zero == 3 and not lay.reshard_after_forward for lay in lays)
    assert any(lay.zero and lay.dp_shard and lay.dp_shard < lay.dp for lay in lays)


@pytest.mark.parametrize(
    ("model_id", "gpus", "space"),
    [
        ("mixtral-8x7b", 32, SearchSpace(etp_values=(1, 2))),
        ("llama-3.1-70b", 64, SearchSpace(schedules=("interleaved",), max_virtual=5)),
    ],
)
def test_ranked_search_layouts_read_back(model_id, gpus, space):
    from explorer.presets import load_gpu
    from explorer.search import search
    from explorer.specs import ClusterSpec

    model = load_model(model_id)
    cluster = ClusterSpec(gpu=load_gpu("h100-sxm"), gpus_per_node=8, num_nodes=gpus // 8)
    work = TrainingWorkload(seq_len=4096, global_batch_size=256, precision="fp8-mixed")
    result = search(model, cluster, work, space=space, ranked=20)
    assert result.estimates
    n = model.num_hidden_layers
    for estimate in result.estimates:
        lay = estimate.layout
        for text, reader in (
            ("\n".join(megatron_arguments(lay, work, n)), read_megatron),
            (torchtitan_config(lay, work, n), read_torchtitan),
        ):
            got = reader(text, lay.world_size, model)
            assert _canonical(got.layout, got.workload, n) == _canonical(lay, work, n), text


def test_import_reads_standard_input(capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("--tensor-model-parallel-size 8 --bf16\n"))
    assert main(["import", "--megatron", "-", "--gpus", "64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["layout"]["tp"], out["layout"]["dp"]) == (8, 8)
    assert out["workload"]["precision"] == "bf16-mixed"


def test_import_world_size_contradiction_exits_2(capsys):
    path = str(RECIPES / "nemo_llama3_70b.yaml")
    with pytest.raises(SystemExit) as info:
        main(["import", "--megatron", path, "--gpus", "64"])
    assert info.value.code == 2
    assert "1024 GPUs" in capsys.readouterr().err


def test_explicit_assume_overrides_the_imported_framework(capsys):
    path = str(RECIPES / "torchtitan_llama3_8b.toml")
    args = ["estimate", "--gpu", "h100-sxm", "--from-torchtitan", path, "--dp", "8"]
    assert main([*args, "--assume", "memory.framework=megatron", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["assumed"]["memory.framework"] == "megatron"
