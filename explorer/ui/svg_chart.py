"""A Plotly figure drawn as one static SVG string, for the pages a slider redraws on every move.

Why: in Chromium on the shared 2-core machine, a one-slider page plus one ``st.plotly_chart``
of the Memory page's figure took 1.150 s p50 per slider move against 0.412 s without it, while
the same page plus an inline SVG of about 60 elements took 0.419 s (README, Speed: the browser
mounts a new Plotly chart on each rerun, since Streamlit hashes the figure into the element's
id). An SVG is parsed and painted by the browser in a few milliseconds.

The renderer covers what the app's Memory, Meshes and Pipeline figures use: bar traces
(vertical or horizontal; stacked, or overlaid from a ``base``; colour and opacity per bar;
text inside when it fits), step and straight line traces, category and linear axes (reversed,
explicit ticks, fixed ranges, subplot domains, a shared x axis), line shapes, annotations
(arrows, paper and axis references), the title and the legend. Hover text is each mark's SVG
``<title>``, written from the trace's own ``hovertemplate`` (the browser shows it as a
tooltip). Anything else in a figure is left out, so pages that need more keep Plotly.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

import numpy as np

from explorer.charts.style import Figure

WIDTH = 1000.0
"""viewBox width; the SVG stretches to its column and keeps its aspect ratio."""
CHAR = 0.55
"""Average glyph width of the app's sans-serif face, in ems (for margins and text fits)."""
FONT = '"Source Sans", "Source Sans Pro", Arial, sans-serif'
DEFAULT_COLORWAY = (
    "#636efa",
    "#EF553B",
    "#00cc96",
    "#ab63fa",
    "#FFA15A",
    "#19d3f3",
    "#FF6692",
    "#B6E880",
    "#FF97FF",
    "#FECB52",
)
"""Plotly's default template colours, for traces that set none."""
STREAMLIT_COLORWAY = (
    "#0068c9",
    "#83c9ff",
    "#ff2b2b",
    "#ffabab",
    "#29b09d",
    "#7defa1",
    "#ff8700",
    "#ffd16a",
    "#6d3fc0",
    "#d5dae5",
)
"""Streamlit's categorical palette: its chart theme's template holds placeholders (#000001,
...) that its front end replaces with these, so figures drawn for that theme get them here."""
MAX_POINT_TITLES = 3000
"""Most line points given their own hover title (beyond, a line's title names the trace)."""


_SVGS: dict[int, str] = {}
_LOCK = threading.Lock()


def cached_svg(fig: Figure) -> str:
    """``figure_svg(fig)``, drawn once per figure object: the app's figures are shared cached
    resources (``explorer.ui.cached``), so a figure seen again is a rerun with the same inputs.
    The entry goes when the figure does."""
    key = id(fig)
    with _LOCK:
        got = _SVGS.get(key)
    if got is None:
        got = figure_svg(fig)
        with _LOCK:
            _SVGS[key] = got
        weakref.finalize(fig, _SVGS.pop, key, None)
    return got


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR


def _clean(text: object) -> str:
    """Plotly's rich text as plain text: <br> a newline, other tags dropped."""
    plain = re.sub(r"<br\s*/?>", "\n", str(text or ""))
    return re.sub(r"<[^>]+>", "", plain)


def _fmt(value: object, spec: str) -> str:
    """A d3-format ``spec`` (the subset Plotly templates use: ``,.2f``, ``.4g``, ``.0%``)."""
    if not spec:
        if isinstance(value, float | np.floating):
            return f"{float(value):.6g}"
        return str(value)
    try:
        return format(float(value), spec.replace("~", ""))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)


_FIELD = re.compile(r"%\{([^}:]+)(?::([^}]*))?\}")


def hover_text(template: str, point: dict[str, Any]) -> str:
    """``template`` (a Plotly hovertemplate) filled from ``point``: x, y, customdata (a value
    or a row), fullData.name, text; ``<extra>`` parts dropped, tags removed."""
    body = re.sub(r"<extra>.*?</extra>", "", template or "")

    def value(match: re.Match[str]) -> str:
        name, spec = match.group(1).strip(), match.group(2) or ""
        indexed = re.fullmatch(r"(\w+(?:\.\w+)?)\[(\d+)\]", name)
        if indexed:
            row = point.get(indexed.group(1))
            got = row[int(indexed.group(2))] if row is not None else ""
        else:
            got = point.get(name, "")
        return _fmt(got, spec)

    return _clean(_FIELD.sub(value, body)).strip()


def nice_ticks(low: float, high: float, target: int = 6) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) covering [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return [low]
    raw = (high - low) / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def tick_label(value: float, ticks: Sequence[float]) -> str:
    """A tick's number with as many decimals as the tick step needs."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else abs(value) or 1.0
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step else 0
    return f"{value:,.{decimals}f}"


@dataclass
class Axis:
    """One axis: its domain (paper share), data range and whether it holds categories."""

    name: str
    layout: Any
    horizontal: bool
    categories: list[str] = field(default_factory=list)
    low: float = math.inf
    high: float = -math.inf
    start: float = 0.0  # pixel of the domain's start (left, or bottom)
    end: float = 0.0
    reversed: bool = False
    frozen: tuple[float, float] | None = None  # the span, once every value is in

    def __post_init__(self) -> None:  # Plotly's property lookups are slow: read them once
        lay = self.layout
        self.kind = lay.type
        self.explicit = lay.range
        self.autorange = lay.autorange
        self.rangemode = lay.rangemode

    @property
    def is_category(self) -> bool:
        return self.kind == "category" or bool(self.categories)

    def freeze(self) -> None:
        """Fix the span (every trace's values are included); pixel() then reads it."""
        self.frozen = None
        self.frozen = self.span()

    def include(self, values: Sequence[float]) -> None:
        finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
        if finite:
            self.low, self.high = min(self.low, *finite), max(self.high, *finite)

    def position(self, value: object) -> float:
        """Data value (or category) to its data coordinate."""
        if isinstance(value, str) and (self.is_category or not _numeric(value)):
            if value not in self.categories:
                self.categories.append(value)
            return float(self.categories.index(value))
        return float(value)  # type: ignore[arg-type]

    def span(self) -> tuple[float, float]:
        if self.frozen is not None:
            return self.frozen
        explicit = self.explicit
        if explicit is not None and self.autorange in (None, False):
            low, high = float(explicit[0]), float(explicit[1])
        elif self.is_category:
            low, high = -0.5, len(self.categories) - 0.5
        else:
            low, high = self.low, self.high
            if not math.isfinite(low):
                low, high = 0.0, 1.0
            if self.rangemode == "tozero":
                low, high = min(low, 0.0), max(high, 0.0)
            pad = (high - low) * 0.05 or 1.0
            low, high = low - pad * (low != 0), high + pad
        return low, high

    def pixel(self, value: float) -> float:
        low, high = self.span()
        share = (value - low) / (high - low) if high != low else 0.5
        if self.reversed:
            share = 1 - share
        return self.start + share * (self.end - self.start)

    def ticks(self) -> list[tuple[float, str]]:
        lay = self.layout
        if lay.tickmode == "array" and lay.tickvals is not None:
            texts = lay.ticktext or [str(v) for v in lay.tickvals]
            return [(float(v), str(t)) for v, t in zip(lay.tickvals, texts, strict=False)]
        if self.is_category:
            return [(float(i), c) for i, c in enumerate(self.categories)]
        low, high = self.span()
        values = nice_ticks(min(low, high), max(low, high))
        return [(v, tick_label(v, values)) for v in values if min(low, high) <= v <= max(low, high)]


class _Canvas:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, text: str) -> None:
        self.parts.append(text)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        *,
        size: float = 12,
        anchor: str = "start",
        color: str = "#444",
        weight: str = "normal",
        rotate: bool = False,
        css: str = "",
        baseline: str = "middle",
    ) -> None:
        lines = _clean(text).split("\n")
        transform = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
        klass = f' class="{css}"' if css else ""
        first = y - (len(lines) - 1) * size * 0.6
        spans = "".join(
            f'<tspan x="{x:.1f}" y="{first + i * size * 1.2:.1f}">{escape(line)}</tspan>'
            for i, line in enumerate(lines)
        )
        self.add(
            f'<text{klass} text-anchor="{anchor}" dominant-baseline="{baseline}" '
            f'font-size="{size:g}" fill="{color}" font-weight="{weight}"{transform}>{spans}</text>'
        )


def _array(values: object, length: int, default: object = None) -> list[Any]:
    if values is None:
        return [default] * length
    if isinstance(values, str | int | float):
        return [values] * length
    out = list(np.asarray(values, dtype=object).tolist())
    return out if len(out) == length else (out + [default] * length)[:length]


def _dash(dash: str | None) -> str:
    return {"dash": ' stroke-dasharray="6,4"', "dot": ' stroke-dasharray="2,3"'}.get(dash or "", "")


def figure_svg(fig: Figure) -> str:
    """``fig`` as a standalone ``<svg>`` element (see the module's docstring for the subset)."""
    layout = fig.layout
    height = float(layout.height or 450)
    margin = layout.margin
    font_size = float(layout.font.size or 12) if layout.font else 12.0
    colorway = list(layout.colorway or layout.template.layout.colorway or DEFAULT_COLORWAY)
    if colorway[0].startswith("#0000"):  # Streamlit's theme placeholders
        colorway = list(STREAMLIT_COLORWAY)
    traces = list(fig.data)
    # Axes, the data on them and their categories in order of appearance.
    axes: dict[str, Axis] = {}

    def axis(name: str) -> Axis:
        if name not in axes:
            full = ("xaxis" if name[0] == "x" else "yaxis") + name[1:]
            axes[name] = Axis(name, layout[full], horizontal=name[0] == "x")
        return axes[name]

    for trace in traces:
        xa, ya = axis(trace.xaxis or "x"), axis(trace.yaxis or "y")
        x = list(trace.x) if trace.x is not None else []
        y = list(trace.y) if trace.y is not None else []
        if trace.type == "bar":
            horizontal = trace.orientation == "h"
            cat, val = (ya, xa) if horizontal else (xa, ya)
            cats, vals = (y, x) if horizontal else (x, y)
            for c in cats:
                if isinstance(c, str):
                    cat.position(c)
            if not any(isinstance(c, str) for c in cats):
                cat.include([float(c) - 0.5 for c in cats] + [float(c) + 0.5 for c in cats])
            base = _array(trace.base, len(vals), 0.0)
            val.include([0.0])
            val.include([float(b or 0) + float(v or 0) for b, v in zip(base, vals, strict=True)])
            val.include([float(b or 0) for b in base])
        else:
            for a, values in ((xa, x), (ya, y)):
                if values and isinstance(values[0], str):
                    for v in values:
                        a.position(v)
                else:
                    a.include([float(v) for v in values])
    stacked = layout.barmode in ("stack", "relative")
    if stacked:  # the value axis spans the stack totals
        totals: dict[tuple[str, float], float] = {}
        for trace in traces:
            if trace.type != "bar":
                continue
            horizontal = trace.orientation == "h"
            cat = axes[trace.yaxis or "y"] if horizontal else axes[trace.xaxis or "x"]
            val = axes[trace.xaxis or "x"] if horizontal else axes[trace.yaxis or "y"]
            cats = trace.y if horizontal else trace.x
            vals = trace.x if horizontal else trace.y
            for c, v in zip(cats, vals, strict=True):
                k = (val.name, cat.position(c))
                totals[k] = totals.get(k, 0.0) + float(v or 0)
        for (name, _), total in totals.items():
            axes[name].include([total])
    for a in axes.values():  # shared axes share their range
        other = a.layout.matches
        if other and other in axes:
            b = axes[other]
            b.include([a.low, a.high])
            a.low, a.high = b.low, b.high
        a.reversed = a.autorange == "reversed"
    for a in axes.values():
        a.freeze()
    # Legend entries (trace order; reversed when the layout says so).
    legend = layout.legend
    entries = []
    for index, trace in enumerate(traces):
        if trace.showlegend is False or not trace.name:
            continue
        entries.append((trace.name, _colour(trace, index, colorway), trace.type))
    if legend.traceorder and "reversed" in legend.traceorder:
        entries.reverse()
    legend_right = legend.orientation != "h"  # Plotly's default legend is a column at right
    # Margins: Plotly's, widened for the labels (automargin) and the legend.
    left = float(margin.l if margin.l is not None else 80)
    right = float(margin.r if margin.r is not None else 80)
    top = float(margin.t if margin.t is not None else 100)
    bottom = float(margin.b if margin.b is not None else 80)
    for a in axes.values():
        if not a.horizontal and a.layout.showticklabels is not False:
            labels = [t for _, t in a.ticks()]
            need = max((_text_width(t, font_size) for t in labels), default=0) + 12
            if a.layout.title.text:
                need += font_size * 1.6
            left = max(left, need + 6)
    if any(a.horizontal and a.layout.title.text for a in axes.values()):
        bottom = max(bottom, 3.4 * font_size + 6)
    legend_width = max((_text_width(n, font_size) for n, *_ in entries), default=0) + 34
    if entries and legend_right:
        right = max(right, legend_width + 12)
    legend_rows: list[list[tuple[str, str, str]]] = []
    if entries and not legend_right:
        row: list[tuple[str, str, str]] = []
        used = 0.0
        for entry in entries:
            width = _text_width(entry[0], font_size) + 40
            if row and used + width > WIDTH - left - right:
                legend_rows.append(row)
                row, used = [], 0.0
            row.append(entry)
            used += width
        legend_rows.append(row)
        top += max(0, len(legend_rows) - 1) * font_size * 1.6
    height = max(height, top + bottom + 60)
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    for a in axes.values():
        d0, d1 = (a.layout.domain or (0.0, 1.0))[:2]
        if a.horizontal:
            a.start, a.end = left + d0 * plot_w, left + d1 * plot_w
        else:  # SVG y grows downwards: a domain's bottom is the larger pixel
            a.start, a.end = top + (1 - d0) * plot_h, top + (1 - d1) * plot_h

    stacks: dict[tuple[str, float], float] = {}  # each stack's top so far (barmode stack)
    canvas = _Canvas()
    canvas.add(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH:g} {height:.0f}" '
        f'width="100%" font-family={_attr(FONT)} role="img" style="display:block">'
    )
    canvas.add(f'<rect width="{WIDTH:g}" height="{height:.0f}" fill="white"/>')
    title = _clean(layout.title.text or "")
    if title:
        share = 0.5 if layout.title.x is None else float(layout.title.x)
        anchor = {"left": "start", "right": "end"}.get(layout.title.xanchor or "", "middle")
        if layout.title.xanchor in (None, "auto"):
            anchor = "start" if share < 1 / 3 else "end" if share > 2 / 3 else "middle"
        canvas.text(
            max(12.0, share * WIDTH) if anchor == "start" else share * WIDTH,
            min(top / 2, 24),
            title,
            size=float(layout.title.font.size or 17),
            anchor=anchor,
            css="gtitle",
        )
    _draw_axes(canvas, axes, font_size)
    for index, trace in enumerate(traces):
        xa, ya = axes[trace.xaxis or "x"], axes[trace.yaxis or "y"]
        colour = _colour(trace, index, colorway)
        if trace.type == "bar":
            _draw_bars(canvas, fig, trace, xa, ya, colour, stacks if stacked else None)
        else:
            _draw_line(canvas, trace, xa, ya, colour)
    for shape in layout.shapes or ():
        _draw_shape(canvas, shape, axes, left, top, plot_w, plot_h)
    for note in layout.annotations or ():
        _draw_annotation(canvas, note, axes, left, top, plot_w, plot_h, font_size)
    if entries:
        _draw_legend(canvas, entries, legend_rows, legend_right, left, top, plot_w, font_size)
    canvas.add("</svg>")
    return "".join(canvas.parts)


def _tip(text: str) -> str:
    """Hover text for a ``<title>``: escaped, its line breaks as character references, so the
    SVG stays one line (a blank line would end the HTML block the app's markdown draws)."""
    return escape(text).replace("\n", "&#10;")


def _attr(value: str) -> str:
    return '"' + escape(value, quote=True) + '"'


def _colour(trace: Any, index: int, colorway: Sequence[str]) -> str:
    marker = getattr(trace, "marker", None)
    if marker is not None and isinstance(marker.color, str):
        return str(marker.color)
    line = getattr(trace, "line", None)
    if line is not None and isinstance(line.color, str):
        return str(line.color)
    return colorway[index % len(colorway)]


def _draw_axes(canvas: _Canvas, axes: dict[str, Axis], size: float) -> None:
    for a in axes.values():
        lay = a.layout
        crossing = _crossing(a, axes)
        if crossing is None:
            continue
        ticks = a.ticks() if lay.showticklabels is not False else []
        grid = lay.showgrid is not False and not a.horizontal
        grid_colour = lay.gridcolor or "#eee"
        line = lay.linecolor or "#999"
        if a.horizontal:
            y = crossing.start  # the bottom of its y axis' domain
            for value, _ in a.ticks():
                x = a.pixel(value)
                if grid:
                    canvas.add(_vline(x, crossing.end, y, grid_colour))
            canvas.add(
                f'<line x1="{a.start:.1f}" x2="{a.end:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{line}"/>'
            )
            for value, text in ticks:
                x = a.pixel(value)
                canvas.add(_vline(x, y, y + 5, line))
                canvas.text(x, y + 8 + size / 2, text, size=size, anchor="middle")
            if lay.title.text:
                mid = (a.start + a.end) / 2
                canvas.text(mid, y + 2.6 * size + 6, lay.title.text, size=size, anchor="middle")
        else:
            x = crossing.start
            for value, _ in a.ticks():
                yy = a.pixel(value)
                if grid:
                    canvas.add(_hline(crossing.start, crossing.end, yy, grid_colour))
            canvas.add(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{a.start:.1f}" y2="{a.end:.1f}" '
                f'stroke="{line}"/>'
            )
            widest = 0.0
            for value, text in ticks:
                yy = a.pixel(value)
                canvas.text(x - 6, yy, text, size=size, anchor="end")
                widest = max(widest, _text_width(text, size))
            if lay.title.text:
                mid = (a.start + a.end) / 2
                canvas.text(
                    x - widest - 10 - size * 0.6,
                    mid,
                    lay.title.text,
                    size=size,
                    anchor="middle",
                    rotate=True,
                )


def _crossing(a: Axis, axes: dict[str, Axis]) -> Axis | None:
    """The axis ``a`` is drawn against (its anchor), or None when it has no partner here."""
    anchor = a.layout.anchor or ("y" if a.horizontal else "x")
    return axes.get(anchor) or next(
        (b for b in axes.values() if b.horizontal != a.horizontal), None
    )


def _vline(x: float, y0: float, y1: float, colour: str) -> str:
    return f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0:.1f}" y2="{y1:.1f}" stroke="{colour}"/>'


def _hline(x0: float, x1: float, y: float, colour: str) -> str:
    return f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}"/>'


def _draw_bars(
    canvas: _Canvas,
    fig: Figure,
    trace: Any,
    xa: Axis,
    ya: Axis,
    colour: str,
    stacks: dict[tuple[str, float], float] | None,
) -> None:
    horizontal = trace.orientation == "h"
    cat_axis, val_axis = (ya, xa) if horizontal else (xa, ya)
    cats = list(trace.y if horizontal else trace.x)
    vals = [float(v or 0) for v in (trace.x if horizontal else trace.y)]
    n = len(vals)
    base = [float(b or 0) for b in _array(trace.base, n, 0.0)]
    gap = float(fig.layout.bargap if fig.layout.bargap is not None else 0.2)
    marker = trace.marker
    colours = _array(marker.color, n, colour) if marker is not None else [colour] * n
    opacity = _array(marker.opacity, n, 1.0) if marker is not None else [1.0] * n
    outline = marker.line if marker is not None else None
    stroke = (
        f' stroke="{outline.color}" stroke-width="{outline.width:g}"'
        if outline is not None and outline.width and isinstance(outline.color, str)
        else ""
    )
    texts = _array(trace.text, n, None)
    custom = _array(trace.customdata, n, None) if trace.customdata is not None else [None] * n
    template = trace.hovertemplate or ""
    name = trace.name or ""
    half = (1 - gap) / 2
    for i in range(n):
        position = cat_axis.position(cats[i])
        start = base[i]
        if stacks is not None:
            key = (val_axis.name + cat_axis.name, position)
            start = stacks.get(key, 0.0)
            stacks[key] = start + vals[i]
        end = start + vals[i]
        c0, c1 = cat_axis.pixel(position - half), cat_axis.pixel(position + half)
        v0, v1 = val_axis.pixel(start), val_axis.pixel(end)
        if horizontal:
            x, w = min(v0, v1), abs(v1 - v0)
            y, h = min(c0, c1), abs(c1 - c0)
        else:
            x, w = min(c0, c1), abs(c1 - c0)
            y, h = min(v0, v1), abs(v1 - v0)
        point = {
            "x": vals[i] if horizontal else cats[i],
            "y": cats[i] if horizontal else vals[i],
            "customdata": custom[i],
            "fullData.name": name,
            "text": texts[i],
        }
        tip = hover_text(template, point) if template else f"{name}: {vals[i]:.4g}"
        fill_opacity = "" if opacity[i] in (None, 1, 1.0) else f' fill-opacity="{opacity[i]:.2f}"'
        canvas.add(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{h:.1f}" '
            f'fill="{colours[i] or colour}"{fill_opacity}{stroke}><title>{_tip(tip)}</title>'
            "</rect>"
        )
        label = texts[i]
        size = 10.0
        if label not in (None, "") and w >= _text_width(str(label), size) + 3 and h >= size + 1:
            canvas.add(
                f'<text x="{x + w / 2:.1f}" y="{y + h / 2:.1f}" text-anchor="middle" '
                f'dominant-baseline="central" font-size="{size:g}" fill="white" '
                f'pointer-events="none">{escape(str(label))}</text>'
            )


def _draw_line(canvas: _Canvas, trace: Any, xa: Axis, ya: Axis, colour: str) -> None:
    xs, ys = list(trace.x or ()), list(trace.y or ())
    if not xs:
        return
    points = [
        (xa.pixel(xa.position(x)), ya.pixel(ya.position(y))) for x, y in zip(xs, ys, strict=True)
    ]
    line = trace.line
    step = line is not None and line.shape == "hv"
    path = [f"M{points[0][0]:.1f},{points[0][1]:.1f}"]
    for x1, y1 in points[1:]:
        if step:
            path.append(f"H{x1:.1f}")
        path.append(f"V{y1:.1f}" if step else f"L{x1:.1f},{y1:.1f}")
    width = float(line.width) if line is not None and line.width else 2.0
    dash = _dash(line.dash if line is not None else None)
    name = escape(trace.name or "")
    canvas.add(
        f'<path d="{"".join(path)}" fill="none" stroke="{colour}" stroke-width="{width:g}"{dash}>'
        f"<title>{name}</title></path>"
    )
    if len(xs) > MAX_POINT_TITLES:
        return
    custom = _array(trace.customdata, len(xs), None) if trace.customdata is not None else None
    template = trace.hovertemplate or ""
    for i, (px, py) in enumerate(points):
        point = {
            "x": xs[i],
            "y": ys[i],
            "customdata": custom[i] if custom else None,
            "fullData.name": trace.name or "",
        }
        tip = hover_text(template, point) if template else f"{trace.name}: {ys[i]}"
        canvas.add(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}" fill-opacity="0">'
            f"<title>{_tip(tip)}</title></circle>"
        )


def _reference(
    ref: str | None, value: Any, axes: dict[str, Axis], start: float, length: float, flip: bool
) -> float:
    """A shape's or annotation's coordinate in pixels: paper, an axis' domain, or data (the
    first axis when no reference is set, as in Plotly)."""
    ref = ref or ("y" if flip else "x")
    if ref == "paper":
        share = float(value)
        return start + (1 - share) * length if flip else start + share * length
    name = ref.split()[0]
    a = axes.get(name)
    if a is None:
        return start
    if ref.endswith("domain"):
        return a.start + float(value) * (a.end - a.start)
    return a.pixel(a.position(value))


def _draw_shape(
    canvas: _Canvas, shape: Any, axes: dict[str, Axis], left: float, top: float, w: float, h: float
) -> None:
    if shape.type not in ("line", "rect"):
        return
    x0 = _reference(shape.xref, shape.x0, axes, left, w, flip=False)
    x1 = _reference(shape.xref, shape.x1, axes, left, w, flip=False)
    y0 = _reference(shape.yref, shape.y0, axes, top, h, flip=True)
    y1 = _reference(shape.yref, shape.y1, axes, top, h, flip=True)
    line = shape.line
    colour = (line.color if line is not None else None) or "#444"
    width = float(line.width) if line is not None and line.width else 2.0
    dash = _dash(line.dash if line is not None else None)
    if shape.type == "line":
        canvas.add(
            f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y0:.1f}" y2="{y1:.1f}" '
            f'stroke="{colour}" stroke-width="{width:g}"{dash}/>'
        )
    else:
        canvas.add(
            f'<rect x="{min(x0, x1):.1f}" y="{min(y0, y1):.1f}" width="{abs(x1 - x0):.1f}"'
            f' height="{abs(y1 - y0):.1f}" fill="none" stroke="{colour}"/>'
        )


def _draw_annotation(
    canvas: _Canvas,
    note: Any,
    axes: dict[str, Axis],
    left: float,
    top: float,
    w: float,
    h: float,
    size: float,
) -> None:
    x = _reference(note.xref, note.x, axes, left, w, flip=False)
    y = _reference(note.yref, note.y, axes, top, h, flip=True)
    font = note.font
    text_size = float(font.size) if font is not None and font.size else size
    colour = (font.color if font is not None else None) or "#444"
    text = _clean(note.text or "")
    if note.showarrow and note.xref != "paper":
        ax, ay = (
            float(note.ax if note.ax is not None else -10),
            float(note.ay if note.ay is not None else -30),
        )
        tx, ty = x + ax, y + ay
        arrow = note.arrowcolor or colour
        canvas.add(
            f'<line x1="{tx:.1f}" y1="{ty + text_size * 0.6:.1f}" x2="{x:.1f}" '
            f'y2="{y - 2:.1f}" stroke="{arrow}"/>'
        )
        canvas.add(
            f'<path d="M{x - 4:.1f},{y - 8:.1f} L{x:.1f},{y - 1:.1f} L{x + 4:.1f},'
            f'{y - 8:.1f} Z" fill="{arrow}"/>'
        )
        x, y, anchor, baseline = tx, ty, "middle", "auto"
    else:
        anchor = {"left": "start", "right": "end"}.get(note.xanchor or "", "middle")
        baseline = {"bottom": "auto", "top": "hanging"}.get(note.yanchor or "", "middle")
        if note.yanchor == "bottom":
            y -= 3
    if note.bgcolor:
        width = _text_width(text, text_size) + 6
        x0 = {"start": x - 3, "end": x - width + 3}.get(anchor, x - width / 2)
        y0 = y - text_size if baseline == "auto" else y - text_size / 2
        canvas.add(
            f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{width:.1f}" '
            f'height="{text_size * 1.3:.1f}" fill="white" fill-opacity="0.85"/>'
        )
    canvas.text(
        x,
        y,
        text,
        size=text_size,
        anchor=anchor,
        color=colour,
        css="annotation-text",
        baseline=baseline,
    )


def _draw_legend(
    canvas: _Canvas,
    entries: list[tuple[str, str, str]],
    rows: list[list[tuple[str, str, str]]],
    right: bool,
    left: float,
    top: float,
    plot_w: float,
    size: float,
) -> None:
    def swatch(x: float, y: float, colour: str, kind: str) -> None:
        if kind == "bar":
            canvas.add(
                f'<rect x="{x:.1f}" y="{y - 6:.1f}" width="14" height="12" fill="{colour}"/>'
            )
        else:
            canvas.add(_hline(x, x + 18, y, colour).replace("/>", ' stroke-width="2"/>'))

    if right:
        x = left + plot_w + 14
        for index, (name, colour, kind) in enumerate(entries):
            y = top + 8 + index * size * 1.7
            swatch(x, y, colour, kind)
            canvas.text(x + 24, y, name, size=size)
        return
    line_h = size * 1.6
    for r, row in enumerate(rows):
        y = top - 14 - (len(rows) - 1 - r) * line_h
        x = left
        for name, colour, kind in row:
            swatch(x, y, colour, kind)
            canvas.text(x + 24, y, name, size=size)
            x += _text_width(name, size) + 40
