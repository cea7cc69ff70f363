"""The report as JSON, and a JSON report loaded back into the scenario it was made from.

Shape: ``{"format": "parallelism-explorer-report", "version": 1, "title": ..., "kind":
"training" | "serving", "scenario": <Scenario JSON>, "results": {...}}``. Results are in SI
units with the unit in each key (``_bytes``, ``_s``); non-finite numbers are written as null,
so the file is strict JSON. Loading validates the scenario through ``explorer.scenario``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from explorer.limits import MAX_REPORT_BYTES, LimitError, check_json_text, shown
from explorer.report.content import Report
from explorer.scenario import Scenario, from_dict, to_dict

FORMAT = "parallelism-explorer-report"
VERSION = 1


def _plain(value: Any) -> Any:
    """``value`` as strict JSON data: tuples as lists, non-finite floats as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _plain(value.item())
    return value


def report_document(report: Report) -> dict[str, Any]:
    """The JSON report as a dict."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "title": report.title,
        "kind": report.kind,
        "scenario": to_dict(report.scenario),
        "results": _plain(report.results),
    }


def report_json(report: Report) -> str:
    """The JSON report as text (indented, keys in a stable order)."""
    return json.dumps(report_document(report), indent=2, allow_nan=False, ensure_ascii=False)


def _document(text: str | bytes) -> dict[str, Any]:
    """The parsed report, its size and nesting bounded before parsing (explorer.limits)."""
    try:
        data = json.loads(check_json_text(text, "The report", MAX_REPORT_BYTES))
    except LimitError as error:
        raise ValueError(f"{error}.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"The file is not valid JSON ({error}).") from None
    except (ValueError, RecursionError):  # a number of thousands of digits; deep nesting
        raise ValueError("The file holds JSON this tool cannot read.") from None
    if not isinstance(data, dict):
        raise ValueError("A report must be a JSON object, not a list or a single value.")
    return data


def _short(value: object, most: int = 60) -> str:
    """A value for a message, cut to ``most`` characters (huge integers by their size)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return shown(value)
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def _check_header(data: dict[str, Any]) -> None:
    if data.get("format") != FORMAT:
        raise ValueError(
            f'This is not a Parallelism Explorer report: its "format" is '
            f"{_short(data.get('format'))}, not {FORMAT!r}."
        )
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
        raise ValueError(
            f"The report's version is {_short(version)}; this tool reads version {VERSION}."
        )
    if "scenario" not in data:
        raise ValueError('The report has no "scenario" to restore.')


def load_report_json(text: str | bytes) -> Scenario:
    """The scenario a JSON report was made from; ValueError with one sentence when malformed."""
    data = _document(text)
    _check_header(data)
    return from_dict(data["scenario"])
