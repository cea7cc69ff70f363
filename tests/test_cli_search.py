"""``python -m explorer search``: the JSON contract (docs/ARCHITECTURE.md), the table, bad input."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from explorer.cli import main

ARGS = ["search", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "16"]
WORKLOAD = ["--seq", "4096", "--gbs", "256"]
LAYOUT_KEYS = {"tp", "pp", "dp", "cp", "ep", "zero", "mbs", "recompute", "schedule", "virtual"}
ROW_KEYS = LAYOUT_KEYS | {"peak_bytes", "step_time_s", "tokens_per_s", "mfu"}


def run_json(capsys, *extra: str) -> dict:
    assert main([*ARGS, *WORKLOAD, "--json", *extra]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


@pytest.fixture(scope="module")
def result() -> dict:
    """One JSON search shared by the module (capsys is per test, so stdout is redirected)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main([*ARGS, *WORKLOAD, "--json", "--top", "5"]) == 0
    return json.loads(buffer.getvalue())


def test_json_has_the_contract_keys(result):
    assert {"evaluated", "layouts", "rejected"} <= set(result)
    assert result["evaluated"] > len(result["layouts"])


def test_each_ranked_layout_carries_the_contract_fields(result):
    assert len(result["layouts"]) == 5
    for row in result["layouts"]:
        assert set(row) >= ROW_KEYS
        assert row["peak_bytes"] > 0 and row["tokens_per_s"] > 0 and 0 < row["mfu"] < 1


def test_layouts_come_best_first(result):
    steps = [row["step_time_s"] for row in result["layouts"]]
    assert steps == sorted(steps)


def test_each_rejected_row_carries_the_layout_fields_and_a_reason(result):
    assert result["rejected"]
    for row in result["rejected"]:
        assert (LAYOUT_KEYS | {"reason", "kind", "num_layouts"}) <= set(row)
        assert isinstance(row["reason"], str) and row["reason"]


def test_layouts_and_rejections_account_for_every_layout_considered(result):
    rejected = sum(row["num_layouts"] for row in result["rejected"])
    assert len(result["layouts"]) + rejected == result["evaluated"]


def test_mbs_fixes_the_micro_batch(capsys):
    out = run_json(capsys, "--top", "3", "--mbs", "2")
    assert {row["mbs"] for row in out["layouts"]} == {2}


def test_space_flags_narrow_the_search(capsys):
    out = run_json(capsys, "--top", "3", "--zero-stages", "1", "--schedules", "1f1b")
    assert {row["zero"] for row in out["layouts"]} == {1}
    assert {row["schedule"] for row in out["layouts"]} == {"1f1b"}


def test_etp_values_open_expert_tensor_parallelism(capsys):
    moe = ["search", "--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "16", *WORKLOAD]
    assert main([*moe, "--json", "--top", "2", "--etp-values", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {row["etp"] for row in out["layouts"]} == {2}


def test_assume_changes_the_search_and_is_echoed(capsys):
    plain = run_json(capsys, "--top", "1")
    slow = run_json(capsys, "--top", "1", "--assume", "compute.max_efficiency=0.375")
    assert slow["assumed"] == {"compute.max_efficiency": 0.375}
    assert slow["layouts"][0]["step_time_s"] > 1.5 * plain["layouts"][0]["step_time_s"]


def test_text_output_lists_the_ranked_layouts(capsys):
    assert main([*ARGS, *WORKLOAD, "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "layouts considered" in out and "#1" in out and "#3" in out


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["--gpus", "0"], "argument --gpus: must be at least 1"),
        (["--top", "0"], "argument --top: must be at least 1"),
        (["--mbs-values", "0"], "argument --mbs-values: must be at least 1"),
        (["--model", "no-such-model"], "unknown model"),
    ],
    ids=["zero-gpus", "top-zero", "mbs-zero", "unknown-model"],
)
def test_bad_input_exits_2_with_one_sentence(capsys, bad, message):
    with pytest.raises(SystemExit) as stop:
        main([*ARGS, *WORKLOAD, *bad])
    assert stop.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and captured.err.count("\n") == 1
