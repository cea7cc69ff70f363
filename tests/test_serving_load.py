"""Serving figures at extreme inputs: latency only where a layout fits, chunked prefill under
the engine's token budget (ITL bounded, the excess queues into TTFT)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.cli import main
from explorer.memory.serving import ServingLayout
from explorer.presets import load_gpu, load_model
from explorer.serving import ServingAssumptions, estimate_serving
from explorer.serving.latency import sustained_decodes
from explorer.specs import ClusterSpec, ServingWorkload

LLAMA_70B = load_model("llama-3.1-70b")
H100_NODE = ClusterSpec(gpu=load_gpu("h100-sxm"))
TP8 = ServingLayout(tp=8)
BUDGET = ServingAssumptions().memory.prefill_chunk_tokens  # 8192, vLLM's max_num_batched_tokens
REL = 1e-9


def test_a_layout_that_does_not_fit_reports_no_latency_or_throughput():
    workload = ServingWorkload(prompt_len=32_000, output_len=1, concurrency=256)
    e = estimate_serving(LLAMA_70B, H100_NODE, TP8, workload)
    assert not e.fits and "KV cache holds" in e.reason
    assert (e.ttft_s, e.itl_s, e.decode_step_s, e.tokens_per_s) == (None, None, None, None)
    assert e.tokens_per_s_per_gpu is None
    assert e.decode.total_s > 0  # the step's roofline is still shown, as the reason for bounds


def test_serve_json_has_null_latency_and_the_text_says_why_for_layouts_that_do_not_fit(capsys):
    args = ["serve", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "8",
            "--prompt-len", "32000", "--output-len", "1", "--concurrency", "256"]  # fmt: skip
    assert main([*args, "--json"]) == 0
    layouts = json.loads(capsys.readouterr().out)["layouts"]
    apart = [r for r in layouts if not r["fits"]]
    assert apart and all(r["ttft_s"] is r["itl_s"] is r["tokens_per_s"] is None for r in apart)
    assert main(args) == 0
    assert "(does not fit: no latency)" in capsys.readouterr().out


def test_below_the_budget_each_step_mixes_in_the_successors_prompts():
    # 32 sequences of 512 outputs: 32 / 512 requests replaced a step, 2048 prompt tokens each,
    # = 128 prefill tokens mixed in per step, far under the 8192 - 32 the budget leaves
    w = ServingWorkload(prompt_len=2048, output_len=512, concurrency=32)
    e = estimate_serving(LLAMA_70B, H100_NODE, TP8, w)
    assert e.itl_s == pytest.approx(e.decode_step_s + 128 * e.prefill.total_s / 2048, rel=REL)
    assert e.tokens_per_s == pytest.approx(32 / e.itl_s, rel=REL)


def test_a_tiny_output_at_high_concurrency_queues_prefill_instead_of_stretching_itl():
    # 64 users each wanting 8192 prompt tokens for 1 output token: the budget holds one prompt
    # a step, so ITL is one step of decode plus one prefill chunk (not 64 prefills, ~24 s),
    # and each request waits for the others' prefills: TTFT ~ 64 prefills (closed loop)
    w = ServingWorkload(prompt_len=8192, output_len=1, concurrency=64)
    e = estimate_serving(LLAMA_70B, H100_NODE, TP8, w)
    assert e.itl_s is not None and e.ttft_s is not None
    assert e.itl_s < 1.1 * e.prefill.total_s
    assert e.ttft_s == pytest.approx(64 * e.prefill.total_s, rel=0.05)


def test_sustained_decodes_fill_the_budget_with_decodes_and_their_successors_prompts():
    # d (1 + P / O) = budget: 8192 x 512 / (512 + 2048) = 1638.4 sequences decoding
    assert sustained_decodes(8192, 2048, 512) == pytest.approx(1638.4, rel=REL)


@settings(max_examples=40, deadline=None)
@given(
    prompt=st.integers(min_value=1, max_value=100_000),
    output=st.integers(min_value=1, max_value=4096),
    concurrency=st.integers(min_value=1, max_value=4096),
    pp=st.sampled_from([1, 2]),
)
def test_itl_never_exceeds_a_decode_step_plus_one_budget_of_prefill(
    prompt, output, concurrency, pp
):
    layout = ServingLayout(tp=4, pp=pp)
    w = ServingWorkload(prompt_len=prompt, output_len=output, concurrency=concurrency)
    e = estimate_serving(LLAMA_70B, H100_NODE, layout, w)
    if not e.fits:
        assert e.itl_s is None
        return
    assert e.itl_s is not None and e.decode_step_s is not None and e.ttft_s is not None
    chunk = min(prompt, BUDGET)
    one_budget_s = pp * BUDGET * e.prefill.total_s / chunk
    assert e.decode_step_s <= e.itl_s <= e.decode_step_s + one_budget_s
    own_chunks_s = e.prefill.total_s * prompt / chunk
    assert e.ttft_s >= own_chunks_s * (1 - 1e-12)  # at least the prompt's own chunks
    assert e.tokens_per_s is not None and 0 < e.tokens_per_s <= concurrency / e.decode_step_s


def test_the_report_table_leaves_latency_blank_for_layouts_that_do_not_fit():
    from explorer.report.serving import layouts_table
    from explorer.report.tables import display_frame
    from explorer.serving import plan_serving

    w = ServingWorkload(prompt_len=32_000, output_len=1, concurrency=256)
    plan = plan_serving(LLAMA_70B, H100_NODE, 8, w)
    shown = display_frame(layouts_table(plan))
    apart = shown[shown["fits"] == "no"]
    assert len(apart) > 0 and set(apart["TTFT (ms)"]) == set(apart["ITL (ms)"]) == {"–"}
    assert set(apart["tokens/s"]) == {"–"}
