"""The table of published serving runs loads and validates; the runner gives finite numbers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from validation import serving as runs

ROWS = runs.load_runs()


def test_the_table_holds_runs_from_at_least_two_engines_each_with_its_source():
    assert len(ROWS) >= 30
    assert {"TensorRT-LLM", "SGLang"} <= {r["engine"] for r in ROWS}
    assert all(r["source"] and r["version"] and r["measured_tokens_per_s"] > 0 for r in ROWS)
    assert len({r["id"] for r in ROWS}) == len(ROWS)


def test_a_published_figure_is_carried_as_read():
    # perf-overview, Llama 3.3 70B, H100 TP2 FP8, 1000/1000: 4,205 output tokens/s in all
    row = next(r for r in ROWS if r["id"] == "trtllm-llama-3.1-70b-h100-sxm-tp2-ep1-1000-1000")
    assert row["measured_tokens_per_s"] == 4205 and row["num_gpus"] == 2
    assert runs.estimate_run(row).measured_per_gpu == 4205 / 2


def test_every_run_gets_a_finite_estimate_or_says_why_not():
    checks = [runs.estimate_run(r) for r in ROWS]
    for c in checks:
        if c.estimated_per_gpu is None:
            assert c.why.startswith(("does not fit", "no sequence fits"))
        else:
            assert math.isfinite(c.estimated_per_gpu) and c.estimated_per_gpu > 0
    mean, worst, missing = runs.summary(checks)
    assert math.isfinite(mean) and worst.error is not None and missing < len(checks) / 4
    text = runs.render(checks)
    assert all(f"{c.id} " in text for c in checks)
    assert "Summary:" in text and "mean |error|" in text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("num_gpus = 8\ntp = 4", "the layout has 4 GPUs, the run 8"),
        ('num_gpus = 8\ntp = 8\nphase = "decode"', "a decode run needs batch_per_gpu"),
        ('num_gpus = 8\ntp = 8\nmeasured_per = "gpu"', "measured_per must be total or node"),
    ],
    ids=["gpu-count", "decode-without-batch", "unknown-unit"],
)
def test_a_bad_row_is_refused_with_a_sentence(tmp_path: Path, edit, message):
    base = {
        "id": "x", "source": "s", "engine": "e", "version": "v", "model": "llama-3.1-8b",
        "gpu": "h100-sxm", "pp": 1, "ep": 1, "replicas": 1, "redundant_experts": 0,
        "weights_dtype": "fp8", "kv_dtype": "bf16", "phase": "throughput", "prompt_len": 128,
        "output_len": 128, "measured_tokens_per_s": 1000, "measured_per": "total",
    }  # fmt: skip
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in base.items()]
    overridden = {line.split(" = ")[0] for line in edit.splitlines()}
    lines = [line for line in lines if line.split(" = ")[0] not in overridden]
    path = tmp_path / "runs.toml"
    path.write_text("[[run]]\n" + "\n".join([*lines, *edit.splitlines()]) + "\n")
    with pytest.raises(ValueError, match=message):
        runs.load_runs(path)


def test_the_runner_prints_and_exits_0(capsys):
    assert runs.main([]) == 0
    assert "Summary:" in capsys.readouterr().out
