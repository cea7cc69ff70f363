"""Prompts admitted whole (no chunked prefill), trtllm-bench's own batch and token budget, and
the published serving runs' agreement with them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.memory.serving import ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.published_serving import estimate_run, load_runs, summary, trtllm_bench_settings
from explorer.serving import ServingAssumptions
from explorer.serving.assumptions import graph_batch
from explorer.serving.kernels import expert_gemm_cost
from explorer.serving.latency import (
    _Case,
    _compute_parts,
    _slowest,
    _stage_flops,
    replica_latency,
    sustained_decodes,
    whole_prompt_decodes,
)
from explorer.serving.scheduler import EngineLoad, simulate
from explorer.specs import ClusterSpec, ServingWorkload


@pytest.mark.parametrize(
    ("budget", "prompt", "steps", "expected"),
    [
        # 9216 tokens, 5000-token prompts: one prompt a step, so 500 sequences of 500 steps
        (9216, 5000, 500, 500.0),
        # 3840 tokens, 2048-token prompts, 128 output steps: one prompt a step, 128 sequences
        (3840, 2048, 128, 128.0),
        # 8192 tokens, 128-token prompts, 2048 steps: 4 prompts leave 7680 tokens of decodes
        (8192, 128, 2048, 7680.0),
        # a budget below one prompt + its decodes counts as 5000 + 500: one prompt, 500 left
        (100, 5000, 500, 500.0),
    ],
)
def test_whole_prompts_limit_the_decodes_a_budget_keeps(budget, prompt, steps, expected):
    assert whole_prompt_decodes(budget, prompt, steps) == pytest.approx(expected)


def test_whole_prompts_never_keep_more_decodes_than_chunked_prefill():
    for budget, prompt, steps in [(9216, 5000, 500), (2048, 1000, 1000), (8192, 128, 2048)]:
        chunked = sustained_decodes(budget, prompt, steps)
        assert whole_prompt_decodes(budget, prompt, steps) <= chunked + 1e-9


def test_an_engine_without_chunked_prefill_decodes_fewer_sequences_at_long_prompts():
    # Llama 3.1 8B on one H200, 5000 / 500 tokens, 2000 sequences wanted, 9216 tokens a step:
    # chunked prefill keeps 9216 x 500 / 5500 = 837.8 decoding; whole prompts keep 500
    model, cluster = load_model("llama-3.1-8b"), ClusterSpec(gpu=load_gpu("h200"), num_nodes=1)
    w = ServingWorkload(prompt_len=5000, output_len=500, concurrency=2000, weights_dtype="fp8")
    chunked = ServingAssumptions()
    chunked = replace(chunked, memory=replace(chunked.memory, prefill_chunk_tokens=9216))
    whole = replace(chunked, chunked_prefill=False)
    one = ServingLayout()
    assert replica_latency(model, cluster, one, w, chunked).decoding == pytest.approx(837.8, 1e-3)
    assert replica_latency(model, cluster, one, w, whole).decoding == pytest.approx(500.0)


def test_trtllm_bench_picks_its_batch_and_token_budget_from_its_memory_estimate():
    # Llama 3.1 8B FP8 on one H100 (85,520,809,984 bytes), 5000 / 500: the KV cache gets
    # 0.9 x (85,520,809,984 - 8,030,261,248) bytes, 65,536 bytes a token (2 x 32 x 8 x 128),
    # so 193.5 requests of 5500 tokens: max_batch_size 224 (up to 32s), 193.5 x 11 = 2128
    # tokens -> 2304 (up to 256s), raised to 5000 + 224 without chunked prefill
    model, gpu = load_model("llama-3.1-8b"), load_gpu("h100-sxm")
    w = ServingWorkload(prompt_len=5000, output_len=500, concurrency=1, weights_dtype="fp8")
    w = replace(w, kv_dtype="fp8")
    assert trtllm_bench_settings(model, gpu.memory_bytes, 1, 1, w) == (224, 5224)
    # 128 / 128 on an H200: the requests cap at 4096, 4096 x 2 tokens -> 8192
    short = replace(w, prompt_len=128, output_len=128)
    assert trtllm_bench_settings(model, load_gpu("h200").memory_bytes, 1, 1, short) == (4096, 8192)


def test_the_qwen3_rows_read_as_tp8_and_the_table_meets_the_issue_target():
    checks = [estimate_run(r) for r in load_runs()]
    qwen = [c for c in checks if "qwen3-235b" in c.id]
    assert len(qwen) == 8 and all(c.error is not None and abs(c.error) < 0.5 for c in qwen)
    mean, worst, missing = summary(checks)
    assert missing == 0 and mean <= 0.20 and abs(worst.error or 0.0) <= 0.50


def test_the_prompts_mixed_into_one_step_run_as_one_prefill_batch():
    # Llama 3.1 8B on one H200, 128 / 128 tokens, 4096 sequences, 8192 tokens a step: each
    # step mixes in 4096 x 128 / 128 = 4096 prompt tokens (32 prompts), which run as one
    # prefill of 4096 tokens (one read of the weights), not as 32 prefills of 128
    model, cluster = load_model("llama-3.1-8b"), ClusterSpec(gpu=load_gpu("h200"), num_nodes=1)
    w = ServingWorkload(prompt_len=128, output_len=128, concurrency=4096, weights_dtype="fp8")
    a, one = ServingAssumptions(), ServingLayout()
    t = replica_latency(model, cluster, one, w, a)
    batch = _slowest(_Case(model, cluster, one, w, a), 4096, 64, prefill=True).total_s
    assert t.decoding == 4096 and t.itl_s == pytest.approx(t.decode_step_s + batch)
    assert t.itl_s < t.decode_step_s + 32 * t.prefill.total_s


@pytest.mark.parametrize(("chunked", "decodes"), [(True, 922 * 50 / 550), (False, 50.0)])
def test_the_scheduler_keeps_the_decodes_the_closed_forms_give(chunked, decodes):
    # a step of 1 s whatever it holds, 200 users, 500-token prompts, 50 output tokens, 922
    # tokens a step: chunked prefill keeps 922 x 50 / 550 = 83.8 sequences decoding (output
    # tokens a second), whole prompts one prompt a step, so 50
    load = EngineLoad(users=200, max_batch=200, token_budget=922, num_requests=3000)
    one = simulate(lambda *_: 1.0, load, 500, 50, 10**7, chunked_prefill=chunked)
    assert one.tokens_per_s == pytest.approx(decodes, rel=0.05)


def test_experts_parallel_over_the_tp_ranks_pay_the_busiest_ranks_load():
    # Qwen3-235B at TP8, 2048 tokens: whole experts, 16 a rank, each rank 2048 x 8 / 8 = 2048
    # copies; cv 1.68: 1 + sqrt(2 ln 8) sqrt(1.68^2 / 16 + 1 / 2048) = 1.8577 x the expert
    # GEMMs' time of TP-sharded experts (same FLOPs, same 128 rows per expert), times the two
    # shapes' cost: whole experts (1536 wide, 16 a GPU) against slices (192 wide, all 128:
    # k = 192 deep down GEMMs pay the FP8 per-wave fixed work of 600 k-elements)
    model = load_model("qwen3-235b-a22b")
    cluster, layout = ClusterSpec(gpu=load_gpu("h200"), num_nodes=1), ServingLayout(tp=8)
    w = ServingWorkload(prompt_len=128, output_len=128, concurrency=2048, weights_dtype="fp8")
    flops = _stage_flops(model, tuple(range(model.num_hidden_layers)), True)
    sharded, whole = ServingAssumptions(), ServingAssumptions(experts_parallel_in_tp=True)
    tp = _compute_parts(_Case(model, cluster, layout, w, sharded), flops, 2048, 0, True, 2048)
    ep = _compute_parts(_Case(model, cluster, layout, w, whole), flops, 2048, 0, True, 2048)
    h200 = cluster.gpu
    whole_s, _ = expert_gemm_cost(model, 128.0, 1536.0, 16, "fp8", h200)
    slice_s, _ = expert_gemm_cost(model, 128.0, 192.0, 128, "fp8", h200)
    assert ep.experts / tp.experts == pytest.approx(1.8577 * whole_s / slice_s, abs=1e-4)
    assert whole_s < slice_s
    assert ep.gemms == tp.gemms and ep.attention == tp.attention


def test_a_capped_graph_list_pads_to_the_cap_not_past_it():
    # TensorRT-LLM's perf-overview list (..., 1024, 2048, 4096, 8192) under a cap of 2304:
    # 2135 sequences pad to 2304 (not 4096); 1500 still to 2048; 2400 run eagerly
    a = ServingAssumptions(cuda_graph_sizes="tensorrt-llm", cuda_graph_max=2304)
    assert graph_batch(a, 2135) == 2304 and graph_batch(a, 1500) == 2048
    assert graph_batch(a, 2400) is None
    assert graph_batch(replace(a, cuda_graph_max=None), 2135) == 4096
