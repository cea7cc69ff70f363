"""Speculative decoding in the planner, the frontier and the scheduler: acceptance 0 is plain
decode, and a speculative engine emits its expected tokens a step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.memory.serving import ServingLayout
from explorer.presets import load_cluster, load_gpu, load_model
from explorer.serving import ServingAssumptions, estimate_serving, plan_serving
from explorer.serving.frontier import pareto_points
from explorer.serving.latency import EngineStep
from explorer.serving.scheduler import EngineLoad, serve_under_load, simulate
from explorer.serving.speculative import Speculation, speculative_decode
from explorer.specs import ClusterSpec, ServingWorkload

DEEPSEEK_V3 = load_model("deepseek-v3")
LLAMA_70B = load_model("llama-3.1-70b")
LLAMA_8B = load_model("llama-3.1-8b")
H100_NODE = ClusterSpec(gpu=load_gpu("h100-sxm"))
H200_TWO = load_cluster("hgx-h200", 2)
A = ServingAssumptions()
W = ServingWorkload(prompt_len=1024, output_len=256, concurrency=32, weights_dtype="fp8")
DRAFT = Speculation(kind="draft", draft_model=LLAMA_8B, draft_tokens=0, acceptance=0.0)


def test_no_draft_tokens_at_acceptance_zero_plan_and_frontier_equal_plain_decode():
    plain = plan_serving(LLAMA_70B, H100_NODE, 8, W, A)
    spec = plan_serving(LLAMA_70B, H100_NODE, 8, W, A, speculation=DRAFT)
    assert [e.itl_s for e in spec.layouts] == [e.itl_s for e in plain.layouts]
    assert [e.tokens_per_s for e in spec.layouts] == [e.tokens_per_s for e in plain.layouts]
    assert [p.tokens_per_s_per_gpu for p in spec.pareto] == [
        p.tokens_per_s_per_gpu for p in plain.pareto
    ]


def test_no_draft_tokens_at_acceptance_zero_the_scheduler_runs_plain_decode():
    load = EngineLoad(users=16, num_requests=48)
    lay = ServingLayout(tp=8)
    plain = serve_under_load(LLAMA_70B, H100_NODE, lay, W, load, A)
    spec = serve_under_load(LLAMA_70B, H100_NODE, lay, W, load, A, DRAFT)
    assert spec == plain


def test_acceptance_zero_with_drafts_gives_one_token_a_step_at_the_drafts_cost():
    # every drafted token rejected: as many steps as plain decode, each longer by k drafts
    load = EngineLoad(users=8, num_requests=8)
    lay = ServingLayout(tp=8)
    costly = replace(DRAFT, draft_tokens=2)
    plain = serve_under_load(LLAMA_70B, H100_NODE, lay, W, load, A)
    spec = serve_under_load(LLAMA_70B, H100_NODE, lay, W, load, A, costly)
    assert spec.steps == plain.steps and spec.finished == plain.finished
    assert spec.tpot.p50_s > plain.tpot.p50_s
    step = EngineStep(LLAMA_70B, H100_NODE, lay, W, A, costly)
    assert step.tokens_per_step == 1.0 and step.draft_tokens == 2


def test_a_speculative_request_takes_the_steps_its_accepted_tokens_need():
    # MTP at acceptance 0.85 and k = 1: 1.85 tokens a step; after the prefill's first token,
    # 37 more need 20 steps (floor(1.85 x 20) = 37), so 21 steps of 1 s
    load = EngineLoad(users=1, num_requests=1)
    r = simulate(lambda d, p, c, k: 1.0, load, 10, 38, 10**6, 16, 0, 1.85, 1)
    assert r.steps == 21
    assert r.e2e.p50_s == pytest.approx(21.0, rel=1e-12)
    assert r.tpot.p50_s == pytest.approx(20.0 / 37.0, rel=1e-12)


def test_the_estimate_with_mtp_equals_speculative_decode_per_token():
    # decodes alone (a prompt of 1 token and no budget pressure): the planner's decode step per
    # token is speculative_decode's time per output token
    mtp = Speculation(kind="mtp", draft_tokens=1, acceptance=0.85)
    w = ServingWorkload(prompt_len=2000, output_len=1000, concurrency=64, weights_dtype="fp8")
    lay = ServingLayout(tp=8, ep=2)
    e = estimate_serving(DEEPSEEK_V3, H200_TWO, lay, w, A, mtp)
    sd = speculative_decode(DEEPSEEK_V3, H200_TWO, lay, w, mtp, A)
    assert e.fits
    assert e.decode_step_s == pytest.approx(sd.tpot_s, rel=1e-9)
    plain = estimate_serving(DEEPSEEK_V3, H200_TWO, lay, w, A)
    assert e.tokens_per_s > plain.tokens_per_s  # MTP pays at 85% acceptance


def test_the_frontier_marks_speculative_and_overlapped_points():
    mtp = Speculation(kind="mtp", draft_tokens=1, acceptance=0.85)
    lay = [ServingLayout(tp=8, ep=2)]
    points = pareto_points(DEEPSEEK_V3, H200_TWO, lay, W, (8, 64), A, mtp, (False, True))
    assert {(p.two_batch_overlap, p.speculative) for p in points} == {(False, True), (True, True)}
    assert all(p.tokens_per_s_per_user == pytest.approx(1 / p.itl_s) for p in points)
