"""The report as Markdown: headings, pipe tables, fenced code; figures named, not drawn."""

from __future__ import annotations

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


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table_markdown(table: Table) -> str:
    """A titled pipe table, with its note in italics below."""
    frame = display_frame(table)
    header = "| " + " | ".join(_cell(str(c)) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(_cell(str(v)) for v in row) + " |" for row in frame.itertuples(False)]
    lines = [f"**{table.title}**", "", header, rule, *rows]
    if frame.empty:
        lines = [f"**{table.title}**", "", "(none)"]
    if table.note:
        lines += ["", f"_{table.note}_"]
    return "\n".join(lines)


def code_markdown(block: CodeBlock) -> str:
    return f"**{block.title}**\n\n```{block.language}\n{block.text.rstrip()}\n```"


def section_markdown(section: Section, level: int = 2) -> str:
    """One section: heading, paragraphs, bullets, tables, code, figure mentions."""
    parts = [f"{'#' * level} {section.title}"]
    parts += list(section.paragraphs)
    if section.bullets:
        parts.append("\n".join(f"- {' '.join(b.split())}" for b in section.bullets))
    parts += [table_markdown(t) for t in section.tables]
    parts += [code_markdown(c) for c in section.code]
    parts += [
        f"_Figure: {FIGURE_TITLES.get(name, name)} (drawn in the HTML and PDF reports)._"
        for name in section.figures
    ]
    return "\n\n".join(parts)


def report_markdown(report: Report) -> str:
    """The whole report as one Markdown document."""
    head = f"# {report.title}\n\n_Parallelism Explorer layout report. {UNITS_LINE}_"
    body = [section_markdown(s) for s in report.sections]
    return "\n\n".join([head, *body]) + "\n"
