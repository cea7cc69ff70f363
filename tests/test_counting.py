"""Parameter counts and FLOPs per token against hand-worked numbers and published formulas."""

from __future__ import annotations

import pytest
from hand_models import DEEPSEEK_V3
from hand_models import LLAMA_LIKE_8B as LLAMA3_8B
from hypothesis import given
from hypothesis import strategies as st

from explorer.counting import active_param_counts, attention_params, param_counts
from explorer.flops import hardware_flops_per_token, model_flops_per_token
from explorer.model_size import dense_model_for_params
from explorer.specs import ModelSpec

REL = 1e-9  # exact integer arithmetic: only float rounding may differ


def gpt_layer_model(h: int, layers: int, heads: int, vocab: int) -> ModelSpec:
    """The GPT layer of Korthikanti et al. 2022: MHA, GELU MLP of 4h, LayerNorm."""
    return ModelSpec(
        num_hidden_layers=layers,
        hidden_size=h,
        num_attention_heads=heads,
        intermediate_size=4 * h,
        ffn_kind="gelu",
        vocab_size=vocab,
        norm_kind="layernorm",
    )


def test_llama3_8b_count_matches_the_hand_sum():
    # 32 x (q 4096^2 + k,v 2*4096*1024 + o 4096^2 + MLP 3*4096*14336 + 2 norms 4096)
    per_layer = 16_777_216 + 8_388_608 + 16_777_216 + 176_160_768 + 8_192
    expected = 32 * per_layer + 2 * 128_256 * 4096 + 4096  # embeddings, LM head, final norm
    assert param_counts(LLAMA3_8B).total == expected == 8_030_261_248


def test_dense_model_is_all_active():
    assert active_param_counts(LLAMA3_8B) == param_counts(LLAMA3_8B)


def test_gqa_attention_is_smaller_than_mha():
    mha = ModelSpec(**{**_fields(LLAMA3_8B), "num_key_value_heads": 32})
    assert attention_params(LLAMA3_8B) == attention_params(mha) - 2 * 4096 * 3072


def test_mla_attention_matches_the_hand_sum():
    h, a = 7168, 128
    q = h * 1536 + 1536 + 1536 * a * 192  # down, norm, up to 128 heads of (128 nope + 64 rope)
    kv = h * (512 + 64) + 512 + 512 * a * (128 + 128)  # latent + rope key, norm, up to k and v
    out = a * 128 * h
    assert attention_params(DEEPSEEK_V3) == q + kv + out == 187_107_328


@pytest.mark.parametrize(
    ("count", "published"),
    [
        pytest.param("total", 671e9, id="deepseek-v3-report-671B-total"),
        pytest.param("active", 37e9, id="deepseek-v3-report-37B-active"),
    ],
)
def test_deepseek_v3_by_hand_matches_its_report(count, published):
    counts = param_counts(DEEPSEEK_V3) if count == "total" else active_param_counts(DEEPSEEK_V3)
    tolerance = 0.005 if count == "total" else 0.03
    assert counts.total_without_mtp == pytest.approx(published, rel=tolerance)


def test_deepseek_v3_mtp_module_is_about_11_6_billion_without_shared_embeddings():
    # The hub's 14B adds copies of the embedding and head (2 x 0.93B) that training shares.
    assert param_counts(DEEPSEEK_V3).mtp == pytest.approx(11.6e9, rel=0.01)


def test_model_flops_match_korthikanti_formula():
    # Korthikanti et al. 2022 sec. 6: 72 B s L h^2 (1 + s/(6h) + V/(12hL)) per iteration.
    h, layers, s, vocab = 12288, 96, 2048, 51200
    model = gpt_layer_model(h, layers, 96, vocab)
    expected = 72 * s * layers * h**2 * (1 + s / (6 * h) + vocab / (12 * h * layers)) / s
    assert model_flops_per_token(model, s, causal=False) == pytest.approx(expected, rel=REL)


def test_full_recompute_flops_match_narayanan_eq3():
    # Narayanan et al. 2021 (arXiv:2104.04473) Eq. 3: 96 B s L h^2 (1 + s/(6h) + V/(16hL)).
    h, layers, s, vocab = 8192, 48, 2048, 51200
    model = gpt_layer_model(h, layers, 64, vocab)
    expected = 96 * s * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * h * layers)) / s
    assert hardware_flops_per_token(model, s, "full", causal=False) == pytest.approx(
        expected, rel=REL
    )


def test_causal_halving_removes_half_the_attention_core():
    s = 8192
    full, causal = (model_flops_per_token(LLAMA3_8B, s, c) for c in (False, True))
    core = 3 * 32 * 2 * s * 32 * 128 * 2  # 3 x layers x 2 s (a d_qk + a d_v)
    assert full - causal == pytest.approx(core / 2, rel=REL)


def test_model_flops_are_close_to_six_n_for_short_sequences():
    # Kaplan et al. 2020: C ~ 6 N D with N the non-embedding parameters (plus the LM head here).
    counts = param_counts(LLAMA3_8B)
    n = counts.total - counts.embeddings
    assert model_flops_per_token(LLAMA3_8B, 128) == pytest.approx(6 * n, rel=0.01)


def test_moe_flops_count_only_the_routed_top_k():
    dense_part = model_flops_per_token(DEEPSEEK_V3, 4096)
    active = active_param_counts(DEEPSEEK_V3)
    matmul_params = active.total - active.embeddings - active.norms
    assert dense_part > 6 * matmul_params * 0.9
    assert dense_part < 6 * param_counts(DEEPSEEK_V3).total / 10


@pytest.mark.parametrize("target", [1e9, 3e9, 8e9, 30e9, 70e9, 175e9, 405e9, 1e12, 2e12])
def test_size_generator_lands_within_three_percent(target):
    model = dense_model_for_params(target)
    assert param_counts(model).total == pytest.approx(target, rel=0.03)
    assert 40 <= model.hidden_size / model.num_hidden_layers <= 250


def test_size_generator_rejects_absurd_sizes():
    with pytest.raises(ValueError, match="between"):
        dense_model_for_params(1e14)


@given(
    layers=st.integers(1, 200),
    heads_log=st.integers(0, 7),
    head_dim=st.sampled_from([64, 96, 128]),
    kv_log=st.integers(0, 7),
    ffn=st.integers(1, 100_000),
    vocab=st.integers(1, 300_000),
    experts=st.sampled_from([0, 8, 64]),
    top_k=st.integers(1, 8),
)
def test_random_valid_models_count_consistently(
    layers, heads_log, head_dim, kv_log, ffn, vocab, experts, top_k
):
    heads = 2**heads_log
    model = ModelSpec(
        num_hidden_layers=layers,
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        num_key_value_heads=2 ** min(kv_log, heads_log),
        intermediate_size=ffn,
        vocab_size=vocab,
        n_routed_experts=experts,
        num_experts_per_tok=min(top_k, experts) if experts else 0,
        moe_intermediate_size=ffn if experts else 0,
    )
    total, active = param_counts(model), active_param_counts(model)
    assert 0 < active.total <= total.total
    assert total.total == sum(total.as_dict().values())
    assert model_flops_per_token(model, 1024) > 0


def _fields(model: ModelSpec) -> dict:
    from dataclasses import fields

    return {f.name: getattr(model, f.name) for f in fields(model)}


def _preset_cases(kind: str) -> list:
    from explorer.presets import model_entry, model_ids

    cases = []
    for model_id in model_ids():
        entry = model_entry(model_id)
        official = entry.official_total_params if kind == "total" else entry.official_active_params
        if official:
            cases.append(pytest.param(model_id, official, id=f"{model_id}-{entry.params_source}"))
    return cases


TOTAL_TOLERANCE = 0.005  # issue 2: every preset within 0.5% of its published total
ACTIVE_TOLERANCE = 0.03  # and MoE active counts within 3%


@pytest.mark.parametrize(("model_id", "official"), _preset_cases("total"))
def test_every_preset_total_matches_its_published_count(model_id, official):
    from explorer.presets import load_model

    total = param_counts(load_model(model_id)).total_without_mtp
    assert total == pytest.approx(official, rel=TOTAL_TOLERANCE)


@pytest.mark.parametrize(("model_id", "official"), _preset_cases("active"))
def test_every_moe_preset_active_count_matches_its_published_count(model_id, official):
    from explorer.counting import active_params_as_published
    from explorer.presets import load_model, model_entry

    excludes = model_entry(model_id).active_excludes_embedding
    active = active_params_as_published(load_model(model_id), excludes)
    assert active == pytest.approx(official, rel=ACTIVE_TOLERANCE)


def test_deepseek_v3_preset_equals_the_hand_built_spec_in_counts():
    from explorer.presets import load_model

    assert param_counts(load_model("deepseek-v3")) == param_counts(DEEPSEEK_V3)
