"""The report's "Measured on your cluster" section: each assumption a probe file set, its value
and the measurement it came from (the scenario's ``calibration`` notes, explorer.probe.derive)."""

from __future__ import annotations

import pandas as pd

from explorer.report.tables import Section, Table
from explorer.scenario import Scenario


def calibration_rows(scenario: Scenario) -> list[dict[str, object]]:
    """(assumption, value, measurement) of every override the calibration file set."""
    values = scenario.assumption_overrides()
    return [
        {"assumption": key, "value": values.get(key), "measurement": measurement}
        for key, measurement in scenario.calibration
    ]


def calibration_section(scenario: Scenario) -> tuple[Section, ...]:
    """The section (one, or none when no calibration file was used)."""
    rows = calibration_rows(scenario)
    if not rows:
        return ()
    table = Table(
        "Assumptions set from the calibration file",
        pd.DataFrame(rows, columns=["assumption", "value", "measurement"]),
        formats={"value": "{:.4g}"},
    )
    text = (
        "These figures come from python -m explorer probe run on the user's own hardware, not "
        "from the presets' defaults; every other assumption keeps its default or override."
    )
    return (
        Section("calibration", "Measured on your cluster", paragraphs=(text,), tables=(table,)),
    )
