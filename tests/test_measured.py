"""A measured run against the estimate (explorer.estimate.measured): parts of the step, the part
that explains the gap, one named correction; the command line's flags and the app's input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.cli import main
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, EstimateAssumptions, estimate
from explorer.estimate.measured import compare_memory, compare_step, correct, step_parts
from explorer.presets import load_gpu, load_model
from explorer.report.assumptions import with_overrides
from explorer.scenario import from_query, to_query
from explorer.specs import ClusterSpec, Layout, TrainingWorkload
from explorer.units import GiB

EXACT = 1e-12
"""Relative tolerance of hand-worked arithmetic on floats."""
ONE_PERCENT = 0.01
APP = str(Path(__file__).resolve().parents[1] / "app.py")

LLAMA_70B_CLI = [
    "estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "4",
    "--dp", "2", "--zero", "1", "--seq", "4096", "--gbs", "64",
]  # fmt: skip


def _case(layout: Layout, model: str = "llama-3.1-70b", gpu: str = "h100-sxm", gbs: int = 64):
    spec, chip = load_model(model), load_gpu(gpu)
    nodes = max(1, layout.world_size // 8)
    cluster = ClusterSpec(gpu=chip, gpus_per_node=8, num_nodes=nodes)
    workload = TrainingWorkload(seq_len=4096, global_batch_size=gbs)

    def with_assumptions(a: EstimateAssumptions = DEFAULT_ESTIMATE_ASSUMPTIONS):
        return estimate(spec, cluster, layout, workload, a)

    return with_assumptions


LAYOUTS = [
    pytest.param(Layout(tp=8, pp=1, dp=1), "llama-3.1-70b", id="tp8-no-pipeline"),
    pytest.param(Layout(tp=8, pp=4, dp=2, zero=1), "llama-3.1-70b", id="tp8-pp4-1f1b"),
    pytest.param(
        Layout(
            tp=4, pp=4, dp=4, zero=1, schedule="interleaved", virtual_stages=2, recompute="full"
        ),
        "llama-3.1-70b",
        id="interleaved-full-recompute",
    ),
    pytest.param(Layout(tp=1, pp=1, dp=8, zero=3), "llama-3.1-8b", id="zero3-dp8"),
    pytest.param(
        Layout(tp=1, pp=4, dp=8, ep=8, zero=1, schedule="dualpipe"),
        "mixtral-8x7b",
        id="dualpipe-moe",
    ),
]


@pytest.mark.parametrize(("layout", "model"), LAYOUTS)
def test_the_parts_of_the_step_sum_to_the_estimated_step(layout: Layout, model: str) -> None:
    est = _case(layout, model)()
    parts = step_parts(est)
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(est.step_time_s, rel=EXACT)


def test_without_a_pipeline_there_is_no_bubble_and_compute_is_the_passes_times_m() -> None:
    est = _case(Layout(tp=8, pp=1, dp=1))()
    parts, (stage,) = step_parts(est), est.stages
    assert parts["bubble"] == 0.0
    passes = stage.compute.forward_s + stage.compute.backward_input_s + stage.compute.weight_s
    assert parts["compute"] == pytest.approx(est.microbatches * passes, rel=EXACT)
    assert parts["optimizer"] == pytest.approx(stage.optimizer_s, rel=EXACT)


def test_the_1f1b_bubble_is_the_closed_form_ramp() -> None:
    """1F1B, closed form: makespan M C_max + (sum C_i - C_max); the pacing rank is busy M C_max,
    so the bubble is the ramp sum C_i - C_max (Narayanan et al. 2021, sec. 2.2)."""
    est = _case(Layout(tp=8, pp=4, dp=2, zero=1))()
    cycles = [s.cycle_s for s in est.stages]
    assert step_parts(est)["bubble"] == pytest.approx(sum(cycles) - max(cycles), rel=1e-9)


def test_a_measured_step_equal_to_the_estimate_has_error_zero_and_nothing_to_correct() -> None:
    est = _case(Layout(tp=8, pp=4, dp=2, zero=1))()
    found = compare_step(est, est.step_time_s)
    assert found.error == 0.0
    assert found.candidates == () and found.explained_by is None


def test_a_step_longer_by_the_compute_share_names_compute_with_factor_exactly_two() -> None:
    est = _case(Layout(tp=8, pp=4, dp=2, zero=1))()
    parts = step_parts(est)
    measured = est.step_time_s + parts["compute"]
    found = compare_step(est, measured)
    named = found.explained_by
    assert named is not None and named.component == "compute"
    assert named.factor == pytest.approx(2.0, rel=EXACT)
    assert named.correction_key == "compute.gemm_efficiency_scale"
    assert found.error == pytest.approx(est.step_time_s / measured - 1, rel=EXACT)
    # every other part, scaled alone, needs 1 + compute / part (hand-worked)
    tp = next(c for c in found.candidates if c.component == "comm.tp")
    assert tp.factor == pytest.approx(1 + parts["compute"] / parts["comm.tp"], rel=EXACT)
    assert tp.correction_key == "comm.links.scale_up"  # TP 8 inside one NVLink node


def test_compute_faster_than_the_peak_allows_is_not_plausible() -> None:
    """Closing a gap of minus 90% of the compute with compute alone would need the GEMMs at
    eff / 0.1 of peak, above 1 for any efficiency over 0.1."""
    est = _case(Layout(tp=8, pp=4, dp=2, zero=1))()
    parts = step_parts(est)
    found = compare_step(est, est.step_time_s - 0.9 * parts["compute"])
    compute = next(c for c in found.candidates if c.component == "compute")
    assert compute.factor == pytest.approx(0.1, rel=1e-9)
    assert not compute.plausible
    assert found.explained_by is None or found.explained_by.component != "compute"


def test_a_gap_larger_than_a_part_cannot_be_closed_by_that_part() -> None:
    est = _case(Layout(tp=8, pp=4, dp=2, zero=1))()
    found = compare_step(est, est.step_time_s / 2)
    optimizer = next(c for c in found.candidates if c.component == "optimizer")
    assert optimizer.factor < 0 and not optimizer.plausible


def test_the_gemm_correction_reproduces_the_measured_step_within_one_percent() -> None:
    run = _case(Layout(tp=8, pp=1, dp=1))
    est = run()
    measured = 1.3 * est.step_time_s
    fix, corrected = correct("compute.gemm_efficiency_scale", measured, est, run)
    assert fix.reached and fix.before == 1.0
    again = run(with_overrides(EstimateAssumptions(), {fix.key: fix.value}))
    assert again.step_time_s == pytest.approx(measured, rel=ONE_PERCENT)
    assert corrected.step_time_s == pytest.approx(again.step_time_s, rel=EXACT)
    # Not linear in the whole compute part: the GEMM scale leaves attention and memory-bound
    # kernels alone, so it must fall further than 1 / k of the compute part alone.
    k = compare_step(est, measured).explained_by.factor  # type: ignore[union-attr]
    assert fix.value < 1 / k


def test_a_link_correction_that_runs_out_of_range_says_it_did_not_reach() -> None:
    """The TP all-gathers and reduce-scatters cannot make a step faster than the step without
    them; with the scale-up links at their bound (2x the published figures) the estimate stays
    above a measurement at half the step."""
    run = _case(Layout(tp=8, pp=4, dp=2, zero=1))
    est = run()
    fix, corrected = correct("comm.links.scale_up", est.step_time_s / 2, est, run)
    assert not fix.reached and fix.value == 2.0
    assert est.step_time_s / 2 < corrected.step_time_s < est.step_time_s


def test_memory_attribution_names_activations_and_refuses_odd_model_state_factors() -> None:
    est = _case(Layout(tp=8, pp=4, dp=2, zero=1))()
    stage = est.memory.stages[est.memory.peak_stage]
    b = stage.breakdown
    without_headroom = stage.total_bytes - b.headroom
    assert compare_memory(est, without_headroom).candidates == ()
    found = compare_memory(est, without_headroom + b.activations)
    named = found.explained_by
    assert named is not None and named.component == "activations"
    assert named.factor == pytest.approx(2.0, rel=EXACT)
    grads = next(c for c in found.candidates if c.component == "gradients")
    assert grads.factor == pytest.approx(1 + b.activations / b.gradients, rel=EXACT)
    assert grads.plausible == (abs(grads.factor / 2 ** round(math.log2(grads.factor)) - 1) <= 0.05)
    doubled = compare_memory(est, without_headroom + b.gradients)  # bf16 -> fp32 gradients
    assert next(c for c in doubled.candidates if c.component == "gradients").plausible


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_cli_reports_the_error_and_applies_the_correction(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = _cli(LLAMA_70B_CLI, capsys)
    assert "measured" not in plain
    measured = 1.25 * plain["step_time_s"]
    argv = [*LLAMA_70B_CLI, "--measured-step-s", repr(measured), "--measured-peak-gib", "70"]
    compared = _cli(argv, capsys)["measured"]
    assert compared["step"]["error"] == pytest.approx(plain["step_time_s"] / measured - 1)
    assert compared["step"]["explained_by"] == "compute" and compared["correction"] is None
    assert compared["memory"]["measured_bytes"] == 70 * GiB
    fixed = _cli([*argv, "--apply-correction", "compute.gemm_efficiency_scale"], capsys)
    fix = fixed["measured"]["correction"]
    assert fix["key"] == "compute.gemm_efficiency_scale" and fix["reached"]
    assert fixed["step_time_s"] == pytest.approx(measured, rel=ONE_PERCENT)
    assert fixed["step_assumptions"]["compute"]["gemm_efficiency_scale"] == fix["value"]
    assert main([*argv, "--apply-correction", "compute.gemm_efficiency_scale"]) == 0
    assert "correction applied" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--measured-step-s", "0"], "--measured-step-s: must be a finite number greater than 0"),
        (["--measured-step-s", "-2"], "--measured-step-s: must be a finite number"),
        (["--measured-step-s", "nan"], "--measured-step-s: must be a finite number"),
        (["--measured-step-s", "inf"], "--measured-step-s: must be a finite number"),
        (["--measured-step-s", "2e6"], "at most 1e+06"),
        (["--measured-step-s", "fast"], "must be a number, got 'fast'"),
        (["--measured-peak-gib", "0"], "--measured-peak-gib: must be a finite number"),
        (["--measured-peak-gib", "2e6"], "at most 1.04858e+06"),
        (["--apply-correction", "compute.gemm_efficiency_scale"], "needs --measured-step-s"),
        (["--measured-step-s", "9", "--apply-correction", "comm.tp_overlap"], "invalid choice"),
    ],
)
def test_bad_measured_values_exit_2_with_one_sentence(
    extra: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*LLAMA_70B_CLI, *extra])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


def test_the_measured_values_ride_in_the_link_and_bad_ones_are_refused() -> None:
    scenario, messages = from_query({"measured_step": "12.5", "measured_peak": "61"})
    assert (scenario.measured_step_s, scenario.measured_peak_gib, messages) == (12.5, 61.0, [])
    assert from_query(to_query(scenario))[0] == scenario
    for bad in ("0", "-1", "nan", "inf", "2e6"):
        kept, said = from_query({"measured_step": bad})
        assert kept.measured_step_s is None and len(said) == 1


def test_the_memory_page_compares_a_measured_step_and_sets_the_correction() -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["measured_step"] = "80"
    at.run()
    at.switch_page("explorer/ui/pages/memory.py").run()
    assert not at.exception
    said = [m.value for m in at.markdown if m.value.startswith("Measured step")]
    assert len(said) == 1 and "**compute**" in said[0]
    (button,) = [b for b in at.button if b.key == "measured_apply"]
    button.click().run()
    assert not at.exception
    overrides = json.loads(at.query_params["assume"])
    assert 0 < overrides["compute.gemm_efficiency_scale"] < 1  # a slower run: GEMMs slowed
    said = [m.value for m in at.markdown if m.value.startswith("Measured step")]
    assert "(they agree)" in said[0]
