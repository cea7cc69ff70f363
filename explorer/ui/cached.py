"""Every ``st.cache_data`` wrapper of the app: core calls keyed on frozen specs and scenarios.

Arguments are frozen dataclasses (hashed by value); results are plain frozen data. No widget
is ever created in here. Core modules are imported on first use (typed imports inside each
wrapper, which mypy and tests/test_architecture.py read), so a page loads
only the parts of the core it draws.
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from explorer.charts.style import Figure
from explorer.counting import ParamCounts, active_param_counts, param_counts
from explorer.flops import FlopsPerToken, forward_flops_per_token, model_flops_per_token
from explorer.mesh import SearchSpace
from explorer.scenario import (
    ClusterInputs,
    ModelRef,
    Overrides,
    Scenario,
    resolve_cluster,
    resolve_model,
)
from explorer.specs import (
    ClusterSpec,
    Layout,
    ModelSpec,
    ScheduleName,
    ServingWorkload,
    TrainingWorkload,
)
from explorer.ui.assumptions import estimate_assumptions, serving_assumptions

if TYPE_CHECKING:
    from explorer.charts.report import ReportFile
    from explorer.estimate import Estimate, StageTime
    from explorer.estimate.fixes import Fix
    from explorer.memory import TrainingMemory
    from explorer.memory.serving import ServingLayout
    from explorer.report import Report
    from explorer.scaling import ScalingSweep
    from explorer.schedules import Timeline
    from explorer.search import Progress, SearchResult
    from explorer.serving import ServingEstimate, ServingPlan
    from explorer.serving.scheduler import LoadResult
    from explorer.serving.speculative import SpeculativeDecode
    from explorer.trust import ErrorSummary

MAX_ENTRIES = 256


def _pickled(value: object) -> bytes:
    """A frozen input's cache key: its pickle. Streamlit's own hasher walks every field and
    takes about 2.5 ms for a ModelSpec or a ClusterSpec against 0.05 ms for the pickle (timed
    here with time.perf_counter); a rerun makes about forty cached calls. Two different specs
    never pickle alike, so a key can miss (equal specs pickled differently) but never match a
    different spec."""
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _hash_funcs() -> dict[str | type[Any], Callable[[Any], Any]]:
    from explorer.memory.serving import ServingLayout

    kinds = (ModelSpec, ClusterSpec, Layout, TrainingWorkload, ServingWorkload, Scenario,
             ModelRef, ClusterInputs, SearchSpace, ServingLayout)  # fmt: skip
    return dict.fromkeys(kinds, _pickled)


HASH = _hash_funcs()
"""hash_funcs of every cached function: the frozen specs keyed by their pickles."""

# Functions marked SHARED are st.cache_resource: every session reads the one frozen result,
# never a copy. st.cache_data unpickles a copy on each call, which costs 22 to 114 ms for a
# schedule timeline and 22 to 122 ms for a search result (pickle.loads timed here on the
# presets), on every rerun of the pages that read them. Nothing in the app mutates them.


# ------------------------------------------------------------------------------ presets


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def model_choices() -> tuple[tuple[str, str], ...]:
    """(preset id, display name) of every model preset, in index order."""
    from explorer import presets

    return tuple((i, presets.model_entry(i).display_name) for i in presets.model_ids())


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def model_source(model_id: str) -> tuple[str, int, int | None]:
    """(source URL, official total, official active) of a model preset."""
    from explorer.presets import model_entry

    entry = model_entry(model_id)
    return entry.source, entry.official_total_params, entry.official_active_params


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def gpu_choices() -> tuple[tuple[str, str], ...]:
    """(preset id, display name) of every GPU preset."""
    from explorer import presets

    return tuple((i, presets.load_gpu(i).name) for i in presets.gpu_ids())


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def model(ref: ModelRef) -> ModelSpec:
    """The model a reference names; ValueError / ConfigError (one sentence) when it cannot."""
    return resolve_model(ref)


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def cluster(shape: ClusterInputs) -> ClusterSpec:
    return resolve_cluster(shape)


# ------------------------------------------------------------------------------ model


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def params(spec: ModelSpec) -> tuple[ParamCounts, ParamCounts]:
    """(all parameters, active per token) by component."""
    return param_counts(spec), active_param_counts(spec)


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def forward_flops(spec: ModelSpec, seq_len: int) -> FlopsPerToken:
    """Forward FLOPs per token by part (causal attention, Megatron-LM convention)."""
    return forward_flops_per_token(spec, seq_len)


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def training_flops(spec: ModelSpec, seq_len: int) -> float:
    """Model FLOPs per token of a training step (forward + backward), the MFU numerator."""
    return model_flops_per_token(spec, seq_len)


# ------------------------------------------------------------------------------ memory


@st.cache_resource(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)  # SHARED
def training_memory(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
) -> TrainingMemory:
    """explorer.memory.training_memory, with the scenario's assumption overrides."""
    from explorer import memory
    from explorer.report.assumptions import with_overrides

    assumptions = with_overrides(memory.DEFAULT_TRAINING_ASSUMPTIONS, dict(overrides), "memory.")
    return memory.training_memory(
        model, cluster.gpu, layout, workload, assumptions, domain_size=cluster.domain_size
    )


@st.cache_data(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)
def axis_roles(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload
) -> tuple[tuple[str, int, str, str], ...]:
    """(axis, degree, what it splits, what it replicates) of each parallel axis, in words."""
    from explorer.memory import axis_roles

    roles = axis_roles(model, layout, workload)
    return tuple((r.axis, r.degree, r.splits, r.replicates) for r in roles)


# ------------------------------------------------------------------------------ step time


@st.cache_resource(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)  # SHARED
def estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
) -> Estimate:
    """explorer.estimate.estimate: memory, step time, exposed communication, MFU."""
    import explorer.estimate as module

    assumptions = estimate_assumptions(dict(overrides))
    return module.estimate(model, cluster, layout, workload, assumptions)


@st.cache_resource(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)  # SHARED
def timeline(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
) -> Timeline:
    """The estimate's pipeline simulated action by action (for the schedule diagram)."""
    est = estimate(model, cluster, layout, workload, overrides)
    from explorer.estimate import estimate_timeline

    return estimate_timeline(est)


@st.cache_resource(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)  # SHARED
def schedule_variants(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
    names: tuple[ScheduleName, ...],
) -> tuple[tuple[ScheduleName, Timeline | None, str], ...]:
    """(schedule, timeline or None, reason it cannot run) of the layout under each schedule.

    Interleaved keeps the layout's virtual stages when it has some, else takes 2 (its smallest
    useful setting); the other schedules run with 1.
    """
    out: list[tuple[ScheduleName, Timeline | None, str]] = []
    for name in names:
        virtual = max(layout.virtual_stages, 2) if name == "interleaved" else 1
        try:
            variant = replace(layout, schedule=name, virtual_stages=virtual)
            out.append((name, timeline(model, cluster, variant, workload, overrides), ""))
        except ValueError as error:
            out.append((name, None, str(error)))
    return tuple(out)


@st.cache_data(
    hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner="Trying changes that would make it fit…"
)
def memory_fixes(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
) -> tuple[Fix, ...]:
    """explorer.estimate.fixes.memory_fixes: the smallest changes that make the layout fit."""
    import explorer.estimate.fixes as fixes

    return fixes.memory_fixes(
        model, cluster, layout, workload, estimate_assumptions(dict(overrides))
    )


def pacing_part(est: Estimate) -> StageTime:
    """The part whose cycle paces the pipeline (explorer.estimate.bottleneck_part)."""
    from explorer.estimate import bottleneck_part

    return bottleneck_part(est.stages)


# ------------------------------------------------------------------------------ figures


@st.cache_resource(hash_funcs=HASH, max_entries=64, show_spinner=False)
def memory_chart(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
) -> Figure:
    """The memory page's chart. Figures are cached as resources (shared, never copied):
    unpickling a Plotly figure re-validates it, which costs as much as building it; the app
    only reads them."""
    from explorer.charts.memory import training_memory_figure

    memory = training_memory(model, cluster, layout, workload, overrides)
    return training_memory_figure(memory, cluster.gpu.name)


def pattern_microbatches(timeline: Timeline) -> int:
    """Micro-batches enough to show a schedule's warm-up, steady state and cool-down: 2P (at
    least 8, even for DualPipe), or all of them when the step has few."""
    schedule = timeline.schedule
    return min(schedule.microbatches, max(8, 2 * schedule.stages))


def _pattern(timeline: Timeline, microbatches: int) -> Timeline:
    """The same schedule and stage times with fewer micro-batches (a readable diagram); the
    whole timeline when the schedule cannot run with that many."""
    from explorer import schedules

    s = timeline.schedule
    if microbatches >= s.microbatches:
        return timeline
    try:
        shorter = schedules.build_schedule(s.name, s.stages, microbatches, s.virtual)
    except ValueError:
        return timeline
    return schedules.simulate(shorter, timeline.times)


@st.cache_resource(hash_funcs=HASH, max_entries=64, show_spinner=False)
def schedule_chart(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
    microbatches: int,
) -> Figure:
    """The schedule diagram of the layout, drawn with ``microbatches`` micro-batches (the
    whole step, or its pattern). Keyed on the specs: hashing a timeline of thousands of
    actions would cost more than the figure."""
    from explorer.charts.schedule import schedule_figure

    whole = timeline(model, cluster, layout, workload, overrides)
    return schedule_figure(_pattern(whole, microbatches))


@st.cache_resource(hash_funcs=HASH, max_entries=64, show_spinner=False)
def schedule_memory_chart(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
    microbatches: int,
) -> Figure:
    """The schedule diagram with each stage's memory in GiB under it (the block activations
    held times one set's bytes, on top of the rest of the stage's peak), when the memory
    estimate has one entry per simulated stage; else the diagram with sets held."""
    from explorer.charts.schedule import live_memory, schedule_figure

    whole = timeline(model, cluster, layout, workload, overrides)
    memory = estimate(model, cluster, layout, workload, overrides).memory
    live = live_memory(memory.stages) if len(memory.stages) == whole.schedule.stages else None
    return schedule_figure(_pattern(whole, microbatches), live=live)


@st.cache_resource(hash_funcs=HASH, max_entries=64, show_spinner=False)
def schedule_comparison_chart(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    workload: TrainingWorkload,
    overrides: Overrides,
    names: tuple[ScheduleName, ...],
) -> Figure | None:
    """The patterns of the layout under each schedule that can run it, stacked; None if none."""
    from explorer.charts.schedule import schedule_comparison_figure

    variants = schedule_variants(model, cluster, layout, workload, overrides, names)
    drawn = [_pattern(t, pattern_microbatches(t)) for _, t, _ in variants if t is not None]
    return schedule_comparison_figure(drawn) if drawn else None


# ------------------------------------------------------------------------------ validation


@st.cache_data(hash_funcs=HASH, max_entries=4, show_spinner=False)
def validation_table() -> tuple[pd.DataFrame, tuple[str, ...]]:
    """explorer.validation_data's comparison tables (the measurements that taught the model,
    then the held-out ones, told apart by ``set``) and the categories they compare."""
    import explorer.validation_data as data

    taught = data.comparison_table().assign(set="taught the model")
    held = data.comparison_table(data.HELDOUT_PATH).assign(set="held out")
    return pd.concat([taught, held], ignore_index=True), tuple(data.COMPARED)


@st.cache_data(
    hash_funcs=HASH, max_entries=2, show_spinner="Estimating 48 published training runs…"
)
def published_runs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """explorer.published_runs: each published run against its estimate, and the summary by
    GPU generation (validation/published_runs.toml)."""
    import explorer.published_runs as runs
    from explorer.trust import published_runs_table

    table = published_runs_table().copy()  # the accuracy sentences' table, computed once
    return table, runs.summary(table)


@st.cache_data(
    hash_funcs=HASH, max_entries=2, show_spinner="Estimating the published serving runs…"
)
def published_serving() -> pd.DataFrame:
    """explorer.published_serving: each published serving run against its estimate."""
    import explorer.published_serving as runs

    checks = [runs.estimate_run(run) for run in runs.load_runs()]
    return pd.DataFrame(
        {
            "run": [c.id for c in checks],
            "engine": [c.engine for c in checks],
            "phase": [c.phase for c in checks],
            "published tokens/s/GPU": [c.measured_per_gpu for c in checks],
            "estimated tokens/s/GPU": [c.estimated_per_gpu for c in checks],
            "error (%)": [None if c.error is None else round(c.error * 100, 1) for c in checks],
            "at": [c.why for c in checks],
        }
    )


@st.cache_data(hash_funcs=HASH, max_entries=4, show_spinner="Estimating the published runs…")
def calibration_table() -> pd.DataFrame:
    """explorer.calibration's table: our estimate against each published figure."""
    from explorer.calibration import calibration_table

    return calibration_table()


def trust_kinds() -> tuple[str, ...]:
    """The kinds of estimate with an expected-error statement, in the order pages show them."""
    from explorer.trust import KINDS

    return tuple(KINDS)


@st.cache_data(hash_funcs=HASH, max_entries=8, show_spinner=False)
def error_summary(evidence: str) -> ErrorSummary:
    """explorer.trust's median and worst error against one body of evidence (``SUMMARIES``)."""
    from explorer.trust import SUMMARIES

    return SUMMARIES[evidence]()


@st.cache_data(hash_funcs=HASH, max_entries=16, show_spinner=False)
def expected_error(kind: str) -> str:
    """explorer.trust's one sentence on how far estimates of ``kind`` are from our evidence."""
    from explorer.trust import expected_error

    return expected_error(kind)


# ------------------------------------------------------------------------------ serving


@st.cache_resource(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)  # SHARED
def serving_plan(
    model: ModelSpec, cluster: ClusterSpec, workload: ServingWorkload, overrides: Overrides
) -> ServingPlan:
    """explorer.serving.plan_serving over every GPU of the cluster."""
    from explorer import serving

    assumptions = serving_assumptions(dict(overrides))
    return serving.plan_serving(model, cluster, cluster.world_size, workload, assumptions)


@st.cache_resource(hash_funcs=HASH, max_entries=MAX_ENTRIES, show_spinner=False)  # SHARED
def serving_under_load(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: ServingWorkload,
    overrides: Overrides,
    layout: ServingLayout,
    users: int,
) -> LoadResult:
    """explorer.serving.scheduler.serve_under_load: ``users`` closed-loop users on ``layout``."""
    import explorer.serving.scheduler as scheduler

    assumptions = serving_assumptions(dict(overrides))
    load = scheduler.EngineLoad(users=users, num_requests=max(4 * users, 64))
    return scheduler.serve_under_load(model, cluster, layout, workload, load, assumptions)


@st.cache_data(max_entries=MAX_ENTRIES, show_spinner=False)
def serving_speculative(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: ServingWorkload,
    overrides: Overrides,
    layout: ServingLayout,
    draft_id: str | None,
    draft_tokens: int,
    acceptance: float,
) -> tuple[ServingEstimate, SpeculativeDecode]:
    """``layout`` at the workload with speculative decoding (the plan's estimate and the
    draft and verify steps): MTP when ``draft_id`` is None, else that model preset drafts."""
    from explorer.presets import load_model
    from explorer.serving import estimate_serving
    from explorer.serving.speculative import Speculation, speculative_decode

    draft = None if draft_id is None else load_model(draft_id)
    speculation = Speculation(
        kind="mtp" if draft is None else "draft",
        draft_model=draft,
        draft_tokens=draft_tokens,
        acceptance=acceptance,
    )
    assumptions = serving_assumptions(dict(overrides))
    estimate = estimate_serving(model, cluster, layout, workload, assumptions, speculation)
    steps = speculative_decode(model, cluster, layout, workload, speculation, assumptions)
    return estimate, steps


def serving_answers(plan: ServingPlan) -> tuple[str, ...]:
    from explorer.serving import serving_answers

    return serving_answers(plan)


def serving_leaves_out() -> str:
    from explorer.serving import LEAVES_OUT

    return LEAVES_OUT


@st.cache_resource(hash_funcs=HASH, max_entries=64, show_spinner=False)
def serving_charts(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: ServingWorkload,
    overrides: Overrides,
    layouts_drawn: int,
) -> tuple[Figure | None, Figure | None]:
    """(memory of the best ``layouts_drawn`` layouts, throughput-latency frontier); None where
    the plan has nothing to draw."""
    from explorer.charts.serving import frontier_figure, memory_figure

    plan = serving_plan(model, cluster, workload, overrides)
    best = plan.layouts[:layouts_drawn]
    memory = memory_figure(best, cluster.gpu.memory_bytes) if best else None
    return memory, frontier_figure(plan.pareto) if plan.pareto else None


# ------------------------------------------------------------------------------ search


class Store:
    """A bounded, thread-safe cache shared by every session, for work that shows its own
    progress: st.cache_data cannot say whether a value is there before computing it, and it
    records the elements a function draws to replay them, which a progress bar must not be."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._values: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> object | None:
        with self._lock:
            if key not in self._values:
                return None
            self._values.move_to_end(key)
            return self._values[key]

    def put(self, key: Hashable, value: object) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self._size:
                self._values.popitem(last=False)


@st.cache_resource(show_spinner=False)
def store(name: str, size: int = 16) -> Store:
    """The shared store ``name`` (one per server process; st.cache_resource.clear() empties
    it with the other caches)."""
    return Store(size)


def search_key(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    overrides: Overrides,
    space: SearchSpace,
    ranked: int = 20,
) -> bytes:
    """The key of one search: its inputs, pickled (see ``_pickled``)."""
    return _pickled((model, cluster, workload, overrides, space, ranked))


def search_done(*inputs: object) -> bool:
    """Whether the search of these inputs (``search``'s arguments) has run already."""
    return store("search").get(search_key(*inputs)) is not None  # type: ignore[arg-type]


def search(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    overrides: Overrides,
    space: SearchSpace,
    ranked: int = 20,
    progress: Progress | None = None,
) -> SearchResult:
    """explorer.search.search over every GPU of the cluster in ``space``, ``ranked`` layouts
    (the current layout is not an input: picking a row does not search again). Shared, not
    copied (see SHARED above). ``progress`` is passed to the search when it runs (not when the
    result is stored already); an exception it raises leaves nothing stored."""
    key = search_key(model, cluster, workload, overrides, space, ranked)
    done = store("search").get(key)
    if done is not None:
        return done  # type: ignore[return-value]
    import explorer.search as module

    assumptions = estimate_assumptions(dict(overrides))
    result = module.search(
        model, cluster, workload, space=space, assumptions=assumptions, ranked=ranked,
        progress=progress,
    )  # fmt: skip
    store("search").put(key, result)
    return result


@st.cache_resource(hash_funcs=HASH, max_entries=16, show_spinner=False)
def search_step_chart(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    overrides: Overrides,
    space: SearchSpace,
    ranked: int,
) -> Figure:
    """The Meshes page's "where the step goes" chart of the best ten layouts, built once per
    search (a figure costs about as much to build as a cached search costs to read)."""
    from explorer.charts.meshes import STEP_PARTS, step_breakdown_figure
    from explorer.ui.meshes_table import display, label

    best = display(search(model, cluster, workload, overrides, space, ranked).layouts).head(10)
    return step_breakdown_figure(
        [label(row) for _, row in best.iterrows()],
        {c: best[c].tolist() for c in STEP_PARTS},
        title="Where the step goes, best ten layouts",
    )


# ------------------------------------------------------------------------------ report


def report_done(scenario: Scenario, with_search: bool = False) -> bool:
    """Whether ``report(scenario, with_search)`` is built already (no status to show)."""
    return store("report").get(_pickled((scenario, with_search))) is not None


def report(scenario: Scenario, with_search: bool = False) -> Report:
    """explorer.report.build_report; the serving plan and (when asked) the mesh search come
    from the caches, so a search already run on the Meshes page is not run again. Kept in a
    Store, so the page can show a status while it is built (``report_done``)."""
    key = _pickled((scenario, with_search))
    done = store("report").get(key)
    if done is not None:
        return done  # type: ignore[return-value]
    import explorer.report as module

    model_spec, cluster_spec = model(scenario.model), cluster(scenario.cluster)
    if scenario.workload == "serving":
        plan = serving_plan(model_spec, cluster_spec, scenario.serving_spec(), scenario.assumptions)
        built = module.build_report(scenario, plan=plan)
    elif not with_search:
        built = module.build_report(scenario)
    else:
        result = search(
            model_spec,
            cluster_spec,
            scenario.training_spec(),
            scenario.assumptions,
            scenario.search_space(),
        )
        built = module.build_report(scenario, search=result)
    store("report").put(key, built)
    return built


def report_file_done(scenario: Scenario, fmt: str, with_search: bool = False) -> bool:
    """Whether the report's ``fmt`` file is built already."""
    return store("report_file").get(_pickled((scenario, fmt, with_search))) is not None


def report_file(scenario: Scenario, fmt: str, with_search: bool = False) -> ReportFile:
    """The report rendered in one format (md, html, pdf, json); built on demand, once."""
    key = _pickled((scenario, fmt, with_search))
    done = store("report_file").get(key)
    if done is not None:
        return done  # type: ignore[return-value]
    from explorer.charts.report import FORMATS, render_report

    if fmt not in FORMATS:
        raise ValueError(f"no report format {fmt!r}; choose from {', '.join(FORMATS)}")
    built = render_report(report(scenario, with_search), fmt)
    store("report_file").put(key, built)
    return built


def report_file_name(scenario: Scenario, fmt: str, with_search: bool = False) -> str:
    """The file's name, from the report shown (never a second report built for it)."""
    from explorer.report.content import file_name

    return file_name(report(scenario, with_search), fmt)


def report_mime(fmt: str) -> str:
    from explorer.charts.report import MIME

    return MIME[fmt]


def pdf_available() -> bool:
    from explorer.report import pdf_available

    return bool(pdf_available())


def load_report(data: bytes) -> Scenario:
    """The scenario a JSON report was made from; ValueError (one sentence) when malformed."""
    from explorer.report import load_report_json

    return load_report_json(data)


# ------------------------------------------------------------------------------ scaling


@st.cache_data(hash_funcs=HASH, max_entries=32, show_spinner="Sweeping GPU counts…")
def scaling(
    kind: str,
    model: ModelSpec,
    cluster: ClusterSpec,
    gpu_counts: tuple[int, ...],
    workload: TrainingWorkload,
    overrides: Overrides,
) -> ScalingSweep:
    """explorer.scaling's strong or weak sweep over ``gpu_counts`` on this node type."""
    import explorer.scaling as module

    sweep = module.strong_scaling if kind == "strong" else module.weak_scaling
    return sweep(
        model, cluster, gpu_counts, workload, assumptions=estimate_assumptions(dict(overrides))
    )
