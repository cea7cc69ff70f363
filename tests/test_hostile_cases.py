"""Regression tests for the hostile inputs of issue 15: every one ends in one sentence (exit 2
on the command line), within bounds, and never in a hang, a traceback, NaN or raw HTML."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from explorer import presets
from explorer.cli import main
from explorer.hf_config import ConfigError, load_config_file, model_from_json_text
from explorer.limits import LIMITS, MAX_CONFIG_BYTES, MAX_GPUS, json_depth, limit
from explorer.presets import PRESETS_DIR, load_model
from explorer.report import build_report, report_html, report_markdown
from explorer.report.json_io import load_report_json
from explorer.scenario import ModelRef, Scenario, from_query, resolve_cluster, resolve_model
from explorer.scenario.inputs import ClusterInputs
from explorer.schedules import build_schedule
from explorer.search import search
from explorer.serving import plan_serving
from explorer.specs import ModelSpec, ServingWorkload, TrainingWorkload

ROOT = Path(__file__).resolve().parents[1]
LLAMA_8B = json.loads((ROOT / "presets" / "models" / "llama-3.1-8b.json").read_text())
CLUSTER = ["--gpu", "h100-sxm"]
TRAIN = ["--seq", "4096", "--gbs", "64"]
SERVE = ["--prompt-len", "1024", "--output-len", "128", "--concurrency", "8"]
XSS = "<img src=x onerror=alert(1)>"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``python -m explorer argv`` run in this process."""
    try:
        code = main(list(argv))
    except SystemExit as stop:
        code = int(stop.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_sentence(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.endswith(".\n"), err
    assert not err.startswith("internal error"), err
    for fragment in fragments:
        assert fragment in err, err


def config_file(tmp_path: Path, **changes: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_8B, **changes}))
    return str(path)


# ------------------------------------------------------------------ 10^12 layers


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["params"], id="params"),
        pytest.param(["estimate", *CLUSTER, "--tp", "8", "--pp", "1", "--dp", "1", *TRAIN],
                     id="estimate"),
        pytest.param(["search", *CLUSTER, "--gpus", "8", *TRAIN], id="search"),
        pytest.param(["serve", *CLUSTER, "--gpus", "8", *SERVE], id="serve"),
    ],
)  # fmt: skip
def test_a_config_of_a_trillion_layers_is_one_sentence_in_every_command(capsys, tmp_path, argv):
    path = config_file(tmp_path, num_hidden_layers=10**12)
    code, out, err = cli(capsys, argv[0], "--model", path, *argv[1:])
    assert_one_sentence(code, out, err, "'num_hidden_layers' must be at most 1,000")


def test_a_trillion_layers_in_a_link_is_refused_when_the_model_is_resolved():
    config = json.dumps({**LLAMA_8B, "num_hidden_layers": 10**12})
    scenario, messages = from_query({"source": "upload", "config": config})
    assert messages == [] and scenario.model.source == "upload"
    with pytest.raises(ConfigError, match="'num_hidden_layers' must be at most 1,000"):
        resolve_model(scenario.model)


def test_a_vocabulary_of_ten_to_the_thirty_is_refused():
    with pytest.raises(ConfigError, match=r"'vocab_size' must be at most 16,777,216.*10\^30"):
        model_from_json_text(json.dumps({**LLAMA_8B, "vocab_size": 10**30}))


def test_a_limit_is_named_by_the_configs_own_field():
    mixtral = json.loads((ROOT / "presets" / "models" / "mixtral-8x7b.json").read_text())
    with pytest.raises(ConfigError, match="'num_local_experts' must be at most 4,096"):
        model_from_json_text(json.dumps({**mixtral, "num_local_experts": 10**6}))


def test_a_number_of_five_thousand_digits_is_a_sentence_not_a_crash():
    text = json.dumps(LLAMA_8B).replace('"vocab_size": 128256', '"vocab_size": ' + "9" * 5000)
    with pytest.raises(ConfigError, match="too many digits"):
        model_from_json_text(text)


def test_the_largest_model_within_bounds_still_counts_in_finite_numbers(capsys, tmp_path):
    sizes = {name: int(LIMITS[name]) for name in ("num_hidden_layers", "vocab_size")}
    path = config_file(tmp_path, hidden_size=1 << 17, num_attention_heads=1 << 10,
                       num_key_value_heads=8, intermediate_size=1 << 20, **sizes)  # fmt: skip
    code, out, _ = cli(capsys, "params", "--model", path, "--json", "--seq", str(1 << 24))
    assert code == 0
    result = json.loads(out, parse_constant=pytest.fail)
    h, ffn, kv_width, vocab = 1 << 17, 1 << 20, 8 * 128, 1 << 24  # head_dim = h / 1024 = 128
    per_layer = 2 * h * h + 2 * h * kv_width + 3 * h * ffn + 2 * h  # q, o; k, v; MLP; 2 norms
    assert result["total_params"] == 1000 * per_layer + 2 * vocab * h + h  # + embed, head, norm
    assert math.isfinite(result["training_flops_per_token"])


# ------------------------------------------------------------------ counts without bounds


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(["search", "--model", "llama-3.1-8b", *CLUSTER, "--gpus", str(10**23),
                      *TRAIN], "--gpus: must be at most 1,048,576", id="search-gpus-1e23"),
        pytest.param(["serve", "--model", "llama-3.1-8b", *CLUSTER, "--gpus", str(10**7),
                      *SERVE], "--gpus: must be at most 1,048,576", id="serve-gpus-1e7"),
        pytest.param(["schedule", "--schedule", "1f1b", "--stages", "10000", "--microbatches",
                      "8"], "--stages: must be at most 1,024", id="schedule-stages-10000"),
        pytest.param(["scaling", "--model", "llama-3.1-8b", *CLUSTER, "--gpu-counts",
                      f"8,{10**20}", *TRAIN], "must be at most 1,048,576",
                     id="scaling-gpu-counts-1e20"),
        pytest.param(["scaling", "--model", "llama-3.1-8b", *CLUSTER, "--gpu-counts", "8,16",
                      *TRAIN, "--mbs", "0"], "--mbs: must be at least 1", id="scaling-mbs-0"),
        pytest.param(["estimate", "--model", "llama-3.1-8b", *CLUSTER, "--tp", "8", "--pp", "1",
                      "--dp", "1", *TRAIN, "--intra-node-GBps", "inf"], "--intra-node-GBps",
                     id="intra-node-inf"),
        pytest.param(["estimate", "--model", "llama-3.1-8b", *CLUSTER, "--tp", "8", "--pp", "1",
                      "--dp", "1", *TRAIN, "--intra-node-GBps", "1e308"], "at most 1e+06",
                     id="intra-node-1e308"),
        pytest.param(["estimate", "--model", "llama-3.1-8b", *CLUSTER, "--tp", "8", "--pp", "1",
                      "--dp", "1", *TRAIN, "--inter-node-GBps", "nan"], "--inter-node-GBps",
                     id="inter-node-nan"),
        pytest.param(["schedule", "--schedule", "gpipe", "--stages", "4", "--microbatches", "8",
                      "--forward", "1e308"], "--forward: must be a finite number",
                     id="schedule-forward-1e308"),
        pytest.param(["estimate", "--model", "llama-3.1-8b", *CLUSTER, "--tp", "8", "--pp", "1",
                      "--dp", "1", *TRAIN, "--assume", "memory.moe_imbalance=inf"],
                     "must be a finite number", id="assume-inf"),
        pytest.param(["schedule", "--schedule", "1f1b", "--stages", "1024", "--microbatches",
                      "1024"], "more than the 524,288", id="schedule-over-budget"),
    ],
)  # fmt: skip
def test_unbounded_numbers_stop_at_the_flag_with_one_sentence(capsys, argv, fragment):
    assert_one_sentence(*cli(capsys, *argv), fragment)


def test_the_same_gpu_limit_holds_in_the_url_the_specs_and_the_command_line(capsys):
    over = MAX_GPUS + 1
    _, messages = from_query({"dp": str(over)})
    assert len(messages) == 1 and "dp=" in messages[0]
    assert from_query({"dp": str(MAX_GPUS)})[0].layout.dp == MAX_GPUS
    with pytest.raises(ValueError, match="1,048,576"):
        resolve_cluster(ClusterInputs(gpus_per_node=1024, num_nodes=over // 1024 + 1))
    argv = ["search", "--model", "llama-3.1-8b", *CLUSTER, "--gpus", str(over), *TRAIN]
    assert_one_sentence(*cli(capsys, *argv), "1,048,576")


def test_a_spec_names_the_field_and_the_limit():
    with pytest.raises(ValueError, match=r"seq_len must be at most 16,777,216 \(this tool"):
        TrainingWorkload(seq_len=limit("seq_len") + 1)
    with pytest.raises(ValueError, match="concurrency must be at most"):
        ServingWorkload(concurrency=10**9)
    with pytest.raises(ValueError, match="n_routed_experts must be at most 4,096"):
        ModelSpec(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                  intermediate_size=128, vocab_size=100, n_routed_experts=5000,
                  num_experts_per_tok=2, moe_intermediate_size=64)  # fmt: skip


# ------------------------------------------------------------------ failures and interrupts


@pytest.mark.parametrize(
    ("error", "fragment"),
    [
        (ZeroDivisionError("division by zero"), "ZeroDivisionError"),
        (OverflowError("math range error"), "OverflowError"),
        (MemoryError(), "out of memory"),
        (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
        (ValueError("tp must divide 8"), "tp must divide 8"),
    ],
)
def test_every_failure_inside_a_command_is_one_sentence_and_status_2(
    capsys, monkeypatch, error, fragment
):
    def broken(args):
        raise error

    monkeypatch.setattr("explorer.cli.params.run", broken)
    assert_one_sentence(*cli(capsys, "params", "--model", "llama-3.1-8b"), fragment)


def test_ctrl_c_prints_interrupted_and_exits_130(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("explorer.cli.search.run", interrupted)
    code, out, err = cli(capsys, "search", "--model", "llama-3.1-8b", *CLUSTER, "--gpus", "8",
                         *TRAIN)  # fmt: skip
    assert (code, out, err) == (130, "", "interrupted.\n")


CTRL_C_WHILE_LOADING = """
import runpy, sys
class CtrlC:
    def find_spec(self, name, path, target=None):
        if name == "explorer.cli":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
runpy.run_module("explorer", run_name="__main__")
"""


def test_ctrl_c_while_the_modules_load_is_interrupted_too():
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_WHILE_LOADING], cwd=ROOT, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "interrupted.\n")


def test_json_output_writes_non_finite_numbers_as_null(capsys, monkeypatch):
    monkeypatch.setattr(
        "explorer.cli.params.run", lambda args: {"a": float("inf"), "b": [float("nan"), 1.5]}
    )
    code, out, _ = cli(capsys, "params", "--model", "llama-3.1-8b", "--json")
    assert code == 0
    assert json.loads(out, parse_constant=pytest.fail) == {"a": None, "b": [None, 1.5]}


# ------------------------------------------------------------------ budgets


def test_a_search_past_its_time_budget_stops_with_a_sentence():
    cluster = resolve_cluster(ClusterInputs(gpus_per_node=8, num_nodes=8))
    with pytest.raises(ValueError, match="its time budget"):
        search(load_model("llama-3.1-70b"), cluster, TrainingWorkload(), budget_s=0.0)


def test_a_serving_plan_past_its_time_budget_stops_with_a_sentence():
    cluster = resolve_cluster(ClusterInputs(gpus_per_node=8, num_nodes=2))
    with pytest.raises(ValueError, match="serving plan stopped"):
        plan_serving(load_model("llama-3.1-70b"), cluster, 16, ServingWorkload(), budget_s=-1.0)


def test_a_scaling_sweep_past_its_time_budget_stops_with_a_sentence():
    from explorer.scaling import scaling_sweep

    cluster = resolve_cluster(ClusterInputs(gpus_per_node=8, num_nodes=1))
    model, workload = load_model("llama-3.1-8b"), TrainingWorkload(global_batch_size=64)
    with pytest.raises(ValueError, match="scaling sweep stopped at its time budget"):
        scaling_sweep("strong", model, cluster, [8, 16], workload, budget_s=-1.0)
    done = scaling_sweep("strong", model, cluster, [8, 16], workload)  # the default budget
    assert [p.num_gpus for p in done.points] == [8, 16]


def test_a_schedule_within_the_budget_builds_and_one_past_it_does_not():
    assert len(build_schedule("1f1b", 16, 1024).actions) == 16
    with pytest.raises(ValueError, match="actions"):
        build_schedule("interleaved", 64, 1024, 8)


# ------------------------------------------------------------------ files


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        pytest.param(lambda tmp: Path(os.devnull), "'/dev/null' is a character device",
                     id="dev-null"),
        pytest.param(lambda tmp: tmp, "a directory", id="directory"),
        pytest.param(lambda tmp: (os.mkfifo(tmp / "pipe.json"), tmp / "pipe.json")[1],
                     "a named pipe", id="fifo"),
    ],
)  # fmt: skip
def test_a_model_path_that_is_not_a_file_says_what_it_is(capsys, tmp_path, make, fragment):
    path = make(tmp_path)  # opening the pipe would wait for a writer: it must not be opened
    assert_one_sentence(*cli(capsys, "params", "--model", str(path)), fragment)


def test_a_200_megabyte_config_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "config.json"
    with path.open("wb") as file:
        file.truncate(200 << 20)  # sparse: nothing is written
    with pytest.raises(ConfigError, match=f"at most {MAX_CONFIG_BYTES:,} bytes"):
        load_config_file(path)


def test_a_missing_presets_folder_is_a_sentence_not_an_empty_choice(monkeypatch, tmp_path):
    monkeypatch.setattr(presets, "PRESETS_DIR", tmp_path / "presets")
    presets.load_gpu.cache_clear()
    presets._model_index.cache_clear()
    try:
        with pytest.raises(ValueError, match="no presets were found") as gpu:
            presets.load_gpu("h100-sxm")
        assert "choose one of" not in str(gpu.value)
        with pytest.raises(ValueError, match="no presets were found"):
            presets.load_model("llama-3.1-8b")
    finally:
        presets.load_gpu.cache_clear()
        presets._model_index.cache_clear()
    assert presets.PRESETS_DIR != PRESETS_DIR  # the monkeypatch, undone after the test


# ------------------------------------------------------------------ reports


def test_a_deeply_nested_report_is_refused_before_parsing_with_one_sentence():
    deep = '{"format": "parallelism-explorer-report", "version": 1, "scenario": '
    deep += "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(ValueError, match="nested more than 64 levels") as error:
        load_report_json(deep)
    assert "\n" not in str(error.value)


def test_json_depth_skips_brackets_inside_strings():
    assert json_depth(b'{"a": [1, {"b": "[[\\"[["}]}') == 3
    assert json_depth(b"[[[]]]") == 3 and json_depth(b"") == 0


def test_json_depth_is_the_same_summed_in_python_and_in_numpy():
    # 2^16 brackets are summed in Python, more in numpy (explorer.limits._SMALL)
    small, large = b"[" * 40000 + b"]" * 25536, b"]" + b"[" * 70000 + b"]" * 70001
    assert json_depth(small) == 40000 and json_depth(large) == 69999
    assert json_depth(b"]]][[[") == 0  # a close before any open never counts below zero


def test_every_report_format_escapes_a_hostile_model_name():
    config = json.dumps({**LLAMA_8B})
    model = ModelRef(source="upload", config_json=config, config_name=XSS)
    scenario = Scenario(model=model)
    report = build_report(scenario)
    assert XSS in report.title  # the name is there, as text
    markdown, html = report_markdown(report), report_html(report)
    for text in (markdown, html):
        assert "<img" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in markdown
    named = ModelRef(source="upload", config_json=config, config_name="[x](javascript:alert(1))")
    link = build_report(Scenario(model=named))
    assert re.search(r"(?<!\\)\]\(", report_markdown(link)) is None  # "](" makes a link


def test_a_link_with_a_trillion_layers_shows_one_sentence_in_the_app():
    from streamlit.testing.v1 import AppTest

    config = json.dumps({**LLAMA_8B, "num_hidden_layers": 10**12}, separators=(",", ":"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["source"] = "upload"
    at.query_params["config"] = config
    at.run()
    assert not at.exception
    errors = [str(e.value) for e in at.error]
    assert any("'num_hidden_layers' must be at most 1,000" in e for e in errors), errors


def test_the_app_without_its_presets_folder_says_so_in_one_sentence(monkeypatch, tmp_path):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    def forget() -> None:
        st.cache_data.clear()
        presets._model_index.cache_clear()
        presets.load_gpu.cache_clear()

    monkeypatch.setattr(presets, "PRESETS_DIR", tmp_path / "presets")
    forget()
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.run()
        assert not at.exception
        errors = [str(e.value) for e in at.error]
        assert len(errors) == 1 and errors[0].startswith("no presets were found in"), errors
    finally:
        monkeypatch.undo()
        forget()
