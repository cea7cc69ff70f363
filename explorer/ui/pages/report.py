"""Report: the current scenario as Markdown, HTML, PDF or JSON; a JSON report restores it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import streamlit as st

from explorer.limits import MAX_REPORT_BYTES
from explorer.report.markdown import escaped
from explorer.scenario import Scenario
from explorer.search.core import DEFAULT_RANKED
from explorer.ui import cached, inputs, progress, sidebar
from explorer.ui.format import seconds, sentence
from explorer.ui.pages import header, opened, run_page

if TYPE_CHECKING:
    from explorer.report import Report

UPLOAD_KEY = "report_upload"
SEARCH_KEY = "report_with_search"
UPLOAD_ERROR = "_report_upload_error"
UPLOAD_DONE = "_report_upload_done"
LABELS = {"md": "Markdown", "html": "HTML", "pdf": "PDF", "json": "JSON"}
HELP = {
    "md": "Text with tables; figures are left out.",
    "html": "One self-contained file with interactive charts (works offline, about 5 MB).",
    "pdf": "For print: charts as images (needs WeasyPrint, and Chromium for the images).",
    "json": "Every input and result; upload it below to restore this view.",
}
# Formats built on request, under a status box, with what the build does.
SLOW = {
    "html": "Drawing every chart into one self-contained file.",
    "pdf": "Laying out the pages and exporting every chart as an image.",
}
BUILD = "_report_build"  # session-state key: the format whose Build button was clicked


def _on_upload() -> None:
    file = st.session_state.get(UPLOAD_KEY)
    if file is None:
        return
    try:
        if file.size > MAX_REPORT_BYTES:  # refused before its bytes are read
            raise ValueError(
                f"The report is {file.size:,} bytes; this tool reads at most {MAX_REPORT_BYTES:,}."
            )
        scenario = cached.load_report(file.getvalue())
    except RecursionError:  # bounded before parsing (explorer.limits); kept as a last guard
        st.session_state[UPLOAD_ERROR] = f"{file.name}: the report is nested too deeply to read."
        st.session_state.pop(UPLOAD_DONE, None)
        return
    except ValueError as error:
        st.session_state[UPLOAD_ERROR] = f"{file.name}: {sentence(error)}"
        st.session_state.pop(UPLOAD_DONE, None)
        return
    st.session_state.pop(UPLOAD_ERROR, None)
    st.session_state[UPLOAD_DONE] = f"Restored the scenario of {file.name}."
    sidebar.apply(scenario)


def _restore() -> None:
    st.markdown("#### Restore a scenario")
    st.file_uploader(
        "Upload a JSON report made by this tool",
        type=["json"],
        key=UPLOAD_KEY,
        on_change=_on_upload,
    )
    if st.session_state.get(UPLOAD_ERROR):
        st.error(st.session_state[UPLOAD_ERROR])
    elif st.session_state.get(UPLOAD_DONE):
        st.success(st.session_state[UPLOAD_DONE])


def _deferred(scenario: Scenario, fmt: str, with_search: bool) -> Callable[[], bytes]:
    """The report's bytes, read when the button is clicked (built already, or quick)."""
    return lambda: cached.report_file(scenario, fmt, with_search).data


def _build(fmt: str) -> None:
    st.session_state[BUILD] = fmt


def _built_now(scenario: Scenario, with_search: bool) -> None:
    """Build the file whose Build button was clicked, inside a status box (HTML and PDF take
    seconds: charts are drawn, and for the PDF exported as images)."""
    fmt = st.session_state.pop(BUILD, None)
    if fmt not in SLOW or cached.report_file_done(scenario, fmt, with_search):
        return
    with st.status(f"Building the {LABELS[fmt]} report…", expanded=True) as box:
        st.write(SLOW[fmt])
        start = time.perf_counter()
        file = cached.report_file(scenario, fmt, with_search)
        size = f"{len(file.data) / 1e6:.1f} MB" if len(file.data) >= 1e5 else "small"
        box.update(
            label=f"{LABELS[fmt]} ready ({size}, built in {seconds(time.perf_counter() - start)})",
            state="complete",
            expanded=False,
        )


def _downloads(scenario: Scenario, with_search: bool) -> None:
    pdf = cached.pdf_available()
    _built_now(scenario, with_search)
    cols = st.columns(4)
    for col, fmt in zip(cols, LABELS, strict=True):
        with col:
            unavailable = fmt == "pdf" and not pdf
            if fmt in SLOW and not cached.report_file_done(scenario, fmt, with_search):
                st.button(
                    f"Build {LABELS[fmt]}",
                    key=f"build_{fmt}",
                    on_click=_build,
                    args=(fmt,),
                    icon=":material/build:",
                    disabled=unavailable,
                    width="stretch",
                )
            else:
                st.download_button(
                    f"Download {LABELS[fmt]}",
                    data=_deferred(scenario, fmt, with_search),
                    file_name=cached.report_file_name(scenario, fmt, with_search),
                    mime=cached.report_mime(fmt),
                    key=f"download_{fmt}",
                    icon=":material/download:",
                    on_click="ignore",
                    width="stretch",
                )
            st.caption(HELP[fmt] if not unavailable else "Unavailable: WeasyPrint is missing.")


def _built_report(scenario: Scenario, with_search: bool) -> Report | None:
    """The report, built under a status box the first time; None when its search was
    cancelled (the sentence is shown)."""
    if cached.report_done(scenario, with_search):
        return cached.report(scenario, with_search)
    if with_search:
        case = inputs.search_case(scenario)
        space = scenario.search_space()
        found = progress.search(
            case.model, case.cluster, case.workload, scenario.assumptions, space,
            DEFAULT_RANKED,
        )  # fmt: skip
        if found is None:
            return None
    with st.status("Building the report…", expanded=True) as box:
        st.write("Estimating the layout and writing every section.")
        start = time.perf_counter()
        report = cached.report(scenario, with_search)
        box.update(
            label=f"Report built in {seconds(time.perf_counter() - start)}",
            state="complete",
            expanded=False,
        )
    return report


def _report(scenario: Scenario) -> None:
    with_search = scenario.workload == "training" and st.toggle(
        "Rank the layout against the mesh search",
        value=True,
        key=SEARCH_KEY,
        help="Runs the Meshes page's search (seconds; instant when it has run already) and "
        "adds the best layouts and where yours stands.",
    )
    report = _built_report(scenario, with_search)
    if report is None:
        return
    st.markdown(f"**{escaped(report.title)}**")
    for paragraph in report.section("summary").paragraphs:
        st.markdown(escaped(paragraph))
    _downloads(scenario, with_search)
    st.caption("Sections: " + " · ".join(s.title for s in report.sections))
    if box := opened("Preview (Markdown)", "report_preview"):
        box.markdown(cached.report_file(scenario, "md", with_search).data.decode())


def render(scenario: Scenario) -> None:
    try:
        name = cached.model(scenario.model).name
    except ValueError:
        name = ""  # the error is shown below, next to the restore
    header("Report", scenario, name)
    try:
        _report(scenario)
    except ValueError as error:  # the scenario cannot be estimated: restoring one still works
        st.error(sentence(error))
    _restore()


if __name__ == "__main__":
    run_page("report")
