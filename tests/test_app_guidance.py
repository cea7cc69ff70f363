"""The app guides: the verdict first, amber inside the reserve, "does not fit" once with fixes
that apply in one click, breakdowns that add up to their totals."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from test_app import assert_clean, charts, run, texts

from explorer.memory import training_memory
from explorer.presets import load_gpu, load_model, model_ids
from explorer.specs import Layout, TrainingWorkload
from explorer.trust import expected_error
from explorer.ui.pages.memory import breakdown_rows

TOO_BIG = {"tp": "8", "pp": "1", "dp": "8", "zero": "0", "mbs": "2", "recompute": "none"}
"""Llama 3.1 70B on the default 64 H100s without ZeRO: 18 bytes x 8.8e9 parameters per GPU."""


def alerts(at) -> list[str]:
    return [*texts(at.success), *texts(at.warning), *texts(at.error)]


def test_the_memory_page_opens_with_its_verdict_then_the_accuracy_sentence():
    at = run(page="memory")
    assert_clean(at)
    first = at.main.children[2]  # after the title and the scenario line
    assert "Fits" in str(first.value)
    assert at.caption[1].value.startswith(expected_error("memory"))  # right under it


def test_free_memory_inside_the_reserve_is_amber_and_a_smaller_reserve_is_green():
    at = run({"reserve": "60"}, page="memory")
    assert_clean(at)
    assert any("near the edge" in w for w in texts(at.warning))
    assert not at.success
    at.number_input(key="in_reserve").set_value(0.0).run()
    assert any(s.startswith("**Fits**") for s in texts(at.success))
    assert at.query_params["reserve"] == "0.0"  # an input like every other: in the link


def test_does_not_fit_is_said_once_and_a_fix_applies_in_one_click():
    at = run(TOO_BIG, page="memory")
    assert not at.exception
    assert sum("does not fit" in a.lower() for a in alerts(at)) == 1
    changes = [m.value for m in at.markdown if "→" in str(m.value)]
    assert changes == ["ZeRO 0 → 3"]  # the only single change: tests/test_fixes.py says why
    at.button(key="memory_fix_0").click().run()
    assert at.query_params["zero"] == "3"
    assert not at.error
    assert any("Fits" in a for a in alerts(at))


def ranked_table(at) -> pd.DataFrame:
    (ranked,) = [f.value for f in at.dataframe if "schedule" in f.value.columns]
    return ranked


def test_the_meshes_table_marks_and_can_hide_layouts_inside_the_reserve():
    at = run(page="meshes")
    assert_clean(at)
    spare = ranked_table(at)["spare (GiB)"]
    reserve = float(spare.median())  # some ranked layouts inside it, some outside
    at.number_input(key="in_reserve").set_value(reserve).run()
    ranked = ranked_table(at)
    inside = ranked["spare (GiB)"] < reserve
    assert inside.any() and (~inside).any()
    assert set(ranked.loc[inside, "memory"]) == {"inside reserve"}
    assert set(ranked.loc[~inside, "memory"]) == {"fits"}
    at.checkbox(key="meshes_hide_tight").check().run()
    kept = ranked_table(at)
    assert len(kept) == int((~inside).sum())
    assert (kept["spare (GiB)"] >= reserve).all()


LAYOUTS = (
    Layout(dp=2, tp=2, pp=2, zero=1),
    Layout(dp=1, tp=4, pp=4, recompute="full", schedule="interleaved", virtual_stages=2),
    Layout(dp=4, tp=1, pp=2, zero=3, recompute="selective", schedule="dualpipe"),
    Layout(dp=8, zero=2, micro_batch_size=2),
)


def test_inside_the_peak_stage_adds_up_to_each_stage_and_names_the_states():
    workload = TrainingWorkload(seq_len=4096, global_batch_size=64)
    checked = 0
    for model_id, layout in itertools.product(model_ids(), LAYOUTS):
        try:
            memory = training_memory(load_model(model_id), load_gpu("h100-sxm"), layout, workload)
        except ValueError:
            continue  # a layout the core rejects for this model (its rules are tested there)
        for stage in memory.stages:
            rows = breakdown_rows(stage)
            total = sum(value for _, _, value in rows)
            assert total == pytest.approx(stage.total_bytes, rel=1e-12), (model_id, layout)
            parts = {part for _, part, _ in rows}
            assert {"Parameters", "Gradients", "Optimizer states"} <= parts
            checked += 1
    assert checked >= 3 * len(model_ids())  # most presets take most layouts


def test_the_pipeline_page_opens_with_its_bubble_and_says_why_the_diagram_differs():
    at = run({"gbs": "256"}, page="pipeline")  # 128 micro-batches on 4 stages: a pattern drawn
    assert_clean(at)
    verdict = str(at.main.children[2].value)
    assert "of the pipeline is bubble" in verdict and "4 stages" in verdict
    assert at.caption[1].value.startswith(expected_error("schedule"))
    step_bubble = next(m.value for m in at.metric if m.label == "Bubble")
    assert any(f"larger than the step's {step_bubble}" in c for c in texts(at.caption)), texts(
        at.caption
    )


def test_the_pipeline_page_says_there_is_no_pipeline_at_pp_one():
    at = run({"pp": "1", "dp": "8"}, page="pipeline")
    assert not at.exception
    assert any("No pipeline" in i for i in texts(at.info))


def test_sp_is_disabled_with_its_reason_at_tp_one():
    at = run({"tp": "1", "dp": "16"}, page="memory")
    sp = at.checkbox(key="in_sp")
    assert sp.disabled and "TP = 1" in sp.help
    at = run(page="memory")  # TP 8: SP shards along the sequence
    assert not at.checkbox(key="in_sp").disabled


def test_the_serving_entry_of_training_switches_the_workload_in_one_click():
    def script():
        from explorer.ui.pages import serving_switch

        serving_switch()

    at = AppTest.from_function(script, default_timeout=30).run()
    at.button[0].click().run()
    assert at.session_state["in_workload"] == "serving"
    assert at.session_state["_landing_page"] == "serving"


def test_drawing_the_whole_step_redraws_the_diagram_without_the_pattern_note():
    at = run({"gbs": "256"}, page="pipeline")
    assert any("The diagram draws" in c for c in texts(at.caption))
    control = at.get("button_group")[0]
    whole = next(o for o in control.proto.options if o.content.startswith("Whole"))
    control.set_value(int(whole.content.split(": ")[1].split()[0])).run()
    assert_clean(at)
    assert not any("The diagram draws" in c for c in texts(at.caption))
    assert charts(at)


def test_the_schedule_diagrams_memory_lines_peak_at_each_stages_memory_estimate():
    from explorer.charts.schedule import live_memory, memory_lines
    from explorer.estimate import estimate, estimate_timeline
    from explorer.presets import load_cluster
    from explorer.units import GiB

    layout = Layout(dp=2, tp=8, pp=4, zero=1, recompute="selective")  # the app's default
    est = estimate(load_model("llama-3.1-70b"), load_cluster("hgx-h100", 8), layout,
                   TrainingWorkload(seq_len=8192, global_batch_size=512))  # fmt: skip
    timeline = estimate_timeline(est)
    lines = memory_lines(timeline, live_memory(est.memory.stages))
    for stage, line in zip(est.memory.stages, lines, strict=True):
        # 1F1B holds P - p sets on stage p at its peak: the simulator and the closed form agree.
        assert max(line.y) == pytest.approx(stage.total_bytes / GiB, rel=1e-9)
        assert min(line.y) < max(line.y)  # sets are freed as backwards finish
