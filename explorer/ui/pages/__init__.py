"""One module per page. ``navigation`` lists them; ``run_page`` draws one behind a guard.

Each page module has ``render(scenario)`` and, at its end, ``if __name__ == "__main__":
run_page(__name__-less module name)``: ``st.navigation`` runs a page file as ``__main__``, and
the guard imports the real module, so its functions are defined once per process.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from streamlit.navigation.page import StreamlitPage

from explorer.charts.style import CONFIG, Figure
from explorer.report.markdown import escaped
from explorer.scenario import Scenario
from explorer.ui import cached, svg_chart
from explorer.ui.format import layout_label, sentence, tokens
from explorer.ui.state import SCENARIO, key

HERE = Path(__file__).resolve().parent
LANDING = "_landing_page"
"""Session-state key: the page to open after the workload changes (set by the sidebar)."""
SHOWN = "_page_shown"
"""Session-state key: the page drawn last (its name)."""


@dataclass(frozen=True, slots=True)
class PageInfo:
    name: str
    title: str
    icon: str
    workloads: tuple[str, ...]


PAGES: tuple[PageInfo, ...] = (
    PageInfo("model", "Model", ":material/account_tree:", ("training", "serving")),
    PageInfo("memory", "Memory", ":material/memory:", ("training",)),
    PageInfo("meshes", "Meshes", ":material/grid_view:", ("training",)),
    PageInfo("pipeline", "Pipeline", ":material/view_timeline:", ("training",)),
    PageInfo("communication", "Communication", ":material/lan:", ("training",)),
    PageInfo("scaling", "Scaling", ":material/trending_up:", ("training",)),
    PageInfo("serving", "Serving", ":material/bolt:", ("serving",)),
    PageInfo("validation", "Validation", ":material/fact_check:", ("training", "serving")),
    PageInfo("report", "Report", ":material/description:", ("training", "serving")),
)


def landing_after(workload: str, shown: str | None) -> str | None:
    """The page to open when the workload becomes ``workload`` on page ``shown``: its main
    page when ``shown`` does not exist for it, else None (stay)."""
    pages = {info.name: info for info in PAGES}
    if shown in pages and workload not in pages[shown].workloads:
        return "serving" if workload == "serving" else "memory"
    return None


def _to_serving() -> None:
    """Switch the workload to serving and land on its page (a callback: before the widgets)."""
    st.session_state[key("workload")] = "serving"
    st.session_state[LANDING] = "serving"


def serving_switch() -> None:
    """The Serving entry of the training workload's navigation: one click to serving."""
    st.subheader("Serving", anchor=False)
    st.info(
        "Serving plans take their own inputs (prompt and output lengths, concurrent requests, "
        "weight and KV-cache formats), shown in the sidebar once the workload is Serving. The "
        "model and cluster stay as they are.",
        icon=":material/bolt:",
    )
    st.button("Plan serving for this model", on_click=_to_serving, type="primary")


def navigation(scenario: Scenario, root: Path) -> StreamlitPage:
    """The pages for the scenario's workload, as ``st.navigation`` over page files; Serving
    is always listed (under training it offers the switch)."""
    pages = {
        info.name: st.Page(
            str((HERE / f"{info.name}.py").relative_to(root)),
            title=info.title,
            icon=info.icon,
            url_path=info.name,
            default=info.name == "model",
        )
        for info in PAGES
        if scenario.workload in info.workloads
    }
    if "serving" not in pages:
        info = next(i for i in PAGES if i.name == "serving")
        pages["serving"] = st.Page(
            serving_switch, title=info.title, icon=info.icon, url_path=info.name
        )
    pages = {info.name: pages[info.name] for info in PAGES if info.name in pages}  # page order
    current = st.navigation(list(pages.values()), position="top")
    landing = st.session_state.pop(LANDING, None)
    if landing in pages and current.url_path != landing:
        st.switch_page(pages[landing])  # the workload changed under a page it does not have
    return current


def run_page(name: str) -> None:
    """Draw page ``name``; a core error becomes st.error with its sentence, never a traceback."""
    scenario = st.session_state.get(SCENARIO) or Scenario()
    st.session_state[SHOWN] = name
    module = importlib.import_module(f"explorer.ui.pages.{name}")
    try:
        module.render(scenario)
    except ValueError as error:  # ConfigError is a ValueError
        st.error(sentence(error))
    except Exception as error:
        st.error(
            f"This page could not be drawn ({type(error).__name__}: {sentence(error)}) "
            "Your inputs are kept; change one and try again."
        )


def _gpu_name(gpu_id: str) -> str:
    return dict(cached.gpu_choices()).get(gpu_id, gpu_id)


def header(
    title: str, scenario: Scenario, model_name: str = "", gpu_name: str = "", detail: str = ""
) -> None:
    """The page title and one line saying what is being estimated."""
    st.subheader(title, anchor=False)  # no link icon: README, Speed
    layout = scenario.layout
    parts = [f"**{escaped(model_name)}**"] if model_name else []
    parts += [
        f"{scenario.cluster.num_gpus:,} GPUs ({scenario.cluster.num_nodes:,} × "
        f"{scenario.cluster.gpus_per_node} {gpu_name or _gpu_name(scenario.cluster.gpu)})",
    ]
    if scenario.workload == "training":
        parts += [
            layout_label(layout),
            f"{tokens(scenario.training.seq_len)} tokens × {scenario.training.global_batch_size:,}"
            f" sequences, micro-batch {layout.micro_batch_size}",
            f"{'no' if layout.recompute == 'none' else layout.recompute} recompute, "
            f"{layout.schedule}",
        ]
    st.caption(" · ".join([*parts, detail] if detail else parts))


def expected_error(kind: str) -> None:
    """The one-line expected error of the estimates of ``kind`` (explorer.trust), as a caption
    under the page's headline numbers; the Validation page shows the evidence."""
    st.caption(cached.expected_error(kind))


def chart(figure: Figure, key: str, *, theme: bool = False) -> None:
    """A Plotly figure as built (its own colours and fonts); ``theme`` applies Streamlit's
    theme, for builders that leave the styling to it.

    ``key`` names the element (CSS class ``st-key-KEY``, which the browser tests find) but does
    not keep the Plotly element across reruns: Streamlit 1.67 hashes the figure's JSON into the
    element id even with a key (streamlit/elements/plotly_chart.py, compute_and_register_element_id
    with key_as_main_identity=False) and the front end keys the chart's React node by that id, so
    a new figure is a new chart (newPlot, not Plotly.react). Measured levers, README's Speed."""
    st.plotly_chart(figure, config=CONFIG, key=key, theme="streamlit" if theme else None)


INTERACTIVE = "_interactive"
"""Suffix of the toggle that swaps a light chart for its Plotly figure (key + suffix)."""


def light_chart(figure: Figure, key: str, *, theme: bool = False) -> None:
    """A figure a slider redraws on every move, drawn as a static SVG (hover text in each
    mark's tooltip; ``explorer.ui.svg_chart``), or as Plotly (zoom, pan, PNG) when the toggle
    under it is on. The SVG sits in a container keyed ``key`` (CSS class ``st-key-KEY``) and
    carries ``data-chart="KEY"``. Why not Plotly always: a new Plotly chart is mounted on each
    rerun, which cost more than the rest of the page together (README, Speed)."""
    if st.session_state.get(key + INTERACTIVE):
        chart(figure, key, theme=theme)
    else:
        with st.container(key=key):
            # st.html sanitizes with DOMPurify's HTML profile, which drops SVG; markdown keeps
            # raw HTML as given (the SVG is built here from the app's own figures).
            st.markdown(
                f'<div data-chart="{key}">{svg_chart.cached_svg(figure)}</div>',
                unsafe_allow_html=True,
            )
    st.toggle(
        "Interactive chart",
        key=key + INTERACTIVE,
        help="Draw this chart with Plotly: zoom, pan, full screen and PNG download. Off, it is "
        "a static drawing (hover a bar or line for its numbers), which redraws faster.",
    )


def opened(label: str, key: str) -> DeltaGenerator | None:
    """An expander that reports whether it is open; its body is drawn only then (if it returns
    a container), so a closed expander costs nothing on each rerun."""
    box = st.expander(label, key=key, on_change="rerun")
    return box if box.open else None


def markdown_table(
    frame: Any, formats: dict[str, str] | None = None, *, index: bool = False
) -> str:
    """A small table as GitHub-flavoured Markdown: numbers right-aligned, formatted with
    ``formats`` (column -> Python format spec, e.g. ``".2f"``, ``",.0f"``), text escaped.
    For tables a slider redraws: one markdown element costs the browser less than a
    ``st.dataframe`` grid (README, Speed)."""
    shown = frame.reset_index() if index else frame
    formats = formats or {}
    columns = [str(c) for c in shown.columns]

    def cell(column: str, value: object) -> str:
        if column in formats and isinstance(value, int | float) and not isinstance(value, bool):
            return format(value, formats[column])
        return escaped(str(value))

    numeric = [_is_number(shown[c]) for c in shown.columns]
    head = "| " + " | ".join(escaped(c) for c in columns) + " |"
    rule = "| " + " | ".join("--:" if n else ":--" for n in numeric) + " |"
    rows = [
        "| " + " | ".join(cell(c, v) for c, v in zip(columns, row, strict=True)) + " |"
        for row in shown.itertuples(index=False, name=None)
    ]
    return "\n".join([head, rule, *rows])


def _is_number(column: Any) -> bool:
    """Whether a pandas column holds numbers (not booleans)."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return bool(is_numeric_dtype(column) and not is_bool_dtype(column))


def number_columns(columns: Iterable[str], fmt: str = "%.2f") -> dict[str, Any]:
    """column_config formatting the given numeric columns (no pandas Styler: it is slow)."""
    return {name: st.column_config.NumberColumn(format=fmt) for name in columns}
