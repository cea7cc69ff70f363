"""The report's figures, drawn with the app's chart builders, in the forms the renderers take.

``report_figures`` draws every figure a Report names; ``figure_fragments`` turns them into HTML
fragments (plotly.js inlined with the first one only: the page works offline); ``figure_pngs``
into PNG bytes through Kaleido 1.x and Debian's Chromium, with one sync server per process,
started on first use, never per rerun; where Kaleido or Chromium is missing it returns no
PNGs and the PDF says charts were left out. ``render_report`` does all of it for one format.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Literal

import plotly.graph_objects as go

from explorer.charts.comm import exposed_figure
from explorer.charts.memory import stage_memory_figure
from explorer.charts.schedule import schedule_figure
from explorer.charts.serving import frontier_figure, memory_figure
from explorer.estimate import estimate_timeline
from explorer.report import (
    Report,
    report_html,
    report_json,
    report_markdown,
    report_pdf,
)
from explorer.report.content import FigureData, file_name
from explorer.report.pdf import NO_CHARTS
from explorer.report.serving import TOP as SERVING_TOP

Format = Literal["md", "html", "pdf", "json"]
FORMATS: tuple[Format, ...] = ("md", "html", "pdf", "json")
MIME = {
    "md": "text/markdown",
    "html": "text/html",
    "pdf": "application/pdf",
    "json": "application/json",
}
"""Format -> MIME type (for st.download_button)."""
PNG_WIDTH = 1100
"""Pixels across of a chart image (scaled 1.5x for print)."""


def _memory(data: FigureData) -> go.Figure:
    assert data.estimate is not None  # training reports only name this figure
    mem = data.estimate.memory
    categories = mem.stages[0].breakdown.as_dict()
    return stage_memory_figure(
        [str(s.stage) for s in mem.stages],
        {c: [getattr(s.breakdown, c) for s in mem.stages] for c in categories},
        capacity_bytes=mem.gpu_bytes,
        gpu_name=data.gpu_name,
        peak_index=mem.peak_stage,
    )


def _schedule(data: FigureData) -> go.Figure:
    assert data.estimate is not None
    return schedule_figure(estimate_timeline(data.estimate))


def _communication(data: FigureData) -> go.Figure:
    est = data.estimate
    assert est is not None
    return exposed_figure(est.exposed_comm_s, est.exposed_comm_by_axis_s, est.step_time_s)


def _serving_memory(data: FigureData) -> go.Figure:
    plan = data.plan
    assert plan is not None
    return memory_figure(plan.layouts[:SERVING_TOP], data.gpu_bytes)


def _serving_frontier(data: FigureData) -> go.Figure:
    assert data.plan is not None
    return frontier_figure(data.plan.pareto)


BUILDERS: Mapping[str, Callable[[FigureData], go.Figure]] = {
    "memory": _memory,
    "schedule": _schedule,
    "communication": _communication,
    "serving_memory": _serving_memory,
    "serving_frontier": _serving_frontier,
}
"""Figure name (explorer.report.FIGURES) -> its builder."""


def report_figures(report: Report) -> dict[str, go.Figure]:
    """Every figure the report names, by name, in reading order."""
    return {name: BUILDERS[name](report.figures) for name in report.figure_names}


def figure_fragments(figures: Mapping[str, go.Figure]) -> dict[str, str]:
    """HTML fragments by name; only the first carries plotly.js (inlined, about 4.8 MB)."""
    return {
        name: fig.to_html(
            full_html=False,
            include_plotlyjs=i == 0,
            config={"displaylogo": False, "responsive": True},
        )
        for i, (name, fig) in enumerate(figures.items())
    }


# ------------------------------------------------------------------------------ PNG


@dataclass(frozen=True, slots=True)
class _PngServer:
    kaleido: ModuleType
    lock: threading.Lock


@cache
def _png_server() -> _PngServer | None:
    """Kaleido's sync server, started once per process; None when Kaleido is missing."""
    try:
        import kaleido

        kaleido.start_sync_server(silence_warnings=True)
    except Exception:  # no Kaleido or no browser: charts are left out
        return None
    return _PngServer(kaleido, threading.Lock())


def figure_png(fig: go.Figure) -> bytes | None:
    """One figure as PNG bytes, or None when no image can be made here."""
    server = _png_server()
    if server is None:
        return None
    height = fig.layout.height or 480
    opts = {"format": "png", "width": PNG_WIDTH, "height": height, "scale": 1.5}
    try:
        with server.lock:
            data = server.kaleido.calc_fig_sync(fig, opts=opts)
    except Exception:  # Chromium missing or crashed: leave the chart out
        return None
    return bytes(data)


def figure_pngs(figures: Mapping[str, go.Figure]) -> dict[str, bytes]:
    """PNG bytes by name; empty when Kaleido or Chromium is missing (the PDF then says so)."""
    out: dict[str, bytes] = {}
    for name, fig in figures.items():
        png = figure_png(fig)
        if png is None:
            return {}
        out[name] = png
    return out


# ------------------------------------------------------------------------------ one call


@dataclass(frozen=True, slots=True)
class ReportFile:
    """A rendered report, ready for a download button or a file."""

    data: bytes
    mime: str
    file_name: str
    note: str = ""
    """A sentence for the person when something was left out ('' when nothing was)."""


def render_report(report: Report, fmt: Format) -> ReportFile:
    """The report in ``fmt`` (md, html, pdf, json), figures drawn as that format needs.

    Raises ReportFormatUnavailable (a sentence) when the PDF library is missing here.
    """
    note = ""
    if fmt == "md":
        data = report_markdown(report).encode()
    elif fmt == "json":
        data = report_json(report).encode()
    elif fmt == "html":
        data = report_html(report, figure_fragments(report_figures(report))).encode()
    elif fmt == "pdf":
        pngs = figure_pngs(report_figures(report))
        note = NO_CHARTS if len(pngs) < len(report.figure_names) else ""
        data = report_pdf(report, pngs)
    else:
        raise ValueError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return ReportFile(data, MIME[fmt], file_name(report, fmt), note)
