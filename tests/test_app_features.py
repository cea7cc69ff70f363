"""The app's explorer, gallery and inputs, headless (AppTest): the free schedule explorer shows
each stage's memory in GiB with a peak that adds up by hand, a long diagram is drawn in time
bins and zooms, every preset loads in one click, every input has a definition and an input
that does nothing is disabled with the reason."""

from __future__ import annotations

import json

import pytest
from test_app import assert_clean, chart_title, run, texts

from explorer.presets import model_ids

DUALPIPE_16_BY_32 = {"pp": "16", "schedule": "dualpipe", "gbs": "64", "nodes": "32"}
"""Llama 3.1 70B on 256 H100s, DP 2 x TP 8 x PP 16: 64 / (2 x 1) = 32 micro-batches."""


def figure(at, key: str) -> dict:
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(key)]
    return json.loads(chart.proto.spec)


def explorer_table(at):
    (table,) = [d.value for d in at.dataframe if "peak (GiB)" in d.value.columns]
    return table


def open_explorer(query=None):
    at = run(query, page="pipeline")
    at.toggle(key="explorer_on").set_value(True).run()
    assert_clean(at)
    return at


def test_the_explorer_shows_each_stages_memory_in_gib_and_its_peak_adds_up():
    at = open_explorer()  # 1F1B, 4 stages, 8 micro-batches: the layout's shape
    at.number_input(key="explorer_stages").set_value(8).run()
    assert_clean(at)
    one_f_one_b = explorer_table(at)
    # DP 2 x TP 8 x 8 stages: 128 GPUs, twice the sidebar's 64, and the page says so.
    assert any(c.startswith("This shape needs 128 GPUs") for c in texts(at.caption))
    # 1F1B holds P - p micro-batches on stage p (Narayanan et al. 2021 sec. 2.2.1).
    assert one_f_one_b["most micro-batches held"].tolist() == [8, 7, 6, 5, 4, 3, 2, 1]
    peak = one_f_one_b["fixed, states included (GiB)"] + (
        one_f_one_b["most micro-batches held"] * one_f_one_b["activations per micro-batch (GiB)"]
    )
    assert one_f_one_b["peak (GiB)"].tolist() == pytest.approx(peak.tolist(), rel=1e-12)
    assert (one_f_one_b["model states (GiB)"] < one_f_one_b["fixed, states included (GiB)"]).all()
    worst = one_f_one_b["peak (GiB)"].idxmax()
    written = next(c for c in texts(at.caption) if c.startswith("Peak: stage"))
    assert f"stage {worst} holds" in written
    assert f"= {one_f_one_b['peak (GiB)'].max():,.2f} GiB" in written
    lower = figure(at, "explorer_chart")["layout"]["yaxis2"]["title"]["text"]
    assert lower == "GiB (2^30 bytes)"

    at.selectbox(key="explorer_schedule").set_value("gpipe").run()
    assert_clean(at)
    gpipe = explorer_table(at)
    assert gpipe["most micro-batches held"].tolist() == [8] * 8  # GPipe keeps every one
    # Stage 4 holds 8 sets instead of 4: 4 x its activations per micro-batch more, the rest
    # the same (the last stage differs more: GPipe also keeps 8 micro-batches' logits).
    extra = gpipe["peak (GiB)"].iloc[4] - one_f_one_b["peak (GiB)"].iloc[4]
    per_set = one_f_one_b["activations per micro-batch (GiB)"].iloc[4]
    assert extra == pytest.approx(4 * per_set, rel=1e-9)
    assert gpipe["fixed, states included (GiB)"].iloc[4] == pytest.approx(
        one_f_one_b["fixed, states included (GiB)"].iloc[4], rel=1e-12
    )


def test_virtual_stages_are_offered_to_interleaved_only_and_a_shape_that_cannot_run_says_why():
    at = open_explorer()
    virtual = at.number_input(key="explorer_virtual")
    assert virtual.disabled and "one chunk per stage" in virtual.help
    at.selectbox(key="explorer_schedule").set_value("interleaved").run()
    assert not at.number_input(key="explorer_virtual").disabled
    at.selectbox(key="explorer_schedule").set_value("dualpipe").run()
    at.number_input(key="explorer_microbatches").set_value(7).run()
    assert not at.exception
    assert any("DualPipe cannot run this" in w for w in texts(at.warning)), texts(at.warning)


def test_dualpipe_at_16_by_32_is_drawn_in_time_bins_and_its_two_bubbles_are_explained():
    at = run(DUALPIPE_16_BY_32, page="pipeline")
    assert_clean(at)
    title = chart_title(at, "schedule")  # the light SVG drawing (no zoom yet)
    assert title.startswith("dualpipe: P=16, M=32") and "drawn in 96 time bins" in title
    bubble = next(m.value for m in at.metric if m.label == "Bubble")
    (said,) = [c for c in texts(at.caption) if "title's bubble" in c]
    # The whole step is drawn: the title's bubble is the metric's, and the step's share is
    # smaller because the optimizer and exposed DP communication add time without a pipeline.
    assert f"The title's bubble ({bubble}) is the Bubble figure above" in said
    step_share = float(said.split("the bubble is ")[1].split("%")[0])
    assert 0 < step_share < float(bubble.rstrip("%"))
    at.slider(key="pipeline_zoom").set_value((0, 20)).run()  # zoom into the warm-up
    assert_clean(at)
    zoomed = figure(at, "schedule")
    assert "time bins" not in zoomed["layout"]["title"]["text"]  # one bar per action again
    assert zoomed["layout"]["xaxis"]["range"][0] == 0


def test_the_explorer_zooms_a_long_schedule_from_time_bins_to_every_action():
    at = open_explorer()
    for name, value in (("explorer_stages", 16), ("explorer_microbatches", 32)):
        at.number_input(key=name).set_value(value).run()
    at.selectbox(key="explorer_schedule").set_value("dualpipe").run()
    assert_clean(at)
    assert "time bins" in figure(at, "explorer_chart")["layout"]["title"]["text"]
    at.slider(key="explorer_window").set_value((0, 20)).run()  # the warm-up's first fifth
    assert_clean(at)
    zoomed = figure(at, "explorer_chart")
    assert "time bins" not in zoomed["layout"]["title"]["text"]  # few actions: one bar each
    start, end = zoomed["layout"]["xaxis"]["range"]
    assert start == 0 and end > 0


def test_the_gallery_lists_every_preset_and_loads_one_in_a_click():
    at = run()
    buttons = [b for b in at.button if str(b.key).startswith("gallery_")]
    assert len(buttons) == len(model_ids())
    assert at.button(key="gallery_llama-3.1-70b").disabled  # the default model: "Loaded"
    at.button(key="gallery_deepseek-v3").click().run()
    assert_clean(at)
    assert at.session_state["in_model_choice"] == "deepseek-v3"
    assert at.query_params["model"] == "deepseek-v3"
    assert at.subheader[0].value == "DeepSeek-V3 (671B)"
    assert at.button(key="gallery_deepseek-v3").label == "Loaded"
    card = next(m.value for m in at.markdown if m.value.startswith("**DeepSeek-V3"))
    assert "671.0B parameters" in card and "37.6B active" in card
    assert "160K context" in card  # config.json max_position_embeddings 163840


def test_inputs_that_do_nothing_are_disabled_with_their_reason():
    at = run(page="memory")  # Llama 3.1 70B (dense), 1F1B on 4 stages, selective recompute
    ep, virtual = at.number_input(key="in_ep"), at.number_input(key="in_virtual")
    assert ep.disabled and "no experts" in ep.help
    assert virtual.disabled and "only interleaved 1F1B" in virtual.help
    assert not at.selectbox(key="in_schedule").disabled
    at.session_state["recipe_open"] = True
    at.session_state["advanced"] = True
    at.run()
    method = at.selectbox(key="in_rc_method")
    assert method.disabled and "Recompute is not full" in method.help
    assert not at.multiselect(key="in_rc_modules").disabled
    moe = at.number_input(key="as_memory.moe_imbalance")
    assert moe.disabled and "no experts" in moe.help
    at.selectbox(key="in_recompute").set_value("full").run()
    assert not at.selectbox(key="in_rc_method").disabled
    assert at.multiselect(key="in_rc_modules").disabled
    at.selectbox(key="in_schedule").set_value("interleaved").run()
    assert not at.number_input(key="in_virtual").disabled

    at = run({"pp": "1", "dp": "8"}, page="memory")
    schedule = at.selectbox(key="in_schedule")
    assert schedule.disabled and "PP = 1" in schedule.help
    at = run({"model": "deepseek-v3"}, page="model")
    assert not at.number_input(key="in_ep").disabled  # experts to spread


def test_every_sidebar_input_and_page_control_has_a_definition():
    at = open_explorer()
    at.session_state["recipe_open"] = True
    at.session_state["advanced"] = True
    at.run()
    kinds = ("number_input", "selectbox", "select_slider", "checkbox", "radio", "multiselect",
             "text_area", "toggle", "slider", "button_group")  # fmt: skip
    missing = [
        (kind, getattr(w, "label", "")) for kind in kinds for w in at.get(kind) if not w.proto.help
    ]
    assert not missing


def test_inputs_hidden_for_several_runs_come_back_with_their_values():
    """Streamlit drops a widget's value once a run does not draw it; the sidebar puts the
    last one back (explorer.ui.sidebar._KEPT) without re-assigning the widgets it draws."""
    at = run()
    at.number_input(key="in_mbs").set_value(4).run()
    at.select_slider(key="in_seq").set_value(32768).run()
    at.radio(key="in_workload").set_value("serving").run()
    at.number_input(key="in_prompt").set_value(777).run()  # two more runs without them
    at.run()
    assert at.session_state["scenario"].layout.micro_batch_size == 4  # kept while hidden
    at.radio(key="in_workload").set_value("training").run()
    assert_clean(at)
    assert at.number_input(key="in_mbs").value == 4
    assert at.select_slider(key="in_seq").value == 32768
    assert at.session_state["scenario"].serving.prompt_len == 777
    assert at.session_state["scenario"].training.seq_len == 32768


def test_the_run_after_a_cut_short_one_sends_every_sidebar_value_as_set():
    """A click during a run cuts it short; the browser may then hold a widget at its element's
    default and send that back (explorer.ui.sidebar._RUN_OPEN). The next run sends each value
    as set (the browser takes it over whatever it holds); a run after a finished one does not
    (it would redraw every widget)."""
    at = run({"gpu": "h200", "nodes": "4"})
    gpus, nodes = at.selectbox(key="in_gpu"), at.number_input(key="in_nodes")
    assert (gpus.value, nodes.value) == ("h200", 4)
    assert gpus.proto.set_value and nodes.proto.set_value  # the first run seeds from the link
    at.run()  # the run after a finished one
    assert not at.number_input(key="in_nodes").proto.set_value
    assert not at.selectbox(key="in_gpu").proto.set_value
    at.session_state["_run_open"] = True  # as a run cut short leaves it
    at.run()
    assert at.number_input(key="in_nodes").proto.set_value
    assert at.selectbox(key="in_gpu").proto.set_value
    assert at.number_input(key="in_nodes").value == 4
    at.run()  # that run finished: the widgets are left alone again
    assert not at.number_input(key="in_nodes").proto.set_value


@pytest.mark.parametrize(
    ("page", "query"),
    [
        ("model", {}), ("memory", {}), ("meshes", {"ranked": "20"}), ("pipeline", {}),
        ("communication", {}), ("scaling", {}), ("validation", {}), ("report", {}),
        ("serving", {"workload": "serving"}),
    ],
)  # fmt: skip
def test_every_page_runs_to_its_end_so_the_next_run_leaves_the_sidebar_alone(page, query):
    """A page that ended its run early (st.stop, st.rerun on the normal path) would leave
    explorer.ui.sidebar._RUN_OPEN set, and every later run would resend 24 widgets."""
    at = run(query, page=page)
    at.run()
    assert_clean(at)
    assert at.session_state["_run_open"] is False
    assert not at.number_input(key="in_nodes").proto.set_value


def test_closing_the_mixed_cluster_editor_keeps_its_groups_and_reopening_shows_them():
    at = run({"mixed": "h100-sxm:8:2,a100-80g:8:2"})  # groups in the link: it opens by itself
    assert at.selectbox(key="cluster_editor_gpu_1").value == "a100-80g"
    at.session_state["cluster_editor_open"] = False
    at.run()
    at.run()
    assert_clean(at)
    assert not [s for s in at.selectbox if s.key == "cluster_editor_gpu_1"]  # not drawn closed
    assert at.session_state["scenario"].mixed.groups == (("h100-sxm", 8, 2), ("a100-80g", 8, 2))
    at.session_state["cluster_editor_open"] = True
    at.run()
    assert at.number_input(key="cluster_editor_nodes_1").value == 2
    assert at.session_state["scenario"].mixed.groups == (("h100-sxm", 8, 2), ("a100-80g", 8, 2))
