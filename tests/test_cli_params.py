"""`python -m explorer params`: the JSON contract and one-sentence errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args], capture_output=True, text=True, timeout=120
    )


def test_params_json_reports_deepseek_v3_total_and_active():
    result = run_cli("params", "--model", "deepseek-v3", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["total_params"] == pytest.approx(671e9, rel=0.005)
    assert data["active_params"] == pytest.approx(37e9, rel=0.03)
    assert sum(data["components"].values()) == data["total_params_with_mtp"]


def test_params_reads_a_config_json_path(tmp_path):
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "vocab_size": 1000,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = run_cli("params", "--model", str(path), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total_params"] > 0


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["params", "--model", "no-such-model"], id="unknown-preset"),
        pytest.param(["params", "--model", "/no/such/config.json"], id="missing-file"),
        pytest.param(["params"], id="missing-flag"),
        pytest.param(["params", "--model", "llama-3.1-8b", "--seq", "0"], id="zero-sequence"),
        pytest.param(["frobnicate"], id="unknown-subcommand"),
    ],
)
def test_bad_input_prints_one_sentence_and_exits_2(args):
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_malformed_config_file_is_one_sentence(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    result = run_cli("params", "--model", str(path), "--json")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "JSON" in result.stderr
