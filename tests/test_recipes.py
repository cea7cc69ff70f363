"""Memory recipes as the frameworks spell them, each against a hand-worked figure.

Megatron-Core recompute modules, method and layer count; torchtitan's op-level and layer SAC;
activation and optimizer offload (bytes moved and the host-copy time left exposed); HSDP and
FSDP2 reshard_after_forward; uneven pipelines (first/last stage layers, Megatron's layout
string) and virtual stages beyond 16.
"""

from __future__ import annotations

import dataclasses

import pytest
from hand_models import DEEPSEEK_V3, H100_LIKE
from hand_models import LLAMA_LIKE_8B as LLAMA
from test_activations import SMALL_MOE

from explorer.compute import PassTimes, stage_work
from explorer.compute.recompute import recompute_shares
from explorer.estimate import EstimateAssumptions
from explorer.estimate.offload import HostCopies
from explorer.memory import training_memory
from explorer.memory.activations import ActivationShape, block_activation_bytes
from explorer.memory.assumptions import DEFAULT_TRAINING_ASSUMPTIONS as MEGATRON
from explorer.memory.assumptions import PYTORCH_ASSUMPTIONS
from explorer.memory.recompute import RecomputePolicy
from explorer.memory.stage_activations import activation_ledger, recompute_working_bytes
from explorer.memory.states import stage_params
from explorer.mesh.tree import pipelines
from explorer.partition import end_stage_layers, pipeline_plan
from explorer.scenario.inputs import SearchInputs
from explorer.specs import ClusterSpec, Layout, TrainingWorkload
from explorer.workload import resolve_workload

EXACT = 1e-12  # sums of products of integers: only float rounding may differ
S = 4096  # tokens per sequence in the hand-worked blocks
SHAPE = ActivationShape(seq_len=S, micro_batch_size=1)
NONE_PER_TOKEN = 2 * (2 * 4096 + 4096 + 4096 + 2 * 1024 + 4096 + 4096 + 3 * 14336) + 4 * 32
"""Llama-like block, bytes per token (tests/test_activations.py by hand): norm inputs 2h,
QKV input h, q, k and v, attention output, MLP input h, gate, up and product, fp32 LSE."""


def block(model, kind, policy, a=MEGATRON, shape=SHAPE) -> float:
    return block_activation_bytes(model, kind, shape, a, policy)


def selective(*modules: str) -> RecomputePolicy:
    return RecomputePolicy("selective", modules=frozenset(modules))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("module", "freed_per_token"),
    [
        pytest.param("core_attn", 4 * 32, id="core_attn-frees-the-fp32-log-sum-exp"),
        pytest.param("layernorm", 2 * (4096 + 4096), id="layernorm-frees-qkv-and-mlp-inputs"),
        pytest.param("mlp", 2 * 3 * 14336, id="mlp-frees-gate-up-and-product"),
    ],
)
def test_one_recomputed_module_frees_exactly_its_saved_tensors(module, freed_per_token) -> None:
    none = block(LLAMA, "dense", "none")
    assert none == pytest.approx(S * NONE_PER_TOKEN, rel=EXACT)
    assert none - block(LLAMA, "dense", selective(module)) == pytest.approx(
        S * freed_per_token, rel=EXACT
    )


def test_recompute_modules_free_the_sum_of_their_tensors() -> None:
    freed = block(LLAMA, "dense", "none") - block(LLAMA, "dense", selective("core_attn", "mlp"))
    assert freed == pytest.approx(S * (4 * 32 + 2 * 3 * 14336), rel=EXACT)


def test_megatron_default_selective_equals_recompute_modules_core_attn() -> None:
    assert block(LLAMA, "dense", "selective") == block(LLAMA, "dense", selective("core_attn"))


# SMALL_MOE (tests/test_activations.py): 4096 tokens, top-2 of 8 experts of width 512, one
# shared expert of width 512, h 1024; balanced routing: 8192 routed copies.
BALANCED = dataclasses.replace(MEGATRON, moe_imbalance=1.0)


@pytest.mark.parametrize(
    ("module", "freed"),
    [
        pytest.param("moe_act", 8192 * 512 * 2, id="moe_act-frees-the-expert-swiglu-product"),
        pytest.param("shared_experts", 4096 * 3 * 512 * 2, id="shared_experts-frees-its-mlp"),
        # dispatched token h, gate+up+product 3 x 512 and an fp32 probability per copy; the
        # shared expert; router logits (8) and probabilities (2) in fp32; MLP input stays
        pytest.param(
            "moe",
            8192 * ((1024 + 3 * 512) * 2 + 4) + 4096 * 3 * 512 * 2 + 4096 * 10 * 4,
            id="moe-frees-router-experts-and-shared-experts",
        ),
    ],
)
def test_moe_recompute_modules_by_hand(module, freed) -> None:
    none = block(SMALL_MOE, "moe", "none", BALANCED)
    assert none - block(SMALL_MOE, "moe", selective(module), BALANCED) == pytest.approx(
        freed, rel=EXACT
    )


def test_layernorm_and_mla_up_proj_equal_the_deepseek_v3_recompute_switch() -> None:
    # Two independent spellings: Megatron's modules and the DeepSeek-V3 report's sec. 3.2.3.
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    switch = dataclasses.replace(MEGATRON, recompute_norms_and_mla_up_projection=True)
    modules = selective("layernorm", "mla_up_proj")
    for kind in ("dense", "moe"):
        assert block(DEEPSEEK_V3, kind, modules, shape=shape) == pytest.approx(
            block(DEEPSEEK_V3, kind, "none", switch, shape), rel=EXACT
        )


def test_mla_up_proj_frees_latents_and_up_projection_outputs_and_keeps_the_rope_key() -> None:
    # per token: normalised q latent 1536 and kv latent 512; q and k 128 x (128 + 64), v 128 x
    # 128; kept: the RoPE key, 64; all bf16
    freed = 1536 + 512 + 2 * 128 * 192 + 128 * 128 - 64
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    drop = block(DEEPSEEK_V3, "dense", "none", shape=shape)
    drop -= block(DEEPSEEK_V3, "dense", selective("mla_up_proj"), shape=shape)
    assert drop == pytest.approx(4096 * 2 * freed, rel=EXACT)


def test_torchtitan_op_sac_keeps_every_second_matmul_and_attention_by_hand() -> None:
    # block input h; wq 4096, wv 1024, SDPA output 4096 and LSE (fp32, 32 heads); w1 14336,
    # w2 h. Source: torchtitan _save_list, per-block mm counter.
    per_token = 2 * (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 4 * 32
    ops = RecomputePolicy("selective", ops=True)
    assert block(LLAMA, "dense", ops, PYTORCH_ASSUMPTIONS) == pytest.approx(
        S * per_token, rel=EXACT
    )


def test_op_sac_with_tp_keeps_the_two_reduce_scatter_outputs() -> None:
    tp2 = ActivationShape(seq_len=S, micro_batch_size=1, tp=2, sp=True)
    ops = RecomputePolicy("selective", ops=True)
    # block input h/2, wq 2048, wv 512, SDPA 2048, LSE 16 heads, w1 7168, w2 h (partial
    # sums), two reduce-scatter outputs h/2 each
    per_token = 2 * (2048 + 2048 + 512 + 2048 + 7168 + 4096 + 2 * 2048) + 4 * 16
    got = block(LLAMA, "dense", ops, PYTORCH_ASSUMPTIONS, tp2)
    assert got == pytest.approx(S * per_token, rel=EXACT)


def test_op_sac_rebuilds_what_the_plain_block_saved_and_it_did_not() -> None:
    # eager PyTorch block's tensors op SAC regenerates: QKV input h, k 1024, MLP norm input h,
    # MLP input h, up f, silu(gate) f, product f (all bf16)
    ops = RecomputePolicy("selective", ops=True)
    plan = pipeline_plan(LLAMA, Layout())[0]
    working = recompute_working_bytes(LLAMA, plan, SHAPE, PYTORCH_ASSUMPTIONS, ops)
    assert working == pytest.approx(S * 2 * (3 * 4096 + 1024 + 3 * 14336), rel=EXACT)


# Full recompute of part of the blocks: 32 Llama-like blocks on one rank. A checkpointed
# block keeps its input, S x h x 2 bytes.
INPUT = S * 4096 * 2


@pytest.mark.parametrize(
    ("layout", "checkpointed", "units"),
    [
        pytest.param(Layout(recompute="full"), 32, 32, id="uniform-every-block"),
        pytest.param(
            Layout(recompute="full", recompute_num_layers=4), 32, 8, id="uniform-units-of-4"
        ),
        pytest.param(
            Layout(recompute="full", recompute_method="block", recompute_num_layers=5),
            5,
            5,
            id="block-method-first-5",
        ),
        pytest.param(
            Layout(recompute="full", recompute_every=3), 10, 10, id="torchtitan-every-third"
        ),
    ],
)
def test_full_recompute_keeps_the_inputs_of_its_units_and_every_other_block(
    layout, checkpointed, units
) -> None:
    plan = pipeline_plan(LLAMA, layout)[0]
    ledger = activation_ledger(LLAMA, plan, SHAPE, MEGATRON, _policy(layout))
    expected = units * INPUT + (32 - checkpointed) * S * NONE_PER_TOKEN
    assert ledger.blocks == pytest.approx(expected, rel=EXACT)


def test_uniform_units_rebuild_all_their_blocks_at_once() -> None:
    layout = Layout(recompute="full", recompute_num_layers=4)
    plan = pipeline_plan(LLAMA, layout)[0]
    working = recompute_working_bytes(LLAMA, plan, SHAPE, MEGATRON, _policy(layout))
    assert working == pytest.approx(4 * S * NONE_PER_TOKEN, rel=EXACT)


def test_block_method_counts_the_first_layers_of_every_virtual_chunk() -> None:
    layout = Layout(pp=2, virtual_stages=2, schedule="interleaved", recompute="full",
                    recompute_method="block", recompute_num_layers=3)  # fmt: skip
    plan = pipeline_plan(LLAMA, layout)[0]  # two chunks of 8 blocks
    ledger = activation_ledger(LLAMA, plan, SHAPE, MEGATRON, _policy(layout))
    assert ledger.blocks == pytest.approx(6 * INPUT + 10 * S * NONE_PER_TOKEN, rel=EXACT)


def _policy(layout: Layout) -> RecomputePolicy:
    from explorer.memory.recompute import recompute_policy

    return recompute_policy(layout)


# Time side: the shares of the forward that each policy repeats.
def _linear_per_token() -> float:
    attention = 2 * (2 * 4096 * 4096 + 2 * 4096 * 1024)  # q, o and k, v projections
    return attention + 2 * 3 * 4096 * 14336


@pytest.mark.parametrize(
    ("layout", "linear", "attention"),
    [
        pytest.param(Layout(recompute="selective"), 0.0, 1.0, id="core_attn"),
        pytest.param(
            Layout(recompute="selective", recompute_modules=("mlp",)),
            2 * 3 * 4096 * 14336 / _linear_per_token(),
            0.0,
            id="mlp",
        ),
        pytest.param(
            Layout(recompute="selective", recompute_ops=True),
            2 * (4096 * 1024 + 4096 * 4096 + 4096 * 14336) / _linear_per_token(),
            0.0,
            id="torchtitan-op-sac-wk-wo-w3",
        ),
        pytest.param(Layout(recompute="full", recompute_every=4), 0.25, 0.25, id="every-4th"),
    ],
)
def test_recompute_repeats_the_forward_share_of_its_policy(layout, linear, attention) -> None:
    shares = recompute_shares(LLAMA, layout, 32, 0, S)
    assert shares.linear == pytest.approx(linear, rel=1e-12)
    assert shares.attention == pytest.approx(attention, rel=1e-12)


# Offload: bytes leave the GPU; the copy time a pass cannot hide is added.
OFFLOAD = ("attn_norm", "attn_proj")
"""Offloads the attention norm input (h) and the attention output (4096) per token."""


def test_activation_offload_moves_its_modules_inputs_off_the_gpu() -> None:
    policy = RecomputePolicy("none", offload=frozenset(OFFLOAD))  # type: ignore[arg-type]
    freed = block(LLAMA, "dense", "none") - block(LLAMA, "dense", policy)
    assert freed == pytest.approx(S * 2 * (4096 + 4096), rel=EXACT)


def test_offloaded_tensors_come_back_for_one_block_in_the_working_set() -> None:
    policy = RecomputePolicy("none", offload=frozenset(OFFLOAD))  # type: ignore[arg-type]
    plan = pipeline_plan(LLAMA, Layout())[0]
    working = recompute_working_bytes(LLAMA, plan, SHAPE, MEGATRON, policy)
    assert working == pytest.approx(S * 2 * (4096 + 4096), rel=EXACT)


CLUSTER = ClusterSpec(gpu=dataclasses.replace(H100_LIKE, host_bytes_per_s=50e9))
WORKLOAD = TrainingWorkload(seq_len=S, global_batch_size=8)
MOVED_S = 32 * S * 2 * (4096 + 4096) / 50e9
"""One micro-batch's offloaded bytes over 32 blocks at 50 GB/s."""


def _passes(forward_s: float) -> PassTimes:
    return PassTimes(forward_s=forward_s, backward_input_s=0.0, weight_s=0.0, recompute_s=0.0,
                     attention_forward_s=0.0, dense_efficiency=1.0)  # fmt: skip


@pytest.mark.parametrize(
    ("overlap", "forward_s", "exposed_s"),
    [
        pytest.param(0.0, 1.0, MOVED_S, id="no-overlap-the-whole-copy"),
        pytest.param(1.0, MOVED_S / 4, MOVED_S * 3 / 4, id="copy-longer-than-the-pass"),
        pytest.param(1.0, 1.0, 0.0, id="copy-hidden-behind-the-pass"),
        pytest.param(0.5, MOVED_S, MOVED_S / 2, id="half-the-pass-overlaps"),
    ],
)
def test_activation_offload_adds_the_copy_time_that_does_not_overlap(
    overlap, forward_s, exposed_s
) -> None:
    layout = Layout(dp=8, activation_offload=OFFLOAD)
    a = dataclasses.replace(MEGATRON, offload_overlap=overlap)
    host = HostCopies(LLAMA, CLUSTER, layout, resolve_workload(layout, WORKLOAD), a)
    got = host.activation_s(tuple(range(32)), _passes(forward_s))
    assert got == pytest.approx(exposed_s, rel=1e-12, abs=1e-15)


def test_optimizer_offload_moves_its_share_of_master_weights_and_adam_states() -> None:
    base = Layout(dp=8, zero=1)
    offloaded = dataclasses.replace(base, optimizer_offload_fraction=0.5)
    full = training_memory(LLAMA, H100_LIKE, base, WORKLOAD).stages[0].phase("optimizer_step")
    half = training_memory(LLAMA, H100_LIKE, offloaded, WORKLOAD).stages[0].phase("optimizer_step")
    for name in ("master_weights", "optimizer_states"):
        assert getattr(half.breakdown, name) == pytest.approx(
            getattr(full.breakdown, name) / 2, rel=EXACT
        )
    assert half.breakdown.parameters == full.breakdown.parameters
    assert half.breakdown.gradients == full.breakdown.gradients


def test_optimizer_offload_time_is_the_gpu_share_plus_the_host_copies() -> None:
    # ZeRO-1 over 8 ranks: each updates 1/8 of the stage's parameters; a quarter on the host
    # moves fp32 gradients out (4 B) and bf16 weights back (2 B).
    layout = Layout(dp=8, zero=1, optimizer_offload_fraction=0.25)
    work = stage_work(LLAMA, tuple(range(32)), S, True, True)
    host = HostCopies(LLAMA, CLUSTER, layout, resolve_workload(layout, WORKLOAD), MEGATRON)
    local = (work.dense_params + work.expert_params) / 8
    expected = 0.75 * 2.0 + 0.25 * local * (4 + 2) / 50e9
    assert host.optimizer_s(work, 2.0) == pytest.approx(expected, rel=1e-12)


# Sharding recipes.
def test_hsdp_shards_the_weights_over_the_shard_group_only() -> None:
    flat = Layout(dp=8, zero=3)
    hsdp = dataclasses.replace(flat, dp_shard=4)
    one = training_memory(LLAMA, H100_LIKE, flat, WORKLOAD).stages[0].phase("optimizer_step")
    two = training_memory(LLAMA, H100_LIKE, hsdp, WORKLOAD).stages[0].phase("optimizer_step")
    for name in ("parameters", "gradients", "master_weights", "optimizer_states"):
        assert getattr(two.breakdown, name) == pytest.approx(
            2 * getattr(one.breakdown, name), rel=EXACT
        )


def test_no_reshard_after_forward_keeps_every_gathered_weight_until_the_backward() -> None:
    layout = Layout(dp=8, zero=3, reshard_after_forward=False)
    stage = training_memory(LLAMA, H100_LIKE, layout, WORKLOAD).stages[0]
    parts = dict(stage.phase("backward_start").temporary_parts)
    held = stage_params(LLAMA, layout, pipeline_plan(LLAMA, layout)[0]).total
    assert parts["ZeRO-3 weights kept gathered after the forward"] == pytest.approx(2 * held)
    assert "ZeRO-3 gathered LM head" not in parts


# Uneven pipelines.
def test_first_and_last_stage_layers_leave_the_rest_even() -> None:
    # Llama 3 405B: 126 blocks on 16 stages = 7 + 14 x 8 + 7 (arXiv:2407.21783 sec. 3.3.2)
    assert end_stage_layers(126, 16, 7, 7) == (7,) + (8,) * 14 + (7,)
    assert end_stage_layers(61, 8, 4, None) == (4, 9, 8, 8, 8, 8, 8, 8)


def test_first_and_last_stage_layers_set_the_plan() -> None:
    layout = Layout(pp=4, first_stage_layers=5, last_stage_layers=6)
    assert [len(p.layers) for p in pipeline_plan(LLAMA, layout)] == [5, 11, 10, 6]


def test_deepseek_v3_layout_string_places_blocks_mtp_and_loss() -> None:
    # "Et*3|(tt|)*29,m|L" on PP 16 x VPP 2 (Megatron-LM docs, custom pipeline layout):
    # chunk c on rank c mod 16; chunks 1-29 hold two blocks, chunk 30 the MTP, 31 the loss.
    layout = Layout(pp=16, virtual_stages=2, schedule="interleaved",
                    pipeline_layout="Et*3|(tt|)*29,m|L")  # fmt: skip
    plans = pipeline_plan(DEEPSEEK_V3, layout)
    assert plans[0].layers == (0, 1, 2, 33, 34) and plans[0].has_embedding
    assert plans[14].layers == (29, 30) and plans[14].holds_mtp and not plans[14].has_head
    assert plans[15].layers == (31, 32) and plans[15].has_head and not plans[15].holds_mtp
    assert sum(len(p.layers) for p in plans) == 61


def test_a_group_may_repeat_starred_letters() -> None:
    # Megatron-Bridge's DeepSeek-V3 B200 recipe (26.04.01): PP 8 x VPP 2, 4 blocks a chunk
    layout = Layout(pp=8, virtual_stages=2, schedule="interleaved",
                    pipeline_layout="Et*4|(t*4|)*14tmL")  # fmt: skip
    plans = pipeline_plan(DEEPSEEK_V3, layout)
    assert [len(p.layers) for p in plans] == [8] * 7 + [5]
    assert plans[7].has_head and plans[7].holds_mtp


def test_the_mtp_rank_holds_the_mtp_modules_memory() -> None:
    layout = Layout(pp=16, dp=8, ep=8, virtual_stages=2, schedule="interleaved",
                    pipeline_layout="Et*3|(tt|)*29,m|L")  # fmt: skip
    memory = training_memory(DEEPSEEK_V3, H100_LIKE, layout, TrainingWorkload(
        seq_len=4096, global_batch_size=1024))  # fmt: skip
    mtp, head = memory.stages[14], memory.stages[15]
    assert mtp.activation_parts.mtp > 0 and head.activation_parts.mtp == 0
    assert head.activation_parts.head > 0 and mtp.activation_parts.head == 0


@pytest.mark.parametrize(
    ("text", "pp", "virtual", "words"),
    [
        pytest.param("tt|EL", 2, 1, "must start with the embedding", id="embedding-not-first"),
        pytest.param("Et|t|L", 2, 1, "not a multiple of pp", id="chunks-not-a-multiple"),
        pytest.param("Et*|L", 2, 1, "not followed by a count", id="star-without-count"),
        pytest.param("Etx|L", 2, 1, "unknown character", id="unknown-letter"),
        pytest.param("E(tt|L", 2, 1, "not closed", id="open-group"),
        pytest.param("Etm|tL", 2, 1, "before the MTP", id="block-after-mtp"),
        pytest.param("Et|t|t|L", 2, 1, "set virtual_stages = 2", id="virtual-stages-differ"),
    ],
)
def test_a_bad_layout_string_gets_one_sentence_naming_the_field(text, pp, virtual, words) -> None:
    with pytest.raises(ValueError, match=words) as error:
        Layout(pp=pp, virtual_stages=virtual, pipeline_layout=text)
    assert str(error.value).startswith("pipeline_layout")
    assert "\n" not in str(error.value)


def test_a_layout_string_with_the_wrong_block_count_names_the_field() -> None:
    layout = Layout(pp=2, pipeline_layout="Et*10|t*10L")
    with pytest.raises(ValueError, match="pipeline_layout places 20 transformer blocks"):
        pipeline_plan(LLAMA, layout)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        pytest.param({"recompute_modules": ("mlp",)}, "recompute_modules", id="modules-need-sel"),
        pytest.param(
            {"recompute": "full", "recompute_modules": ("bogus",)},
            "recompute_modules",
            id="unknown-module",
        ),
        pytest.param({"recompute_num_layers": 2}, "recompute_num_layers", id="layers-need-full"),
        pytest.param({"activation_offload": ("mlp",)}, "activation_offload", id="bad-offload"),
        pytest.param(
            {"optimizer_offload_fraction": 1.5},
            "optimizer_offload_fraction",
            id="fraction-above-one",
        ),
        pytest.param({"dp": 6, "dp_shard": 4}, "dp_shard", id="shard-must-divide-dp"),
        pytest.param({"first_stage_layers": 3}, "first_stage_layers", id="first-needs-pp"),
    ],
)
def test_bad_recipe_fields_get_one_sentence_naming_the_field(fields, named) -> None:
    with pytest.raises(ValueError, match=named):
        Layout(**fields)


# Virtual stages beyond 16 (published recipes use 20 and 24).
def test_the_search_may_interleave_24_virtual_stages() -> None:
    space = SearchInputs(max_virtual=24)
    assert ("interleaved", 24) in pipelines(4, space.schedules, space.max_virtual)


def test_20_virtual_stages_estimate_one_block_per_chunk() -> None:
    layout = Layout(pp=4, dp=2, virtual_stages=20, schedule="interleaved")
    plans = pipeline_plan(dataclasses.replace(LLAMA, num_hidden_layers=80), layout)
    assert all(p.chunk_blocks == (1,) * 20 for p in plans)


def test_fsdp_under_torch_pipelining_keeps_weights_gathered_and_gradients_unsharded() -> None:
    # torch.distributed.pipelining: no reshard, no reduce-scatter before the last backward;
    # bf16-mixed: 2-byte gathered weights, 4-byte (fp32 reduce dtype) unsharded gradients
    layout = Layout(pp=2, dp=4, zero=3)
    for a, expected in ((PYTORCH_ASSUMPTIONS, True), (MEGATRON, False)):
        stage = training_memory(LLAMA, H100_LIKE, layout, WORKLOAD, a).stages[0]
        parts = dict(stage.phase("backward_start").temporary_parts)
        held = stage_params(LLAMA, layout, pipeline_plan(LLAMA, layout)[0]).total
        if not expected:
            assert "ZeRO-3 unsharded gradients under pipelining" not in parts
            continue
        assert parts["ZeRO-3 weights kept gathered after the forward"] == pytest.approx(2 * held)
        assert parts["ZeRO-3 unsharded gradients under pipelining"] == pytest.approx(4 * held)


# FP8 training memory (Transformer Engine).
def test_te_fp8_saves_each_fp8_gemm_input_in_one_byte() -> None:
    # QKV input h, attention output 4096, MLP input h and SwiGLU product f: 2 -> 1 byte each
    te = dataclasses.replace(MEGATRON, fp8_linear_input_bytes=1.0)
    freed = block(LLAMA, "dense", "none") - block(LLAMA, "dense", "none", te)
    assert freed == pytest.approx(S * (4096 + 4096 + 4096 + 14336), rel=EXACT)


def test_te_fp8_weight_copies_are_kept_for_the_stage_blocks() -> None:
    # 32 Llama-like blocks on one GPU: 218,112,000 parameters each (attention 41,943,040 +
    # MLP 176,160,768 + two norms 8,192), 2 bytes of row- and column-wise FP8 copies each
    a = dataclasses.replace(MEGATRON, fp8_weight_copy_bytes=2.0)
    stage = training_memory(LLAMA, H100_LIKE, Layout(dp=8, zero=1), WORKLOAD, a).stages[0]
    parts = dict(stage.phase("optimizer_step").temporary_parts)
    per_block = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert parts["FP8 weight copies (Transformer Engine)"] == pytest.approx(32 * per_block * 2)


# The exporter writes each recipe as the framework spells it.
def test_megatron_arguments_spell_the_recipes() -> None:
    from explorer.launch import megatron_arguments

    layout = Layout(pp=16, virtual_stages=2, schedule="interleaved", dp=8, zero=1,
                    recompute="selective", recompute_modules=("mla_up_proj", "mlp"),
                    activation_offload=("core_attn", "attn_proj"), offload_layers=4,
                    optimizer_offload_fraction=0.5,
                    pipeline_layout="Et*3|(tt|)*29,m|L")  # fmt: skip
    args = megatron_arguments(layout, WORKLOAD, 61)
    for flag in (
        '--pipeline-model-parallel-layout "Et*3|(tt|)*29,m|L"',
        "--recompute-granularity selective",
        "--recompute-modules mla_up_proj mlp",
        "--fine-grained-activation-offloading",
        "--offload-modules core_attn attn_proj",
        "--cpu-offloading-num-layers 4",
        "--optimizer-cpu-offload",
        "--optimizer-offload-fraction 0.5",
    ):
        assert flag in args
    assert not any(a.startswith("--num-layers-per-virtual-pipeline-stage") for a in args)
    block = Layout(recompute="full", recompute_method="block", recompute_num_layers=5)
    assert "--recompute-method block" in megatron_arguments(block, WORKLOAD, 32)


def test_torchtitan_config_spells_op_and_layer_sac_and_hsdp() -> None:
    from explorer.launch import torchtitan_config

    op = torchtitan_config(Layout(recompute="selective", recompute_ops=True), WORKLOAD)
    assert 'selective_ac_option = "op"' in op
    layer = torchtitan_config(Layout(recompute="full", recompute_every=2), WORKLOAD)
    assert 'mode = "selective"' in layer and 'selective_ac_option = "2"' in layer
    hsdp = torchtitan_config(Layout(dp=8, zero=3, dp_shard=4), WORKLOAD)
    assert "data_parallel_replicate_degree = 2" in hsdp
    assert "data_parallel_shard_degree = 4" in hsdp


def test_one_knob_neighbours_skip_the_changes_a_recipe_does_not_allow() -> None:
    from explorer.search.explain import neighbours

    layout = Layout(pp=2, dp=4, recompute="selective", recompute_modules=("mlp",),
                    pipeline_layout="Et*16|t*16L")  # fmt: skip
    found = dict(neighbours(layout, moe=False))
    assert "recompute selective to none" not in found  # the modules need selective
    assert "PP 2 to 4" not in found  # the layout string is for 2 ranks
    assert found["ZeRO 0 to 1"].recompute_modules == ("mlp",)


# The time side end to end.
def test_uneven_stages_time_their_own_blocks() -> None:
    from explorer.estimate import estimate

    cluster = ClusterSpec(gpu=H100_LIKE)
    layout = Layout(pp=4, dp=2, first_stage_layers=5, last_stage_layers=6)
    e = estimate(LLAMA, cluster, layout, TrainingWorkload(seq_len=S, global_batch_size=16))
    assert [len(s.layers) for s in e.stages] == [5, 11, 10, 6]
    middle = e.stages[1].compute.forward_s / e.stages[2].compute.forward_s
    assert middle == pytest.approx(11 / 10, rel=1e-9)  # equal blocks, no ends


def test_offload_copy_time_adds_to_both_passes_where_it_does_not_overlap() -> None:
    from explorer.estimate import estimate

    cluster = ClusterSpec(gpu=dataclasses.replace(H100_LIKE, host_bytes_per_s=1e9))
    base = Layout(dp=8)
    offload = dataclasses.replace(base, activation_offload=OFFLOAD)
    a = dataclasses.replace(EstimateAssumptions(), memory=dataclasses.replace(
        MEGATRON, offload_overlap=0.0))  # fmt: skip
    plain = estimate(LLAMA, cluster, base, WORKLOAD, a).stages[0]
    moved = estimate(LLAMA, cluster, offload, WORKLOAD, a).stages[0]
    copy_s = 32 * S * 2 * (4096 + 4096) / 1e9
    assert moved.forward_s - plain.forward_s == pytest.approx(copy_s, rel=1e-9)
    assert moved.backward_s - plain.backward_s == pytest.approx(copy_s, rel=1e-9)


def test_token_drop_at_a_capacity_factor_times_experts_at_that_load() -> None:
    # Dropless: the busiest GPU's experts see the imbalance (2); a capacity factor of 1 caps
    # them at the mean, as balanced routing does.
    from explorer.estimate import estimate

    cluster = ClusterSpec(gpu=H100_LIKE)
    layout, load = Layout(dp=8, ep=8), TrainingWorkload(seq_len=S, global_batch_size=8)

    def forward_s(**memory: float) -> float:
        a = EstimateAssumptions(memory=dataclasses.replace(MEGATRON, **memory))
        return estimate(SMALL_MOE, cluster, layout, load, a).stages[0].compute.forward_s

    capped = forward_s(moe_imbalance=2.0, moe_capacity_factor=1.0)
    assert capped == pytest.approx(forward_s(moe_imbalance=1.0), rel=1e-12)
    assert forward_s(moe_imbalance=2.0) > capped
