"""Multi-head latent attention (DeepSeek-V2/V3) as decode kernels run it: absorbed.

In decode, engines (FlashMLA, SGLang, vLLM) fold the key up-projection W_UK into the query
and the value up-projection W_UV into the output (DeepSeek-V2 report, arXiv:2405.04434,
sec. 2.1.3 and appendix C), so each head attends over the cached latent directly: per key the
query meets c_kv (kv_lora_rank) plus the shared rope key (qk_rope_head_dim), and the values
are the latent itself (kv_lora_rank). The cache read per token is the latent and the rope key
once, shared by all heads (explorer.memory.serving_layout). The projections W_UK and W_UV
applied to one token per step cost what the non-absorbed projections cost, so only the
attention core changes. Prefill keeps the non-absorbed (MHA-like) form, as SGLang and vLLM
run it for long prompts.
"""

from __future__ import annotations

from explorer.specs import ModelSpec


def absorbed_attention_flops_per_key(model: ModelSpec) -> float:
    """Forward FLOPs of one decode token's attention per key in context, one block, absorbed:
    2 heads (kv_lora_rank + qk_rope_head_dim) for the scores plus 2 heads kv_lora_rank for the
    values. DeepSeek-V3: 2 x 128 x (512 + 64 + 512) = 278,528 (non-absorbed: 2 x 128 x
    (192 + 128) = 81,920)."""
    rank = model.kv_lora_rank or 0
    return 2.0 * model.num_attention_heads * (2 * rank + model.qk_rope_head_dim)
