"""The seeds' case: DeepSeek-R1 671B (the deepseek-v3 preset's architecture) on 2 x 8 GPUs,
which layouts fit, with how many users at which context, and why; numbers from the plan."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from explorer.memory.serving import max_concurrency
from explorer.presets import load_gpu, load_model
from explorer.report import build_report
from explorer.scenario import Scenario, ServingInputs
from explorer.serving import plan_serving
from explorer.serving.capacity import capacity_rows, capacity_sentences
from explorer.specs import ClusterSpec, ServingWorkload
from explorer.units import GiB

DEEPSEEK_R1 = load_model("deepseek-v3")  # R1 has V3's architecture; only the weights differ
W = ServingWorkload(prompt_len=4096, output_len=1024, concurrency=32, weights_dtype="fp8")


def _case(gpu: str):
    cluster = ClusterSpec(gpu=load_gpu(gpu), num_nodes=2)
    plan = plan_serving(DEEPSEEK_R1, cluster, 16, W)
    rows = capacity_rows(DEEPSEEK_R1, cluster, plan, W)
    return cluster, plan, rows, capacity_sentences(DEEPSEEK_R1, cluster, rows, W)


def _numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\.?\d*", text)]


def test_on_h100_only_layouts_over_both_nodes_hold_users():
    # 671B fp8 weights are ~625 GiB: more than one node's 8 x 74.5 GiB
    _, plan, rows, _ = _case("h100-sxm")
    holding = [r for r in rows if r.users[0][1] > 0]
    assert holding
    assert all(r.estimate.layout.gpus_per_replica == 16 for r in holding)
    assert len(rows) == len(plan.layouts)


def test_on_h200_one_node_holds_deepseek_r1_in_fp8():
    # SGLang's DeepSeek docs serve R1 in fp8 on one 8 x H200 node with TP8
    _, _, rows, _ = _case("h200")
    tp8 = next(r for r in rows if r.label == "TP8 PP1 EP1 x2")
    assert tp8.users[0][1] > 0


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200", "b200"])
def test_the_sentences_numbers_come_from_the_plan(gpu):
    cluster, plan, rows, sentences = _case(gpu)
    holding = [r for r in rows if r.users[0][1] > 0]
    count = _numbers(sentences[0])
    assert count[:2] == [len(holding), len(plan.layouts)]
    most = next(s for s in sentences if s.startswith("Most users"))
    best = holding[0]
    assert best.label in most
    users = [n for _, n in best.users]
    numbers = _numbers(most.split(best.label, 1)[1])
    # n at 4K, n at 32K, n at 128K, free GiB, weights GiB, bytes a token
    assert numbers[0::2][:3] == users
    assert numbers[6] == round(best.kv_free_bytes / GiB, 1)
    assert numbers[7] == round(best.weights_bytes / GiB, 1)
    assert numbers[8] == round(best.kv_bytes_per_token_per_gpu)
    # the users at a context are the memory model's, independently recomputed
    for context, n in best.users:
        w = replace(W, prompt_len=context - 1024, output_len=1024, concurrency=1)
        lay = best.estimate.layout
        assert n == max_concurrency(DEEPSEEK_R1, cluster.gpu, lay, w) * lay.replicas
    fastest = max(
        (e for e in plan.layouts if e.tokens_per_s is not None), key=lambda e: e.tokens_per_s or 0
    )
    assert fastest.layout.label in sentences[-1]
    assert f"{fastest.tokens_per_s:,.0f} tokens/s" in sentences[-1]


def test_users_fall_with_context_as_the_kv_cache_per_user_grows():
    _, _, rows, _ = _case("h200")
    for r in rows:
        counts = [n for _, n in r.users]
        assert counts == sorted(counts, reverse=True)
    best = rows[0]
    # 32 times the tokens a user: at most 1/32 of the users plus paging slack
    assert best.users[2][1] <= best.users[0][1] / 32 + 1


def test_the_serving_report_carries_the_users_by_context():
    report = build_report(Scenario(workload="serving", serving=ServingInputs(concurrency=16)))
    section = report.section("serving")
    assert any("valid layouts hold a user at 4K tokens" in b for b in section.bullets)
    table = next(t for t in section.tables if t.title == "Concurrent users by context")
    users = table.frame["users at 4K tokens"]
    assert (users >= table.frame["users at 128K tokens"]).all() and users.iloc[0] > 0
