"""The report as Markdown: headings, pipe tables, fenced code; figures named, not drawn."""

from __future__ import annotations

import re

from explorer.report.content import Report
from explorer.report.tables import CodeBlock, Section, Table, display_frame

UNITS_LINE = (
    "GiB = 2^30 bytes, GB = 10^9 bytes, GB/s = 10^9 bytes per second; times in seconds (s) or "
    "milliseconds (ms) as labelled."
)
FIGURE_TITLES = {
    "memory": "memory per GPU by pipeline stage and category",
    "schedule": "pipeline schedule diagram",
    "communication": "exposed communication by collective and axis",
    "serving_memory": "serving memory per GPU by layout",
    "serving_frontier": "throughput against inter-token latency",
}
"""Figure name -> what it shows, in words."""


_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_MARKUP = re.compile(r"([\\`*_\[\]|#!])")


def escaped(text: str) -> str:
    """``text`` on one line, with nothing Markdown or HTML would act on: ``& < >`` as entities,
    the characters of emphasis, code, links, images, tables and headings backslash-escaped
    (a model name like ``<img src=x onerror=...>`` or ``[x](javascript:...)`` stays text)."""
    return _MARKUP.sub(r"\\\1", " ".join(str(text).split()).translate(_ENTITIES))


def _cell(text: str) -> str:
    return escaped(text)


def table_markdown(table: Table) -> str:
    """A titled pipe table, with its note in italics below."""
    frame = display_frame(table)
    header = "| " + " | ".join(_cell(str(c)) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_cell(str(v)) for v in row) + " |" for row in frame.itertuples(False)]
    lines = [f"**{escaped(table.title)}**", "", header, rule, *rows]
    if frame.empty:
        lines = [f"**{escaped(table.title)}**", "", "(none)"]
    if table.note:
        lines += ["", f"_{escaped(table.note)}_"]
    return "\n".join(lines)


def code_markdown(block: CodeBlock) -> str:
    """A fenced block; the fence is longer than any run of backticks in the text."""
    longest = max((len(run) for run in re.findall(r"`+", block.text)), default=0)
    fence = "`" * max(3, longest + 1)
    language = re.sub(r"[^A-Za-z0-9_+-]", "", block.language)
    body = block.text.rstrip()
    return f"**{escaped(block.title)}**\n\n{fence}{language}\n{body}\n{fence}"


def section_markdown(section: Section, level: int = 2) -> str:
    """One section: heading, paragraphs, bullets, tables, code, figure mentions."""
    parts = [f"{'#' * level} {escaped(section.title)}"]
    parts += [escaped(p) for p in section.paragraphs]
    if section.bullets:
        parts.append("\n".join(f"- {escaped(b)}" for b in section.bullets))
    parts += [table_markdown(t) for t in section.tables]
    parts += [code_markdown(c) for c in section.code]
    parts += [
        f"_Figure: {FIGURE_TITLES.get(name, name)} (drawn in the HTML and PDF reports)._"
        for name in section.figures
    ]
    return "\n\n".join(parts)


def report_markdown(report: Report) -> str:
    """The whole report as one Markdown document."""
    head = f"# {escaped(report.title)}\n\n_Parallelism Explorer layout report. {UNITS_LINE}_"
    body = [section_markdown(s) for s in report.sections]
    return "\n\n".join([head, *body]) + "\n"
