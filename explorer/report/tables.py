"""The report's building blocks (tables, code blocks, sections) and how their cells read.

A table holds numbers as numbers (units in the column names: ``(GiB)``, ``(s)``), so the app can
show the same DataFrame sortable; ``display_frame`` turns it into text once, for Markdown, HTML
and PDF alike, with each column's format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real

import pandas as pd

DEFAULT_FLOAT = "{:,.2f}"
"""Format of a float cell when its table names none for the column."""


@dataclass(frozen=True, slots=True, eq=False)
class Table:
    """A titled DataFrame; numbers stay numbers until ``display_frame``."""

    title: str
    frame: pd.DataFrame
    """Rows to show; the index is not shown (put labels in a column)."""
    formats: Mapping[str, str] = field(default_factory=dict)
    """Column -> ``str.format`` pattern for its numbers (``"{:.1%}"``); others: DEFAULT_FLOAT."""
    note: str = ""
    """A sentence under the table (units, conventions)."""


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """Text to paste elsewhere (launch settings), with its language for highlighting."""

    title: str
    language: str
    text: str


@dataclass(frozen=True, slots=True, eq=False)
class Section:
    """One heading of the report and what sits under it, in order: text, tables, code, figures."""

    key: str
    """Stable identifier (``memory``, ``launch``, ...): anchors, tests, the app."""
    title: str
    paragraphs: tuple[str, ...] = ()
    """Plain sentences (no markup)."""
    bullets: tuple[str, ...] = ()
    """A list of short items (warnings, notes)."""
    tables: tuple[Table, ...] = ()
    code: tuple[CodeBlock, ...] = ()
    figures: tuple[str, ...] = ()
    """Names of the figures drawn in this section (``explorer.report.content.FIGURES``)."""


def format_cell(value: object, pattern: str | None = None) -> str:
    """One cell as text: integers with thousands separators, floats with ``pattern``."""
    if value is None or (isinstance(value, float) and value != value):  # None or NaN
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Integral) and pattern is None:
        return f"{int(value):,}"
    if isinstance(value, Real):
        return (pattern or DEFAULT_FLOAT).format(value)
    return str(value)


def display_frame(table: Table) -> pd.DataFrame:
    """The table's cells as text, columns in order, with the table's formats."""
    frame = table.frame
    columns = {
        str(name): [format_cell(v, table.formats.get(str(name))) for v in frame[name].tolist()]
        for name in frame.columns
    }
    return pd.DataFrame(columns, dtype=object)
