"""Helix against plain TP, read as the paper reads its figures (explorer.serving.helix_paper)."""

from __future__ import annotations

import itertools
import json

from explorer.cli import main
from explorer.presets import load_cluster, load_model
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.helix import helix_points
from explorer.serving.helix_paper import pareto, summarize
from explorer.specs import ServingWorkload

MODEL, CLUSTER = load_model("deepseek-v3"), load_cluster("gb200-nvl72")
WORKLOAD = ServingWorkload(prompt_len=1_000_000, output_len=1024, weights_dtype="nvfp4",
                           kv_dtype="fp8")  # fmt: skip


def test_the_papers_two_figures_read_from_the_points():
    # Helix (arXiv:2507.07120) abstract: up to 1.5x lower TTL at a fixed batch, up to 32x more
    # users in the same latency budget (DeepSeek-R1, GB200). The summary reads the same two
    # ratios from the model's points; the test pins how they are read, not the paper's values.
    points = helix_points(MODEL, CLUSTER, 64, WORKLOAD, (1, 2, 4, 8, 16, 32), ServingAssumptions())
    s = summarize(points)
    tp1 = [p for p in points if p.kvp == 1 and p.decode_seqs == 1]
    assert s.tp_ttl_s == tp1[0].token_latency_s  # TP over all 64 GPUs at one user
    helix1 = [p for p in points if p.kvp > 1 and p.decode_seqs == 1 and p.fits]
    assert s.helix_ttl_s == min(p.token_latency_s for p in helix1)
    assert s.ttl_speedup > 1.0  # TP64 duplicates MLA's one latent KV head on every GPU
    tp_fit = [p for p in points if p.kvp == 1 and p.fits]
    assert s.tp_users == max(p.decode_seqs for p in tp_fit)
    within = [p for p in points if p.kvp > 1 and p.fits and p.token_latency_s <= s.budget_s]
    assert s.helix_users == max(p.decode_seqs for p in within)
    assert s.users_ratio >= 1.0


def test_the_frontier_is_the_fitting_points_nothing_beats_on_both_axes():
    points = helix_points(MODEL, CLUSTER, 64, WORKLOAD, (1, 4, 16, 64), ServingAssumptions())
    front = pareto(points)
    assert front and all(p.fits for p in front)
    for a, b in itertools.pairwise(front):
        assert a.token_latency_s <= b.token_latency_s
        assert b.tokens_per_s_per_gpu > a.tokens_per_s_per_gpu
    for p in (p for p in points if p.fits):
        for f in front:
            assert not (p.token_latency_s < f.token_latency_s
                        and p.tokens_per_s_per_gpu > f.tokens_per_s_per_gpu)  # fmt: skip


def test_the_command_line_prints_points_frontier_and_summary(capsys):
    code = main(["helix", "--model", "deepseek-v3", "--gpu", "gb200", "--gpus", "16",
                 "--context", "262144", "--users", "1,4,16", "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["points"]) == 5 * 3  # KVP in 1, 2, 4, 8, 16 at each of three concurrencies
    assert out["summary"]["paper_ttl_speedup"] == 1.5
    assert out["summary"]["ttl_speedup"] > 0
