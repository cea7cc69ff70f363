"""Measured against estimated training memory, per stored configuration, with a summary.

``python -m validation.report`` prints one row per configuration of ``validation/results.json``
from ``explorer.validation_data.comparison_table()`` (the estimator with
``TrainingAssumptions(framework="pytorch")``, runtime and headroom left out): measured and
estimated peak per GPU, the peak's relative error, the measured peak phase beside the
estimator's, and the relative error of the model states (parameters, gradients, master weights,
Adam states after the backward). The summary gives the median and worst |error| and how many
configurations lie within the tolerances of ``tests/test_validation.py``, for all
configurations, the dense ones and the MoE ones. ``--heldout`` reads the held-out set
(``validation/heldout.json``, chosen after the estimator was fitted) instead. Torch-free; exits
1 when any configuration lies outside a tolerance.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from explorer.memory import training_memory
from explorer.presets import load_gpu
from explorer.validation_data import (
    GPU_ID,
    RESULTS_PATH,
    comparison_assumptions,
    comparison_table,
    load_results,
)
from validation.run_all import HELDOUT_PATH

PEAK_TOLERANCE = 0.10
"""Relative peak error allowed (``tests/test_validation.py`` PEAK_TOLERANCE)."""
MODEL_STATES_TOLERANCE = 0.02
"""Relative model-state error allowed (``tests/test_validation.py`` MODEL_STATES_TOLERANCE)."""
GIB = 2**30


def estimated_phases(path: Path = RESULTS_PATH) -> list[str]:
    """The estimator's peak phase per stored configuration, in file order."""
    return [
        training_memory(
            m.model, load_gpu(GPU_ID), m.layout, m.workload, comparison_assumptions(m)
        ).peak_phase
        for m in load_results(path)
    ]


def report_table(path: Path = RESULTS_PATH) -> pd.DataFrame:
    """``comparison_table()`` with the estimator's peak phase and whether the model is MoE."""
    table = comparison_table(path)
    table["estimated_peak_phase"] = estimated_phases(path)
    table["moe"] = [m.model.is_moe for m in load_results(path)]
    return table


def _rows(table: pd.DataFrame, peak_tol: float, states_tol: float) -> list[str]:
    header = (
        f"{'configuration':42} {'measured':>9} {'estimate':>9} {'peak err':>8}  "
        f"{'phase':9} {'est. phase':14} {'states err':>10}"
    )
    lines = [header, "-" * len(header)]
    for r in table.itertuples(index=False):
        flag = ""
        if abs(r.peak_error) > peak_tol or abs(r.model_states_error) > states_tol:
            flag = "  OUT OF TOLERANCE"
        lines.append(
            f"{r.id:42} {r.measured_peak_bytes / GIB:9.3f} {r.estimated_peak_bytes / GIB:9.3f} "
            f"{r.peak_error:+8.2%}  {r.peak_phase:9} {r.estimated_peak_phase:14} "
            f"{r.model_states_error:+10.3%}{flag}"
        )
    lines.append("(GiB per GPU; error = (estimate - measured) / measured)")
    return lines


def _worst(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows.loc[rows[column].abs().idxmax()]


def _summary_line(name: str, rows: pd.DataFrame, peak_tol: float, states_tol: float) -> str:
    peak, states = rows["peak_error"].abs(), rows["model_states_error"].abs()
    within = ((peak <= peak_tol) & (states <= states_tol)).sum()
    worst = _worst(rows, "peak_error")
    return (
        f"{name:6} {len(rows):>5} {f'{within}/{len(rows)}':>7} {peak.median():>13.2%} "
        f"{worst['peak_error']:>+11.2%} {states.median():>15.3%} "
        f"{_worst(rows, 'model_states_error')['model_states_error']:>+13.3%}"
    )


def _summary(table: pd.DataFrame, peak_tol: float, states_tol: float) -> list[str]:
    header = (
        f"{'group':6} {'count':>5} {'within':>7} {'median |peak|':>13} {'worst peak':>11} "
        f"{'median |states|':>15} {'worst states':>13}"
    )
    groups = (("all", table), ("dense", table[~table["moe"]]), ("MoE", table[table["moe"]]))
    lines = [header, "-" * len(header)]
    lines += [_summary_line(n, rows, peak_tol, states_tol) for n, rows in groups if len(rows)]
    for name, rows in groups:
        if len(rows):
            peak, states = _worst(rows, "peak_error"), _worst(rows, "model_states_error")
            lines.append(f"worst {name}: peak {peak['id']}, model states {states['id']}")
    measured_phase = table["peak_phase"]
    estimated_phase = table["estimated_peak_phase"].map(
        {"backward_start": "backward", "block_backward": "backward", "optimizer_step": "optimizer"}
    )
    agree = (measured_phase == estimated_phase).sum()
    lines.append(
        f"within: |peak error| <= {peak_tol:.0%} and |model-state error| <= {states_tol:.0%}; "
        f"peak phase agrees (backward / optimizer) in {agree} of {len(table)}"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the per-configuration table and the summary; 1 if any lies outside a tolerance."""
    parser = argparse.ArgumentParser(prog="python -m validation.report", description=__doc__)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--results", type=Path, default=RESULTS_PATH, help="measurements JSON")
    source.add_argument(
        "--heldout", action="store_true", help=f"the held-out set ({HELDOUT_PATH.name})"
    )
    parser.add_argument("--peak-tolerance", type=float, default=PEAK_TOLERANCE)
    parser.add_argument("--states-tolerance", type=float, default=MODEL_STATES_TOLERANCE)
    parser.add_argument("--summary-only", action="store_true", help="print the summary only")
    args = parser.parse_args(argv)

    table = report_table(HELDOUT_PATH if args.heldout else args.results)
    peak_tol, states_tol = args.peak_tolerance, args.states_tolerance
    if not args.summary_only:
        print("\n".join(_rows(table, peak_tol, states_tol)), end="\n\n")
    print("\n".join(_summary(table, peak_tol, states_tol)))
    outside = (table["peak_error"].abs() > peak_tol) | (
        table["model_states_error"].abs() > states_tol
    )
    return 1 if outside.any() else 0


if __name__ == "__main__":
    sys.exit(main())
