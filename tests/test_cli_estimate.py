"""``python -m explorer estimate``: the JSON contract (docs/ARCHITECTURE.md) and bad input."""

from __future__ import annotations

import json

import pytest

from explorer.cli import main
from explorer.memory import CATEGORIES

LLAMA_70B = [
    "estimate",
    "--model",
    "llama-3.1-70b",
    "--gpu",
    "h100-sxm",
    "--tp",
    "8",
    "--pp",
    "4",
    "--dp",
    "2",
    "--zero",
    "1",
    "--seq",
    "4096",
    "--gbs",
    "64",
]


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1  # one JSON object, nothing else
    return json.loads(out)


def test_json_has_the_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(LLAMA_70B, capsys)
    for key in ("gpu_bytes", "peak_bytes", "fits", "peak_stage", "stages", "warnings"):
        assert key in result
    assert result["world_size"] == 64
    assert "headroom_fraction" in result["assumptions"]
    assert len(result["stages"]) == 4
    for stage in result["stages"]:
        assert set(stage["bytes"]) == set(CATEGORIES)
        assert stage["total_bytes"] == pytest.approx(sum(stage["bytes"].values()))
        assert len(stage["layers"]) == 20
    assert result["peak_bytes"] == result["stages"][result["peak_stage"]]["total_bytes"]


def test_assumption_flags_change_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    flash = run_json(LLAMA_70B, capsys)["peak_bytes"]
    classic = run_json([*LLAMA_70B, "--attention", "classic", "--dropout"], capsys)["peak_bytes"]
    no_headroom = run_json([*LLAMA_70B, "--headroom", "0"], capsys)["peak_bytes"]
    assert classic > flash > no_headroom


def test_assume_sets_any_named_assumption_and_echoes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = run_json(LLAMA_70B, capsys)
    hidden = run_json([*LLAMA_70B, "--assume", "comm.tp_overlap=1", "--assume",
                       "memory.headroom_fraction=0"], capsys)  # fmt: skip
    assert hidden["assumed"] == {"comm.tp_overlap": 1.0, "memory.headroom_fraction": 0.0}
    assert plain["assumed"] == {}
    assert hidden["exposed_comm_by_axis_s"]["tp"] < plain["exposed_comm_by_axis_s"]["tp"]
    assert hidden["peak_bytes"] < plain["peak_bytes"]
    assert main([*LLAMA_70B, "--assume", "pipeline_model=simulate"]) == 0
    assert "assumed: pipeline_model=simulate" in capsys.readouterr().out


def test_text_output_labels_gib(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(LLAMA_70B) == 0
    text = capsys.readouterr().out
    assert "GiB = 2^30 bytes" in text and "stage  3 (20 layers)" in text


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--dp", "2", "--ep", "32"], "must divide"),
        (["--dp", "128"], "smaller than DP x micro-batch"),
        (["--pp", "3", "--schedule", "dualpipe"], "even number of stages"),
        (["--headroom", "150"], "--headroom must be a percentage"),
        (["--assume", "comm.tp_overlapp=1"], "no assumption named 'comm.tp_overlapp'"),
        (["--assume", "comm.tp_overlap=lots"], "comm.tp_overlap='lots'"),
        (["--assume", "comm.tp_overlap=2"], "tp_overlap must be between 0 and 1"),
        (["--assume", "memory.framework"], "an assumption is KEY=VALUE"),
    ],
)
def test_bad_input_exits_2_with_one_sentence(
    extra: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*LLAMA_70B, *extra]
    if "--ep" in extra:
        argv[argv.index("llama-3.1-70b")] = "deepseek-v3"
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


@pytest.mark.parametrize("flag", ["--gpus", "--gpus-per", "--inter-node"])
def test_an_abbreviated_option_is_a_sentence_not_another_option(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse would read --gpus as --gpus-per-node (one 16-GPU node where `search --gpus`
    # means 16 GPUs in all) and --inter-node as --inter-node-GBps: both refused, exit 2.
    with pytest.raises(SystemExit) as stopped:
        main([*LLAMA_70B, flag, "16"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err == f"python -m explorer: unrecognized arguments: {flag} 16.\n"
