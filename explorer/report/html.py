"""The report as one self-contained HTML page: tidy CSS, tables, code, and prerendered figures.

Figures arrive from the caller as HTML fragments by name (``explorer.charts.report`` makes
them: Plotly divs, plotly.js inlined with the first one only, or ``<img>`` tags with PNG data
for the PDF), because the core never imports plotly. Nothing is fetched from the network.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from numbers import Real

from explorer.report.content import Report
from explorer.report.markdown import FIGURE_TITLES, UNITS_LINE
from explorer.report.tables import CodeBlock, Section, Table, display_frame

CSS = """
:root { --ink: #1f2328; --muted: #59636e; --rule: #d1d9e0; --band: #f6f8fa; --accent: #4C78A8; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff;
  font: 14px/1.5 Inter, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 36px 0 10px; padding-bottom: 4px;
  border-bottom: 2px solid var(--accent); }
h3 { font-size: 15px; margin: 20px 0 6px; }
p.units, p.note, footer { color: var(--muted); font-size: 12px; }
nav ol { columns: 3; padding-left: 20px; margin: 12px 0; }
nav a { color: var(--accent); text-decoration: none; }
.table-wrap { overflow-x: auto; margin: 6px 0 4px; }
table { border-collapse: collapse; font-size: 12.5px; width: auto; }
th, td { padding: 4px 9px; border-bottom: 1px solid var(--rule); text-align: left;
  vertical-align: top; }
th { background: var(--band); font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) td { background: #fbfcfd; }
ul.bullets li { margin: 3px 0; }
section.warnings ul.bullets li { color: #8a4b00; }
pre { background: var(--band); border: 1px solid var(--rule); border-radius: 6px;
  padding: 10px 12px; font: 12px/1.45 "DejaVu Sans Mono", Menlo, Consolas, monospace;
  white-space: pre-wrap; overflow-wrap: anywhere; }
figure.chart { margin: 14px 0; }
figure.chart img { max-width: 100%; }
p.figure-missing { color: var(--muted); font-style: italic; }
@page { size: A4 landscape; margin: 14mm 12mm; }
@media print {
  main { max-width: none; padding: 0; }
  body { font-size: 11px; }
  table { font-size: 9px; }
  th, th.num { white-space: normal; }
  .table-wrap { overflow: visible; }
  h2 { break-after: avoid; }
  figure.chart, tr, pre { break-inside: avoid; }
  nav { display: none; }
}
"""
"""The page's only style sheet (inlined)."""


def _numeric(table: Table) -> list[bool]:
    """Whether each column holds numbers (right-aligned)."""
    frame = table.frame
    return [
        len(frame) > 0
        and all(isinstance(v, Real) and not isinstance(v, bool) for v in frame[c].tolist())
        for c in frame.columns
    ]


def _row_html(cells: tuple[object, ...], classes: list[str]) -> str:
    tds = (f"<td{k}>{escape(str(v))}</td>" for v, k in zip(cells, classes, strict=True))
    return "<tr>" + "".join(tds) + "</tr>"


def table_html(table: Table) -> str:
    """A titled table with numeric columns right-aligned, its note below."""
    frame = display_frame(table)
    if frame.empty:
        return f'<h3>{escape(table.title)}</h3><p class="note">(none)</p>'
    classes = [' class="num"' if num else "" for num in _numeric(table)]
    head = "".join(
        f"<th{k}>{escape(str(c))}</th>" for c, k in zip(frame.columns, classes, strict=True)
    )
    rows = "".join(_row_html(row, classes) for row in frame.itertuples(False))
    note = f'<p class="note">{escape(table.note)}</p>' if table.note else ""
    return (
        f'<h3>{escape(table.title)}</h3><div class="table-wrap"><table><thead><tr>{head}'
        f"</tr></thead><tbody>{rows}</tbody></table></div>{note}"
    )


def code_html(block: CodeBlock) -> str:
    lang = escape(block.language)
    return (
        f"<h3>{escape(block.title)}</h3>"
        f'<pre><code class="language-{lang}">{escape(block.text.rstrip())}</code></pre>'
    )


def figure_html(name: str, fragments: Mapping[str, str], missing_note: str) -> str:
    """The figure's fragment, or a sentence saying it was left out (and why)."""
    if name in fragments:
        return f'<figure class="chart" id="figure-{escape(name)}">{fragments[name]}</figure>'
    what = FIGURE_TITLES.get(name, name)
    why = f" {missing_note}" if missing_note else ""
    return f'<p class="figure-missing">Figure left out: {escape(what)}.{escape(why)}</p>'


def section_html(section: Section, fragments: Mapping[str, str], missing_note: str) -> str:
    parts = [f"<h2>{escape(section.title)}</h2>"]
    parts += [f"<p>{escape(p)}</p>" for p in section.paragraphs]
    if section.bullets:
        items = "".join(f"<li>{escape(b)}</li>" for b in section.bullets)
        parts.append(f'<ul class="bullets">{items}</ul>')
    parts += [figure_html(name, fragments, missing_note) for name in section.figures]
    parts += [table_html(t) for t in section.tables]
    parts += [code_html(c) for c in section.code]
    key = escape(section.key)
    return f'<section id="{key}" class="{key}">{"".join(parts)}</section>'


def _contents(report: Report) -> str:
    items = "".join(
        f'<li><a href="#{escape(s.key)}">{escape(s.title)}</a></li>' for s in report.sections
    )
    return f"<nav><ol>{items}</ol></nav>"


def report_html(
    report: Report, figures: Mapping[str, str] | None = None, *, missing_note: str = ""
) -> str:
    """The report as one HTML document.

    ``figures`` maps a figure name (``report.figure_names``) to an HTML fragment placed where
    the section draws it; a name without a fragment becomes a sentence "Figure left out",
    followed by ``missing_note`` (why).
    """
    fragments = figures or {}
    body = "".join(section_html(s, fragments, missing_note) for s in report.sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(report.title)}</title><style>{CSS}</style></head><body><main>"
        f"<header><h1>{escape(report.title)}</h1>"
        f'<p class="units">Parallelism Explorer layout report. {escape(UNITS_LINE)}</p></header>'
        f"{_contents(report)}{body}"
        "<footer><p>Made with Parallelism Explorer. The JSON report of the same scenario can "
        "be uploaded back into the app to restore every input.</p></footer>"
        "</main></body></html>\n"
    )
