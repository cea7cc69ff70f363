"""Published serving runs against the serving estimator: ``python -m validation.serving``.

The table and the comparison live in ``explorer.published_serving`` (the app's Validation page
and explorer.trust read them there); this prints each run's estimate, error and the summary.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from explorer.published_serving import (
    MAX_BATCH,
    RUNS_PATH,
    RunCheck,
    estimate_run,
    load_runs,
    summary,
)

__all__ = ["MAX_BATCH", "RUNS_PATH", "RunCheck", "estimate_run", "load_runs", "main", "summary"]


def render(checks: list[RunCheck]) -> str:
    lines = [
        f"{'run':<52} {'phase':<10} {'measured':>9} {'estimate':>9} {'error':>7}  at",
    ]
    for c in checks:
        est = "-" if c.estimated_per_gpu is None else f"{c.estimated_per_gpu:9,.0f}"
        err = "-" if c.error is None else f"{100 * c.error:+6.0f}%"
        lines.append(
            f"{c.id:<52} {c.phase:<10} {c.measured_per_gpu:9,.0f} {est:>9} {err:>7}  {c.why}"
        )
    mean, worst, missing = summary(checks)
    scored = len(checks) - missing
    lines.append(
        f"Summary: {scored} of {len(checks)} runs estimated (output or input tokens/s per GPU); "
        f"mean |error| {100 * mean:.1f}%, worst {worst.id} {100 * (worst.error or 0):+.1f}%"
        + (f"; {missing} without an estimate (does not fit)" if missing else "")
    )
    for engine in sorted({c.engine for c in checks}):
        part = [c for c in checks if c.engine == engine and c.error is not None]
        if part:
            m = sum(abs(c.error or 0.0) for c in part) / len(part)
            lines.append(f"  {engine}: {len(part)} runs, mean |error| {100 * m:.1f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validation.serving", description=__doc__)
    parser.add_argument("--runs", type=Path, default=RUNS_PATH, help="the table of runs (TOML)")
    args = parser.parse_args(argv)
    checks = [estimate_run(run) for run in load_runs(args.runs)]
    print(render(checks))
    return 0 if all(math.isfinite(c.estimated_per_gpu or 0.0) for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
