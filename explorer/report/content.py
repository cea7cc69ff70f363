"""The layout report as one frozen value: sections of sentences, tables and code, the results as
JSON-ready data, and what the figures are drawn from. Pure: no plotting, no files.

``build_report(scenario)`` resolves the scenario through the core (explorer.estimate for
training, explorer.serving for serving) and arranges what comes back; the renderers
(``markdown``, ``html``, ``pdf``, ``json_io``) only format it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, Estimate, estimate, estimate_dict
from explorer.report import inputs, launch, ranking, serving, timing, training
from explorer.report.assumptions import SERVING_PREFIX, with_overrides
from explorer.report.calibration import calibration_rows, calibration_section
from explorer.report.cost import cost_results, cost_section
from explorer.report.hetero import hetero_parts
from explorer.report.tables import Section
from explorer.scenario import Scenario, resolve_cluster, resolve_model, world_size_error
from explorer.search import SearchResult
from explorer.serving import ServingAssumptions, ServingPlan, plan_serving, serving_answers

FIGURES = ("memory", "schedule", "communication", "serving_memory", "serving_frontier")
"""Every figure a report may name; ``explorer.charts.report`` draws them."""
"""Overrides of the serving model's assumptions are keyed ``serving.<field>``."""


@dataclass(frozen=True, slots=True, eq=False)
class FigureData:
    """What the report's figures are drawn from (core results, no plotting)."""

    estimate: Estimate | None = None
    """Training: memory per stage, pipeline timeline and exposed communication."""
    plan: ServingPlan | None = None
    """Serving: memory per layout and the throughput-latency frontier."""
    gpu_name: str = ""
    gpu_bytes: float = 0.0
    """Capacity of one GPU, bytes."""


@dataclass(frozen=True, slots=True, eq=False)
class Report:
    """A layout report: sections in reading order, results as JSON-ready data, figure data."""

    kind: Literal["training", "serving"]
    title: str
    scenario: Scenario
    """The input it was built from (restored by loading the JSON report)."""
    sections: tuple[Section, ...]
    results: Mapping[str, Any]
    """Numbers behind the sections (bytes, seconds, counts), for the JSON report."""
    figures: FigureData = field(default_factory=FigureData)

    def section(self, key: str) -> Section:
        """The section called ``key``; KeyError when the report has none."""
        for section in self.sections:
            if section.key == key:
                return section
        raise KeyError(f"the report has no section {key!r}")

    @property
    def figure_names(self) -> tuple[str, ...]:
        """Figures the sections draw, in reading order."""
        return tuple(name for s in self.sections for name in s.figures)


def file_name(report: Report, extension: str) -> str:
    """A file name for the report: its title as a slug, ``.extension`` (md, html, pdf, json)."""
    slug = re.sub(r"[^a-z0-9]+", "-", report.title.lower()).strip("-")[:80].rstrip("-")
    return f"{slug or 'report'}.{extension}"


def build_report(
    scenario: Scenario,
    *,
    search: SearchResult | None = None,
    plan: ServingPlan | None = None,
) -> Report:
    """The report of ``scenario``; ValueError (one sentence) when its inputs cannot be estimated.

    ``search`` (training) and ``plan`` (serving) let a caller pass results it already holds
    (the app's cache) for the same scenario; without a search the chosen layout is ranked
    alone (a report never waits for a search), without a plan the plan is computed.
    """
    if scenario.workload == "serving":
        return _serving_report(scenario, plan)
    return _training_report(scenario, search)


# ------------------------------------------------------------------------------ training


def training_case(scenario: Scenario) -> training.TrainingCase:
    """The scenario resolved to specs and estimated; ValueError when it cannot be."""
    if error := world_size_error(scenario.layout, scenario.cluster):
        raise ValueError(error)
    model, cluster = resolve_model(scenario.model), resolve_cluster(scenario.cluster)
    layout, workload = scenario.layout_spec(), scenario.training_spec()
    assumptions = with_overrides(DEFAULT_ESTIMATE_ASSUMPTIONS, scenario.assumption_overrides())
    result = estimate(model, cluster, layout, workload, assumptions)
    return training.TrainingCase(model, cluster, layout, workload, assumptions, result)


def _training_inputs(case: training.TrainingCase, scenario: Scenario) -> Section:
    w, est = case.workload, case.estimate
    workload = [
        ("sequence length (tokens)", w.seq_len),
        ("global batch (sequences per step)", w.global_batch_size),
        ("tokens per step", w.tokens_per_step),
        ("precision", w.precision),
        ("micro-batch (sequences)", case.layout.micro_batch_size),
        ("micro-batches per step per pipeline", est.microbatches),
    ]
    return Section(
        "inputs",
        "Inputs",
        tables=(
            inputs.key_values("Model", inputs.model_rows(case.model, scenario.model)),
            inputs.component_table(case.model),
            inputs.key_values("Cluster", inputs.cluster_rows(case.cluster, est.num_gpus)),
            inputs.key_values("Workload", workload),
        ),
    )


def _ranking(case: training.TrainingCase, search: SearchResult | None) -> ranking.Ranking:
    """The search's ranking when it is for this case's problem, else the chosen layout alone."""
    if search is None:
        return ranking.current_only(case)
    p = search.problem
    if (p.model, p.cluster, p.workload) != (case.model, case.cluster, case.workload):
        raise ValueError("The search result given is for another model, cluster or workload.")
    if search.assumptions != case.assumptions:
        raise ValueError("The search result given was made with other assumptions.")
    return ranking.from_search(search, case.estimate)


def _training_report(scenario: Scenario, search: SearchResult | None) -> Report:
    case = training_case(scenario)
    est = case.estimate
    ranked = _ranking(case, search)
    mixed_sections, mixed_results = hetero_parts(case, scenario)  # explorer.report.hetero
    notes = (estimate_dict(est)["flops_convention"],)
    assumptions, assumption_data = inputs.assumptions_section(
        case.assumptions, scenario.assumption_overrides(), notes=notes
    )
    sections = (
        Section("summary", "Summary", paragraphs=training.summary_paragraphs(case)),
        _training_inputs(case, scenario),
        training.layout_section(case),
        training.performance_section(case),
        *mixed_sections,
        cost_section(case),
        training.memory_section(case),
        ranking.ranking_section(ranked, case.layout),
        timing.schedule_section(case),
        timing.communication_section(case),
        assumptions,
        *calibration_section(scenario),
        accuracy_section(TRAINING_TRUST),
        inputs.warnings_section(est.warnings),
        launch.launch_section(case),
    )
    results = {
        "kind": "training",
        "model": inputs.model_results(case.model),
        "cluster": inputs.cluster_results(case.cluster, est.num_gpus),
        "layout": ranking.layout_json(case.layout),
        "memory": training.memory_results(case),
        "estimate": _estimate_results(est),
        "cost": cost_results(case),
        "schedule": timing.schedule_results(case),
        "communication": timing.communication_results(est),
        "ranking": ranking.ranking_results(ranked),
        "assumptions": assumption_data,
        "calibration": calibration_rows(scenario),
        "accuracy": accuracy_results(TRAINING_TRUST),
        "warnings": list(est.warnings),
        "launch": launch.launch_results(case),
        **mixed_results,
    }
    title = f"{case.model.name} training on {est.num_gpus:,} × {case.cluster.gpu.name}"
    figures = FigureData(
        estimate=est, gpu_name=case.cluster.gpu.name, gpu_bytes=case.cluster.gpu.memory_bytes
    )
    return Report("training", title, scenario, sections, results, figures)


TRAINING_TRUST = ("params", "memory", "step_time", "communication", "schedule", "search")
"""Expected-error statements a training report carries (explorer.trust)."""
SERVING_TRUST = ("params", "serving")
"""The same for a serving report."""


def accuracy_section(kinds: tuple[str, ...]) -> Section:
    """How far to trust the report's numbers: one sentence per kind, from explorer.trust."""
    from explorer.trust import expected_error

    return Section(
        "accuracy",
        "How far to trust these numbers",
        bullets=tuple(expected_error(kind) for kind in kinds),
    )


def accuracy_results(kinds: tuple[str, ...]) -> dict[str, str]:
    """The same statements for the JSON report, by kind."""
    from explorer.trust import expected_error

    return {kind: expected_error(kind) for kind in kinds}


def _estimate_results(est: Estimate) -> dict[str, Any]:
    """The estimate's headline numbers (the ``estimate`` command's keys, without the lists)."""
    data = estimate_dict(est)
    for bulky in ("stage_times", "collectives", "groups", "step_assumptions", "warnings"):
        data.pop(bulky, None)
    return data


# ------------------------------------------------------------------------------ serving


def serving_case(scenario: Scenario, plan: ServingPlan | None = None) -> serving.ServingCase:
    """The scenario resolved to specs and planned; ValueError when it cannot be."""
    model, cluster = resolve_model(scenario.model), resolve_cluster(scenario.cluster)
    workload = scenario.serving_spec()
    overrides = scenario.assumption_overrides()
    assumptions = with_overrides(ServingAssumptions(), overrides, SERVING_PREFIX)
    num_gpus = scenario.cluster.num_gpus
    if plan is None:
        plan = plan_serving(model, cluster, num_gpus, workload, assumptions)
    return serving.ServingCase(model, cluster, num_gpus, workload, assumptions, plan)


def _serving_report(scenario: Scenario, plan: ServingPlan | None) -> Report:
    case = serving_case(scenario, plan)
    answers = serving_answers(case.plan)
    assumptions, assumption_data = inputs.assumptions_section(
        case.assumptions, scenario.assumption_overrides(), SERVING_PREFIX, (serving.LEFT_OUT,)
    )
    best = case.best
    warnings = best.warnings if best is not None else ()
    sections = (
        Section("summary", "Summary", paragraphs=serving.summary_paragraphs(case)),
        Section(
            "inputs",
            "Inputs",
            tables=(
                inputs.key_values("Model", inputs.model_rows(case.model, scenario.model)),
                inputs.component_table(case.model),
                inputs.key_values("Cluster", inputs.cluster_rows(case.cluster, case.num_gpus)),
                inputs.key_values("Serving load", serving.workload_rows(case.workload)),
            ),
        ),
        serving.plan_section(case, answers),
        assumptions,
        *calibration_section(scenario),
        accuracy_section(SERVING_TRUST),
        inputs.warnings_section(warnings),
    )
    results = {
        "kind": "serving",
        "model": inputs.model_results(case.model),
        "cluster": inputs.cluster_results(case.cluster, case.num_gpus),
        "serving": serving.serving_results(case, answers),
        "assumptions": assumption_data,
        "calibration": calibration_rows(scenario),
        "accuracy": accuracy_results(SERVING_TRUST),
        "warnings": list(warnings),
    }
    title = f"{case.model.name} serving on {case.num_gpus:,} × {case.cluster.gpu.name}"
    figures = FigureData(
        plan=case.plan, gpu_name=case.cluster.gpu.name, gpu_bytes=case.cluster.gpu.memory_bytes
    )
    return Report("serving", title, scenario, sections, results, figures)
