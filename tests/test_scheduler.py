"""The engine-under-load simulation against closed forms: one request, a saturated engine,
Little's law, static against continuous batching, preemption and the caps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.memory.serving import ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions, estimate_serving
from explorer.serving import scheduler as sched
from explorer.serving.scheduler import EngineLoad, serve_under_load, simulate
from explorer.specs import ClusterSpec, ServingWorkload

LLAMA_70B = load_model("llama-3.1-70b")
H100_NODE = ClusterSpec(gpu=load_gpu("h100-sxm"))
TP8 = ServingLayout(tp=8)
REL = 1e-9
TAU_S = 0.01
BIG_CACHE = 10**9


def constant_step(decodes: int, prefill: int, context: float, keys: float) -> float:
    return TAU_S


@pytest.mark.parametrize(("prompt", "chunks"), [(100, 1), (8192, 1), (3 * 8192, 3)])
def test_one_request_with_constant_steps_takes_its_chunks_then_one_step_a_token(prompt, chunks):
    load = EngineLoad(users=1, num_requests=1)
    r = simulate(constant_step, load, prompt, 50, BIG_CACHE)
    assert r.ttft.p50_s == pytest.approx(chunks * TAU_S, rel=REL)  # the last chunk samples one
    assert r.tpot.p50_s == pytest.approx(TAU_S, rel=REL)
    assert r.e2e.p50_s == pytest.approx((chunks + 49) * TAU_S, rel=REL)
    assert r.steps == chunks + 49


def test_a_single_request_has_ttft_of_the_prefill_and_tpot_of_the_batch_1_decode_step():
    w = ServingWorkload(prompt_len=2048, output_len=512, concurrency=1)
    r = serve_under_load(LLAMA_70B, H100_NODE, TP8, w, EngineLoad(users=1, num_requests=1))
    e = estimate_serving(LLAMA_70B, H100_NODE, TP8, w)
    assert r.ttft.p50_s == pytest.approx(e.ttft_s, rel=1e-9)  # one chunk of 2048 tokens
    # the decode step reads KV at prompt + output / 2 keys: the mean of the simulated contexts
    assert r.tpot.p50_s == pytest.approx(e.decode_step_s, rel=1e-6)


def test_a_saturated_engine_runs_at_the_roofline_step_of_its_batch():
    # 64 users, short prompts and long outputs: almost every step is 64 decodes
    w = ServingWorkload(prompt_len=128, output_len=1024, concurrency=64)
    load = EngineLoad(users=64, num_requests=192)
    r = serve_under_load(LLAMA_70B, H100_NODE, TP8, w, load)
    e = estimate_serving(LLAMA_70B, H100_NODE, TP8, w)
    assert e.decode_step_s is not None and e.tokens_per_s is not None
    assert r.tpot.p50_s == pytest.approx(e.decode_step_s, rel=0.03)
    assert r.tokens_per_s == pytest.approx(e.tokens_per_s, rel=0.05)
    assert r.preemptions == 0


def test_littles_law_holds_on_the_simulated_queue():
    rate = 2.0
    w = ServingWorkload(prompt_len=2048, output_len=256, concurrency=1)
    n = 800  # 3 / sqrt(n): the second check within 10.6%
    load = EngineLoad(rate_per_s=rate, num_requests=n, seed=0)
    r = serve_under_load(LLAMA_70B, H100_NODE, TP8, w, load)
    # time-averaged requests in the system = arrival rate x mean time in it: exact against the
    # measured rate, within 3 standard errors of a Poisson count (1 / sqrt(n)) against the set one
    assert r.mean_in_system == pytest.approx(r.requests_per_s * r.e2e.mean_s, rel=0.01)
    assert r.mean_in_system == pytest.approx(rate * r.e2e.mean_s, rel=3 / n**0.5)
    assert r.finished == n


def test_continuous_batching_beats_static_batching_on_latency_at_the_same_load():
    w = ServingWorkload(prompt_len=1024, output_len=256, concurrency=1)
    runs = {
        mode: serve_under_load(
            LLAMA_70B,
            H100_NODE,
            TP8,
            w,
            EngineLoad(rate_per_s=4.0, num_requests=300, batching=mode),
        )
        for mode in ("continuous", "static")
    }
    assert runs["continuous"].e2e.mean_s < runs["static"].e2e.mean_s
    assert runs["continuous"].ttft.p90_s < runs["static"].ttft.p90_s
    assert runs["continuous"].tokens_per_s >= 0.95 * runs["static"].tokens_per_s


def test_a_full_cache_preempts_and_every_request_still_finishes():
    # room for 3 sequences of 1000 + 500 tokens, 8 users: decodes outgrow the cache
    load = EngineLoad(users=8, num_requests=24)
    r = simulate(constant_step, load, 1000, 500, 3 * 1504, block_tokens=16)
    assert r.finished == 24
    assert r.preemptions > 0
    static = simulate(constant_step, EngineLoad(users=8, num_requests=24, batching="static"),
                      1000, 500, 3 * 1504)  # fmt: skip
    assert static.preemptions == 0  # static batching reserves whole sequences up front
    assert static.finished == 24


def test_the_step_cap_stops_the_run_with_a_sentence(monkeypatch):
    monkeypatch.setattr(sched, "MAX_STEPS", 50)
    r = simulate(constant_step, EngineLoad(users=4, num_requests=100), 100, 100, BIG_CACHE)
    assert r.note == f"stopped after 50 steps with {r.finished} requests finished"
    assert r.finished == 0 and r.steps == 50


def test_the_request_cap_cuts_the_run_with_a_sentence(monkeypatch):
    monkeypatch.setattr(sched, "MAX_REQUESTS", 5)
    r = simulate(constant_step, EngineLoad(users=2, num_requests=100), 10, 10, BIG_CACHE)
    assert r.finished == 5 and r.note == "cut to 5 simulated requests"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of a request rate or a number of users"),
        ({"rate_per_s": 1.0, "users": 2}, "exactly one"),
        ({"rate_per_s": -1.0}, "rate_per_s must be positive"),
        ({"users": 4, "token_budget": 0}, "token_budget must be positive"),
    ],
)
def test_bad_loads_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EngineLoad(**kwargs)


def test_a_request_larger_than_the_cache_is_refused_in_words():
    with pytest.raises(ValueError, match="does not fit the KV cache"):
        simulate(constant_step, EngineLoad(users=1, num_requests=1), 1000, 100, 512)


def test_the_kv_pool_holds_what_max_concurrency_counts_in_whole_sequences():
    from explorer.memory.serving import kv_capacity_tokens, max_concurrency, paged_tokens

    w = ServingWorkload(prompt_len=2048, output_len=512, concurrency=1)
    tokens = kv_capacity_tokens(LLAMA_70B, H100_NODE.gpu, TP8, w)
    most = max_concurrency(LLAMA_70B, H100_NODE.gpu, TP8, w)
    per_sequence = paged_tokens(2048 + 512, 16)
    assert tokens % 16 == 0  # whole paged blocks
    # max_concurrency also keeps one fp32 logit row per sequence (0.5 MB against 105 MB of
    # KV per GPU here), so it is lower by under 1%
    assert most <= tokens // per_sequence <= 1.01 * most


def test_prefix_cache_hits_skip_their_chunks_and_match_the_estimates_ttft():
    load = EngineLoad(users=1, num_requests=1)
    # 3 chunks of 8192 with the first 8192 tokens cached: 2 chunks, then 49 decode steps
    r = simulate(constant_step, load, 3 * 8192, 50, BIG_CACHE, cached_tokens=8192)
    assert r.ttft.p50_s == pytest.approx(2 * TAU_S, rel=REL)
    assert r.steps == 2 + 49
    a = replace(ServingAssumptions(), prefix_cache_hit_rate=0.5)
    w = ServingWorkload(prompt_len=2048, output_len=512, concurrency=1)
    sim = serve_under_load(LLAMA_70B, H100_NODE, TP8, w, load, a)
    e = estimate_serving(LLAMA_70B, H100_NODE, TP8, w, a)
    plain = estimate_serving(LLAMA_70B, H100_NODE, TP8, w)
    assert e.ttft_s is not None and plain.ttft_s is not None
    assert sim.ttft.p50_s == pytest.approx(e.ttft_s, rel=1e-9)  # 1024 new tokens, 1536 keys
    assert e.ttft_s < plain.ttft_s
    with pytest.raises(ValueError, match="cached tokens"):
        simulate(constant_step, load, 100, 50, BIG_CACHE, cached_tokens=100)
