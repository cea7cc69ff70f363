"""How far each kind of estimate is from our evidence: one sentence each, numbers computed.

Every number comes from the evidence when asked: measured memory
(``validation_data.comparison_table``), published training runs
(``calibration.calibration_table``), published runs on current GPUs
(``published_runs.published_table``, validation/published_runs.toml), the presets' published
parameter counts, and the schedule simulator against its closed forms. Nothing here is typed
in by hand, so a change to the estimator or the evidence changes the sentences.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal, cast, get_args

from explorer.calibration import TFLOPS, calibration_table
from explorer.counting import active_params_as_published, param_counts
from explorer.presets import load_model, model_entry, model_ids
from explorer.published_runs import published_table
from explorer.published_runs import summary as published_summary
from explorer.published_serving import estimate_run, load_runs
from explorer.published_serving import summary as serving_summary
from explorer.schedules import StageTimes, build_schedule, simulate
from explorer.specs import ScheduleName
from explorer.validation_data import HELDOUT_PATH, comparison_table, load_results

if TYPE_CHECKING:
    import pandas as pd

TrustKind = Literal[
    "params", "memory", "step_time", "communication", "schedule", "search", "scaling", "serving"
]
KINDS: Final[tuple[TrustKind, ...]] = get_args(TrustKind)

EXACT: Final = 1e-9
"""Largest relative deviation from a closed form still called exact (float rounding)."""
BUBBLE_CASES: Final[tuple[tuple[ScheduleName, int, int, int], ...]] = (
    ("gpipe", 4, 8, 1),
    ("gpipe", 16, 64, 1),
    ("1f1b", 4, 8, 1),
    ("1f1b", 8, 32, 1),
    ("interleaved", 4, 16, 2),
    ("interleaved", 8, 32, 4),
)
"""(schedule, P, M, V) checked against the bubble (P - 1) / (V M + P - 1) of Narayanan et al.
2021 (arXiv:2104.04473) sec. 2.2, with equal stage times and free point-to-point."""


def percent_text(fraction: float) -> str:
    """A fraction as a percentage, about two significant figures: 0.000598 -> "0.06%",
    0.01515 -> "1.5%", 0.0799 -> "8.0%", 0.1502 -> "15%"."""
    value = float(f"{abs(fraction) * 100:.2g}")
    if value >= 10:
        return f"{value:.0f}%"
    return f"{value:.1f}%" if value >= 1 else f"{value:g}%"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSummary:
    """Absolute relative errors of one estimate against a body of evidence."""

    count: int
    """Figures compared."""
    median: float
    """Median |relative error|, a fraction."""
    worst: float
    """Largest |relative error|, a fraction."""

    @classmethod
    def of(cls, errors: Iterable[float]) -> ErrorSummary:
        magnitudes = [abs(e) for e in errors]
        return cls(
            count=len(magnitudes), median=statistics.median(magnitudes), worst=max(magnitudes)
        )

    @property
    def median_text(self) -> str:
        """The median as the statements print it: "0.059%"."""
        return percent_text(self.median)

    @property
    def worst_text(self) -> str:
        return percent_text(self.worst)

    @property
    def text(self) -> str:
        """In words: median error 0.059%, worst 1.5%."""
        return f"median error {self.median_text}, worst {self.worst_text}"


@cache
def memory_summary() -> ErrorSummary:
    """Peak bytes per GPU against the measured PyTorch training steps."""
    return ErrorSummary.of(comparison_table()["peak_error"])


@cache
def heldout_summary() -> ErrorSummary:
    """Peak bytes per GPU against the held-out steps (measured after the model was frozen)."""
    return ErrorSummary.of(comparison_table(HELDOUT_PATH)["peak_error"])


def memory_coverage() -> str:
    """What the measured steps cover, in words: "single GPU, FSDP2 to 1,024 ranks, ..."."""
    layouts = [m.layout for m in load_results()]
    fsdp = [lay.dp for lay in layouts if lay.zero == 3]
    tp = [lay.tp for lay in layouts if lay.tp > 1]
    parts = [
        "single GPU" if any(lay.dp * lay.tp == 1 for lay in layouts) else "",
        f"FSDP2 to {max(fsdp):,} ranks" if fsdp else "",
        f"TP to {max(tp)}" if tp else "",
        "MoE" if any(m.model.is_moe for m in load_results()) else "",
    ]
    return ", ".join(p for p in parts if p)


@cache
def step_time_summary() -> ErrorSummary:
    """Every published figure of the calibration table (TFLOP/s, iteration time, MFU)."""
    return ErrorSummary.of(calibration_table()["relative_error"])


@cache
def weak_scaling_summary() -> ErrorSummary:
    """TFLOP/s per GPU along Narayanan et al. 2021's weak-scaling series (Table 1)."""
    table = calibration_table()
    return ErrorSummary.of(table[table["metric"] == TFLOPS]["relative_error"])


@cache
def published_runs_table() -> pd.DataFrame:
    """Every run of validation/published_runs.toml against its estimate, computed once per
    process (114 estimates; the step-time sentence, its summary and the Validation page read
    the same table). Callers must not modify it."""
    return published_table()


@cache
def published_runs_summary() -> ErrorSummary:
    """Tokens/s per GPU against every run of validation/published_runs.toml (none fitted)."""
    return ErrorSummary.of(published_runs_table()["error"])


@cache
def published_runs_text() -> str:
    """The published runs per GPU generation in words: "mean |error| 26% (2) on Ampere, 47% (30)
    on Hopper, 56% (16) on Blackwell, 37 too high, worst +180%" (runs in brackets)."""
    groups = published_summary(published_runs_table()).set_index("group")
    overall = groups.loc["all"]
    parts = [
        f"{percent_text(g.mean_abs_error)} ({g.runs}) on {name}"
        for name, g in groups.drop(index="all").iterrows()
    ]
    sign = "+" if overall.worst_error > 0 else "-"
    return (
        f"mean |error| {', '.join(parts)}, {overall.too_high} too high, worst "
        f"{sign}{percent_text(overall.worst_error)}"
    )


def calibration_scope() -> str:
    """The published runs in words: "14 Megatron-LM runs on 8 to 3,072 NVIDIA A100 ..."."""
    table = calibration_table()
    runs = len(table[["source", "model"]].drop_duplicates())
    gpus = " and ".join(sorted(table["gpu"].unique()))
    low, high = table["gpus"].min(), table["gpus"].max()
    return f"{runs} Megatron-LM runs on {low:,} to {high:,} {gpus}"


@cache
def params_summaries() -> tuple[ErrorSummary, ErrorSummary, int]:
    """(totals, MoE active counts, presets counted exactly) against their published counts."""
    totals, active, exact = [], [], 0
    for model_id in model_ids():
        entry, model = model_entry(model_id), load_model(model_id)
        total = param_counts(model).total_without_mtp
        totals.append((total - entry.official_total_params) / entry.official_total_params)
        exact += total == entry.official_total_params
        if entry.official_active_params:
            ours = active_params_as_published(model, entry.active_excludes_embedding)
            active.append((ours - entry.official_active_params) / entry.official_active_params)
    return ErrorSummary.of(totals), ErrorSummary.of(active), exact


@cache
def schedule_check() -> ErrorSummary:
    """Simulated bubble fractions against the closed form, over ``BUBBLE_CASES``."""
    errors = []
    for name, stages, microbatches, virtual in BUBBLE_CASES:
        schedule = build_schedule(name, stages, microbatches, virtual)
        simulated = simulate(schedule, StageTimes.uniform(stages)).bubble_fraction
        closed = (stages - 1) / (virtual * microbatches + stages - 1)
        errors.append((simulated - closed) / closed)
    return ErrorSummary.of(errors)


def _params() -> str:
    totals, active, exact = params_summaries()
    return (
        f"Parameters: {totals.text} against the published totals of {totals.count} presets "
        f"({exact} exact; published totals are often rounded); MoE active counts "
        f"{active.text}."
    )


def _memory() -> str:
    m, h = memory_summary(), heldout_summary()
    return (
        f"Memory: peak per GPU {m.text} against {m.count} measured PyTorch training steps "
        f"({memory_coverage()}), and {h.text} against {h.count} held out (measured after the "
        "model was frozen); Megatron behaviour (the default), pipeline, CP and EP memory "
        "are derived from sources, not measured; CUDA context and allocator reserve are "
        "assumptions."
    )


def _step_time() -> str:
    s = step_time_summary()
    return (
        f"Step time: {s.text} against {s.count} published figures of {calibration_scope()}; "
        f"other GPUs and frameworks are not calibrated: against {published_runs_summary().count} "
        f"published runs (tokens/s per GPU, none fitted), {published_runs_text()}."
    )


def _communication() -> str:
    s = step_time_summary()
    return (
        "Communication: collectives timed by message size on published nccl-tests sweeps and "
        "NCCL's protocol latencies (presets/fabrics), tested against those figures; in a step "
        f"they are part of the step time ({s.text} against {s.count} published figures)."
    )


def _schedule() -> str:
    check, s = schedule_check(), step_time_summary()
    match = "exactly" if check.worst <= EXACT else f"to {percent_text(check.worst)}"
    return (
        f"Pipeline: the simulator reproduces the closed-form bubble {match} ({check.count} "
        "GPipe, 1F1B and interleaved cases), so the schedule adds no error of its own; its "
        f"stage times come from the step-time model ({s.text})."
    )


def _search() -> str:
    s, m = step_time_summary(), memory_summary()
    return (
        f"Meshes: ranked by the step-time model ({s.text} against {s.count} published "
        f"figures), so layouts within about {percent_text(s.median)} of each other may swap "
        f"places; fit follows the memory model (worst {percent_text(m.worst)} against "
        f"{m.count} measured steps)."
    )


def _scaling() -> str:
    w, table = weak_scaling_summary(), calibration_table()
    gpus = table[table["metric"] == TFLOPS]["gpus"]
    return (
        f"Scaling: every point is a step-time estimate; along Narayanan et al.'s weak-scaling "
        f"series ({gpus.min():,} to {gpus.max():,} A100s) TFLOP/s per GPU has {w.text}; "
        "other GPUs are not calibrated."
    )


@cache
def serving_runs_check() -> tuple[float, float, int, int]:
    """(mean |error|, the worst signed error, runs estimated, runs) of tokens/s per GPU against
    validation/serving_runs.toml (explorer.published_serving; none fitted)."""
    checks = [estimate_run(run) for run in load_runs()]
    mean, worst, missing = serving_summary(checks)
    return mean, worst.error or 0.0, len(checks) - missing, len(checks)


def _serving() -> str:
    mean, worst, scored, runs = serving_runs_check()
    sign = "+" if worst > 0 else "-"
    return (
        f"Serving: throughput per GPU against {scored} of {runs} published serving runs "
        "(TensorRT-LLM's performance tables, SGLang's and DeepSeek's deployments; none "
        f"fitted) has mean |error| {percent_text(mean)}, worst {sign}{percent_text(worst)}; "
        "latency percentiles under load come from a scheduler simulation that no published "
        "percentile has checked yet."
    )


STATEMENTS: Final[Mapping[TrustKind, Callable[[], str]]] = MappingProxyType(
    {
        "params": _params,
        "memory": _memory,
        "step_time": _step_time,
        "communication": _communication,
        "schedule": _schedule,
        "search": _search,
        "scaling": _scaling,
        "serving": _serving,
    }
)


SUMMARIES: Final[Mapping[str, Callable[[], ErrorSummary]]] = MappingProxyType(
    {
        "memory": memory_summary,
        "memory_heldout": heldout_summary,
        "step_time": step_time_summary,
        "step_time_published": published_runs_summary,
    }
)
"""Bodies of evidence with an error summary, by name (the Validation page shows them)."""


def expected_error(kind: str) -> str:
    """One sentence: how far estimates of ``kind`` (one of ``KINDS``) are from our evidence."""
    if kind not in STATEMENTS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return STATEMENTS[cast(TrustKind, kind)]()
