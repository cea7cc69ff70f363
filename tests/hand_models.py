"""Hand-built specs shared by several test modules (imported as ``from hand_models import ...``).

Only specs that were written identically in more than one test module live here; variants stay
beside the tests that use them.
"""

from __future__ import annotations

from explorer.specs import GpuSpec, ModelSpec

H100_LIKE = GpuSpec(
    name="h100-like",
    memory_bytes=80 * 10**9,
    bf16_flops_per_s=989e12,
    fp8_flops_per_s=1979e12,
    hbm_bytes_per_s=3.35e12,
    scale_up_bytes_per_s=450e9,
)
"""An H100-shaped GPU with FP8, in round published numbers."""

LLAMA_LIKE_8B = ModelSpec(
    name="llama-like-8b",
    num_hidden_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=128256,
)
"""Llama-3-8B's shape (GQA 32/8, SwiGLU 14336, V = 128256)."""

DEEPSEEK_V3 = ModelSpec(
    name="deepseek-v3-by-hand",
    num_hidden_layers=61,
    hidden_size=7168,
    num_attention_heads=128,
    num_key_value_heads=128,
    intermediate_size=18432,
    vocab_size=129280,
    n_routed_experts=256,
    n_shared_experts=1,
    num_experts_per_tok=8,
    moe_intermediate_size=2048,
    first_k_dense_replace=3,
    router_bias=True,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
    num_nextn_predict_layers=1,
)
"""DeepSeek-V3 from its report (arXiv:2412.19437): MLA, 256 routed experts, one MTP module."""
