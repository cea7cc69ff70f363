"""The layout report: its content equals the core's numbers, and every format holds it.

Figures are drawn by explorer.charts.report (the core never imports plotly); the PDF test
is skipped only where WeasyPrint's system libraries are missing and CI is not set.
"""

from __future__ import annotations

import html
import json
import os
import re
from dataclasses import replace
from functools import cache

import pandas as pd
import pytest
from pdf_text import pdf_images, pdf_outline, pdf_pages

from explorer.counting import active_param_counts, param_counts
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, estimate
from explorer.launch import megatron_arguments, torchtitan_config
from explorer.memory import training_memory
from explorer.report import (
    FORMAT,
    Report,
    ReportFormatUnavailable,
    build_report,
    load_report_json,
    pdf_available,
    report_html,
    report_json,
    report_markdown,
    report_pdf,
)
from explorer.report.assumptions import assumption_rows, split_source, with_overrides
from explorer.report.pdf import NO_CHARTS
from explorer.report.tables import Table, display_frame, format_cell
from explorer.scenario import (
    DEEPSEEK_V3,
    ClusterInputs,
    LayoutInputs,
    ModelRef,
    Scenario,
    ServingInputs,
    TrainingInputs,
    resolve_cluster,
    resolve_model,
    to_dict,
)
from explorer.search import search
from explorer.serving import ServingAssumptions, plan_serving
from explorer.units import GiB

EXACT = 1e-12
"""Relative tolerance for numbers that must be the core's own (same function, same inputs)."""

TRAINING_SECTIONS = (
    "summary", "inputs", "layout", "performance", "cost", "memory", "ranking", "schedule",
    "communication", "assumptions", "accuracy", "warnings", "launch",
)  # fmt: skip
SERVING_SECTIONS = ("summary", "inputs", "serving", "assumptions", "accuracy", "warnings")

SMALL = Scenario(
    model=ModelRef(preset="llama-3.1-8b"),
    training=TrainingInputs(seq_len=4096, global_batch_size=64),
    cluster=ClusterInputs(gpus_per_node=8, num_nodes=1),
    layout=LayoutInputs(dp=2, tp=2, pp=2, zero=1, recompute="selective"),
)
"""A small training scenario (8 GPUs, 8B model) that builds in milliseconds."""
SERVING = Scenario(workload="serving", serving=ServingInputs(concurrency=16))


@cache
def built(scenario: Scenario) -> Report:
    """``build_report(scenario)``, built once per scenario for this module (a report is frozen;
    each build estimates, searches and simulates again)."""
    return build_report(scenario)


@pytest.fixture(scope="module")
def report():
    return built(Scenario())


@pytest.fixture(scope="module")
def serving_report():
    return built(SERVING)


def _assumptions(scenario: Scenario):
    from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
    from explorer.report.assumptions import with_overrides

    return with_overrides(DEFAULT_ESTIMATE_ASSUMPTIONS, scenario.assumption_overrides())


def _core_estimate(scenario: Scenario):
    model, cluster = resolve_model(scenario.model), resolve_cluster(scenario.cluster)
    layout, workload = scenario.layout_spec(), scenario.training_spec()
    return estimate(model, cluster, layout, workload, _assumptions(scenario))


# ------------------------------------------------------------------------------ content


def test_a_training_report_has_every_section_in_reading_order(report):
    assert tuple(s.key for s in report.sections) == TRAINING_SECTIONS
    assert report.kind == "training"
    assert report.figure_names == ("memory", "schedule", "communication")


def test_a_serving_report_has_the_planner_instead_of_the_training_parts(serving_report):
    assert tuple(s.key for s in serving_report.sections) == SERVING_SECTIONS
    assert serving_report.figure_names == ("serving_memory", "serving_frontier")


def test_an_unknown_section_is_a_key_error(report):
    with pytest.raises(KeyError, match="no section"):
        report.section("nonsense")


@pytest.mark.parametrize(
    "scenario", [pytest.param(Scenario(), id="llama-70b"), pytest.param(DEEPSEEK_V3, id="dsv3")]
)
def test_memory_and_step_numbers_are_the_cores_own(scenario):
    results = built(scenario).results
    model, cluster = resolve_model(scenario.model), resolve_cluster(scenario.cluster)
    memory = training_memory(
        model,
        cluster.gpu,
        scenario.layout_spec(),
        scenario.training_spec(),
        _assumptions(scenario).memory,
        domain_size=cluster.domain_size,
    )
    est = _core_estimate(scenario)
    assert results["memory"]["peak_bytes"] == pytest.approx(memory.peak_bytes, rel=EXACT)
    for row, stage in zip(results["memory"]["stages"], memory.stages, strict=True):
        assert row["bytes"] == pytest.approx(stage.breakdown.as_dict(), rel=EXACT)
    assert results["estimate"]["step_time_s"] == pytest.approx(est.step_time_s, rel=EXACT)
    assert results["estimate"]["tokens_per_s"] == pytest.approx(est.tokens_per_s, rel=EXACT)
    assert results["estimate"]["mfu"] == pytest.approx(est.mfu, rel=EXACT)
    assert results["schedule"]["bubble_fraction"] == pytest.approx(est.bubble_fraction, rel=EXACT)
    assert results["communication"]["exposed_comm_s"] == pytest.approx(est.exposed_comm_s)


def test_parameter_counts_are_the_counting_modules(report):
    model = resolve_model(Scenario().model)
    assert report.results["model"]["total_params"] == param_counts(model).total_without_mtp
    assert report.results["model"]["active_params"] == active_param_counts(model).total_without_mtp


def test_the_memory_table_is_in_gib_of_the_cores_bytes(report):
    table = report.section("memory").tables[0]
    stages = report.results["memory"]["stages"]
    assert "GiB = 2^30" in table.note
    assert len(table.frame) == len(stages)
    gib = table.frame["total (GiB)"].tolist()
    assert gib == pytest.approx([s["total_bytes"] / GiB for s in stages], rel=EXACT)


def test_the_schedule_section_gives_the_bubble_and_in_flight_per_stage(report):
    section = report.section("schedule")
    in_flight = section.tables[0].frame["micro-batches in flight"].tolist()
    assert in_flight == report.results["schedule"]["peak_inflight"]
    assert "bubble" in section.paragraphs[0]


def test_the_communication_section_has_exposed_seconds_per_collective_and_axis(report):
    by_kind, by_axis = report.section("communication").tables[:2]
    exposed = report.results["communication"]
    assert by_kind.frame["exposed per step (s)"].tolist() == list(
        exposed["exposed_comm_s"].values()
    )
    assert by_axis.frame["exposed per step (s)"].tolist() == list(
        exposed["exposed_comm_by_axis_s"].values()
    )


def test_launch_settings_are_the_launch_modules_for_the_chosen_layout(report):
    scenario = Scenario()
    layout, workload = scenario.layout_spec(), scenario.training_spec()
    layers = resolve_model(scenario.model).num_hidden_layers
    code = {block.language: block.text for block in report.section("launch").code}
    for flag in megatron_arguments(layout, workload, layers):
        assert flag in code["bash"]
    assert code["toml"] == torchtitan_config(layout, workload)


def test_every_assumption_is_listed_with_value_and_source(report):
    frame = report.section("assumptions").tables[0].frame
    names = {row.name for row in assumption_rows(DEFAULT_ESTIMATE_ASSUMPTIONS)}
    assert set(frame["assumption"]) == names
    assert "memory.headroom_fraction" in names
    assert frame["source"].str.len().min() > 0
    headroom = frame[frame["assumption"] == "memory.headroom_fraction"].iloc[0]
    assert headroom["value"] == "0.05" and headroom["set by"] == "default"


def test_an_assumption_override_changes_the_numbers_and_is_marked_as_yours():
    changed = replace(Scenario(), assumptions=(("memory.headroom_fraction", 0.1),))
    base, mine = built(Scenario()), build_report(changed)
    gpu_bytes = base.results["memory"]["gpu_bytes"]
    delta = mine.results["memory"]["peak_bytes"] - base.results["memory"]["peak_bytes"]
    assert delta == pytest.approx(0.05 * gpu_bytes, rel=1e-9)
    frame = mine.section("assumptions").tables[0].frame
    assert frame.set_index("assumption").loc["memory.headroom_fraction", "set by"] == "you"


def test_with_overrides_reaches_nested_assumption_groups():
    changed = with_overrides(
        DEFAULT_ESTIMATE_ASSUMPTIONS, {"comm.tp_overlap": 0.5, "nonsense.key": 1.0}
    )
    assert changed.comm.tp_overlap == 0.5
    assert changed.memory == DEFAULT_ESTIMATE_ASSUMPTIONS.memory
    assert with_overrides(DEFAULT_ESTIMATE_ASSUMPTIONS, {}) is DEFAULT_ESTIMATE_ASSUMPTIONS


def test_a_docstrings_source_sentence_becomes_the_source_column():
    assert split_source("Bytes per mask. Source: Korthikanti 2022.") == (
        "Bytes per mask",
        "Korthikanti 2022.",
    )


def test_warnings_are_the_estimates():
    report = built(DEEPSEEK_V3)
    est = _core_estimate(DEEPSEEK_V3)
    assert report.results["warnings"] == list(est.warnings)
    assert len(report.section("warnings").bullets) == len(est.warnings) > 0


def test_the_serving_summary_is_the_planners(serving_report):
    model, cluster = resolve_model(SERVING.model), resolve_cluster(SERVING.cluster)
    plan = plan_serving(
        model, cluster, SERVING.cluster.num_gpus, SERVING.serving_spec(), ServingAssumptions()
    )
    first = serving_report.results["serving"]["layouts"][0]
    assert first["label"] == plan.layouts[0].layout.label
    assert first["tokens_per_s"] == pytest.approx(plan.layouts[0].tokens_per_s, rel=EXACT)
    assert serving_report.section("serving").bullets  # the planner's answers


def test_a_layout_that_does_not_fill_the_cluster_is_one_sentence():
    wrong = replace(Scenario(), layout=LayoutInputs(dp=1, tp=8, pp=4))
    with pytest.raises(ValueError, match=r"^DP × TP × PP × CP = .*\.$"):
        build_report(wrong)


def test_a_search_result_ranks_the_top_layouts_and_places_the_chosen_one():
    model, cluster = resolve_model(SMALL.model), resolve_cluster(SMALL.cluster)
    result = search(model, cluster, SMALL.training_spec(), ranked=5)
    report = build_report(SMALL, search=result)
    frame = report.section("ranking").tables[0].frame
    best = result.estimates[0]
    assert frame["step (s)"].iloc[0] == pytest.approx(best.step_time_s, rel=EXACT)
    assert report.results["ranking"]["evaluated"] == result.evaluated
    assert frame["layout"].str.contains("chosen").sum() == 1


def test_a_search_for_another_problem_is_refused():
    model, cluster = resolve_model(SMALL.model), resolve_cluster(SMALL.cluster)
    other = replace(SMALL.training_spec(), seq_len=2048)
    with pytest.raises(ValueError, match="another model, cluster or workload"):
        build_report(SMALL, search=search(model, cluster, other, ranked=1))


def test_a_search_under_other_assumptions_is_refused():
    model, cluster = resolve_model(SMALL.model), resolve_cluster(SMALL.cluster)
    other = with_overrides(DEFAULT_ESTIMATE_ASSUMPTIONS, {"comm.tp_overlap": 0.5})
    result = search(model, cluster, SMALL.training_spec(), assumptions=other, ranked=1)
    with pytest.raises(ValueError, match="other assumptions"):
        build_report(SMALL, search=result)


def test_without_a_search_the_chosen_layout_is_ranked_alone(report):
    ranking = report.results["ranking"]
    assert ranking["evaluated"] == 1 and ranking["chosen_rank"] == 1


# ------------------------------------------------------------------------------ cells


@pytest.mark.parametrize(
    ("value", "pattern", "text"),
    [
        (1234567, None, "1,234,567"),
        (0.123456, None, "0.12"),
        (0.123456, "{:.1%}", "12.3%"),
        (True, None, "yes"),
        (None, None, "–"),
        (float("nan"), None, "–"),
        ("TP 8", None, "TP 8"),
    ],
)
def test_cells_read_as_people_expect(value, pattern, text):
    assert format_cell(value, pattern) == text


def test_display_frame_applies_column_formats():
    table = Table("t", pd.DataFrame({"a": [0.5], "b": [2]}), {"a": "{:.0%}"})
    assert display_frame(table).iloc[0].tolist() == ["50%", "2"]


# ------------------------------------------------------------------------------ Markdown


def _pipe_rows(markdown: str, header_start: str) -> list[str]:
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_markdown_has_every_section_heading_and_table(report):
    text = report_markdown(report)
    for section in report.sections:
        assert f"## {section.title}" in text
        for table in section.tables:
            assert f"**{table.title}**" in text
    rows = _pipe_rows(text, "| stage | layers | parameters (GiB)")
    assert len(rows) == len(report.results["memory"]["stages"])


def test_markdown_carries_the_launch_settings_as_code(report):
    text = report_markdown(report)
    assert "```bash\ntorchrun" in text and "--tensor-model-parallel-size 8" in text
    assert "```toml\n[parallelism]" in text


def test_markdown_labels_gib(report):
    assert "GiB = 2^30 bytes" in report_markdown(report)


def test_a_pipe_in_a_cell_does_not_break_the_table():
    table = Table("t", pd.DataFrame({"a": ["x | y"]}))
    from explorer.report.markdown import table_markdown

    assert "x \\| y" in table_markdown(table)


# ------------------------------------------------------------------------------ HTML


@pytest.fixture(scope="module")
def html_page(report):
    from explorer.charts.report import figure_fragments, report_figures

    return report_html(report, figure_fragments(report_figures(report)))


def test_html_is_self_contained_with_plotly_inlined_once(html_page):
    assert len(re.findall(r"plotly\.js v\d", html_page)) == 1  # the library's banner
    assert not re.search(r"<script[^>]*\bsrc=", html_page)
    assert not re.search(r"<link[^>]*\bhref=\"?https?:", html_page)
    assert html_page.count('class="plotly-graph-div"') == 3


def test_html_has_every_section_and_escapes_text(report, html_page):
    for section in report.sections:
        assert f'<section id="{section.key}"' in html_page
    assert "<table>" in html_page and "<style>" in html_page
    assert "&lt;" not in report.title


def test_html_without_figures_says_which_were_left_out(report):
    page = report_html(report, missing_note="No charts here.")
    assert page.count("Figure left out") == len(report.figure_names)
    assert "No charts here." in page


# ------------------------------------------------------------------------------ JSON


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(Scenario(), id="default"),
        pytest.param(DEEPSEEK_V3, id="deepseek-v3"),
        pytest.param(SERVING, id="serving"),
        pytest.param(
            replace(SMALL, assumptions=(("memory.headroom_fraction", 0.1),)), id="overrides"
        ),
    ],
)
def test_the_json_report_restores_an_equal_scenario(scenario):
    text = report_json(built(scenario))
    data = json.loads(text)
    assert data["format"] == FORMAT and data["version"] == 1
    assert data["scenario"] == to_dict(scenario)
    assert load_report_json(text) == scenario
    assert load_report_json(text.encode()) == scenario


def test_an_uploaded_config_round_trips_through_the_json_report():
    config = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 512,
        "intermediate_size": 1024,
        "num_attention_heads": 8,
        "num_hidden_layers": 4,
        "vocab_size": 1000,
    }
    ref = ModelRef(source="upload", config_json=json.dumps(config), config_name="tiny")
    scenario = replace(SMALL, model=ref)
    assert load_report_json(report_json(build_report(scenario))) == scenario


def test_the_json_report_is_strict_json_with_the_results(report):
    data = json.loads(report_json(report), parse_constant=pytest.fail)
    assert data["results"]["memory"]["peak_bytes"] == report.results["memory"]["peak_bytes"]
    assert data["results"]["launch"]["megatron_arguments"]


def _good_document() -> dict:
    return json.loads(report_json(build_report(SMALL)))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        pytest.param(lambda d: "{not json", "not valid JSON", id="not-json"),
        pytest.param(lambda d: [1, 2], "JSON object", id="a-list"),
        pytest.param(lambda d: {**d, "format": "other"}, "not a Parallelism", id="format"),
        pytest.param(lambda d: {**d, "version": 2}, "version", id="version"),
        pytest.param(
            lambda d: {k: v for k, v in d.items() if k != "scenario"}, "no", id="no-scenario"
        ),
        pytest.param(
            lambda d: {**d, "scenario": {**d["scenario"], "extra": 1}}, "unknown", id="unknown"
        ),
        pytest.param(
            lambda d: {**d, "scenario": {**d["scenario"], "layout": {"tp": 0}}},
            "layout",
            id="bad-degree",
        ),
        pytest.param(lambda d: {**d, "scenario": "x"}, "object", id="scenario-text"),
    ],
)
def test_a_malformed_report_is_rejected_with_one_sentence(change, words):
    document = change(_good_document())
    text = document if isinstance(document, str) else json.dumps(document)
    with pytest.raises(ValueError) as error:
        load_report_json(text)
    message = str(error.value)
    assert words in message
    assert message[0].isupper() and message.endswith(".") and "\n" not in message


# ------------------------------------------------------------------------------ PDF


def _pdf_or_skip() -> None:
    if not pdf_available() and not os.environ.get("CI"):
        pytest.skip("WeasyPrint's system libraries are missing here (and CI is not set)")


def _headings(page: str) -> list[str]:
    """The text of every h1-h6 of an HTML page, in order."""
    found = re.findall(r"<h[1-6][^>]*>(.*?)</h[1-6]>", page, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", h)).strip() for h in found]


def test_the_pdf_report_has_the_reports_title_sections_and_pages(report):
    """Read back: one bookmark per heading of the HTML report in its order, then the
    document's title (its information dictionary), on more than one page, and no image where
    no chart was given."""
    _pdf_or_skip()
    data = report_pdf(report)
    assert data.startswith(b"%PDF-")
    outline = pdf_outline(data)
    assert outline == [*_headings(report_html(report, missing_note=NO_CHARTS)), report.title]
    assert outline[0] == report.title  # the h1
    assert {"Memory per GPU", "Pipeline schedule", "Communication"} <= set(outline)
    assert pdf_pages(data) > 1
    assert pdf_images(data) == 0


def test_the_pdf_report_takes_png_charts(report):
    _pdf_or_skip()
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
    with_charts = report_pdf(report, dict.fromkeys(report.figure_names, png))
    assert pdf_images(with_charts) > 0  # the PNGs are in it (one XObject per distinct image)
    assert pdf_outline(with_charts)[:-1] == _headings(report_html(report, {}))


def test_a_missing_pdf_library_is_a_sentence_the_app_can_show(monkeypatch, report):
    import builtins

    real_import = builtins.__import__

    def no_weasyprint(name, *args, **kwargs):
        if name == "weasyprint":
            raise OSError("cannot load library 'libpango-1.0-0'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_weasyprint)
    with pytest.raises(ReportFormatUnavailable, match="PDF reports need WeasyPrint"):
        report_pdf(report)


# ------------------------------------------------------------------------------ figures


def test_without_kaleido_no_pngs_are_made(monkeypatch, report):
    from explorer.charts import report as charts

    monkeypatch.setattr(charts, "_png_server", lambda: None)
    assert charts.figure_pngs(charts.report_figures(report)) == {}


def test_render_report_gives_bytes_mime_and_a_file_name(report):
    from explorer.charts.report import render_report

    rendered = render_report(report, "md")
    assert rendered.mime == "text/markdown"
    assert rendered.file_name.endswith(".md") and " " not in rendered.file_name
    assert rendered.data.decode().startswith("# ")


def test_serving_figures_are_drawn(serving_report):
    from explorer.charts.report import report_figures

    figures = report_figures(serving_report)
    assert set(figures) == {"serving_memory", "serving_frontier"}


def test_the_report_says_how_far_to_trust_its_numbers(report):
    from explorer.trust import expected_error

    section = report.section("accuracy")
    assert expected_error("memory") in section.bullets
    assert expected_error("step_time") in section.bullets
    assert report.results["accuracy"]["memory"] == expected_error("memory")
    assert expected_error("memory") in report_markdown(report)


def test_the_serving_report_prices_its_layouts_per_million_output_tokens(serving_report):
    gpu = resolve_cluster(SERVING.cluster).gpu
    assert gpu.price_per_gpu_hour is not None  # the preset's published price
    first = serving_report.results["serving"]["layouts"][0]
    (priced, *_) = serving_report.results["serving"]["cost"]
    assert priced["label"] == first["label"]
    gpus = first["tp"] * first["pp"] * first["ep"]
    per_replica = first["tokens_per_s"] / first["replicas"]
    # the replica's GPUs x the hourly price over 3,600 s, per output token, x 10^6
    expected = gpus * gpu.price_per_gpu_hour / 3600 / per_replica * 1e6
    assert priced["cost_per_million_output_tokens_usd"] == pytest.approx(expected, rel=EXACT)
    (table,) = [t for t in serving_report.section("serving").tables if t.title == "Serving cost"]
    assert table.frame["US$ per M output tokens"].iloc[0] == pytest.approx(expected, rel=EXACT)
