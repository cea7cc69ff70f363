"""The app, headless (Streamlit AppTest): every page renders, links reproduce a view, bad input
shows a sentence where the person is looking and never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.calibration import calibration_table
from explorer.published_runs import published_table
from explorer.published_serving import load_runs
from explorer.scenario import DEEPSEEK_V3, Scenario, to_query
from explorer.trust import KINDS, expected_error
from explorer.validation_data import HELDOUT_PATH, comparison_table

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES = "explorer/ui/pages/"
NOT_YET = "Not available yet"


def run(query: dict[str, str] | None = None, page: str | None = None) -> AppTest:
    """The app after its first run (with ``query`` in the URL), on ``page`` when given."""
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    if page:
        at.switch_page(f"{PAGES}{page}.py").run()
    return at


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def assert_clean(at: AppTest) -> None:
    """No exception reached the page and no st.error was shown."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, texts(at.error)


def charts(at: AppTest) -> list:
    """The charts drawn: Plotly ones and the light SVG ones (``explorer.ui.pages.light_chart``,
    markdown carrying ``data-chart="KEY"``)."""
    svgs = [m for m in at.markdown if 'data-chart="' in str(m.value)]
    return [*at.get("plotly_chart"), *svgs]


def chart_title(at: AppTest, key: str) -> str:
    """The title of chart ``key``: from its Plotly JSON, or its SVG's title text."""
    import json
    import re
    from html import unescape

    for chart in at.get("plotly_chart"):
        if chart.proto.id.endswith(key):
            return str(json.loads(chart.proto.spec)["layout"]["title"]["text"])
    (svg,) = [str(m.value) for m in at.markdown if f'data-chart="{key}"' in str(m.value)]
    found = re.search(r'class="gtitle"[^>]*>(.*?)</text>', svg)
    assert found, f"chart {key} has no title"
    return unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def metric_labels(at: AppTest) -> list[str]:
    return [m.label for m in at.metric]


def assert_expected_errors(at: AppTest, kinds: list[str]) -> None:
    """Each kind's one-line expected error is a caption on the page."""
    for kind in kinds:
        statement = expected_error(kind)
        assert any(c.startswith(statement) for c in texts(at.caption)), f"no {kind} statement"


@pytest.mark.parametrize(
    ("page_name", "labels", "kinds"),
    [
        ("model", ["Parameters", "Active per token", "Step time", "MFU"], ["params", "step_time"]),
        ("memory", ["Peak per GPU", "GPU capacity"], ["memory"]),
        ("pipeline", ["Micro-batches per step", "Bubble"], ["schedule"]),
        ("communication", ["Step time", "Exposed communication"], ["communication"]),
        ("validation", ["Configurations", "Median |peak error|", "Published figures"], []),
        ("meshes", ["Layouts considered", "Ranked", "Search time"], ["search"]),
        ("scaling", [], ["scaling"]),
    ],
)
def test_each_training_page_renders_its_numbers_charts_and_expected_error(page_name, labels, kinds):
    at = run(page=page_name)
    assert_clean(at)
    assert set(labels) <= set(metric_labels(at))
    assert charts(at), f"{page_name} draws no chart"
    assert not any(NOT_YET in t for t in texts(at.info)), texts(at.info)
    assert_expected_errors(at, kinds)


def test_a_narrowed_search_space_ranks_only_its_choices_and_an_emptied_one_says_why():
    at = run({"schedules": "1f1b", "zeros": "1,2", "ranked": "7"}, page="meshes")
    assert_clean(at)
    (ranked,) = [f.value for f in at.dataframe if "schedule" in f.value.columns]
    assert len(ranked) == 7
    pipelined = ranked[ranked["PP"] > 1]
    assert not pipelined.empty and set(pipelined["schedule"]) == {"1f1b"}
    assert set(ranked["ZeRO"]) <= {1, 2}
    assert any("Search space (narrowed)" in e.label for e in at.expander)
    at.session_state["in_schedules"] = []
    at.run()
    assert not at.exception
    assert "Schedules must list at least one value." in texts(at.error)
    assert at.session_state["in_zeros"] == [1, 2]  # the other choices are kept


def test_the_validation_page_states_every_expected_error_and_the_published_runs():
    at = run(page="validation")
    assert_clean(at)
    markdown = " ".join(texts(at.markdown))
    for kind in KINDS:
        assert expected_error(kind).partition(": ")[2] in markdown, kind
    assert "Published runs" in markdown
    published = [f.value for f in at.dataframe if "metric" in f.value.columns]
    assert len(published) == 1 and len(published[0]) == len(calibration_table())
    assert {"published", "ours", "error (%)"} <= set(published[0].columns)
    assert len(at.get("plotly_chart")) == 3  # measured memory, one configuration, published runs
    (memory,) = [f.value for f in at.dataframe if "set" in f.value.columns]
    counts = memory["set"].value_counts().to_dict()
    assert counts == {
        "taught the model": len(comparison_table()),
        "held out": len(comparison_table(HELDOUT_PATH)),
    }
    assert "Held-out worst |peak error|" in metric_labels(at)
    # today's GPUs: every published run of validation/published_runs.toml, with its error
    (today,) = [f.value for f in at.dataframe if "exact layout" in f.value.columns]
    runs = published_table()
    assert len(today) == len(runs)
    error = runs["estimated_tokens_per_s_per_gpu"] / runs["published_tokens_per_s_per_gpu"] - 1
    assert today["error (%)"].tolist() == ((error * 100).round(1) + 0.0).tolist()
    (by_generation,) = [f.value for f in at.dataframe if "exact_layouts" in f.value.columns]
    assert by_generation.set_index("group").loc["all", "runs"] == len(runs)
    (serving,) = [f.value for f in at.dataframe if "engine" in f.value.columns]
    assert len(serving) == len(load_runs())  # every published serving run, estimated or not


@pytest.mark.parametrize("workload", ["training", "serving"])
def test_the_report_page_offers_four_downloads_and_a_restore(workload):
    at = run({"workload": workload}, page="report")
    assert_clean(at)
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download Markdown", "Download JSON"]  # HTML and PDF: built on request
    assert {"Build HTML", "Build PDF"} <= {b.label for b in at.button}
    assert any("Restore" in m.value for m in at.markdown)


def test_the_serving_page_plans_the_cluster():
    at = run({"workload": "serving"}, page="serving")
    assert_clean(at)
    assert "Layouts that fit" in metric_labels(at)
    assert len(at.get("plotly_chart")) == 2  # memory per layout, throughput-latency frontier
    assert_expected_errors(at, ["serving"])


def test_the_memory_page_highlights_the_peak_of_the_deepseek_example():
    at = run(to_query(DEEPSEEK_V3), page="memory")
    assert_clean(at)
    assert at.subheader[0].value == "Memory per GPU"
    assert any("DeepSeek-V3" in c.value for c in at.caption)
    peak = dict(zip(metric_labels(at), texts(at.metric), strict=True))["Peak stage"]
    assert peak.endswith("of 16")


def test_a_link_sets_every_widget_and_the_url_keeps_it():
    query = to_query(DEEPSEEK_V3)
    at = run(query)
    assert_clean(at)
    assert at.selectbox(key="in_model_choice").value == "deepseek-v3"
    assert at.select_slider(key="in_seq").value == 4096
    assert at.number_input(key="in_nodes").value == 256
    assert at.number_input(key="in_ep").value == 64
    assert at.selectbox(key="in_schedule").value == "dualpipe"
    assert at.session_state["scenario"] == DEEPSEEK_V3
    assert at.query_params == {k: [v] for k, v in query.items()} or dict(at.query_params) == query


def test_moving_a_widget_writes_the_url():
    at = run()
    at.select_slider(key="in_seq").set_value(32768).run()
    assert_clean(at)
    assert at.session_state["scenario"].training.seq_len == 32768
    assert at.query_params["seq"] in ("32768", ["32768"])


def test_the_server_config_accepts_no_parent_frame_and_page_titles_draw_no_link_icon():
    """Two browser costs cut per rerun (README, Speed): with Streamlit's 16 default origins the
    page checked each message it posts to itself against every one; a heading's link icon
    reads the computed style of the whole page while it is drawn."""
    import tomllib

    config = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert config["client"]["allowedOrigins"] == []
    assert config["runner"]["postScriptGC"] is False
    at = run(page="memory")
    assert_clean(at)
    title = at.subheader[0]
    assert title.value == "Memory per GPU" and title.proto.hide_anchor


def test_an_example_button_loads_its_scenario():
    at = run()
    label = "DeepSeek-V3 671B MoE · 2048 H800"
    next(b for b in at.button if b.label == label).click().run()
    assert_clean(at)
    assert at.session_state["scenario"] == DEEPSEEK_V3


def test_a_malformed_link_value_keeps_the_default_and_says_so():
    at = run({"seq": "lots", "tp": "0"})
    assert not at.exception
    warning = " ".join(texts(at.warning))
    assert "Ignored seq='lots'" in warning and "Ignored tp='0'" in warning
    assert at.session_state["scenario"] == Scenario()


def test_an_unknown_preset_in_the_link_falls_back_with_a_message():
    at = run({"model": "gpt-7"})
    assert not at.exception
    assert any("gpt-7" in w for w in texts(at.warning))


@pytest.mark.parametrize(
    ("query", "page_name", "message"),
    [
        ({"nodes": "7"}, "memory", "DP × TP × PP × CP = 2 × 8 × 4 × 1 = 64"),
        ({"nodes": "0"}, "memory", "no GPUs"),
        ({"virtual": "2"}, "pipeline", "interleaved"),
        ({"gbs": "1"}, "communication", "smaller than"),
        ({"schedule": "dualpipe", "gbs": "6"}, "pipeline", "even number of microbatches"),
        ({"assume": '{"memory.headroom_fraction": 2}'}, "memory", "headroom_fraction"),
        ({"source": "upload"}, "model", "No config.json"),
    ],
)
def test_impossible_input_shows_one_sentence_and_no_traceback(query, page_name, message):
    at = run(query, page_name)
    assert not at.exception, [e.value for e in at.exception]
    assert any(message in t for t in texts(at.error)), texts(at.error)


def test_the_world_size_error_offers_to_fit_dp_and_keeps_the_rest():
    at = run({"nodes": "16"}, page="memory")
    next(b for b in at.button if b.label == "Set DP to 4").click().run()
    assert_clean(at)
    scenario = at.session_state["scenario"]
    assert scenario.layout.dp == 4 and scenario.cluster.num_nodes == 16


def test_an_uploaded_config_in_the_link_is_the_model():
    config = (Path(APP).parent / "presets" / "models" / "mixtral-8x7b.json").read_text()
    at = run({"source": "upload", "config": config, "config_name": "my-mixtral"}, page="model")
    assert_clean(at)
    assert at.subheader[0].value == "my-mixtral"


def test_an_assumption_override_in_the_link_changes_the_memory_estimate():
    plain = run(page="memory")
    more_headroom = run({"assume": '{"memory.headroom_fraction": 0.2}'}, page="memory")
    assert_clean(more_headroom)
    peak = {m.label: m.value for m in plain.metric}["Peak per GPU"]
    assert {m.label: m.value for m in more_headroom.metric}["Peak per GPU"] != peak


def test_the_generic_size_slider_builds_a_dense_model():
    at = run({"source": "generic", "size_b": "30.0"}, page="model")
    assert_clean(at)
    assert at.select_slider(key="in_size_b").value == 30.0
    assert "Dense" in at.subheader[0].value


def test_page_scripts_hold_no_bare_strings_that_streamlit_magic_would_draw():
    """st.navigation runs each page file as a script with magic on: a string statement after
    the module docstring (an attribute docstring, say) would appear on the page."""
    import ast

    from explorer.ui.pages import PAGES as REGISTERED

    for path in (Path(APP).parent / PAGES / f"{info.name}.py" for info in REGISTERED):
        body = ast.parse(path.read_text()).body[1:]
        strings = [
            node.lineno
            for node in body
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        ]
        assert not strings, f"{path.name} lines {strings}"


@pytest.mark.parametrize(
    ("start", "workload", "lands_on"),
    [("memory", "serving", "Serving"), ("serving", "training", "Memory per GPU")],
)
def test_switching_the_workload_opens_its_main_page(start, workload, lands_on):
    other = "training" if workload == "serving" else "serving"
    at = run({"workload": other}, page=start)
    at.radio(key="in_workload").set_value(workload).run()
    assert_clean(at)
    assert at.subheader[0].value == lands_on


def test_switching_the_workload_on_a_shared_page_stays_there():
    at = run(page="validation")
    at.radio(key="in_workload").set_value("serving").run()
    assert_clean(at)
    assert at.subheader[0].value.startswith("Validation")
