"""Expected-error statements: each carries the numbers its evidence gives, computed here again."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import calibration
from explorer.counting import active_params_as_published, param_counts
from explorer.presets import load_model, model_entry, model_ids
from explorer.published_serving import estimate_run, load_runs
from explorer.trust import BUBBLE_CASES, KINDS, expected_error, percent_text
from explorer.validation_data import HELDOUT_PATH, comparison_table

MAX_CHARS = 400
"""A statement is one line under a headline, not a paragraph."""


def median_and_worst(errors) -> tuple[str, str]:
    """``median error X, worst Y`` of these relative errors, as the statements print them."""
    magnitudes = np.abs(np.asarray(errors, dtype=float))
    return percent_text(float(np.median(magnitudes))), percent_text(float(magnitudes.max()))


def assert_states(statement: str, errors) -> None:
    median, worst = median_and_worst(errors)
    assert f"median error {median}, worst {worst}" in statement, statement


@pytest.mark.parametrize(
    ("fraction", "text"),
    [(0.0000598, "0.006%"), (0.000587, "0.059%"), (0.01515, "1.5%"), (0.0799, "8.0%"),
     (0.1502, "15%"), (-0.0087, "0.87%"), (0.0, "0%")],
)  # fmt: skip
def test_percent_text_keeps_two_significant_figures(fraction, text):
    assert percent_text(fraction) == text


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_one_short_sentence_naming_what_it_covers(kind):
    statement = expected_error(kind)
    assert statement.endswith(".") and len(statement) <= MAX_CHARS
    assert ". " not in statement.removesuffix("."), "one sentence"
    label, _, rest = statement.partition(": ")
    assert label[0].isupper() and rest, "starts with what it covers"


def test_an_unknown_kind_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="memory"):
        expected_error("accuracy")


def test_memory_states_the_peak_error_of_every_measured_step():
    table = comparison_table()
    statement = expected_error("memory")
    assert_states(statement, table["peak_error"])
    assert f"against {len(table)} measured PyTorch training steps" in statement
    assert "FSDP2 to 1,024 ranks" in statement
    assert "not measured" in statement and "assumptions" in statement
    heldout = comparison_table(HELDOUT_PATH)["peak_error"]
    median, worst = median_and_worst(heldout)
    assert f"median error {median}, worst {worst} against {len(heldout)} held out" in statement


def published_errors(metric: str | None = None) -> list[float]:
    """(ours - published) / published, each estimate run here again, no cache."""
    errors = []
    for row in calibration.NARAYANAN_TABLE_1:
        if metric in (None, calibration.TFLOPS):
            est = calibration.run_estimate(
                row.run, "full", False, calibration.NARAYANAN_SETTING, "bf16"
            )
            errors.append(est.hardware_flops_per_s_per_gpu / 1e12 / row.tflops_per_gpu - 1)
    if metric is None:
        for row in calibration.KORTHIKANTI_TABLE_5:
            setting = calibration.PAPER_SETTING
            full = calibration.run_estimate(row.run, "full", False, setting, None)
            present = calibration.run_estimate(row.run, "selective", True, setting, None)
            errors.append(full.step_time_s / row.full_recompute_s - 1)
            errors.append(present.step_time_s / row.selective_s - 1)
            errors.append(present.mfu / row.mfu - 1)
    return errors


def test_step_time_states_the_error_over_every_published_figure_and_run():
    errors = published_errors()
    runs = len(calibration.NARAYANAN_TABLE_1) + len(calibration.KORTHIKANTI_TABLE_5)
    statement = expected_error("step_time")
    assert_states(statement, errors)
    assert f"against {len(errors)} published figures of {runs} Megatron-LM runs" in statement
    assert "8 to 3,072 NVIDIA A100" in statement and "not calibrated" in statement


@pytest.mark.parametrize("kind", ["communication", "schedule", "search"])
def test_pages_built_on_the_step_time_carry_its_error(kind):
    assert_states(expected_error(kind), published_errors())


def test_scaling_states_the_error_along_the_weak_scaling_series():
    statement = expected_error("scaling")
    assert_states(statement, published_errors(calibration.TFLOPS))
    assert "32 to 3,072 A100s" in statement


def test_search_states_how_close_layouts_tie_and_the_memory_error():
    statement = expected_error("search")
    median, _ = median_and_worst(published_errors())
    _, memory_worst = median_and_worst(comparison_table()["peak_error"])
    assert f"within about {median} of each other" in statement
    assert f"worst {memory_worst} against {len(comparison_table())} measured steps" in statement


def test_schedule_says_the_simulator_matches_the_closed_form_exactly():
    statement = expected_error("schedule")
    assert f"exactly ({len(BUBBLE_CASES)} GPipe, 1F1B and interleaved cases)" in statement


def test_params_state_the_error_against_every_published_count():
    totals, active, exact = [], [], 0
    for model_id in model_ids():
        entry, model = model_entry(model_id), load_model(model_id)
        total = param_counts(model).total_without_mtp
        totals.append(total / entry.official_total_params - 1)
        exact += total == entry.official_total_params
        if entry.official_active_params:
            ours = active_params_as_published(model, entry.active_excludes_embedding)
            active.append(ours / entry.official_active_params - 1)
    statement = expected_error("params")
    assert_states(statement, totals)
    assert_states(statement.split("MoE active counts")[1], active)
    assert f"published totals of {len(totals)} presets ({exact} exact" in statement


def test_serving_states_its_error_against_the_published_serving_runs():
    checks = [estimate_run(run) for run in load_runs()]
    scored = [c.error for c in checks if c.error is not None]
    mean = sum(abs(e) for e in scored) / len(scored)
    worst = max(scored, key=abs)
    statement = expected_error("serving")
    assert f"against {len(scored)} of {len(checks)} published serving runs" in statement
    assert f"mean |error| {percent_text(mean)}" in statement
    assert f"worst {'+' if worst > 0 else '-'}{percent_text(worst)}" in statement
