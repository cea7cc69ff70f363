"""Hugging Face config.json to ModelSpec: hand-checked mappings and helpful errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from architecture_configs import ARCHITECTURE_CONFIGS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.hf_config import (
    ARCHITECTURES,
    ConfigError,
    load_config_file,
    model_from_config,
    model_from_json_text,
)
from explorer.specs import ModelSpec

MODELS = Path(__file__).resolve().parent.parent / "presets" / "models"


def preset_config(model_id: str) -> dict[str, Any]:
    return json.loads((MODELS / f"{model_id}.json").read_text())


def preset_spec(model_id: str) -> ModelSpec:
    return model_from_config(preset_config(model_id), model_id)


# Tiny dense configs, one per architecture, for the edge cases below.
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "intermediate_size": 512,
    "vocab_size": 1000,
}
QWEN3_MOE = LLAMA | {
    "architectures": ["Qwen3MoeForCausalLM"],
    "num_hidden_layers": 8,
    "num_experts": 16,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 64,
}
# Qwen1.5-MoE-A2.7B's shape (huggingface.co/Qwen/Qwen1.5-MoE-A2.7B, config.json).
QWEN2_MOE = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "hidden_size": 2048,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "intermediate_size": 5632,
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "vocab_size": 151936,
}


# ---------------------------------------------------------------- hand-checked mappings


def test_llama_3_1_8b_maps_to_gqa_with_eight_kv_heads_and_a_128k_vocabulary() -> None:
    spec = preset_spec("llama-3.1-8b")
    assert (spec.num_hidden_layers, spec.hidden_size, spec.num_attention_heads) == (32, 4096, 32)
    assert (spec.kv_heads, spec.head_size, spec.intermediate_size) == (8, 128, 14336)
    assert spec.vocab_size == 128256  # not the paper's 128,000
    assert spec.ffn_kind == "swiglu" and spec.norm_kind == "rmsnorm"
    assert not (spec.tie_word_embeddings or spec.attention_bias or spec.mlp_bias)
    assert spec.max_position_embeddings == 131072 and not spec.is_moe


def test_mistral_7b_maps_to_a_bias_free_gqa_model() -> None:
    spec = preset_spec("mistral-7b")
    assert (spec.num_hidden_layers, spec.hidden_size, spec.kv_heads) == (32, 4096, 8)
    assert (spec.intermediate_size, spec.vocab_size) == (14336, 32000)
    assert not (spec.attention_bias or spec.attention_out_bias or spec.is_moe)


def test_mixtral_8x7b_has_eight_experts_top_two_in_every_layer() -> None:
    spec = preset_spec("mixtral-8x7b")
    assert (spec.n_routed_experts, spec.num_experts_per_tok) == (8, 2)
    assert spec.moe_intermediate_size == 14336  # intermediate_size is one expert's width
    assert spec.n_shared_experts == 0 and spec.num_moe_layers == 32


def test_qwen2_5_72b_has_qkv_biases_although_its_config_does_not_say_so() -> None:
    spec = preset_spec("qwen2.5-72b")
    assert "attention_bias" not in preset_config("qwen2.5-72b")
    assert spec.attention_bias and not spec.attention_out_bias
    assert (spec.num_hidden_layers, spec.hidden_size, spec.kv_heads) == (80, 8192, 8)
    assert (spec.intermediate_size, spec.vocab_size) == (29568, 152064)


def test_qwen3_32b_has_head_dim_128_unlike_hidden_over_heads() -> None:
    spec = preset_spec("qwen3-32b")
    assert spec.hidden_size // spec.num_attention_heads == 80
    assert (spec.head_size, spec.num_attention_heads, spec.kv_heads) == (128, 64, 8)
    assert spec.qk_norm and not spec.attention_bias and not spec.is_moe


def test_qwen3_235b_a22b_routes_8_of_128_experts_in_all_94_layers() -> None:
    spec = preset_spec("qwen3-235b-a22b")
    assert (spec.n_routed_experts, spec.num_experts_per_tok) == (128, 8)
    assert (spec.moe_intermediate_size, spec.num_moe_layers) == (1536, 94)
    assert (spec.head_size, spec.kv_heads) == (128, 4) and spec.qk_norm


def test_deepseek_v3_keeps_its_mla_ranks_and_three_dense_layers() -> None:
    spec = preset_spec("deepseek-v3")
    assert spec.is_mla and (spec.q_lora_rank, spec.kv_lora_rank) == (1536, 512)
    mla = (spec.qk_rope_head_dim, spec.qk_nope_head_dim, spec.v_head_dim)
    assert mla == (64, 128, 128)
    assert (spec.n_routed_experts, spec.n_shared_experts, spec.num_experts_per_tok) == (256, 1, 8)
    assert (spec.first_k_dense_replace, spec.num_moe_layers) == (3, 58)
    assert spec.router_bias  # topk_method noaux_tc
    assert spec.num_nextn_predict_layers == 1 and spec.intermediate_size == 18432


def test_kimi_k2_reuses_the_deepseek_v3_mapping_with_384_experts() -> None:
    spec = preset_spec("kimi-k2")
    assert preset_config("kimi-k2")["model_type"] == "kimi_k2"
    assert (spec.n_routed_experts, spec.num_experts_per_tok, spec.num_attention_heads) == (
        384,
        8,
        64,
    )
    assert (spec.first_k_dense_replace, spec.num_moe_layers, spec.vocab_size) == (1, 60, 163840)


def test_gpt2_has_layernorm_biases_learned_positions_and_a_tied_head() -> None:
    spec = preset_spec("gpt2")
    assert (spec.num_hidden_layers, spec.hidden_size, spec.num_attention_heads) == (12, 768, 12)
    assert spec.intermediate_size == 4 * 768 and spec.ffn_kind == "gelu"
    assert spec.norm_kind == "layernorm" and spec.learned_position_embeddings
    assert spec.attention_bias and spec.attention_out_bias and spec.mlp_bias
    assert spec.tie_word_embeddings and spec.max_position_embeddings == 1024


def test_gpt3_175b_has_the_paper_table_2_1_dimensions() -> None:
    spec = preset_spec("gpt3-175b")
    shape = (spec.num_hidden_layers, spec.hidden_size, spec.num_attention_heads, spec.head_size)
    assert shape == (96, 12288, 96, 128)
    assert spec.max_position_embeddings == 2048 and spec.vocab_size == 50257


def test_qwen2_moe_has_a_shared_expert_and_qkv_biases() -> None:
    spec = model_from_config(QWEN2_MOE)
    assert (spec.n_routed_experts, spec.num_experts_per_tok) == (60, 4)
    assert (spec.n_shared_experts, spec.shared_ffn_size) == (1, 5632)
    assert spec.attention_bias and spec.num_moe_layers == 24


# ---------------------------------------------------------------- defaults and variants


def test_a_missing_head_dim_means_128_for_qwen3_but_hidden_over_heads_for_llama() -> None:
    qwen3 = model_from_config(LLAMA | {"architectures": ["Qwen3ForCausalLM"]})
    llama = model_from_config(LLAMA)
    assert (qwen3.head_size, llama.head_size) == (128, 32)


def test_llama_attention_bias_puts_biases_on_q_k_v_and_the_output() -> None:
    spec = model_from_config(LLAMA | {"attention_bias": True, "mlp_bias": True})
    assert spec.attention_bias and spec.attention_out_bias and spec.mlp_bias


@pytest.mark.parametrize(
    ("architecture", "tied"),
    [("LlamaForCausalLM", False), ("Qwen3ForCausalLM", False), ("MistralForCausalLM", False)],
)
def test_tie_word_embeddings_defaults_to_the_architectures_default(
    architecture: str, tied: bool
) -> None:
    assert model_from_config(LLAMA | {"architectures": [architecture]}).tie_word_embeddings is tied


def test_gpt2_ties_its_head_and_uses_4h_when_the_config_is_silent() -> None:
    spec = model_from_config(
        {"architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_layer": 2, "n_head": 4}
        | {"vocab_size": 100}
    )
    assert spec.tie_word_embeddings and spec.intermediate_size == 256


def test_a_config_without_architectures_is_read_by_its_model_type() -> None:
    config = preset_config("kimi-k2")
    del config["architectures"]
    assert model_from_config(config).n_routed_experts == 384


def test_qwen_moe_decoder_sparse_step_two_makes_every_second_layer_moe() -> None:
    spec = model_from_config(QWEN3_MOE | {"decoder_sparse_step": 2})
    moe_layers = [i for i in range(8) if spec.is_moe_layer(i)]
    assert moe_layers == [1, 3, 5, 7]  # transformers: (i + 1) % step == 0


def test_qwen_moe_mlp_only_layers_at_the_start_become_dense_layers() -> None:
    spec = model_from_config(QWEN3_MOE | {"mlp_only_layers": [0, 1]})
    assert spec.first_k_dense_replace == 2 and spec.num_moe_layers == 6


def test_qwen_moe_with_every_layer_dense_is_a_dense_model() -> None:
    assert not model_from_config(QWEN3_MOE | {"mlp_only_layers": list(range(8))}).is_moe


def test_a_file_is_named_after_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "My-Model-7B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    assert load_config_file(folder / "config.json").name == "My-Model-7B"


def test_uploaded_bytes_parse_like_text() -> None:
    text = json.dumps(LLAMA)
    assert model_from_json_text(text.encode()) == model_from_json_text(text)


# ---------------------------------------------------------------- helpful errors


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("{not json", ("not valid JSON",), id="not-json"),
        pytest.param("[1, 2]", ("JSON object", "a list"), id="list-instead-of-object"),
        pytest.param(
            json.dumps(LLAMA | {"architectures": ["BertModel"]}),
            ("unknown architecture", "BertModel", "LlamaForCausalLM", "DeepseekV3ForCausalLM"),
            id="unknown-architecture",
        ),
        pytest.param(
            json.dumps({k: v for k, v in LLAMA.items() if k != "hidden_size"}),
            ("hidden_size", "LlamaForCausalLM"),
            id="missing-hidden-size",
        ),
        pytest.param(
            json.dumps(LLAMA | {"hidden_size": 0}), ("hidden_size", "positive", "0"), id="zero"
        ),
        pytest.param(
            json.dumps(LLAMA | {"num_hidden_layers": -2}),
            ("num_hidden_layers", "positive", "-2"),
            id="negative-layers",
        ),
        pytest.param(
            json.dumps(LLAMA | {"hidden_size": "4096"}),
            ("hidden_size", "whole number"),
            id="string-for-a-number",
        ),
        pytest.param(
            json.dumps(LLAMA | {"num_key_value_heads": 3}),
            ("num_key_value_heads",),
            id="heads-not-a-multiple-of-kv-heads",
        ),
        pytest.param(
            json.dumps({"hidden_size": 4}), ("names no architecture",), id="no-architecture"
        ),
        pytest.param(
            json.dumps(QWEN3_MOE | {"mlp_only_layers": [5]}),
            ("mlp_only_layers",),
            id="unrepresentable-moe-layers",
        ),
    ],
)
def test_bad_configs_raise_one_helpful_sentence(text: str, words: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as caught:
        model_from_json_text(text)
    message = str(caught.value)
    assert all(word in message for word in words), message
    assert "\n" not in message and message.endswith(".")


def test_a_missing_file_raises_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path / "absent" / "config.json")


def test_config_error_is_a_value_error_for_the_cli() -> None:
    assert issubclass(ConfigError, ValueError)


# ---------------------------------------------------------------- property: nothing else escapes

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=8,
)
BASES = [
    *(preset_config(p.stem) for p in sorted(MODELS.glob("*.json"))),
    QWEN2_MOE,
    QWEN3_MOE,
    *ARCHITECTURE_CONFIGS,  # issue 18 (tests/architecture_configs.py)
]


@st.composite
def mutated_configs(draw: st.DrawFn) -> dict[str, Any]:
    config = dict(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        key = draw(st.sampled_from(sorted(config)) | st.text(max_size=10))
        if draw(st.booleans()) and key in config:
            del config[key]
        else:
            config[key] = draw(JSON_VALUES | st.integers(min_value=-3, max_value=300))
    return config


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_mutated_configs_either_parse_or_raise_config_error(config: dict[str, Any]) -> None:
    try:
        spec = model_from_config(config)
    except ConfigError as error:
        assert "\n" not in str(error)
    else:
        assert isinstance(spec, ModelSpec)


def test_every_supported_architecture_has_a_preset_or_a_test_config() -> None:
    used = {c.get("architectures", [""])[0] for c in BASES}
    assert set(ARCHITECTURES) <= used
