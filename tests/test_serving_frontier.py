"""``serve --frontier``: tokens/s per GPU against tokens/s per user across layouts and loads."""

from __future__ import annotations

import json
import math

from explorer.cli import main

ARGS = ["serve", "--json", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "16",
        "--prompt-len", "2048", "--output-len", "1024", "--concurrency", "64",
        "--weights-dtype", "fp8", "--frontier"]  # fmt: skip


def _frontier(capsys, *extra: str) -> list[dict]:
    assert main([*ARGS, *extra]) == 0
    return json.loads(capsys.readouterr().out)["frontier"]


def test_the_frontier_trades_speed_per_user_for_tokens_per_gpu(capsys):
    front = _frontier(capsys)
    assert len(front) >= 3
    users = [p["tokens_per_s_per_user"] for p in front]
    gpus = [p["tokens_per_s_per_gpu"] for p in front]
    assert users == sorted(users, reverse=True)  # fastest per user first ...
    assert gpus == sorted(gpus) and len(set(gpus)) == len(gpus)  # ... each next serves more
    assert all(math.isfinite(v) for p in front for v in (p["itl_s"], p["ttft_s"]))
    assert all(p["tokens_per_s_per_user"] == 1 / p["itl_s"] for p in front)
    assert len({p["concurrency"] for p in front}) > 1  # loads, not only layouts
    assert len({p["label"] for p in front}) > 1


def test_the_frontier_sweeps_two_batch_overlap_and_speculation(capsys):
    # at the largest loads DeepSeek-V3's prefill exchange is worth overlapping (TBO points)
    assert any(p["two_batch_overlap"] for p in _frontier(capsys))
    spec = _frontier(capsys, "--speculative", "mtp", "--acceptance", "0.85")
    assert spec and all(p["speculative"] for p in spec)
    assert main(["serve", *ARGS[2:]]) == 0
    assert "Frontier (tokens/s per GPU against tokens/s per user" in capsys.readouterr().out
