"""Serving memory per GPU: KV cache per token, weights by layout and dtype, fit, max concurrency."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.counting import param_counts
from explorer.memory.serving import (
    MemoryAssumptions,
    ServingLayout,
    kv_bytes_per_token,
    max_concurrency,
    paged_tokens,
    prefill_workspace_bytes,
    serving_memory,
    stage_shapes,
    weight_bytes_per_param,
)
from explorer.presets import load_gpu, load_model
from explorer.specs import ModelSpec, ServingWorkload
from explorer.units import GiB

REL = 1e-9  # exact arithmetic: only float rounding may differ
CATEGORIES = ["weights", "kv_cache", "activations", "communication", "runtime", "headroom"]

LLAMA_70B = load_model("llama-3.1-70b")
LLAMA_405B = load_model("llama-3.1-405b")
DEEPSEEK_V3 = load_model("deepseek-v3")
H100 = load_gpu("h100-sxm")


def per_gpu_kv(model: ModelSpec, tp: int) -> float:
    return stage_shapes(model, ServingLayout(tp=tp), "bf16", "bf16", MemoryAssumptions())[
        0
    ].kv_bytes_per_token


@pytest.mark.parametrize(
    ("model", "kv_dtype", "expected"),
    [
        # 80 layers x 8 KV heads x 128 head dim x 2 (K and V) x 2 bytes
        pytest.param(LLAMA_70B, "bf16", 327_680, id="llama3-70b-gqa-80x8x128x2x2"),
        pytest.param(LLAMA_70B, "fp8", 163_840, id="llama3-70b-fp8-kv-half"),
        # 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes
        pytest.param(DEEPSEEK_V3, "bf16", 70_272, id="deepseek-v2-report-table1-mla-61x576x2"),
    ],
)
def test_kv_bytes_per_token_matches_the_architecture(model, kv_dtype, expected):
    assert kv_bytes_per_token(model, kv_dtype) == expected


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_mla_latent_cache_is_replicated_not_split_by_tp(tp):
    assert per_gpu_kv(DEEPSEEK_V3, tp) == 70_272  # one latent shared by all heads


def test_gqa_cache_splits_over_kv_heads_then_replicates():
    assert [per_gpu_kv(LLAMA_70B, tp) for tp in (1, 2, 4, 8, 16)] == [
        327_680,
        163_840,
        81_920,
        40_960,
        40_960,  # TP 16 > 8 KV heads: each head stored twice, the cache per GPU stops shrinking
    ]


@pytest.mark.parametrize(
    ("tokens", "expected"), [(1, 16), (16, 16), (17, 32), (2560, 2560), (2561, 2576)]
)
def test_paged_cache_rounds_up_to_vllm_blocks_of_16(tokens, expected):
    assert paged_tokens(tokens, 16) == expected


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        ("bf16", 2.0),
        ("fp8", 1.0 + 4 / (128 * 128)),  # fp32 scale per 128 x 128 block (DeepSeek-V3 sec. 3.3.2)
        ("int4", 0.5 + 2 / 128),  # bf16 scale per group of 128 weights
    ],
)
def test_weight_bytes_per_param_include_the_quantisation_scales(dtype, expected):
    assert weight_bytes_per_param(dtype, MemoryAssumptions()) == pytest.approx(expected, rel=REL)


def test_one_gpu_holds_every_parameter_once_in_bf16():
    shape = stage_shapes(LLAMA_70B, ServingLayout(), "bf16", "bf16", MemoryAssumptions())[0]
    assert shape.weights_bytes == pytest.approx(2 * param_counts(LLAMA_70B).total, rel=REL)


def test_pipeline_stages_partition_the_weights():
    a = MemoryAssumptions()
    whole = stage_shapes(LLAMA_70B, ServingLayout(), "bf16", "bf16", a)[0].weights_bytes
    stages = stage_shapes(LLAMA_70B, ServingLayout(pp=4), "bf16", "bf16", a)
    assert [len(s.layers) for s in stages] == [20, 20, 20, 20]
    assert sum(s.weights_bytes for s in stages) == pytest.approx(whole, rel=REL)


def test_tensor_parallel_splits_dense_weights_except_norms_and_replicated_kv():
    a = MemoryAssumptions()
    one = stage_shapes(LLAMA_70B, ServingLayout(tp=1), "bf16", "bf16", a)[0].weights_bytes
    eight = stage_shapes(LLAMA_70B, ServingLayout(tp=8), "bf16", "bf16", a)[0].weights_bytes
    assert eight == pytest.approx(one / 8, rel=1e-3)  # norms (0.0002%) stay whole


def test_expert_parallel_splits_only_the_routed_experts():
    a = MemoryAssumptions()
    one, two = (
        stage_shapes(DEEPSEEK_V3, ServingLayout(ep=ep), "fp8", "bf16", a)[0] for ep in (1, 2)
    )
    experts = param_counts(DEEPSEEK_V3).routed_experts * weight_bytes_per_param("fp8", a)
    assert one.weights_bytes - two.weights_bytes == pytest.approx(experts / 2, rel=REL)
    assert one.read_bytes == two.read_bytes  # attention and shared experts are replicated


@pytest.mark.parametrize(
    ("dtype", "fits"),
    [
        pytest.param("fp8", True, id="llama3.1-405b-fp8-fits-one-8x80GB-node"),
        pytest.param("bf16", False, id="llama3.1-405b-bf16-810GB-exceeds-640GB"),
    ],
)
def test_405b_fits_eight_80gb_gpus_in_fp8_but_not_in_bf16(dtype, fits):
    workload = ServingWorkload(concurrency=16, weights_dtype=dtype)
    memory = serving_memory(LLAMA_405B, H100, ServingLayout(tp=8), workload)
    assert (memory.total <= H100.memory_bytes) is fits
    assert (max_concurrency(LLAMA_405B, H100, ServingLayout(tp=8), workload) >= 16) is fits


def test_breakdown_has_the_six_serving_categories_summing_to_the_total():
    memory = serving_memory(LLAMA_70B, H100, ServingLayout(tp=8), ServingWorkload())
    assert list(memory.as_dict()) == CATEGORIES
    assert sum(memory.as_dict().values()) == pytest.approx(memory.total, rel=REL)


def test_headroom_is_what_gpu_memory_utilization_leaves_free():
    memory = serving_memory(LLAMA_70B, H100, ServingLayout(tp=8), ServingWorkload())
    assert memory.headroom == pytest.approx(0.1 * H100.memory_bytes, rel=REL)


def test_kv_cache_is_concurrency_times_paged_length_times_bytes_per_token_per_gpu():
    workload = ServingWorkload(prompt_len=1000, output_len=30, concurrency=10)
    memory = serving_memory(LLAMA_70B, H100, ServingLayout(tp=8), workload)
    assert memory.kv_cache == 10 * 1040 * 40_960  # 1030 tokens -> 65 blocks of 16


@pytest.mark.parametrize(("prompt", "kept"), [(2_000, 2_016), (32_752, 4_096)])
def test_a_sliding_window_keeps_only_the_windows_tokens_in_the_kv_cache(prompt, kept):
    # Mistral 7B (arXiv:2310.06825 sec. 2, rolling buffer): every block attends to the last
    # 4,096 tokens, so past the window a sequence holds 4,096 tokens' KV: 32 layers x 8 KV
    # heads x 128 x 2 (K, V) x 2 bytes = 131,072 bytes a token on one GPU.
    mistral = load_model("mistral-7b")
    workload = ServingWorkload(prompt_len=prompt, output_len=16, concurrency=3)
    memory = serving_memory(mistral, H100, ServingLayout(tp=1), workload)
    assert memory.kv_cache == 3 * kept * 131_072  # 2,016 = 2,000 + 16 in blocks of 16


def test_attention_data_parallel_groups_split_the_sequences():
    workload = ServingWorkload(concurrency=64, weights_dtype="fp8")
    whole = serving_memory(DEEPSEEK_V3, H100, ServingLayout(tp=8, ep=2), workload).kv_cache
    split = serving_memory(DEEPSEEK_V3, H100, ServingLayout(tp=8, ep=8), workload).kv_cache
    assert split == pytest.approx(whole / 4, rel=REL)


def test_prefill_workspace_counts_residual_and_the_larger_phase():
    # Llama 3 70B, TP 8, 8192 tokens: residual + normed input 2h = 16384; attention
    # q + out 2 x 64 x 128 / 8 = 2048 plus one K and one V head 256; MLP 3 x 28672 / 8 = 10752
    expected = 8192 * (16_384 + 10_752) * 2
    assert prefill_workspace_bytes(LLAMA_70B, 8, 8192) == expected


def test_max_concurrency_is_the_edge_of_the_fit():
    workload = ServingWorkload(prompt_len=4096, output_len=1024)
    most = max_concurrency(LLAMA_70B, H100, ServingLayout(tp=4), workload)
    at = serving_memory(LLAMA_70B, H100, ServingLayout(tp=4), replace(workload, concurrency=most))
    over = serving_memory(
        LLAMA_70B, H100, ServingLayout(tp=4), replace(workload, concurrency=most + 1)
    )
    assert at.total <= H100.memory_bytes < over.total


@given(
    small=st.integers(min_value=40, max_value=300),
    extra=st.integers(min_value=0, max_value=200),
    tp=st.sampled_from([2, 4, 8]),
    prompt=st.integers(min_value=1, max_value=32_768),
)
def test_max_concurrency_never_falls_when_gpu_memory_grows(small, extra, tp, prompt):
    workload = ServingWorkload(prompt_len=prompt, output_len=256)
    a, b = (replace(H100, memory_bytes=gib * GiB) for gib in (small, small + extra))
    layout = ServingLayout(tp=tp)
    assert max_concurrency(LLAMA_70B, a, layout, workload) <= max_concurrency(
        LLAMA_70B, b, layout, workload
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gpu_memory_utilization", 1.5, "gpu_memory_utilization must be in"),
        ("kv_block_tokens", 0, "kv_block_tokens must be positive"),
    ],
)
def test_bad_memory_assumptions_say_which_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        MemoryAssumptions(**{field: value})


def test_a_layout_with_a_zero_degree_is_refused_with_its_name():
    with pytest.raises(ValueError, match="tp must be positive, got 0"):
        ServingLayout(tp=0)


def test_llama_70b_over_tp8_holds_about_16_gib_of_bf16_weights_per_gpu():
    memory = serving_memory(LLAMA_70B, H100, ServingLayout(tp=8), ServingWorkload())
    assert memory.weights / GiB == pytest.approx(16.4, abs=0.1)  # 141 GB of bf16 over 8 GPUs
