"""`python -m explorer serve`: the JSON contract of DESIGN.md and one-sentence errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from explorer.cli import main

LAYOUT_KEYS = {
    "tp",
    "pp",
    "ep",
    "replicas",
    "weights_bytes",
    "kv_bytes_per_token",
    "max_concurrency",
    "ttft_s",
    "itl_s",
    "tokens_per_s",
    "fits",
    "bytes",
    "prefill_bound",
    "decode_bound",
}
CATEGORIES = ["weights", "kv_cache", "activations", "communication", "runtime", "headroom"]
SERVING = ["--prompt-len", "2048", "--output-len", "512", "--concurrency", "16"]


def serve_json(capsys, *args: str) -> dict:
    assert main(["serve", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_serve_json_has_the_contract_keys_for_every_layout(capsys):
    data = serve_json(
        capsys, "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "16", *SERVING,
        "--weights-dtype", "fp8",
    )  # fmt: skip
    assert {"layouts", "rejected", "pareto"} <= set(data)
    for layout in data["layouts"]:
        assert set(layout) >= LAYOUT_KEYS
        assert list(layout["bytes"]) == CATEGORIES
        assert ("reason" in layout) is (not layout["fits"])
        assert layout["prefill_bound"] in {"compute", "memory", "communication"}
    assert all(r["reason"] for r in data["rejected"])
    assert data["pareto"] and all(p["pareto"] for p in data["pareto"])
    assert data["layouts"][0]["kv_bytes_per_token"] == 70_272  # MLA latent, bf16


def test_assume_sets_a_named_serving_assumption(capsys):
    args = ["--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "8", *SERVING]
    plain = serve_json(capsys, *args)
    slow = serve_json(capsys, *args, "--assume", "serving.hbm_efficiency=0.4")
    assert slow["assumptions"]["hbm_efficiency"] == 0.4

    def shape(r: dict) -> tuple:
        return r["tp"], r["pp"], r["ep"], r["replicas"]

    best = next(r for r in slow["layouts"] if r["fits"])
    before = next(r for r in plain["layouts"] if shape(r) == shape(best))
    assert best["itl_s"] > before["itl_s"]


@pytest.mark.parametrize(
    ("dtype", "fits"),
    [
        pytest.param("fp8", True, id="llama3.1-405b-fp8-fits-8xh100"),
        pytest.param("bf16", False, id="llama3.1-405b-bf16-does-not-fit-8xh100"),
    ],
)
def test_405b_serves_on_one_h100_node_only_in_fp8(capsys, dtype, fits):
    data = serve_json(
        capsys, "--model", "llama-3.1-405b", "--gpu", "h100-sxm", "--gpus", "8", *SERVING,
        "--weights-dtype", dtype,
    )  # fmt: skip
    assert any(layout["fits"] for layout in data["layouts"]) is fits


def test_serve_text_lists_layouts_and_answers(capsys):
    assert (
        main(["serve", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "8", *SERVING])
        == 0
    )
    text = capsys.readouterr().out
    assert "TP8 PP1 EP1 x1" in text
    assert "The smallest replica that fits" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--gpus", "0", *SERVING], "must be positive", id="zero-gpus"),
        pytest.param(
            ["--gpus", "8", "--prompt-len", "0", "--output-len", "1", "--concurrency", "1"],
            "prompt_len must be positive",
            id="zero-prompt",
        ),
        pytest.param(
            ["--gpus", "8", *SERVING, "--gpu-memory-utilization", "2"],
            "gpu_memory_utilization must be in",
            id="utilization-above-one",
        ),
        pytest.param(
            ["--gpus", "8", *SERVING, "--weights-dtype", "fp4"], "invalid choice", id="bad-dtype"
        ),
        pytest.param(
            ["--gpus", "8", *SERVING, "--assume", "hbm_efficiency=0.5"],
            "no assumption named 'hbm_efficiency' (close: serving.hbm_efficiency)",
            id="assume-without-the-serving-prefix",
        ),
    ],
)
def test_bad_input_is_one_sentence_and_exit_status_2(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unknown_gpu_fails_from_a_real_process_with_status_2():
    result = subprocess.run(
        [sys.executable, "-m", "explorer", "serve", "--model", "llama-3.1-70b", "--gpu", "h999",
         "--gpus", "8", *SERVING, "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stdout == ""
    assert "h999" in result.stderr and result.stderr.count("\n") == 1


LOADED = ["--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "8", *SERVING]


def test_serve_under_load_reports_percentiles_and_throughput_of_the_best_layout(capsys):
    data = serve_json(capsys, *LOADED, "--rate", "3", "--requests", "200")
    u = data["under_load"]
    best = next(r for r in data["layouts"] if r["fits"])
    assert u["label"] == best["label"] and u["finished"] == 200
    for name in ("ttft", "tpot", "e2e"):
        assert 0 < u[name]["p50_s"] <= u[name]["p90_s"] <= u[name]["p99_s"]
    # below saturation the engine serves what arrives: 3 requests/s x 512 tokens, sampled
    assert u["tokens_per_s"] == pytest.approx(3 * 512, rel=0.25)
    assert data["layouts"] and serve_json(capsys, *LOADED)["under_load"] is None


def test_static_batching_under_load_reads_in_the_text(capsys):
    assert (
        main(["serve", *LOADED, "--users", "16", "--requests", "32", "--batching", "static"]) == 0
    )
    assert "Under load (static batching) on TP" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "1", "--users", "4"], "not allowed with argument"),
        (["--users", "4", "--token-budget", "0"], "token_budget must be positive"),
        (["--rate", "-2"], "rate_per_s must be positive"),
    ],
    ids=["rate-and-users", "zero-budget", "negative-rate"],
)
def test_bad_load_flags_are_one_sentence_and_exit_status_2(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", *LOADED, *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
