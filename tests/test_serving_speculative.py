"""Speculative decoding (Leviathan et al. eq. 1, MTP, draft models) and prefix caching."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.memory.serving import ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions, estimate_serving
from explorer.serving.latency import EngineStep
from explorer.serving.speculative import (
    Speculation,
    expected_tokens_per_step,
    speculative_decode,
)
from explorer.specs import ClusterSpec, ServingWorkload

DEEPSEEK_V3 = load_model("deepseek-v3")
LLAMA_70B = load_model("llama-3.1-70b")
LLAMA_8B = load_model("llama-3.1-8b")
H200_NODE = ClusterSpec(gpu=load_gpu("h200"))
A = ServingAssumptions()
W = ServingWorkload(prompt_len=2000, output_len=1000, concurrency=16, weights_dtype="fp8")


def test_expected_tokens_per_step_matches_leviathan_eq_1_by_hand():
    # (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2 = 3.3616
    assert expected_tokens_per_step(0.8, 4) == pytest.approx(3.3616, rel=1e-12)
    # DeepSeek-V3 sec. 5.4.3: one MTP token accepted 85% of the time gives 1.85 tokens a step
    assert expected_tokens_per_step(0.85, 1) == pytest.approx(1.85, rel=1e-12)
    assert expected_tokens_per_step(1.0, 3) == 4.0
    assert expected_tokens_per_step(0.0, 5) == 1.0


@pytest.mark.parametrize("kind", ["mtp", "draft"])
def test_acceptance_zero_without_draft_tokens_is_plain_decode(kind):
    spec = Speculation(kind=kind, draft_tokens=0, acceptance=0.0, draft_model=LLAMA_8B)
    model = DEEPSEEK_V3 if kind == "mtp" else LLAMA_70B
    layout = ServingLayout(tp=8)
    r = speculative_decode(model, H200_NODE, layout, W, spec, A)
    plain = EngineStep(model, H200_NODE, layout, W, A).seconds(16, 0, 2500.0, 0.0)
    assert r.step_s == r.plain_step_s == plain
    assert r.tokens_per_s == pytest.approx(16 / plain, rel=1e-12)
    assert r.speedup == pytest.approx(1.0, rel=1e-12)


def test_acceptance_zero_with_draft_tokens_only_costs():
    spec = Speculation(kind="mtp", draft_tokens=2, acceptance=0.0)
    r = speculative_decode(DEEPSEEK_V3, H200_NODE, ServingLayout(tp=8), W, spec, A)
    assert r.tokens_per_step == 1.0
    assert r.speedup < 1.0


def test_a_memory_bound_verify_step_costs_what_a_decode_step_costs():
    # one sequence of a dense model on one GPU: the weights dominate, k + 1 tokens' FLOPs hide;
    # only their activations and norms (5 rows' bytes, not 1) add, under 1%
    w = replace(W, concurrency=1)
    spec = Speculation(kind="draft", draft_tokens=4, acceptance=0.7, draft_model=LLAMA_8B)
    r = speculative_decode(LLAMA_8B, H200_NODE, ServingLayout(), w, spec, A)
    assert r.verify_step_s == pytest.approx(r.plain_step_s, rel=1e-2)
    assert r.verify_step_s > r.plain_step_s
    # the draft is the same model here, so each draft step is a plain step: 4 of them and the
    # verify for (1 - 0.7^5) / 0.3 = 2.7731 tokens, slower than plain decode
    assert r.step_s == pytest.approx(4 * r.plain_step_s + r.verify_step_s, rel=1e-12)
    assert r.tokens_per_step == pytest.approx(2.7731, rel=1e-12)


def test_the_mtp_module_weighs_one_deepseek_block():
    # DeepSeek-V3's model card: 14B MTP weights, of which the embedding and LM head (2 x
    # 129,280 x 7,168 = 1.853B) are shared; the rest in fp8 over TP8 is ~1.52 GB a GPU
    r = speculative_decode(
        DEEPSEEK_V3, H200_NODE, ServingLayout(tp=8), replace(W, concurrency=1), Speculation(), A
    )
    unique = 14e9 - 2 * 129_280 * 7_168
    assert r.extra_bytes_per_gpu == pytest.approx(unique / 8, rel=0.05)
    assert r.fits


def test_prefix_cache_hits_shrink_ttft():
    layout = ServingLayout(tp=4)
    w = replace(W, prompt_len=16_000, concurrency=1)
    plain = estimate_serving(LLAMA_70B, H200_NODE, layout, w, A)
    half = estimate_serving(LLAMA_70B, H200_NODE, layout, w, replace(A, prefix_cache_hit_rate=0.5))
    assert plain.ttft_s is not None and half.ttft_s is not None
    # 8,000 of 16,000 tokens prefilled, each attending 12,000 keys on average instead of 8,000:
    # fewer than half the chunks, each no cheaper, so TTFT falls by at most half
    assert 0.5 * plain.ttft_s < half.ttft_s < plain.ttft_s
    with pytest.raises(ValueError, match="prefix_cache_hit_rate"):
        ServingAssumptions(prefix_cache_hit_rate=1.0)


def test_mtp_needs_a_model_with_an_mtp_module():
    with pytest.raises(ValueError, match="no multi-token-prediction module"):
        speculative_decode(LLAMA_70B, H200_NODE, ServingLayout(tp=4), W, Speculation(), A)
