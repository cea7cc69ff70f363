"""``python -m explorer schedule``: the JSON contract, the text picture and bad input."""

from __future__ import annotations

import json

import pytest

from explorer import cli
from explorer.schedules import StageTimes, build_schedule, simulate

CONTRACT_KEYS = {"makespan", "bubble_fraction", "peak_inflight", "events"}
EVENT_KEYS = {"stage", "kind", "microbatch", "chunk", "start", "end"}


@pytest.fixture(autouse=True)
def _only_schedule(monkeypatch):
    """Load only this subcommand, so the test does not depend on the others' modules."""
    monkeypatch.setattr(cli, "COMMANDS", ("schedule",))


def _json(capsys, *argv: str) -> dict:
    assert cli.main(["schedule", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # one JSON object, nothing else
    return json.loads(out)


@pytest.mark.parametrize(
    "argv",
    [
        ("--schedule", "gpipe", "--stages", "4", "--microbatches", "8"),
        ("--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--p2p", "0.1"),
        ("--schedule", "interleaved", "--stages", "4", "--microbatches", "8", "--virtual", "2"),
        ("--schedule", "zb-h1", "--stages", "4", "--microbatches", "8"),
        ("--schedule", "dualpipe", "--stages", "4", "--microbatches", "8"),
    ],
)
def test_json_has_the_contract_keys(capsys, argv):
    result = _json(capsys, *argv)
    assert result.keys() >= CONTRACT_KEYS
    assert result.keys() >= {"parameter_copies", "schedule", "stages", "microbatches", "virtual"}
    assert len(result["peak_inflight"]) == result["stages"] == 4
    assert all(set(e) == EVENT_KEYS and e["kind"] in "FBW" for e in result["events"])
    assert max(e["end"] for e in result["events"]) == result["makespan"]


def test_zero_bubble_defaults_split_the_backward_into_b_1_and_w_1(capsys):
    result = _json(capsys, "--schedule", "zb-h1", "--stages", "4", "--microbatches", "8")
    expected = simulate(build_schedule("zb-h1", 4, 8), StageTimes.uniform(4, 1.0, 1.0, 1.0))
    assert result["makespan"] == pytest.approx(expected.makespan_s)
    assert {e["end"] - e["start"] for e in result["events"]} == {1.0}


def test_default_times_give_1f1b_its_closed_form_bubble(capsys):
    result = _json(capsys, "--schedule", "1f1b", "--stages", "4", "--microbatches", "8")
    assert result["bubble_fraction"] == pytest.approx(3 / 11)
    assert result["makespan"] == pytest.approx(33.0)
    assert result["peak_inflight"] == [4, 3, 2, 1]


def test_flags_set_the_times(capsys):
    result = _json(
        capsys,
        *("--schedule", "gpipe", "--stages", "2", "--microbatches", "2"),
        *("--forward", "0.5", "--backward", "1.5", "--p2p", "0.25"),
    )
    assert result["makespan"] == pytest.approx(3 * 0.5 + 3 * 1.5 + 2 * 0.25)


def test_dualpipe_reports_two_parameter_copies(capsys):
    result = _json(capsys, "--schedule", "dualpipe", "--stages", "4", "--microbatches", "8")
    assert result["parameter_copies"] == [2, 2, 2, 2]
    assert result["peak_inflight"] == [5, 5, 5, 5]


def test_text_output_draws_one_line_per_stage(capsys):
    argv = ["schedule", "--schedule", "1f1b", "--stages", "3", "--microbatches", "4"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "stage  0: F0 F1 F2 B0 F3 B1 B2 B3" in out
    assert "stage  2: F0 B0 F1 B1 F2 B2 F3 B3" in out
    assert "makespan" in out and "bubble" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--schedule", "dualpipe", "--stages", "3", "--microbatches", "8"), "even number"),
        (
            ("--schedule", "interleaved", "--stages", "4", "--microbatches", "2", "--virtual", "2"),
            "microbatches >= stages",
        ),
        (
            ("--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--virtual", "2"),
            "interleaved",
        ),
        (("--schedule", "1f1b", "--stages", "0", "--microbatches", "8"), "--stages: must be"),
        (
            ("--schedule", "gpipe", "--stages", "2", "--microbatches", "2", "--forward", "-1"),
            "--forward",
        ),
        (("--schedule", "bogus", "--stages", "2", "--microbatches", "2"), "invalid choice"),
    ],
)
def test_bad_input_prints_one_sentence_and_exits_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["schedule", *argv])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
