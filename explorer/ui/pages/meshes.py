"""Meshes: every valid layout ranked by step time; pick one to make it the current layout."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from explorer import limits
from explorer.charts.memory import stage_memory_figure
from explorer.charts.meshes import STEP_PARTS, step_breakdown_figure
from explorer.scenario import LayoutInputs, Scenario, SearchInputs
from explorer.search.rows import with_cost_column
from explorer.specs import RECOMPUTES, SCHEDULES
from explorer.ui import cached, inputs, progress, sidebar
from explorer.ui.format import gib, percent, seconds
from explorer.ui.meshes_table import (
    COLUMNS,
    COMPARED,
    FORMATS,
    LAYOUT_FIELDS,
    TIGHT,
    display,
    label,
    layout_of,
)
from explorer.ui.pages import chart, expected_error, header, light_chart, opened, run_page
from explorer.ui.pages.memory import reserve_input
from explorer.ui.sidebar import SCHEDULE_LABELS
from explorer.ui.state import key
from explorer.units import GiB

if TYPE_CHECKING:
    from explorer.search import SearchResult

TABLE_KEY = "meshes_table"
MAX_REJECTED = 5000  # rows of the rejected list sent to the browser at once
FILTERS = {"schedule": "Schedule", "zero": "ZeRO", "recompute": "Recompute", "tp": "TP"}
MICRO_BATCH_SIZES = (1, 2, 4, 8, 16)  # offered to the search, with any other a link sets


def _filters(frame: pd.DataFrame) -> pd.DataFrame:
    cols = st.columns(4)
    picks: dict[str, list[Any]] = {}
    for col, (field, title) in zip(cols, FILTERS.items(), strict=True):
        options = sorted(frame[field].unique().tolist())
        picks[field] = col.multiselect(title, options, key=f"meshes_filter_{field}",
                                       help=f"Show only ranked layouts with these {title} values; "
                                       "empty shows all.")  # fmt: skip
    shown = frame
    for field, values in picks.items():
        if values:
            shown = shown[shown[field].isin(values)]
    return shown


def _on_pick(layouts: list[LayoutInputs]) -> None:
    """The selection callback: make the picked row the current layout (before the rerun)."""
    rows = st.session_state[TABLE_KEY].selection.rows
    if rows and rows[0] < len(layouts):
        sidebar.apply_layout(layouts[rows[0]])


def _table(shown: pd.DataFrame, current: LayoutInputs) -> None:
    layouts = [layout_of(row, current) for _, row in shown.iterrows()]
    table = shown[list(COLUMNS)].rename(columns=COLUMNS)
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        key=TABLE_KEY,
        on_select=lambda: _on_pick(layouts),
        selection_mode="single-row",
        column_config={
            name: st.column_config.NumberColumn(format=fmt) for name, fmt in FORMATS.items()
        },
    )
    st.caption(
        "Click a row to make it the current layout on every page (the sidebar follows). "
        "Click a header to sort."
    )


def _rejected(result: SearchResult) -> None:
    rejected = result.rejected
    if not (
        top := opened(
            f"Rejected layouts, by rule ({int(rejected['num_layouts'].sum()):,})",
            "meshes_rejected_rules",
        )
    ):
        return
    summary = (
        rejected.groupby("kind", observed=True)["num_layouts"]
        .agg(["sum", "count"])
        .rename(columns={"sum": "layouts", "count": "rows"})
        .sort_values("layouts", ascending=False)
    )
    top.dataframe(summary, width="stretch")
    title = f"Every rejection with its reason ({len(rejected):,} rows)"
    if box := opened(title, "meshes_rejected"):
        kinds = summary.index.astype(str).tolist()
        chosen = box.multiselect("Rule", kinds, key="meshes_rejected_kinds")
        shown = rejected[rejected["kind"].astype(str).isin(chosen)] if chosen else rejected
        columns = [*LAYOUT_FIELDS, "kind", "reason", "num_layouts"]
        box.dataframe(
            shown[columns].head(MAX_REJECTED).rename(columns={"num_layouts": "layouts"}),
            hide_index=True,
            width="stretch",
        )
        box.caption(
            f"An empty field means any value: the rule rejected the whole subtree. "
            f"The first {MAX_REJECTED:,} rows of the chosen rules are shown."
        )


def _selected_index() -> int:
    """The row picked in the table (its position in the shown rows), or the best."""
    state = st.session_state.get(TABLE_KEY)
    rows = state.selection.rows if state is not None else []
    return rows[0] if rows else 0


def _explain(shown: pd.DataFrame, best: pd.Series) -> None:
    """What limits the picked row, and what changes against the best layout."""
    if shown.empty:
        return
    index = min(_selected_index(), len(shown) - 1)
    row = shown.iloc[index]
    st.markdown(f"#### {label(row)}")
    step = row["step_time_s"]
    shares = {name: row[column] / step for column, (name, _) in STEP_PARTS.items()}
    limit = max(shares, key=shares.__getitem__)
    st.markdown(
        f"Its step is {', '.join(f'{percent(v)} {k}' for k, v in shares.items())}: "
        f"**{limit}** limits it."
    )
    cols = st.columns(4)
    same = row["rank"] == best["rank"]
    cols[0].metric(
        "Step time",
        seconds(step),
        None if same else f"{step - best['step_time_s']:+.3f} s vs #1",
        delta_color="inverse",
    )
    cols[1].metric(
        "Tokens/s",
        f"{row['tokens_per_s']:,.0f}",
        None if same else f"{row['tokens_per_s'] - best['tokens_per_s']:+,.0f} vs #1",
    )
    cols[2].metric(
        "MFU",
        percent(row["mfu"]),
        None if same else f"{100 * (row['mfu'] - best['mfu']):+.1f} pts vs #1",
    )
    cols[3].metric(
        "Peak memory per GPU",
        gib(row["peak_bytes"]),
        None if same else f"{(row['peak_bytes'] - best['peak_bytes']) / GiB:+.1f} GiB vs #1",
        delta_color="inverse",
    )
    for warning in row["warnings"]:
        st.caption(f"⚠ {warning[0].upper()}{warning[1:]}")


def _compare(frame: pd.DataFrame, gpu_name: str) -> None:
    if opened("Two layouts side by side", "meshes_compare"):
        _comparison(frame, gpu_name)


@st.fragment  # choosing the two layouts reruns this panel only
def _comparison(frame: pd.DataFrame, gpu_name: str) -> None:
    labels = [label(row) for _, row in frame.iterrows()]
    left, right = st.columns(2)
    a = left.selectbox("First", range(len(labels)), format_func=labels.__getitem__, key="cmp_a")
    b = right.selectbox(
        "Second",
        range(len(labels)),
        index=min(1, len(labels) - 1),
        format_func=labels.__getitem__,
        key="cmp_b",
    )
    first, second = frame.iloc[a], frame.iloc[b]
    st.dataframe(
        pd.DataFrame(
            [
                (label, fmt(first[c]), fmt(second[c]), fmt(second[c] - first[c], signed=True))
                for label, c, fmt in COMPARED
            ],
            columns=["", f"#{a + 1}", f"#{b + 1}", "second − first"],
        ),
        hide_index=True,
        width="stretch",
    )
    pair = [frame.iloc[a], frame.iloc[b]]
    chosen = [labels[a], labels[b]]
    chart(
        step_breakdown_figure(
            chosen,
            {c: [r[c] for r in pair] for c in STEP_PARTS},
            title="Where the step goes",
        ),
        "cmp_time",
    )
    memory_columns = [c for c in frame.columns if c.startswith("mem_") and c.endswith("_bytes")]
    chart(
        stage_memory_figure(
            chosen,
            {
                c.removeprefix("mem_").removesuffix("_bytes"): [r[c] for r in pair]
                for c in memory_columns
            },
            capacity_bytes=float(frame.iloc[0]["gpu_bytes"]),
            gpu_name=gpu_name,
            peak_index=0 if pair[0]["peak_bytes"] >= pair[1]["peak_bytes"] else 1,
            title="Memory of each layout's peak stage",
            x_title="layout",
        ),
        "cmp_memory",
    )


def _space(scenario: Scenario) -> None:
    """What the search may choose, for frameworks that lack a schedule or a ZeRO stage; the
    choices live in the scenario (and the link) like every other input."""
    default = SearchInputs()
    narrowed = replace(scenario.search, ranked=default.ranked) != default
    title = "Search space" + (" (narrowed)" if narrowed else ": every schedule, ZeRO stage, ...")
    title += f", {scenario.search.ranked} ranked"
    if not (box := opened(title, "meshes_space")):
        return
    left, right = box.columns(2)
    left.multiselect(
        "Schedules", SCHEDULES, key=key("schedules"), format_func=SCHEDULE_LABELS.__getitem__
    )
    right.multiselect("ZeRO stages", (0, 1, 2, 3), key=key("zeros"))
    left.multiselect("Recompute", RECOMPUTES, key=key("recomputes"))
    sizes = sorted({*MICRO_BATCH_SIZES, *scenario.search.micro_batch_sizes})
    right.multiselect("Micro-batch sizes", sizes, key=key("mbs_tried"))
    left.number_input(
        "Most virtual stages",
        min_value=1,
        max_value=int(limits.limit("max_virtual")),
        key=key("max_virtual"),
    )
    right.number_input(
        "Layouts to rank",
        min_value=1,
        max_value=int(limits.limit("ranked")),
        key=key("ranked"),
        help="The search stops once these are certain; more rows take a little longer.",
    )
    left.checkbox(
        "TP across nodes",
        key=key("tp_cross"),
        help="Let TP groups leave the scale-up domain (rejected by default: its per-layer "
        "collectives would run over the fabric).",
    )


def _verdict(frame: pd.DataFrame) -> None:
    """The page's answer first: the best layout and what limits it."""
    best = frame.iloc[0]
    step = best["step_time_s"]
    shares = {name: best[column] / step for column, (name, _) in STEP_PARTS.items()}
    limit = max(shares, key=shares.__getitem__)
    st.success(
        f"**Best layout**: {label(best).removeprefix('#1 ')}: {seconds(step)} per step, "
        f"MFU {percent(best['mfu'])}, {gib(best['peak_bytes'])} peak; bound by **{limit}**.",
        icon=":material/star:",
    )


def _reserve(frame: pd.DataFrame) -> pd.DataFrame:
    """The reserve input and the choice to hide layouts inside it; the rows kept."""
    left, right = st.columns([1, 3], vertical_alignment="bottom")
    reserve_input(left)
    tight = frame["memory"] == TIGHT
    hide = right.checkbox(
        f"Hide layouts inside the reserve ({int(tight.sum())} of {len(frame)})",
        key="meshes_hide_tight",
        help="Layouts whose free memory at the peak is less than the reserve are marked "
        f"'{TIGHT}' in the memory column.",
    )
    return frame[~tight] if hide else frame


def render(scenario: Scenario) -> None:
    case = inputs.search_case(scenario)
    header("Meshes", scenario, case.model.name, case.cluster.gpu.name, "ranked by step time")
    _space(scenario)
    from explorer.ui.cluster_editor import results  # mixed cluster, straggler (issue 17)

    results(scenario)
    space = scenario.search_space()  # an emptied choice: one sentence (run_page)
    result = progress.search(
        case.model, case.cluster, case.workload, scenario.assumptions, space, scenario.search.ranked
    )
    if result is None:  # cancelled: the sentence and "Search again" are shown
        return
    gpu = case.cluster.gpu  # priced at the GPU preset's published list price, if any
    priced = with_cost_column(result.layouts, result.problem.num_gpus, gpu.price_per_gpu_hour)
    frame = display(priced, scenario.reserve_gib * GiB)
    if frame.empty:
        st.error("No layout fits this model on this cluster; the rejected ones say why.")
        expected_error("search")
        _rejected(result)
        return
    _verdict(frame)
    expected_error("search")
    cols = st.columns(4)
    cols[0].metric(
        "Layouts considered",
        f"{result.evaluated:,}",
        help="Every combination of degrees, ZeRO stage, recompute, micro-batch and schedule "
        "in the search space, including the subtrees a rule rejected whole.",
    )
    cols[1].metric(
        "Fully estimated",
        f"{result.estimated:,}",
        help="Layouts timed end to end; the rest were rejected by a rule or by a bound "
        "that proves they cannot rank.",
    )
    cols[2].metric("Ranked", f"{len(frame):,}", help="Rows in the table, fastest step first.")
    cols[3].metric(
        "Search time", seconds(result.elapsed_s), help="Wall-clock time of the search here."
    )
    kept = _reserve(frame)
    shown = _filters(kept)
    _table(shown, scenario.layout)
    _explain(shown, frame.iloc[0])
    search_inputs = (case.model, case.cluster, case.workload, scenario.assumptions, space)
    light_chart(cached.search_step_chart(*search_inputs, scenario.search.ranked), "meshes_steps")
    _rejected(result)
    if len(frame) >= 2:
        _compare(frame, case.cluster.gpu.name)


if __name__ == "__main__":
    run_page("meshes")
