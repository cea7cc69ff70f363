"""`python -m explorer params`: the JSON contract and one-sentence errors with exit status 2.

In-process through `explorer.cli.main` (what `python -m explorer` calls): a real process adds
nothing here. tests/test_cli_report.py and tests/test_cli_serve.py run the module as a process,
status and stderr included, and tests/test_cli_cold_start.py checks what a cold start imports.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import pytest

from explorer.cli import main


class Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys):
    """``python -m explorer ARGS`` in this process: its status, stdout and stderr."""

    def run(*args: str) -> Ran:
        try:
            status = main(list(args))
        except SystemExit as stop:  # argparse's errors and the CLI's one sentence
            status = stop.code if isinstance(stop.code, int) else 2
        out = capsys.readouterr()
        return Ran(status, out.out, out.err)

    return run


def test_params_json_reports_deepseek_v3_total_and_active(run_cli):
    result = run_cli("params", "--model", "deepseek-v3", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["total_params"] == pytest.approx(671e9, rel=0.005)
    assert data["active_params"] == pytest.approx(37e9, rel=0.03)
    assert sum(data["components"].values()) == data["total_params_with_mtp"]


def test_params_reads_a_config_json_path(run_cli, tmp_path):
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
def test_bad_input_prints_one_sentence_and_exits_2(run_cli, args):
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_malformed_config_file_is_one_sentence(run_cli, tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    result = run_cli("params", "--model", str(path), "--json")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "JSON" in result.stderr
