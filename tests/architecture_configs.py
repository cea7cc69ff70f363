"""Shape fields of published config.json files for the architectures added in issue 18.

Test inputs only (not presets): each dict carries the fields that set the model's size, as the
model's published config.json gives them (source in the comment); other keys are left out, so
the parser's defaults for them are exercised too. Imported as ``from architecture_configs import``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# google/gemma-2-9b config.json (Gemma 2 report, arXiv:2408.00118, Table 1).
GEMMA2_9B: dict[str, Any] = {
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 3584,
    "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 256, "intermediate_size": 14336, "vocab_size": 256000,
    "sliding_window": 4096, "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0, "max_position_embeddings": 8192,
}  # fmt: skip
# google/gemma-2-2b and google/gemma-2-27b config.json.
GEMMA2_2B = GEMMA2_9B | {
    "hidden_size": 2304, "num_hidden_layers": 26, "num_attention_heads": 8,
    "num_key_value_heads": 4, "intermediate_size": 9216,
}  # fmt: skip
GEMMA2_27B = GEMMA2_9B | {
    "hidden_size": 4608, "num_hidden_layers": 46, "num_attention_heads": 32,
    "num_key_value_heads": 16, "head_dim": 128, "intermediate_size": 36864,
    "query_pre_attn_scalar": 144,
}  # fmt: skip
# google/gemma-3-1b-pt config.json (Gemma3ForCausalLM, text only).
GEMMA3_1B: dict[str, Any] = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 1152,
    "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1,
    "head_dim": 256, "intermediate_size": 6912, "vocab_size": 262144,
    "sliding_window": 512, "sliding_window_pattern": 6, "max_position_embeddings": 32768,
    "attn_logit_softcapping": None, "final_logit_softcapping": None,
}  # fmt: skip
# google/gemma-3-12b-pt config.json: the language model sits in text_config.
GEMMA3_12B: dict[str, Any] = {
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {
        "model_type": "gemma3_text", "hidden_size": 3840, "num_hidden_layers": 48,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
        "intermediate_size": 15360, "vocab_size": 262208, "sliding_window": 1024,
        "sliding_window_pattern": 6, "max_position_embeddings": 131072,
    },
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152},
}  # fmt: skip
# microsoft/Phi-3-mini-4k-instruct config.json.
PHI3_MINI: dict[str, Any] = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 3072,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "intermediate_size": 8192, "vocab_size": 32064, "max_position_embeddings": 4096,
    "sliding_window": 2047, "tie_word_embeddings": False,
}  # fmt: skip
# microsoft/phi-4 config.json (model_type phi3).
PHI4: dict[str, Any] = PHI3_MINI | {
    "hidden_size": 5120, "num_hidden_layers": 40, "num_attention_heads": 40,
    "num_key_value_heads": 10, "intermediate_size": 17920, "vocab_size": 100352,
    "max_position_embeddings": 16384, "sliding_window": None,
}  # fmt: skip
# microsoft/Phi-3.5-MoE-instruct config.json.
PHI35_MOE: dict[str, Any] = {
    "architectures": ["PhimoeForCausalLM"], "model_type": "phimoe", "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 6400, "num_local_experts": 16, "num_experts_per_tok": 2,
    "vocab_size": 32064, "max_position_embeddings": 131072, "sliding_window": 131072,
    "attention_bias": True, "lm_head_bias": True, "tie_word_embeddings": False,
}  # fmt: skip
# Nemotron-4 340B in Hugging Face field names (shape: arXiv:2406.11704, Table 1).
NEMOTRON4_340B: dict[str, Any] = {
    "architectures": ["NemotronForCausalLM"], "model_type": "nemotron", "hidden_size": 18432,
    "num_hidden_layers": 96, "num_attention_heads": 96, "num_key_value_heads": 8,
    "head_dim": 192, "intermediate_size": 73728, "vocab_size": 256000,
    "max_position_embeddings": 4096, "hidden_act": "relu2", "tie_word_embeddings": False,
}  # fmt: skip
# bigscience/bloom and bigscience/bloom-560m config.json.
BLOOM_176B: dict[str, Any] = {
    "architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": 14336,
    "n_layer": 70, "num_attention_heads": 112, "n_head": 112, "vocab_size": 250880,
}  # fmt: skip
BLOOM_560M: dict[str, Any] = {
    "architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_embed": 1024,
    "n_layer": 24, "n_head": 16, "vocab_size": 250880,
}  # fmt: skip
# mosaicml/mpt-7b config.json.
MPT_7B: dict[str, Any] = {
    "architectures": ["MPTForCausalLM"], "model_type": "mpt", "d_model": 4096,
    "n_layers": 32, "n_heads": 32, "expansion_ratio": 4, "vocab_size": 50432,
    "max_seq_len": 2048, "no_bias": True,
    "attn_config": {"alibi": True, "attn_type": "multihead_attention"},
}  # fmt: skip
# deepseek-ai/DeepSeek-V2 and DeepSeek-V2-Lite config.json.
DEEPSEEK_V2: dict[str, Any] = {
    "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
    "hidden_size": 5120, "num_hidden_layers": 60, "num_attention_heads": 128,
    "num_key_value_heads": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
    "n_routed_experts": 160, "n_shared_experts": 2, "num_experts_per_tok": 6,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "vocab_size": 102400, "topk_method": "group_limited_greedy", "n_group": 8,
    "topk_group": 3, "max_position_embeddings": 163840,
}  # fmt: skip
DEEPSEEK_V2_LITE = DEEPSEEK_V2 | {
    "hidden_size": 2048, "num_hidden_layers": 27, "num_attention_heads": 16,
    "num_key_value_heads": 16, "intermediate_size": 10944, "moe_intermediate_size": 1408,
    "n_routed_experts": 64, "q_lora_rank": None, "topk_method": "greedy", "n_group": 1,
    "topk_group": 1,
}  # fmt: skip
# zai-org/GLM-4.5 and GLM-4.5-Air config.json.
GLM45: dict[str, Any] = {
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "hidden_size": 5120,
    "num_hidden_layers": 92, "num_attention_heads": 96, "num_key_value_heads": 8,
    "head_dim": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
    "n_routed_experts": 160, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "vocab_size": 151552, "attention_bias": True,
    "use_qk_norm": False, "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
    "max_position_embeddings": 131072, "partial_rotary_factor": 0.5,
}  # fmt: skip
GLM45_AIR = GLM45 | {
    "hidden_size": 4096, "num_hidden_layers": 46, "intermediate_size": 10944,
    "moe_intermediate_size": 1408, "n_routed_experts": 128, "first_k_dense_replace": 1,
}  # fmt: skip

# meta-llama/Llama-4-Scout-17B-16E and Llama-4-Maverick-17B-128E config.json (text_config).
LLAMA4_SCOUT: dict[str, Any] = {
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
        "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_local_experts": 16,
        "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "vocab_size": 202048,
        "attention_chunk_size": 8192, "max_position_embeddings": 10485760,
        "use_qk_norm": True, "tie_word_embeddings": False,
    },
    "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408},
}  # fmt: skip
LLAMA4_MAVERICK: dict[str, Any] = LLAMA4_SCOUT | {
    "text_config": LLAMA4_SCOUT["text_config"] | {
        "num_local_experts": 128, "interleave_moe_layer_step": 2,
        "max_position_embeddings": 1048576, "use_qk_norm": False,
    },
}  # fmt: skip
# openai/gpt-oss-120b and gpt-oss-20b config.json.
GPT_OSS_120B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
    "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8,
    "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 128,
    "num_experts_per_tok": 4, "experts_per_token": 4, "vocab_size": 201088,
    "sliding_window": 128, "attention_bias": True, "tie_word_embeddings": False,
    "max_position_embeddings": 131072,
    "quantization_config": {"quant_method": "mxfp4"},
}  # fmt: skip
GPT_OSS_20B = GPT_OSS_120B | {"num_hidden_layers": 24, "num_local_experts": 32}

# deepseek-ai/DeepSeek-V3.2-Exp config.json: DeepSeek-V3's shape plus the indexer fields.
DEEPSEEK_V32: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent.parent / "presets" / "models" / "deepseek-v3.json").read_text()
) | {
    "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32",
    "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128,
}  # fmt: skip

# Qwen/Qwen3-Next-80B-A3B-Instruct config.json (Qwen3-Coder-Next has the same shape).
QWEN3_NEXT: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
    "hidden_size": 2048, "num_hidden_layers": 48, "vocab_size": 151936, "head_dim": 256,
    "num_attention_heads": 16, "num_key_value_heads": 2, "intermediate_size": 5120,
    "num_experts": 512, "num_experts_per_tok": 10, "decoder_sparse_step": 1,
    "mlp_only_layers": [], "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "linear_num_key_heads": 16,
    "linear_key_head_dim": 128, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "tie_word_embeddings": False,
    "max_position_embeddings": 262144,
}  # fmt: skip

# nvidia/Nemotron-H-8B-Base-8K config.json (as quoted in NVIDIA-NeMo/Megatron-Bridge's
# tests/unit_tests/models/nemotronh/test_nemotron_h_bridge.py; Nemotron-H report, arXiv:2504.03624,
# sec. 2.1: 24 Mamba-2, 24 MLP and 4 self-attention layers).
NEMOTRON_H_8B: dict[str, Any] = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "num_hidden_layers": 52, "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "attention_head_dim": 128, "intermediate_size": 21504,
    "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8,
    "conv_kernel": 4, "chunk_size": 128, "expand": 2, "use_conv_bias": True, "use_bias": False,
    "attention_bias": False, "mlp_bias": False, "mlp_hidden_act": "relu2",
    "vocab_size": 131072, "tie_word_embeddings": False, "max_position_embeddings": 8192,
}  # fmt: skip

# Nemotron-H-47B-Base-8K and -56B-Base-8K: the 8B config with the shapes of NVIDIA-NeMo
# Megatron-Bridge's NemotronHModelProvider47B / 56B (nemotron_h_provider.py: hybrid_layer_pattern,
# hidden 8192, FFN 30720 / 32768, 64 query heads, 256 Mamba heads of state 256; 8 KV heads and 8
# groups, head dim 64 and a 131,072 vocabulary from the provider's base class). NVIDIA's blog
# (research.nvidia.com/labs/adlr/nemotronh): the 56B has 54 Mamba-2, 54 MLP and 10 attention
# layers; the 47B model card: five attention layers.
NEMOTRON_H_47B: dict[str, Any] = NEMOTRON_H_8B | {
    "hybrid_override_pattern": "M-M-M-M-M-M-M-M-M*-M-M-M-M-M-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-"
    "M-M-M-M-M-M-M---MM---M-M*-M-M-M-M-M-",
    "num_hidden_layers": 98, "hidden_size": 8192, "intermediate_size": 30720,
    "num_attention_heads": 64, "mamba_num_heads": 256, "ssm_state_size": 256,
}  # fmt: skip
NEMOTRON_H_56B: dict[str, Any] = NEMOTRON_H_47B | {
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-"
    "M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "num_hidden_layers": 118, "intermediate_size": 32768,
}  # fmt: skip

ARCHITECTURE_CONFIGS: tuple[dict[str, Any], ...] = (
    GEMMA2_9B, GEMMA3_1B, GEMMA3_12B, PHI3_MINI, PHI35_MOE, NEMOTRON4_340B, BLOOM_560M,
    MPT_7B, MPT_7B | {"architectures": ["MptForCausalLM"]}, DEEPSEEK_V2, GLM45, LLAMA4_SCOUT,
    LLAMA4_SCOUT["text_config"] | {"architectures": ["Llama4ForCausalLM"]}, GPT_OSS_120B,
    DEEPSEEK_V32, QWEN3_NEXT, NEMOTRON_H_8B,
)  # fmt: skip
"""One config per new architecture (the hf_config fuzz test mutates them)."""
