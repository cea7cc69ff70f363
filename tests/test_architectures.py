"""Architectures of issue 18 from their config.json: official parameter counts, sliding-window
KV cache and attention FLOPs, and one-sentence errors naming the field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from architecture_configs import (
    BLOOM_176B,
    BLOOM_560M,
    DEEPSEEK_V2,
    DEEPSEEK_V2_LITE,
    DEEPSEEK_V32,
    GEMMA2_2B,
    GEMMA2_9B,
    GEMMA2_27B,
    GEMMA3_1B,
    GEMMA3_12B,
    GLM45,
    GLM45_AIR,
    GPT_OSS_20B,
    GPT_OSS_120B,
    LLAMA4_MAVERICK,
    LLAMA4_SCOUT,
    MPT_7B,
    NEMOTRON4_340B,
    NEMOTRON_H_8B,
    NEMOTRON_H_47B,
    NEMOTRON_H_56B,
    PHI3_MINI,
    PHI4,
    PHI35_MOE,
    QWEN3_NEXT,
)

from explorer.counting import (
    active_param_counts,
    layer_params,
    linear_attention_params,
    mamba_params,
    param_counts,
)
from explorer.flops import (
    block_forward_flops,
    decode_context,
    decode_keys_read,
    forward_flops_per_token,
    indexer_flops_per_key,
    keys_per_query,
    keys_per_query_chunked,
)
from explorer.hf_config import ConfigError, model_from_config
from explorer.memory.serving import (
    MemoryAssumptions,
    ServingLayout,
    kv_capacity_tokens,
    max_concurrency,
    stage_shapes,
)
from explorer.memory.serving_layout import (
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    kv_cache_bytes_per_sequence,
)
from explorer.presets import load_gpu, load_model
from explorer.specs import Layout, ServingWorkload

PRESET_DIR = Path(__file__).resolve().parent.parent / "presets" / "models"

# Exact counts: the safetensors parameter count the Hugging Face hub shows for the checkpoint
# (or the model card's exact figure, BLOOM: "176,247,271,424 parameters").
EXACT = [
    (GEMMA2_2B, 2_614_341_888),  # google/gemma-2-2b
    (GEMMA2_9B, 9_241_705_984),  # google/gemma-2-9b
    (GEMMA2_27B, 27_227_128_320),  # google/gemma-2-27b
    (GEMMA3_1B, 999_885_952),  # google/gemma-3-1b-pt
    (PHI3_MINI, 3_821_079_552),  # microsoft/Phi-3-mini-4k-instruct
    (BLOOM_176B, 176_247_271_424),  # bigscience/bloom model card
    (BLOOM_560M, 559_214_592),  # bigscience/bloom-560m model card
    (MPT_7B, 6_649_286_656),  # mosaicml/mpt-7b
]


@pytest.mark.parametrize(("config", "official"), EXACT)
def test_exact_official_counts(config: dict, official: int) -> None:
    assert param_counts(model_from_config(config)).total == official


# Rounded counts from model cards and reports: (config, total, active or None, relative tolerance).
ROUNDED = [
    (PHI4, 14.7e9, None, 0.005),  # microsoft/phi-4 hub count 14.7B
    (PHI35_MOE, 41.9e9, 6.6e9, 0.01),  # Phi-3.5-MoE model card: 41.9B total, 6.6B active
    (NEMOTRON4_340B, 340e9, None, 0.005),  # Nemotron-4 340B report (arXiv:2406.11704)
    (DEEPSEEK_V2, 236e9, 21e9, 0.02),  # DeepSeek-V2 report abstract: 236B total, 21B active
]


@pytest.mark.parametrize(("config", "total", "active", "tolerance"), ROUNDED)
def test_rounded_official_counts(
    config: dict, total: float, active: float | None, tolerance: float
) -> None:
    model = model_from_config(config)
    assert param_counts(model).total_without_mtp == pytest.approx(total, rel=tolerance)
    if active is not None:
        assert active_param_counts(model).total_without_mtp == pytest.approx(active, rel=tolerance)


def _active_without_embeddings(config: dict) -> float:
    counts = active_param_counts(model_from_config(config))
    return counts.total_without_mtp - counts.embeddings - counts.lm_head


def test_counts_that_leave_out_embeddings() -> None:
    # GLM-4.5 report Table 1: 355B total / 32B active; GLM-4.5-Air 106B / 12B. The active
    # figures match without embedding and LM head (33.6B and 13.4B with them).
    assert param_counts(model_from_config(GLM45)).total_without_mtp == pytest.approx(
        355e9, rel=0.01
    )
    assert _active_without_embeddings(GLM45) == pytest.approx(32e9, rel=0.01)
    assert param_counts(model_from_config(GLM45_AIR)).total_without_mtp == pytest.approx(
        106e9, rel=0.01
    )
    assert _active_without_embeddings(GLM45_AIR) == pytest.approx(12e9, rel=0.02)
    # DeepSeek-V2-Lite card: 15.7B total, 2.4B activated (again without one embedding matrix).
    lite = model_from_config(DEEPSEEK_V2_LITE)
    assert param_counts(lite).total == pytest.approx(15.7e9, rel=0.005)
    active = active_param_counts(lite)
    assert active.total - active.embeddings == pytest.approx(2.4e9, rel=0.03)


def test_gemma3_vision_left_out_and_non_embedding_matches_report() -> None:
    # Gemma 3 report (arXiv:2503.19786) Table 1: 12B has 10,759M non-embedding parameters.
    counts = param_counts(model_from_config(GEMMA3_12B))
    assert counts.total - counts.embeddings == pytest.approx(10_759e6, rel=1e-4)


def test_gemma_blocks() -> None:
    g2, g3 = model_from_config(GEMMA2_9B), model_from_config(GEMMA3_1B)
    assert g2.tie_word_embeddings and g2.post_norms and g2.head_size == 256
    assert g2.window_layers == tuple(range(0, 42, 2))  # even blocks local, odd global
    assert g3.qk_norm and g3.sliding_window == 512
    assert [i for i in range(26) if g3.attention_window(i) is None] == [5, 11, 17, 23]


def test_sliding_window_kv_cache_is_the_window() -> None:
    g3 = model_from_config(GEMMA3_1B)  # 22 local blocks of window 512, 4 global blocks
    per_layer = kv_bytes_per_token_per_layer(g3, "bf16")
    assert per_layer == 2 * 1 * 256 * 2  # K and V, one KV head of 256, 2 bytes
    assert kv_cache_bytes_per_sequence(g3, "bf16", 32768) == per_layer * (22 * 512 + 4 * 32768)
    # Shorter than the window: every block keeps every token.
    assert kv_cache_bytes_per_sequence(g3, "bf16", 300) == per_layer * 26 * 300
    mistral = load_model("mistral-7b")  # sliding_window 4096 on all 32 blocks
    assert mistral.sliding_window == 4096
    mistral_layer = kv_bytes_per_token_per_layer(mistral, "bf16")
    assert kv_cache_bytes_per_sequence(mistral, "bf16", 32768) == mistral_layer * 32 * 4096


def test_sliding_window_attention_flops() -> None:
    # Causal, s = 8, w = 4: keys per query 1, 2, 3, 4, 4, 4, 4, 4 -> mean 26 / 8 = 3.25.
    assert keys_per_query(8, 4) == pytest.approx(3.25)
    assert keys_per_query(8, None) == 4.0 and keys_per_query(8, 4, causal=False) == 4.0
    g2 = model_from_config(GEMMA2_9B)
    full = dataclasses.replace(g2, sliding_window=None, window_layers=None)
    s, w = 8192, 4096
    ratio = (
        forward_flops_per_token(g2, s).attention_core
        / forward_flops_per_token(full, s).attention_core
    )
    # 21 local blocks at keys_per_query(s, w) and 21 global at s / 2.
    assert ratio == pytest.approx((21 * keys_per_query(s, w) + 21 * s / 2) / (42 * s / 2))


def test_qwen2_sliding_window_layers() -> None:
    config = {
        "architectures": ["Qwen2ForCausalLM"], "hidden_size": 1024, "num_hidden_layers": 8,
        "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 2048,
        "vocab_size": 1000, "use_sliding_window": True, "sliding_window": 256,
        "max_window_layers": 6,
    }  # fmt: skip
    assert model_from_config(config).window_layers == (6, 7)
    off = model_from_config(config | {"use_sliding_window": False})
    assert off.sliding_window is None


def test_qwen3_sliding_window_where_configured() -> None:
    # Qwen3-32B's published config.json sets use_sliding_window false (the preset: no window);
    # switched on, blocks from max_window_layers on keep only the window (transformers Qwen3Config).
    config = json.loads((PRESET_DIR / "qwen3-32b.json").read_text())
    assert model_from_config(config).sliding_window is None
    on = config | {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 48}
    model = model_from_config(on)
    assert model.window_layers == tuple(range(48, 64))
    per_layer = kv_bytes_per_token_per_layer(model, "bf16")
    assert per_layer == 2 * 8 * 128 * 2
    assert kv_cache_bytes_per_sequence(model, "bf16", 32768) == per_layer * (48 * 32768 + 16 * 4096)
    # Qwen3-MoE reads the same fields
    moe = json.loads((PRESET_DIR / "qwen3-235b-a22b.json").read_text())
    moe_on = moe | {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 90}
    assert model_from_config(moe_on).window_layers == (90, 91, 92, 93)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (GEMMA3_1B | {"layer_types": ["chunked_attention"] * 26}, "field 'layer_types' has"),
        (GEMMA3_1B | {"layer_types": ["full_attention"] * 3}, "'layer_types' lists 3 layers"),
        (NEMOTRON4_340B | {"hidden_act": "silu"}, "field 'hidden_act' is 'silu'"),
        (MPT_7B | {"attn_config": {"attn_type": "grouped_query_attention"}}, "attn_type"),
        ({k: v for k, v in GEMMA2_9B.items() if k != "head_dim"} | {"head_dim": 0}, "head_dim"),
        ({**BLOOM_560M, "n_embed": None}, "'hidden_size' (or 'n_embed')"),
        (
            {"architectures": ["Gemma3ForConditionalGeneration"], "text_config": {}},
            "has no field 'hidden_size'",
        ),
    ],
)
def test_bad_configs_name_the_field(config: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")) as err:
        model_from_config(config)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("model_type", "closest"),
    [
        ("falcon", "BloomForCausalLM"),
        ("qwen3_5_moe", "Qwen3NextForCausalLM"),
        ("gemma", "Gemma2ForCausalLM"),
        ("qwen2_vl", "Qwen2ForCausalLM"),
    ],
)
def test_unknown_model_type_names_the_closest(model_type: str, closest: str) -> None:
    with pytest.raises(ConfigError, match=f"closest supported: {closest}"):
        model_from_config({"model_type": model_type, "hidden_size": 8})


@pytest.mark.parametrize(
    ("config", "total", "active"),
    [
        # gpt-oss model card (arXiv:2508.10925) Table 1: 116.83B / 5.13B and 20.91B / 3.61B;
        # its active count leaves out the embedding (the unembedding is in).
        (GPT_OSS_120B, 116.83e9, 5.13e9),
        (GPT_OSS_20B, 20.91e9, 3.61e9),
    ],
)
def test_gpt_oss_counts(config: dict, total: float, active: float) -> None:
    model = model_from_config(config)
    assert param_counts(model).total == pytest.approx(total, abs=0.005e9)
    counts = active_param_counts(model)
    assert counts.total - counts.embeddings == pytest.approx(active, abs=0.005e9)
    # Sinks: one per head and block; every block MoE with biased experts and router.
    assert (
        param_counts(model).attention
        - param_counts(dataclasses.replace(model, attention_sinks=False)).attention
        == 64 * model.num_hidden_layers
    )
    assert model.num_moe_layers == model.num_hidden_layers
    assert model.attention_window(0) == 128 and model.attention_window(1) is None


def test_llama4_counts_and_layout() -> None:
    # Llama 4 model cards: Scout 17B active / 109B total, Maverick 17B active / 400B total.
    # Scout's 109B includes the vision encoder, which this tool leaves out (107.8B here).
    scout, maverick = model_from_config(LLAMA4_SCOUT), model_from_config(LLAMA4_MAVERICK)
    assert param_counts(maverick).total == pytest.approx(400e9, rel=0.005)
    assert param_counts(scout).total == pytest.approx(109e9, rel=0.015)
    for model in (scout, maverick):
        assert active_param_counts(model).total == pytest.approx(17e9, rel=0.015)
        assert model.shared_ffn_size == 8192
    assert scout.num_moe_layers == 48
    assert [i for i in range(6) if maverick.is_moe_layer(i)] == [1, 3, 5]
    # Dense blocks of Maverick use intermediate_size_mlp (16384), experts intermediate_size.
    assert param_counts(maverick).mlp == 24 * 3 * 5120 * 16384
    # Chunked attention on three of every four blocks (the fourth is global NoPE).
    assert [i for i in range(8) if scout.attention_window(i) is None] == [3, 7]


def test_chunked_attention_kv_and_flops() -> None:
    # Causal chunks of 4 over 10 tokens: 1+2+3+4, 1+2+3+4, 1+2 -> 23 keys / 10 queries.
    assert keys_per_query_chunked(10, 4) == pytest.approx(2.3)
    scout = model_from_config(LLAMA4_SCOUT)
    per_layer = kv_bytes_per_token_per_layer(scout, "bf16")
    # 36 chunked blocks hold at most one chunk (8192 tokens); 12 global blocks hold them all.
    assert kv_cache_bytes_per_sequence(scout, "bf16", 65536) == per_layer * (36 * 8192 + 12 * 65536)
    full = dataclasses.replace(scout, sliding_window=None, window_layers=None)
    s = 65536
    ratio = (
        forward_flops_per_token(scout, s).attention_core
        / forward_flops_per_token(full, s).attention_core
    )
    assert ratio == pytest.approx((36 * (8192 + 1) / 2 + 12 * s / 2) / (48 * s / 2))


def test_llama4_unsupported_moe_pattern_names_the_field() -> None:
    text = LLAMA4_MAVERICK["text_config"] | {"moe_layers": [0, 1, 2]}
    with pytest.raises(ConfigError, match="field 'moe_layers'"):
        model_from_config(LLAMA4_MAVERICK | {"text_config": text})


def test_deepseek_v32_indexer_and_sparse_attention() -> None:
    v32 = model_from_config(DEEPSEEK_V32)
    v3 = load_model("deepseek-v3")
    # Indexer per block: 1536 x 64 x 128 (wq_b) + 7168 x 128 (wk) + 2 x 128 (k_norm)
    # + 7168 x 64 (weights_proj) = 13,959,424.
    per_block = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert per_block == 13_959_424
    added = param_counts(v32).total_without_mtp - param_counts(v3).total_without_mtp
    assert added == 61 * per_block
    # DeepSeek-V3.2-Exp keeps V3's 671B (the indexer adds 0.85B).
    assert param_counts(v32).total_without_mtp == pytest.approx(671e9, rel=0.005)
    # Attention at 32k: each query reads at most 2048 keys; the indexer scores all of them.
    s = 32768
    core = forward_flops_per_token(v32, s).attention_core / 61
    a, d_qk, d_v = 128, 192, 128
    sparse = 2.0 * keys_per_query(s, 2048) * a * (d_qk + d_v)
    indexer = 2.0 * (s / 2) * 64 * 128
    assert core == pytest.approx(sparse + indexer)
    # Against dense MLA (2 x s/2 x 128 x 320 per token): about 0.32 of it at 32k tokens.
    dense = forward_flops_per_token(v3, s).attention_core / 61
    assert core / dense == pytest.approx((sparse + indexer) / (2.0 * (s / 2) * a * (d_qk + d_v)))


def test_qwen3_next_counts() -> None:
    model = model_from_config(QWEN3_NEXT)
    # Qwen3-Coder-Next (the same shape) publishes 79,674,391,296 parameters in its safetensors;
    # the Qwen3-Next-80B-A3B card rounds to 80B total and 3B activated (without embeddings).
    assert param_counts(model).total == 79_674_391_296
    assert param_counts(model).total == pytest.approx(80e9, rel=0.005)
    assert _active_without_embeddings(QWEN3_NEXT) == pytest.approx(3e9, abs=0.5e9)
    assert len(model.linear_attention_layers) == 36 and 3 not in model.linear_attention_layers
    # One Gated DeltaNet block by hand: in_proj_qkvz 2048 x (2 x 2048 + 2 x 4096), in_proj_ba
    # 2048 x 64, conv (2 x 2048 + 4096) x 4, dt_bias and A_log 2 x 32, norm 128, out 4096 x 2048.
    assert linear_attention_params(model) == (
        2048 * 12288 + 2048 * 64 + 8192 * 4 + 64 + 128 + 4096 * 2048
    )


def test_qwen3_next_state_and_flops() -> None:
    model = model_from_config(QWEN3_NEXT)
    per_layer = kv_bytes_per_token_per_layer(model, "bf16")  # 2 x 2 KV heads x 256 x 2 bytes
    assert per_layer == 2 * 2 * 256 * 2
    # 12 softmax blocks keep every token; 36 linear blocks a fixed state: 32 heads x 128 x 128
    # fp32, and 3 past inputs of the 8192-wide convolution in bf16.
    state = 32 * 128 * 128 * 4 + 8192 * 3 * 2
    for tokens in (1, 4096, 65536):
        assert kv_cache_bytes_per_sequence(model, "bf16", tokens) == (
            12 * tokens * per_layer + 36 * state
        )
    # the whole model's KV per token (capacity, the disaggregated KV transfer): 12 blocks only
    assert kv_bytes_per_token(model, "bf16") == 12 * per_layer
    # Linear blocks: attention cost does not grow with the sequence.
    assert block_forward_flops(model, 0, 4096).attention_core == 8.0 * 32 * 128 * 128
    assert block_forward_flops(model, 0, 65536).attention_core == 8.0 * 32 * 128 * 128
    assert (
        block_forward_flops(model, 3, 65536).attention_core
        > block_forward_flops(model, 3, 4096).attention_core
    )


def test_qwen3_next_training_activations_of_its_linear_blocks() -> None:
    from explorer.memory.activations import block_tensors
    from explorer.memory.assumptions import TrainingAssumptions
    from explorer.memory.tensors import ActivationShape

    model = model_from_config(QWEN3_NEXT)
    x = ActivationShape(seq_len=4096, micro_batch_size=1)
    tensors = block_tensors(model, "moe", x, TrainingAssumptions())
    by_name = {t.name: t for t in tensors}
    # One Gated DeltaNet block, bf16 elements a token: norm and in_proj inputs 2 x 2048, conv
    # input 2 x 2048 + 4096, gate z 4096, beta 32, q and k repeated to 32 value heads 2 x 32 x
    # 128, v 4096, WY matrix 32 x 64, delta-rule output 4096, out_proj input 4096; fp32: g and
    # the softplus input 2 x 32, q and k rstd 2 x 32, gated-norm rstd 32.
    bf16 = 2048 + 2048 + 8192 + 4096 + 32 + 8192 + 4096 + 2048 + 4096 + 4096
    assert bf16 == 38_944
    linear = 2 * bf16 + 4 * (64 + 64 + 32)
    ours = sum(t.bytes for t in tensors if t.name.startswith(("linear-attention", "delta-rule")))
    ours += sum(by_name[n].bytes for n in ("short-convolution input", "output gate z"))
    ours += by_name["gated-norm rstd"].bytes
    assert ours == pytest.approx(4096 * linear * 36 / 48, rel=1e-12)
    # 12 gated softmax blocks: their K and V (2 heads x 256) and the gate's two tensors
    # (16 heads x 256 each) weighted by 12 / 48; nothing of theirs on the 36 linear blocks.
    assert by_name["value"].elements == pytest.approx(4096 * 512 * 12 / 48)
    gate = by_name["ungated attention output"].bytes + by_name["sigmoid(output gate)"].bytes
    assert gate == pytest.approx(4096 * 2 * 4096 * 2 * 12 / 48)
    # TP 2 halves the delta-rule tensors (heads split); the norm input stays (no SP)
    half = block_tensors(model, "moe", ActivationShape(4096, 1, tp=2), TrainingAssumptions())
    halved = {t.name: t.bytes for t in half}
    assert halved["delta-rule v"] == by_name["delta-rule v"].bytes / 2
    assert halved["linear-attention norm input"] == by_name["linear-attention norm input"].bytes


# Nemotron-H-8B by hand from its config.json (transformers NemotronHMamba2Mixer shapes):
# d_inner = 128 heads x 64 = 8192; B and C 2 x 8 groups x 128 = 2048; conv channels 10240.
NEMOTRON_H_MAMBA = 4096 * (2 * 8192 + 2048 + 128) + 10240 * (4 + 1) + 3 * 128 + 8192 + 8192 * 4096
NEMOTRON_H_ATTENTION = 4096 * 4096 * 2 + 2 * 4096 * 8 * 128  # q, o and GQA k, v (8 heads)
NEMOTRON_H_MLP = 2 * 4096 * 21504  # squared ReLU: up and down, no gate


def test_nemotron_h_counts() -> None:
    model = model_from_config(NEMOTRON_H_8B)
    assert mamba_params(model) == NEMOTRON_H_MAMBA == 109_635_968
    # 24 Mamba2 + 4 attention + 24 MLP blocks, one RMSNorm each, final norm, untied head.
    by_hand = (
        24 * NEMOTRON_H_MAMBA + 4 * NEMOTRON_H_ATTENTION + 24 * NEMOTRON_H_MLP
        + 52 * 4096 + 4096 + 2 * 131072 * 4096
    )  # fmt: skip
    assert param_counts(model).total == by_hand == 8_100_852_736
    # The model card gives no exact count ("8B"); the hand count rounds to it.
    assert param_counts(model).total == pytest.approx(8e9, rel=0.02)


def _nemotron_h_by_hand(h: int, f: int, layers: tuple[int, int, int]) -> int:
    """Nemotron-H 47B / 56B by hand (transformers NemotronHMamba2Mixer shapes): 256 Mamba heads
    of 64 (d_inner 16,384), 8 groups of state 256 (B and C 4,096), conv channels 20,480; 64 query
    heads and 8 KV heads of 128; squared-ReLU MLP; one RMSNorm a block, final norm, untied head."""
    mamba_blocks, attention_blocks, mlp_blocks = layers
    inner, bc, heads = 256 * 64, 2 * 8 * 256, 256
    mamba = h * (2 * inner + bc + heads) + (inner + bc) * (4 + 1) + 3 * heads + inner + inner * h
    attention = 2 * h * 64 * 128 + 2 * h * 8 * 128
    mlp = 2 * h * f
    blocks = mamba_blocks + attention_blocks + mlp_blocks
    return (
        mamba_blocks * mamba + attention_blocks * attention + mlp_blocks * mlp
        + (blocks + 1) * h + 2 * 131072 * h
    )  # fmt: skip


@pytest.mark.parametrize(
    ("config", "layers", "by_hand", "official"),
    [
        # Nemotron-H-47B-Base-8K model card: "47B model parameters", five attention layers.
        (NEMOTRON_H_47B, (45, 5, 48), 46_791_554_816, 47e9),
        # Nemotron-H-56B-Base-8K model card: "56B model parameters"; NVIDIA's Nemotron-H page
        # (research.nvidia.com/labs/adlr/nemotronh): 54 Mamba-2, 54 MLP and 10 attention layers.
        (NEMOTRON_H_56B, (54, 10, 54), 56_324_350_464, 56e9),
    ],
)
def test_nemotron_h_47b_and_56b_counts(
    config: dict, layers: tuple[int, int, int], by_hand: int, official: float
) -> None:
    model = model_from_config(config)
    kinds = (len(model.mamba_layers), len(model.attention_only_layers), len(model.ffn_only_layers))
    assert kinds == layers
    h, f = config["hidden_size"], config["intermediate_size"]
    assert param_counts(model).total == _nemotron_h_by_hand(h, f, layers) == by_hand
    # The model cards give no exact count; the hand count rounds to the published figure.
    assert param_counts(model).total == pytest.approx(official, abs=0.5e9)
    # KV cache on the attention blocks only; each Mamba2 block a fixed fp32 state of 256 heads
    # x 64 x 256 and 3 past inputs of its 20,480 convolution channels (bf16).
    per_layer = kv_bytes_per_token_per_layer(model, "bf16")
    assert per_layer == 2 * 8 * 128 * 2
    state = 256 * 64 * 256 * 4 + 20480 * 3 * 2
    assert kv_cache_bytes_per_sequence(model, "bf16", 8192) == (
        layers[1] * 8192 * per_layer + layers[0] * state
    )


def test_nemotron_h_layer_kinds_from_the_pattern() -> None:
    model = model_from_config(NEMOTRON_H_8B)
    assert model.num_hidden_layers == 52
    assert model.attention_only_layers == (7, 18, 29, 40)
    assert len(model.mamba_layers) == 24 and len(model.ffn_only_layers) == 24
    assert model.mamba_layers[:4] == (0, 2, 4, 6) and model.ffn_only_layers[:4] == (1, 3, 5, 8)
    mamba, attention, mlp = (layer_params(model, i) for i in (0, 7, 1))
    assert (mamba.attention, mamba.mlp, mamba.norms) == (NEMOTRON_H_MAMBA, 0, 4096)
    assert (attention.attention, attention.mlp) == (NEMOTRON_H_ATTENTION, 0)
    assert (mlp.attention, mlp.mlp) == (0, NEMOTRON_H_MLP)
    # layers_block_type (transformers' newer name) reads the same model
    names = {"M": "mamba", "*": "attention", "-": "mlp"}
    listed = [names[c] for c in NEMOTRON_H_8B["hybrid_override_pattern"]]
    as_list = {k: v for k, v in NEMOTRON_H_8B.items() if k != "hybrid_override_pattern"}
    assert model_from_config(as_list | {"layers_block_type": listed}) == model
    # model_type alone reads the same model
    bare = {k: v for k, v in NEMOTRON_H_8B.items() if k != "architectures"}
    assert param_counts(model_from_config(bare)).total == 8_100_852_736


def test_nemotron_h_no_kv_on_mamba_or_mlp_blocks() -> None:
    model = model_from_config(NEMOTRON_H_8B)
    per_layer = kv_bytes_per_token_per_layer(model, "bf16")
    assert per_layer == 2 * 8 * 128 * 2
    assert kv_bytes_per_token(model, "bf16") == 4 * per_layer  # the four '*' blocks only
    # Each Mamba2 block: a 128 x 64 x 128 fp32 state and 3 past inputs of 10240 channels (bf16).
    state = 128 * 64 * 128 * 4 + 10240 * 3 * 2
    for tokens in (1, 8192):
        assert kv_cache_bytes_per_sequence(model, "bf16", tokens) == (
            4 * tokens * per_layer + 24 * state
        )
    # Four pipeline stages of 13 blocks: the per-GPU KV follows each stage's attention blocks,
    # the Mamba states its Mamba blocks (split over TP).
    shapes = stage_shapes(model, ServingLayout(tp=2, pp=4), "bf16", "bf16", MemoryAssumptions())
    assert [s.kv_bytes_per_token for s in shapes] == [per_layer / 2, per_layer / 2] * 2
    assert [s.state_bytes_per_sequence * 2 for s in shapes] == [
        sum(i in model.mamba_layers for i in s.layers) * state for s in shapes
    ]
    # the Mamba blocks' weights are split over TP, the MLP blocks hold no attention
    one = stage_shapes(model, ServingLayout(), "bf16", "bf16", MemoryAssumptions())[0]
    assert one.weights_bytes == pytest.approx(8_100_852_736 * 2, rel=1e-9)


def test_nemotron_h_serving_with_a_stage_without_attention() -> None:
    model = model_from_config(NEMOTRON_H_8B)
    gpu = load_gpu("h100-sxm")
    # pp=8: blocks 0-6 (stage 0) hold no attention block, so no KV cache per token there.
    layout = ServingLayout(pp=8)
    shapes = stage_shapes(model, layout, "bf16", "bf16", MemoryAssumptions())
    assert shapes[0].kv_bytes_per_token == 0 and shapes[0].state_bytes_per_sequence > 0
    workload = ServingWorkload(concurrency=8, prompt_len=1024, output_len=1024)
    assert max_concurrency(model, gpu, layout, workload) > 8
    assert kv_capacity_tokens(model, gpu, layout, workload) > 8 * 2048


def test_nemotron_h_flops() -> None:
    model = model_from_config(NEMOTRON_H_8B)
    mamba = block_forward_flops(model, 0, 8192)
    # in_proj and out_proj at 2 FLOPs a weight; SSD (Mamba-2 paper sec. 6) with chunk Q = 128:
    # causal intra-chunk (129 / 2 keys a query) C B^T per group and its product with X per head,
    # chunk state and its read 2 N P each per head.
    assert mamba.attention_projections == 2 * (4096 * (2 * 8192 + 2048 + 128) + 8192 * 4096)
    assert mamba.attention_core == 2 * 64.5 * (128 * 8 + 64 * 128) + 4 * 128 * 64 * 128
    assert mamba.mlp == 0
    # the scan's cost per token stops growing past one chunk; attention's keeps growing
    assert block_forward_flops(model, 0, 65536).attention_core == mamba.attention_core
    attention = block_forward_flops(model, 7, 8192)
    assert attention.mlp == 0 and attention.attention_core == 2 * 8192 * 32 * 256 / 2
    mlp = block_forward_flops(model, 1, 8192)
    assert (mlp.attention_projections, mlp.attention_core, mlp.mlp) == (0, 0, 2 * NEMOTRON_H_MLP)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"hybrid_override_pattern": "M-X*"}, "'hybrid_override_pattern' must be a non-empty"),
        ({"hybrid_override_pattern": "M-*"}, "'num_hidden_layers' is 52 but"),
        ({"hybrid_override_pattern": "ME*-", "num_hidden_layers": 4}, "MoE blocks ('E'"),
        ({"hybrid_override_pattern": "M-M-", "num_hidden_layers": 4}, "no attention block"),
        ({"hybrid_override_pattern": None}, "no field 'hybrid_override_pattern'"),
        ({"mlp_hidden_act": "silu"}, "field 'mlp_hidden_act' is 'silu'"),
        ({"mamba_num_heads": 100}, "'mamba_num_heads' (100) must be a multiple of 'n_groups'"),
        ({"ssm_state_size": 0}, "field 'ssm_state_size' must be positive"),
    ],
)
def test_nemotron_h_bad_configs_name_the_field(change: dict, words: str) -> None:
    config = {k: v for k, v in (NEMOTRON_H_8B | change).items() if v is not None}
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")) as err:
        model_from_config(config)
    assert "\n" not in str(err.value)


def test_nemotron_h_decode_scan_does_not_grow_with_context() -> None:
    from explorer.serving.latency import _stage_flops

    model = model_from_config(NEMOTRON_H_8B)
    mamba_only = _stage_flops(model, (0,), False)  # block 0 is a Mamba2 block
    assert mamba_only.attention_per_key == 0
    one_token = block_forward_flops(model, 0, 1, causal=False)
    assert mamba_only.dense == one_token.attention_projections + one_token.attention_core
    assert _stage_flops(model, (7,), False).attention_per_key == 2 * 32 * 256  # q k and p v


def test_nemotron_h_training_states_follow_each_block_kind() -> None:
    from explorer.memory.states import single_module_block_params_per_gpu, stage_params
    from explorer.partition import StagePlan

    model = model_from_config(NEMOTRON_H_8B)
    layout = Layout(tp=2)
    # blocks 13-25 read "M-M-M*-M-M-M-": 6 Mamba2, 1 attention (18), 6 MLP; TP 2 halves each
    # (8 KV heads -> 4 a GPU), the 13 pre-norms are replicated.
    plan = StagePlan(stage=1, layers=tuple(range(13, 26)), num_moe_layers=0, has_embedding=False,
                     has_head=False)  # fmt: skip
    expected = (6 * NEMOTRON_H_MAMBA + NEMOTRON_H_ATTENTION + 6 * NEMOTRON_H_MLP) / 2 + 13 * 4096
    assert stage_params(model, layout, plan).dense == expected
    assert single_module_block_params_per_gpu(model, 1, 2) == NEMOTRON_H_MLP / 2 + 4096


def test_nemotron_h_activations_are_the_mean_of_its_block_kinds() -> None:
    from explorer.memory.activations import block_tensors
    from explorer.memory.assumptions import TrainingAssumptions
    from explorer.memory.tensors import ActivationShape

    model = model_from_config(NEMOTRON_H_8B)
    x = ActivationShape(seq_len=8192, micro_batch_size=1)
    # bf16 bytes a token: Mamba2 norm and in_proj inputs 2 x 4096, in_proj output 18560, scan
    # output 8192, fp32 rstd of 8 groups; attention norm and QKV inputs 2 x 4096, q 4096, k and
    # v 2 x 1024, output 4096, fp32 log-sum-exp of 32 heads; MLP norm and up inputs 2 x 4096,
    # squared-ReLU input and output 2 x 21504.
    mamba = 2 * (4096 + 4096 + 18560 + 8192) + 4 * 8
    attention = 2 * (4096 + 4096 + 4096 + 2048 + 4096) + 4 * 32
    mlp = 2 * (4096 + 4096 + 2 * 21504)
    block = sum(t.bytes for t in block_tensors(model, "dense", x, TrainingAssumptions()))
    assert 52 * block == pytest.approx(8192 * (24 * mamba + 4 * attention + 24 * mlp), rel=1e-12)


def test_nemotron_h_search_bounds_hold_and_pruning_is_exact() -> None:
    from test_search import _check_bounds_on_sampled_layouts, _ranked_keys

    from explorer.calibration import dgx_a100
    from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
    from explorer.mesh import Problem, SearchSpace
    from explorer.search import search
    from explorer.specs import TrainingWorkload

    model = model_from_config(NEMOTRON_H_8B)
    workload = TrainingWorkload(seq_len=2048, global_batch_size=128)
    cluster = dgx_a100(16)
    p = Problem(model=model, cluster=cluster, workload=workload, num_gpus=16)
    _check_bounds_on_sampled_layouts(p, DEFAULT_ESTIMATE_ASSUMPTIONS)
    space = SearchSpace(micro_batch_sizes=(1, 2), max_virtual=2)
    pruned = search(model, cluster, workload, ranked=12, space=space)
    full = search(model, cluster, workload, ranked=None, space=space)
    assert _ranked_keys(pruned.layouts) == _ranked_keys(full.layouts.head(12))


def test_decode_reads_only_the_window_chunk_or_top_k() -> None:
    g3 = model_from_config(GEMMA3_1B)  # 22 local blocks of 512, 4 global
    assert decode_keys_read(g3, 0, 32768) == 512 and decode_keys_read(g3, 5, 32768) == 32768
    assert decode_context(g3, tuple(range(26)), 32768) == pytest.approx((22 * 512 + 4 * 32768) / 26)
    assert decode_context(g3, tuple(range(26)), 300) == 300  # shorter than the window
    scout = model_from_config(LLAMA4_SCOUT)  # chunks of 8192 on 36 blocks, 12 global
    # token 8192 + 100 is the 100th of its chunk; global blocks read all 8292 keys
    assert decode_keys_read(scout, 0, 8292) == 100 and decode_keys_read(scout, 3, 8292) == 8292
    assert decode_keys_read(scout, 0, 8192) == 8192
    v32 = model_from_config(DEEPSEEK_V32)  # top-2048 keys; the indexer scores all of them
    assert decode_context(v32, tuple(range(61)), 32768) == 2048
    assert decode_context(v32, tuple(range(61)), 1000) == 1000
    assert indexer_flops_per_key(v32) == 2 * 64 * 128
    # blocks without a KV cache read nothing
    nh = model_from_config(NEMOTRON_H_8B)
    assert decode_keys_read(nh, 0, 4096) == 0 and decode_context(nh, (0, 1, 2), 4096) == 0
    assert decode_context(nh, (0, 7), 4096) == 4096  # block 7 is attention
    with pytest.raises(ValueError, match="at least 1 token"):
        decode_keys_read(g3, 0, 0)


def test_nemotron_h_blocks_move_their_own_elementwise_bytes() -> None:
    from explorer.compute.elementwise import mamba_scan_ledger, stage_traffic
    from explorer.compute.work import stage_work
    from explorer.specs import Layout

    model = model_from_config(NEMOTRON_H_8B)  # I = 128 x 64 = 8192, H 128, G N 8 x 128, Q 128
    scan = mamba_scan_ledger(model, Layout())
    # conv 2 (8192 + 2048) = 20,480; cumsum 128 + 4 x 128 = 640; chunk states 8192 + 1024 +
    # 512 + 2 x 8192 = 26,112; passing 3 x 8192 = 24,576; C B^T 2048 + 2 x 8 x 128 = 4,096;
    # scan 2048 + 8192 + 512 + 1024 + 8192 + 8192 = 28,160; gated norm 3 x 8192 = 24,576
    assert scan.forward == 128_640
    assert scan.backward == 2 * 128_640 + 128_640 - 28_160 - 24_576  # + the first five again
    # "**M-": a stage of the two attention blocks moves a norm and a residual each (5 h);
    # the other a Mamba2 block (5 h + the scan) and an MLP block (5 h + relu2's 2 x 21,504)
    pattern = model_from_config(NEMOTRON_H_8B | {"hybrid_override_pattern": "**M-",
                                                 "num_hidden_layers": 4})  # fmt: skip
    first = stage_work(pattern, (0, 1), 4096, True, False)
    last = stage_work(pattern, (2, 3), 4096, False, True)
    flash, fused = (True, False), "fused"
    assert stage_traffic(first, pattern, Layout(), 4096, *flash, fused).blocks == 2 * 5 * 4096
    expected = 5 * 4096 + 128_640 + 5 * 4096 + 2 * 21_504
    assert stage_traffic(last, pattern, Layout(), 4096, *flash, fused).blocks == expected


def test_num_moe_layers_counts_the_interleaved_blocks() -> None:
    # Hand-counted: DeepSeek-V3 keeps its first 3 of 61 blocks dense (config.json
    # first_k_dense_replace 3): 58 MoE blocks; 10 blocks from block 1 every 2nd: 1, 3, 5, 7, 9;
    # 3 dense lead blocks out of 3: none.
    v3 = load_model("deepseek-v3")
    assert v3.num_moe_layers == 58
    sparse = dataclasses.replace(v3, num_hidden_layers=10, first_k_dense_replace=1,
                                 moe_layer_freq=2)  # fmt: skip
    assert sparse.num_moe_layers == 5
    assert dataclasses.replace(v3, num_hidden_layers=3).num_moe_layers == 0
    assert load_model("llama-3.1-405b").num_moe_layers == 0
