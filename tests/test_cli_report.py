"""`python -m explorer report`: writes every format, says what it wrote, exits 2 on bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from pdf_text import pdf_outline, pdf_pages

from explorer.cli import main
from explorer.report import load_report_json, pdf_available

SMALL = [
    "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq", "4096",
    "--gbs", "64",
]  # fmt: skip
"""MODEL, CLUSTER and WORKLOAD of a small problem (the search over it takes milliseconds)."""
LAYOUT = ["--tp", "2", "--pp", "2", "--zero", "1", "--recompute", "selective"]


def run_report(capsys, tmp_path, fmt: str, *extra: str) -> tuple[dict, bytes]:
    """Run the command in-process; its JSON and the bytes it wrote."""
    out = tmp_path / f"report.{fmt}"
    code = main(["report", *SMALL, *extra, "--format", fmt, "--output", str(out), "--json"])
    assert code == 0
    printed = capsys.readouterr().out
    assert len(printed.strip().splitlines()) == 1
    return json.loads(printed), out.read_bytes()


@pytest.mark.parametrize("fmt", ["md", "json", "html"])
def test_each_format_is_written_and_described(capsys, tmp_path, fmt):
    result, data = run_report(capsys, tmp_path, fmt, *LAYOUT)
    assert result["format"] == fmt
    assert result["bytes"] == len(data) > 0
    assert result["path"].endswith(f"report.{fmt}")


def test_the_markdown_report_holds_the_layout_of_the_flags(capsys, tmp_path):
    _, data = run_report(capsys, tmp_path, "md", *LAYOUT)
    text = data.decode()
    assert text.startswith("# Llama 3.1 8B training on 8 × ")
    assert "--tensor-model-parallel-size 2" in text and "--pipeline-model-parallel-size 2" in text


def test_the_json_report_loads_back_into_the_flags_scenario(capsys, tmp_path):
    _, data = run_report(capsys, tmp_path, "json", *LAYOUT)
    scenario = load_report_json(data)
    assert (scenario.layout.tp, scenario.layout.pp, scenario.layout.dp) == (2, 2, 2)
    assert scenario.layout.zero == 1 and scenario.layout.recompute == "selective"
    assert scenario.cluster.num_gpus == 8 and scenario.cluster.gpu == "h100-sxm"
    assert scenario.training.seq_len == 4096 and scenario.training.global_batch_size == 64


def test_assume_travels_into_the_reports_scenario(capsys, tmp_path):
    _, data = run_report(capsys, tmp_path, "json", *LAYOUT, "--assume", "comm.tp_overlap=0.5")
    assert load_report_json(data).assumption_overrides() == {"comm.tp_overlap": 0.5}


def test_search_flags_narrow_the_reports_search_and_travel_in_its_scenario(capsys, tmp_path):
    _, data = run_report(capsys, tmp_path, "json", "--schedules", "1f1b", "--zero-stages", "1")
    scenario = load_report_json(data)
    assert scenario.search.schedules == ("1f1b",) and scenario.search.zero_stages == (1,)
    assert scenario.layout.zero == 1 and scenario.layout.schedule == "1f1b"


def test_the_html_report_is_self_contained(capsys, tmp_path):
    result, data = run_report(capsys, tmp_path, "html", *LAYOUT)
    text = data.decode()
    assert len(re.findall(r"plotly\.js v\d", text)) == 1
    assert not re.search(r"<script[^>]*\bsrc=", text)
    assert result["figures"] == ["memory", "schedule", "communication"]


def test_the_pdf_report_is_a_pdf(capsys, tmp_path):
    if not pdf_available() and not os.environ.get("CI"):
        pytest.skip("WeasyPrint's system libraries are missing here (and CI is not set)")
    result, data = run_report(capsys, tmp_path, "pdf", *LAYOUT)
    assert data.startswith(b"%PDF-")
    assert result["bytes"] == len(data)
    outline = pdf_outline(data)  # the title, then one bookmark per section
    assert outline[0].startswith("Llama 3.1 8B training on 8 ")
    assert {"Summary", "Memory per GPU", "Pipeline schedule"} <= set(outline)
    assert pdf_pages(data) > 1


def test_the_format_follows_the_file_suffix(capsys, tmp_path):
    out = tmp_path / "layout.md"
    assert main(["report", *SMALL, *LAYOUT, "--output", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "md"


def test_without_a_layout_the_search_picks_the_fastest_one(capsys, tmp_path):
    _, data = run_report(capsys, tmp_path, "json")
    document = json.loads(data)
    ranking = document["results"]["ranking"]
    assert ranking["chosen_rank"] == 1 and ranking["evaluated"] > 100
    best = ranking["layouts"][0]
    assert document["scenario"]["layout"]["tp"] == best["tp"]
    assert document["results"]["estimate"]["step_time_s"] == pytest.approx(best["step_time_s"])


def test_rank_places_a_given_layout_among_the_searched_ones(capsys, tmp_path):
    _, data = run_report(capsys, tmp_path, "json", *LAYOUT, "--rank")
    ranking = json.loads(data)["results"]["ranking"]
    assert ranking["evaluated"] > 100 and len(ranking["layouts"]) == 5


def test_fewer_gpus_than_a_node_make_one_smaller_node(capsys, tmp_path):
    out = tmp_path / "r.json"
    args = ["report", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "4"]
    args += ["--seq", "4096", "--gbs", "32", "--tp", "4", "--output", str(out)]
    assert main(args) == 0
    cluster = load_report_json(out.read_bytes()).cluster
    assert (cluster.gpus_per_node, cluster.num_nodes) == (4, 1)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--model", "no-such-model"], id="unknown-model"),
        pytest.param(["--gpu", "no-such-gpu"], id="unknown-gpu"),
        pytest.param(["--tp", "3"], id="world-size"),
        pytest.param(["--gpus", "12"], id="partial-node"),
        pytest.param(["--etp", "2"], id="etp"),
        pytest.param(["--grad-dtype", "bf16"], id="grad-dtype"),
        pytest.param(["--seq", "0"], id="zero-sequence"),
        pytest.param(["--output", "report.txt", "--format", None], id="unknown-suffix"),
        pytest.param(["--format", "docx"], id="unknown-format"),
        pytest.param(["--output", "/no/such/dir/report.md"], id="unwritable"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(capsys, tmp_path, args):
    flags = dict(zip(SMALL[::2], SMALL[1::2], strict=True))
    flags |= {"--tp": "2", "--format": "md", "--output": str(tmp_path / "r.md")}
    for key, value in zip(args[::2], args[1::2], strict=True):
        if value is None:
            del flags[key]
        else:
            flags[key] = value
    argv = ["report", *(item for pair in flags.items() for item in pair)]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err


def test_the_command_runs_as_a_module(tmp_path):
    out = tmp_path / "r.md"
    command = [sys.executable, "-m", "explorer", "report", *SMALL, "--output", str(out)]
    result = subprocess.run(
        [*command, *LAYOUT, "--json"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["bytes"] == out.stat().st_size
    # Bad input's exit 2 and one sentence: in-process above (a second interpreter adds nothing).
