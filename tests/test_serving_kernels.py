"""Serving steps as the kernels run them: MLA absorbed decode, GEMM efficiency by rows, DeepEP."""

from __future__ import annotations

from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions
from explorer.serving.latency import _stage_flops
from explorer.serving.mla import absorbed_attention_flops_per_key
from explorer.specs import ClusterSpec

DEEPSEEK_V3 = load_model("deepseek-v3")
LLAMA_70B = load_model("llama-3.1-70b")
H200_NODE = ClusterSpec(gpu=load_gpu("h200"))
A = ServingAssumptions()


def test_absorbed_mla_attention_per_key_matches_the_hand_count():
    # 2 x 128 heads x (512 latent + 64 rope) scores + 2 x 128 x 512 values = 278,528 FLOPs
    assert absorbed_attention_flops_per_key(DEEPSEEK_V3) == 278_528


def test_decode_attention_of_deepseek_is_absorbed_and_prefill_is_not():
    f = _stage_flops(DEEPSEEK_V3, tuple(range(61)), True)
    assert f.decode_attention_per_key == 61 * 278_528
    # prefill keeps the non-absorbed form: 2 x 128 x (192 + 128) per key and block
    assert f.attention_per_key == 61 * 81_920
    dense = _stage_flops(LLAMA_70B, tuple(range(80)), True)
    assert dense.decode_attention_per_key == dense.attention_per_key
