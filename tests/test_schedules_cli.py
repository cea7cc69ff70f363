"""``python -m explorer schedule --schedule zb-v|dualpipev``: split backward by default, bad M."""

from __future__ import annotations

import json

import pytest

from explorer import cli


@pytest.fixture(autouse=True)
def _only_schedule(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ("schedule",))


def test_dualpipev_cli_runs_f_b_w_of_one_second_and_reports_the_v(capsys):
    # F = B = W = 1 per rank: 3 s of work per micro-batch, 8 micro-batches, and DualPipeV's
    # fixed cost (P-1) x half a forward = 1.5 s (tests/test_schedules.py): 25.5 s.
    argv = ["schedule", "--schedule", "dualpipev", "--stages", "4", "--microbatches", "8"]
    assert cli.main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["makespan"] == pytest.approx(25.5)
    assert out["peak_inflight"] == [4.5] * 4
    assert out["parameter_copies"] == [1] * 4
    assert {e["kind"] for e in out["events"]} == {"F", "B", "W"}


def test_dualpipev_with_too_few_microbatches_exits_2_with_one_sentence(capsys):
    argv = ["schedule", "--schedule", "dualpipev", "--stages", "4", "--microbatches", "7"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "at least twice the stages (8)" in captured.err
