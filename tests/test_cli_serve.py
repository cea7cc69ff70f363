"""`python -m explorer serve`: the JSON contract of docs/ARCHITECTURE.md and one-sentence errors."""

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
        pytest.param(["--gpus", "0", *SERVING], "--gpus: must be at least 1", id="zero-gpus"),
        pytest.param(
            ["--gpus", "8", "--prompt-len", "0", "--output-len", "1", "--concurrency", "1"],
            "--prompt-len: must be at least 1",
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


def test_serve_disaggregate_gives_pools_split_and_transfer(capsys):
    data = serve_json(
        capsys, "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "16",
        "--prompt-len", "2000", "--output-len", "1000", "--concurrency", "64",
        "--weights-dtype", "fp8", "--disaggregate",
    )  # fmt: skip
    plans = data["disaggregated"]
    assert plans
    best = plans[0]
    assert best["prefill"]["gpus"] + best["decode"]["gpus"] == best["gpus"] <= 16
    # 2000 tokens x 80 blocks x 2 x 8 KV heads x 128 x 2 bytes (bf16 KV)
    assert best["kv_transfer_bytes_per_request"] == 2000 * 80 * 2 * 8 * 128 * 2
    assert best["tokens_per_s_per_gpu"] <= min(
        best["prefill_bound_tokens_per_s_per_gpu"], best["decode_bound_tokens_per_s_per_gpu"]
    )
    assert best["tokens_per_s"] == pytest.approx(best["requests_per_s"] * 1000, rel=1e-12)
    assert main(["serve", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "16",
                 "--prompt-len", "2000", "--output-len", "1000", "--concurrency", "64",
                 "--disaggregate"]) == 0  # fmt: skip
    assert "Disaggregated: prefill" in capsys.readouterr().out
    assert serve_json(capsys, "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "2",
                      *SERVING)["disaggregated"] is None  # fmt: skip


def test_serve_speculative_reports_the_draft_and_fails_cleanly_without_one(capsys):
    args = ["--model", "llama-3.1-70b", "--gpu", "h200", "--gpus", "8", "--prompt-len", "2000",
            "--output-len", "1000", "--concurrency", "8", "--weights-dtype", "fp8"]  # fmt: skip
    data = serve_json(
        capsys, *args, "--speculative", "draft", "--draft-model", "llama-3.1-8b",
        "--draft-tokens", "4", "--acceptance", "0.7",
    )  # fmt: skip
    s = data["speculative"]
    assert s["tokens_per_step"] == pytest.approx((1 - 0.7**5) / 0.3, rel=1e-12)
    assert s["step_s"] == pytest.approx(s["verify_step_s"] + 4 * s["draft_step_s"], rel=1e-12)
    assert s["tpot_s"] == pytest.approx(s["step_s"] / s["tokens_per_step"], rel=1e-12)
    assert serve_json(capsys, *args)["speculative"] is None
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", *args, "--speculative", "draft"])
    assert exit_info.value.code == 2
    assert "needs --draft-model" in capsys.readouterr().err


def test_serve_says_which_deepseek_r1_layouts_fit_two_h100_nodes(capsys):
    # DeepSeek-R1 671B: the deepseek-v3 preset's architecture
    args = ["--model", "deepseek-v3", "--gpu", "h100-sxm", "--gpus", "16", "--prompt-len",
            "4096", "--output-len", "1024", "--concurrency", "32",
            "--weights-dtype", "fp8"]  # fmt: skip
    data = serve_json(capsys, *args)
    capacity = data["capacity"]
    rows = {r["label"]: r for r in capacity["rows"]}
    assert set(rows) == {e["label"] for e in data["layouts"]}
    holding = [r for r in capacity["rows"] if r["users"]["4096"] > 0]
    assert capacity["sentences"][0].startswith(f"{len(holding)} of {len(rows)} valid layouts")
    # one node's 8 x 80 GB cannot hold 671B fp8 weights: the single-node layouts hold nobody
    assert rows["TP8 PP1 EP1 x2"]["users"]["4096"] == 0
    assert main(["serve", *args]) == 0
    text = capsys.readouterr().out
    assert "users at a context" in text and "Most users:" in text
