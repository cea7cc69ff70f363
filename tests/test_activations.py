"""Activation bytes per block, against Korthikanti et al. 2022 and hand-worked tensor lists."""

from __future__ import annotations

import dataclasses

import pytest
from hand_models import DEEPSEEK_V3
from hand_models import LLAMA_LIKE_8B as LLAMA3_8B
from hypothesis import given
from hypothesis import strategies as st

from explorer.memory.activations import (
    ActivationShape,
    block_activation_bytes,
    block_tensors,
    mla_tensors,
    moe_tensors,
)
from explorer.memory.assumptions import (
    DEFAULT_TRAINING_ASSUMPTIONS,
    GPT_STYLE,
    PYTORCH_ASSUMPTIONS,
)
from explorer.memory.stage_activations import head_tensors, recompute_working_bytes
from explorer.partition import pipeline_plan
from explorer.specs import Layout, ModelSpec

EXACT = 1e-12  # sums of products of integers: only float rounding may differ

# The GPT-3 175B layer of Korthikanti et al. 2022 Table 3: a 96, h 12288, s 2048.
S, B, H, A = 2048, 1, 12288, 96
GPT_175B = ModelSpec(
    name="gpt-175b-layer",
    num_hidden_layers=96,
    hidden_size=H,
    num_attention_heads=A,
    intermediate_size=4 * H,
    ffn_kind="gelu",
    norm_kind="layernorm",
    vocab_size=51200,
)

SMALL_MOE = ModelSpec(
    num_hidden_layers=4,
    hidden_size=1024,
    num_attention_heads=8,
    num_key_value_heads=2,
    intermediate_size=4096,
    vocab_size=32000,
    n_routed_experts=8,
    n_shared_experts=1,
    num_experts_per_tok=2,
    moe_intermediate_size=512,
)


def gpt_layer_bytes(tp: int, sp: bool, recompute: str) -> float:
    shape = ActivationShape(seq_len=S, micro_batch_size=B, tp=tp, sp=sp)
    return block_activation_bytes(GPT_175B, "dense", shape, GPT_STYLE, recompute)  # type: ignore[arg-type]


T = 8
SBH = S * B * H
KORTHIKANTI_TABLE2 = [
    pytest.param(1, False, "none", SBH * (34 + 5 * A * S / H), id="korthikanti2022-table2-none"),
    pytest.param(
        T, False, "none", SBH * (10 + 24 / T + 5 * A * S / (H * T)), id="korthikanti2022-table2-tp"
    ),
    pytest.param(
        T, True, "none", SBH * (34 / T + 5 * A * S / (H * T)), id="korthikanti2022-table2-tp-sp"
    ),
    pytest.param(
        T, False, "selective", SBH * (10 + 24 / T), id="korthikanti2022-table2-tp-selective"
    ),
    pytest.param(T, True, "selective", SBH * 34 / T, id="korthikanti2022-table2-tp-sp-selective"),
    pytest.param(1, False, "full", 2 * SBH, id="korthikanti2022-table2-full-recompute"),
]


@pytest.mark.parametrize(("tp", "sp", "recompute", "expected"), KORTHIKANTI_TABLE2)
def test_gpt_layer_matches_korthikanti_table2(tp, sp, recompute, expected) -> None:
    assert gpt_layer_bytes(tp, sp, recompute) == pytest.approx(expected, rel=EXACT)


def test_full_recompute_keeps_the_sequence_parallel_shard_of_the_input() -> None:
    # Megatron-LM checkpoints the SP-sharded layer input: 2 s b h / t.
    assert gpt_layer_bytes(T, True, "full") == pytest.approx(2 * SBH / T, rel=EXACT)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        pytest.param(
            ("MLP input", "MLP activation input", "MLP activation output", "MLP residual"),
            19 * SBH,
            id="korthikanti2022-sec4.1-mlp-19sbh",
        ),
        pytest.param(("attention norm", "MLP norm"), 4 * SBH, id="korthikanti2022-sec4.1-norms"),
    ],
)
def test_gpt_layer_parts_match_korthikanti_section_4(names, expected) -> None:
    shape = ActivationShape(seq_len=S, micro_batch_size=B)
    tensors = block_tensors(GPT_175B, "dense", shape, GPT_STYLE)
    assert sum(t.bytes for t in tensors if t.name.startswith(names)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("recompute", "expected"),
    [
        pytest.param("none", 0.0, id="none-rebuilds-nothing"),
        pytest.param("selective", 5 * A * S * S * B / T, id="selective-rebuilds-5as2b-over-t"),
        pytest.param("full", gpt_layer_bytes(T, True, "none"), id="full-rebuilds-one-layer"),
    ],
)
def test_recomputation_rebuilds_one_block_during_backward(recompute, expected) -> None:
    shape = ActivationShape(seq_len=S, micro_batch_size=B, tp=T, sp=True)
    plan = pipeline_plan(GPT_175B, Layout(pp=8))[0]
    working = recompute_working_bytes(GPT_175B, plan, shape, GPT_STYLE, recompute)
    assert working == pytest.approx(expected, rel=EXACT)


def test_output_layer_matches_korthikanti_section_4_3() -> None:
    # 4 s b h / t (1 + V / h) with sequence parallelism.
    shape = ActivationShape(seq_len=S, micro_batch_size=B, tp=T, sp=True)
    head = sum(t.bytes for t in head_tensors(GPT_175B, shape, GPT_STYLE))
    assert head == pytest.approx(4 * SBH / T * (1 + 51200 / H), rel=EXACT)


def test_flash_attention_replaces_the_s_squared_terms_with_the_log_sum_exp() -> None:
    shape = ActivationShape(seq_len=S, micro_batch_size=B, tp=T, sp=True)
    flash = dataclasses.replace(GPT_STYLE, flash_attention=True)
    classic = block_activation_bytes(GPT_175B, "dense", shape, GPT_STYLE, "none")
    with_flash = block_activation_bytes(GPT_175B, "dense", shape, flash, "none")
    lse = 4 * S * B * A / T  # fp32 per query and head
    assert with_flash == pytest.approx(classic - 5 * A * S * S * B / T + lse, rel=EXACT)


def test_llama3_8b_gqa_swiglu_layer_by_hand() -> None:
    # per token: norms 2h, QKV input h, q 32x128, k and v 8x128 each, attention output 4096,
    # MLP input h, gate+up 2 x 14336, product 14336 (bf16), log-sum-exp 32 heads (fp32).
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    per_token = 2 * (2 * 4096 + 4096 + 4096 + 2 * 1024 + 4096 + 4096 + 3 * 14336) + 4 * 32
    layer = block_activation_bytes(LLAMA3_8B, "dense", shape, DEFAULT_TRAINING_ASSUMPTIONS, "none")
    assert layer == pytest.approx(4096 * per_token, rel=EXACT)


def test_gelu_mlp_keeps_two_ffn_tensors_and_swiglu_three() -> None:
    shape = ActivationShape(seq_len=1024, micro_batch_size=1)
    gelu = dataclasses.replace(LLAMA3_8B, ffn_kind="gelu")
    a = DEFAULT_TRAINING_ASSUMPTIONS
    swiglu_bytes = block_activation_bytes(LLAMA3_8B, "dense", shape, a, "none")
    gelu_bytes = block_activation_bytes(gelu, "dense", shape, a, "none")
    assert swiglu_bytes - gelu_bytes == pytest.approx(1024 * 14336 * 2, rel=EXACT)


def test_qk_norm_keeps_q_and_k_before_the_norm() -> None:
    shape = ActivationShape(seq_len=1024, micro_batch_size=1)
    qk = dataclasses.replace(LLAMA3_8B, qk_norm=True)
    a = DEFAULT_TRAINING_ASSUMPTIONS
    extra = block_activation_bytes(qk, "dense", shape, a, "none")
    extra -= block_activation_bytes(LLAMA3_8B, "dense", shape, a, "none")
    assert extra == pytest.approx(1024 * (4096 + 1024) * 2, rel=EXACT)


@pytest.mark.parametrize(
    ("probs_in_experts", "per_copy"),
    [
        # Megatron-Core: weighted SwiGLU saves the copy's fp32 probability, no expert output
        # (moe/experts.py TEGroupedMLP, fusions/fused_bias_swiglu.py WeightedSwiGLUFunction).
        pytest.param(True, (1024 + 3 * 512) * 2 + 4, id="megatron-core-weighted-swiglu"),
        # Probabilities applied to the expert outputs (torchtitan): the combine keeps them (h).
        pytest.param(False, (2 * 1024 + 3 * 512) * 2, id="combine-keeps-expert-outputs"),
    ],
)
def test_moe_layer_by_hand(probs_in_experts, per_copy) -> None:
    # 4096 tokens, top-2, balanced (imbalance 1): 8192 routed copies, each keeping the dispatched
    # token (h) and gate, up, product (3 x 512), and what the probabilities' gradient needs;
    # shared expert 3 x 512 per token; router logits (8) and probabilities (2) in fp32.
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    a = dataclasses.replace(
        DEFAULT_TRAINING_ASSUMPTIONS, moe_imbalance=1.0, moe_probs_in_experts=probs_in_experts
    )
    routed = 8192 * per_copy
    shared = 4096 * 3 * 512 * 2
    router = 4096 * (8 + 2) * 4
    moe = sum(t.bytes for t in moe_tensors(SMALL_MOE, shape, a))
    assert moe == pytest.approx(routed + shared + router, rel=EXACT)


def test_moe_capacity_factor_replaces_the_imbalance_margin() -> None:
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    a = DEFAULT_TRAINING_ASSUMPTIONS
    dropless = dataclasses.replace(a, moe_imbalance=2.0)
    capped = dataclasses.replace(a, moe_imbalance=2.0, moe_capacity_factor=1.0)
    balanced = dataclasses.replace(a, moe_imbalance=1.0)
    total = {x: sum(t.bytes for t in moe_tensors(SMALL_MOE, shape, x)) for x in (capped, balanced)}
    assert total[capped] == pytest.approx(total[balanced], rel=EXACT)
    assert sum(t.bytes for t in moe_tensors(SMALL_MOE, shape, dropless)) > total[balanced]


def test_expert_tp_gathers_tokens_and_splits_expert_width() -> None:
    # ETP 2: twice the tokens, half the FFN width: the dispatched tokens double, FFN unchanged.
    a = dataclasses.replace(DEFAULT_TRAINING_ASSUMPTIONS, moe_imbalance=1.0)
    one, two = (ActivationShape(seq_len=4096, micro_batch_size=1, etp=e) for e in (1, 2))
    by_name = {x: {t.name: t.bytes for t in moe_tensors(SMALL_MOE, x, a)} for x in (one, two)}
    assert by_name[two]["dispatched tokens"] == 2 * by_name[one]["dispatched tokens"]
    assert by_name[two]["expert gate and up"] == by_name[one]["expert gate and up"]


def test_mla_attention_by_hand() -> None:
    # DeepSeek-V3 per token (bf16): down-projection input 7168, q latent and its norm 2 x 1536,
    # kv latent and its norm 2 x 512, q and k 128 x 192 each, v and output 128 x 128 each.
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    per_token = 2 * (7168 + 2 * 1536 + 2 * 512 + 2 * 128 * 192 + 2 * 128 * 128)
    mla = sum(t.bytes for t in mla_tensors(DEEPSEEK_V3, shape))
    assert mla == pytest.approx(4096 * per_token, rel=EXACT)


def test_mla_latents_are_split_by_sequence_parallel_only() -> None:
    shape = ActivationShape(seq_len=4096, micro_batch_size=1, tp=8, sp=True)
    by_name = {t.name: t.bytes for t in mla_tensors(DEEPSEEK_V3, shape)}
    latent = by_name["key-value latent"] + by_name["key-value latent, normalised"]
    assert latent == 2 * 4096 / 8 * 512 * 2


def test_activation_bytes_halve_when_tp_doubles_with_sequence_parallel() -> None:
    a = DEFAULT_TRAINING_ASSUMPTIONS
    two, four = (ActivationShape(seq_len=4096, micro_batch_size=1, tp=t, sp=True) for t in (2, 4))
    gpt = block_activation_bytes(GPT_175B, "dense", two, a, "none")
    assert block_activation_bytes(GPT_175B, "dense", four, a, "none") == pytest.approx(gpt / 2)


def test_context_parallel_splits_every_tensor() -> None:
    a = DEFAULT_TRAINING_ASSUMPTIONS
    one, two = (ActivationShape(seq_len=8192, micro_batch_size=1, cp=c) for c in (1, 2))
    for model, kind in ((LLAMA3_8B, "dense"), (DEEPSEEK_V3, "moe"), (SMALL_MOE, "moe")):
        whole = block_activation_bytes(model, kind, one, a, "none")
        assert block_activation_bytes(model, kind, two, a, "none") == pytest.approx(whole / 2)


PYTORCH = PYTORCH_ASSUMPTIONS
MEGATRON = DEFAULT_TRAINING_ASSUMPTIONS


@pytest.mark.parametrize(
    ("assumptions", "h_per_token"),
    [
        pytest.param(MEGATRON, 17, id="megatron-fused-swiglu-17h"),
        pytest.param(PYTORCH, 20.5, id="measured-llama8b-eager-swiglu-20.5h"),
    ],
)
def test_eager_swiglu_saves_silu_of_the_gate_as_well(assumptions, h_per_token) -> None:
    # measured: validation/results.json llama8b-bf16-pure-s4096-b1 (one layer more: 20.5 h)
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    per_token = h_per_token * 4096 * 2 + 4 * 32  # bf16 elements + fp32 log-sum-exp per head
    layer = block_activation_bytes(LLAMA3_8B, "dense", shape, assumptions, "none")
    assert layer == pytest.approx(4096 * per_token, rel=EXACT)


@pytest.mark.parametrize(
    ("assumptions", "h_per_token"),
    [
        pytest.param(MEGATRON, 17, id="korthikanti2022-sp-saves-shards-17h-over-t"),
        pytest.param(PYTORCH, 26.5, id="measured-llama8b-tp4-sp-saves-gathered-26.5h-over-t"),
    ],
)
def test_pytorch_sequence_parallel_saves_the_gathered_projection_inputs(
    assumptions, h_per_token
) -> None:
    # measured: validation/results.json llama8b-tp4-bf16-pure-s4096-b1 (20.5 + 2 x 3 = 26.5)
    shape = ActivationShape(seq_len=4096, micro_batch_size=1, tp=4, sp=True)
    per_token = h_per_token * 4096 / 4 * 2 + 4 * 32 / 4
    layer = block_activation_bytes(LLAMA3_8B, "dense", shape, assumptions, "none")
    assert layer == pytest.approx(4096 * per_token, rel=EXACT)
    head = {t.name: t.elements for t in head_tensors(LLAMA3_8B, shape, assumptions)}
    gathered = assumptions is PYTORCH
    assert head["LM head input"] == 4096 * 4096 / (1 if gathered else 4)
    assert head["final norm input"] == 4096 * 4096 / 4


def test_unfused_swiglu_adds_one_ffn_tensor_to_routed_and_shared_experts() -> None:
    shape = ActivationShape(seq_len=4096, micro_batch_size=1)
    fused = dataclasses.replace(MEGATRON, moe_imbalance=1.0)
    eager = dataclasses.replace(fused, fused_swiglu=False)
    totals = [sum(t.bytes for t in moe_tensors(SMALL_MOE, shape, a)) for a in (fused, eager)]
    assert totals[1] - totals[0] == pytest.approx((8192 + 4096) * 512 * 2, rel=EXACT)


@given(
    seq=st.integers(1, 32768),
    extra=st.integers(1, 32768),
    flash=st.booleans(),
    dropout=st.booleans(),
    recompute=st.sampled_from(["none", "selective", "full"]),
    tp=st.sampled_from([1, 2, 8]),
    cp=st.sampled_from([1, 2, 4]),
    model=st.sampled_from([GPT_175B, LLAMA3_8B, DEEPSEEK_V3, SMALL_MOE]),
)
def test_a_longer_sequence_never_lowers_activations(
    seq, extra, flash, dropout, recompute, tp, cp, model
) -> None:
    a = dataclasses.replace(DEFAULT_TRAINING_ASSUMPTIONS, flash_attention=flash, dropout=dropout)
    kind = "moe" if model.is_moe else "dense"
    short, long = (
        ActivationShape(seq_len=n, micro_batch_size=1, tp=tp, sp=True, cp=cp)
        for n in (seq, seq + extra)
    )
    assert block_activation_bytes(model, kind, long, a, recompute) >= block_activation_bytes(
        model, kind, short, a, recompute
    )


def test_each_nemotron_h_stage_saves_its_own_blocks() -> None:
    from architecture_configs import NEMOTRON_H_8B

    from explorer.hf_config import model_from_config
    from explorer.memory.assumptions import TrainingAssumptions
    from explorer.memory.stage_activations import activation_ledger
    from explorer.memory.tensors import ActivationShape
    from explorer.partition import StagePlan

    # the 8B's shapes with the pattern "**M-": attention, attention, Mamba2, MLP
    model = model_from_config(NEMOTRON_H_8B | {"hybrid_override_pattern": "**M-",
                                               "num_hidden_layers": 4})  # fmt: skip
    x = ActivationShape(seq_len=1024, micro_batch_size=1, tp=1, sp=False, cp=1, etp=1,
                        dtype_bytes=2)  # fmt: skip
    a = TrainingAssumptions()  # FlashAttention, no dropout
    first = StagePlan(stage=0, layers=(0, 1), num_moe_layers=0, has_embedding=True,
                      has_head=False)  # fmt: skip
    last = StagePlan(stage=1, layers=(2, 3), num_moe_layers=0, has_embedding=False,
                     has_head=True)  # fmt: skip
    # one attention block, s = 1024, h = 4096, 32 heads and 8 KV heads of 128, bf16: norm input,
    # QKV input, q and the output s h x 2 bytes (8,388,608 each), k and v 1024 x 1024 x 2
    # (2,097,152 each), fp32 log-sum-exp 32 x 1024 x 4 = 131,072: 37,879,808 bytes
    attention = 4 * 8_388_608 + 2 * 2_097_152 + 131_072
    stage0 = activation_ledger(model, first, x, a, "none").blocks
    assert stage0 == pytest.approx(2 * attention, rel=1e-12)
    # the two stages together save what the four blocks save, the mix split as the blocks are
    stage1 = activation_ledger(model, last, x, a, "none").blocks
    mean = activation_ledger(model, StagePlan(0, (0, 1, 2, 3), 0, True, True), x, a, "none")
    assert stage0 + stage1 == pytest.approx(mean.blocks, rel=1e-12)
    # the model-wide mix charged each stage half the four blocks (the MLP of 21,504 is heavy)
    assert stage1 > mean.blocks / 2 > stage0
