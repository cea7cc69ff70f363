"""The cluster editor (explorer.ui.cluster_editor), headless: groups edited in the sidebar reach
the link and the Meshes page; a straggler gives the mitigation sentence; bad input, a sentence."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
MESHES = "explorer/ui/pages/meshes.py"
# A short search: one schedule, ZeRO stage and micro-batch size.
SMALL = {"model": "llama-3.1-8b", "nodes": "4", "dp": "1", "schedules": "1f1b", "zeros": "1",
         "mbs_tried": "1", "recomputes": "selective,full", "ranked": "3"}  # fmt: skip


def _run(query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.session_state["cluster_editor_open"] = True  # the editor draws its rows only when open
    at.run()
    return at


def _headers(at: AppTest) -> list[str]:
    return [str(s.value) for s in at.subheader]


def test_groups_added_in_the_editor_reach_the_link_and_rank_layouts_on_the_meshes_page():
    at = _run(SMALL)
    assert not at.exception
    for _ in range(2):
        next(b for b in at.button if b.label == "Add group").click().run()
    at.selectbox(key="cluster_editor_gpu_0").set_value("h100-sxm")
    at.selectbox(key="cluster_editor_gpu_1").set_value("a100-80g")
    at.number_input(key="cluster_editor_nodes_0").set_value(2)
    at.number_input(key="cluster_editor_nodes_1").set_value(2).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["mixed"] == "h100-sxm:8:2,a100-80g:8:2"
    at.switch_page(MESHES).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "On the mixed cluster" in _headers(at)
    table = next(d.value for d in at.dataframe if "per type" in d.value.columns)
    assert len(table) == 3 and table["step (s)"].is_monotonic_increasing
    assert all("H100" in t and "A100" in t for t in table["per type"])


def test_a_straggler_shows_its_cost_and_the_mitigation_and_zero_shows_nothing():
    at = _run({**SMALL, "slow": "30", "slow_where": "dp"})
    at.switch_page(MESHES).run()
    assert not at.exception and not at.error
    sentence = [str(m.value) for m in at.markdown if "slower the step takes" in str(m.value)]
    assert len(sentence) == 1 and "one data-parallel replica 30% slower" in sentence[0]
    at = _run({**SMALL, "slow": "0"})
    at.switch_page(MESHES).run()
    assert "With the straggler" not in _headers(at) and "On the mixed cluster" not in _headers(at)


def test_an_unknown_gpu_and_a_layout_the_groups_cannot_hold_are_one_sentence_each():
    at = _run({**SMALL, "mixed": "h1000:8:2,a100-80g:8:1"})
    assert not at.exception
    assert [str(w.value) for w in at.warning][:1] == [
        "Unknown GPU 'h1000' in group 1; showing " + at.selectbox(key="cluster_editor_gpu_0").value
        + "."]  # fmt: skip
    at.switch_page(MESHES).run()
    assert not at.exception
    infos = [str(i.value) for i in at.info if "current layout on the mixed cluster" in str(i.value)]
    assert len(infos) == 1 and infos[0].count(".") >= 1 and "\n" not in infos[0]


def test_a_json_report_with_a_mixed_cluster_loads_back_into_the_editor():
    from dataclasses import replace

    from explorer.report import build_report
    from explorer.report.json_io import load_report_json, report_json
    from explorer.scenario import MixedInputs, Scenario, StragglerInputs
    from explorer.ui.state import state_from_scenario

    scenario = replace(
        Scenario(),
        mixed=MixedInputs(groups=(("h100-sxm", 8, 4), ("a100-80g", 8, 4)), split="speed"),
        straggler=StragglerInputs(slowdown_pct=15.0, where="pp-stage", stage=2),
    )
    loaded = load_report_json(report_json(build_report(scenario)))
    at = _run({})
    for name, value in state_from_scenario(loaded).items():  # what the Report page's load does
        at.session_state[name] = value
    at.run()
    assert not at.exception
    assert at.session_state["scenario"] == scenario
    assert at.selectbox(key="cluster_editor_gpu_1").value == "a100-80g"
    assert at.number_input(key="cluster_editor_nodes_1").value == 4
    assert at.number_input(key="in_slow").value == 15.0


def test_an_empty_group_from_a_link_is_one_error_on_the_meshes_page():
    at = _run({**SMALL, "mixed": "h100-sxm:8:0"})
    at.switch_page(MESHES).run()
    assert not at.exception
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and "no GPUs" in errors[0] and "\n" not in errors[0]
