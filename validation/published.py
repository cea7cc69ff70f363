"""Published training runs against the estimate: each run's error, then the summary.

``python -m validation.published`` reads ``validation/published_runs.toml`` through
``explorer.published_runs`` (pure, no torch) and prints, per run: published and estimated
tokens/s per GPU, the signed error ((estimate - published) / published: positive is too
optimistic), the estimated peak memory per GPU against the GPU's memory (and the measured peak
where the run published one), then what the estimate changes ("inexact"), the speed features it
has no term for ("not modelled"), what the source leaves unpublished ("missing") and the run's
notes (where an estimate is off for a reason no source explains). The summary
groups the runs by GPU generation (Ampere, Hopper, Blackwell) and overall: mean and median
|error|, the worst run, how many estimates are too high and how many layouts do not fit.

Options: ``--gpu GEN`` keeps one generation (Ampere, Hopper, Blackwell) or one GPU preset
(h100-sxm, gb200, ...); ``--set check|used``; ``--exact`` keeps the runs whose layout the core
expresses as published; ``--brief`` drops the per-run notes; ``--json`` prints one JSON object
(``runs`` and ``summary``); ``--tp-comm-overlap`` times the runs that published Transformer
Engine's comm-GEMM overlap (a userbuffers config) with it instead of with their TP collectives
exposed (explorer.published_runs.scenario.TP_COMM_OVERLAP_DEFAULT). Bad input: one sentence on
stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

import pandas as pd

from explorer.published_runs import GENERATIONS, published_table, summary


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m validation.published", description=__doc__)
    parser.add_argument("--gpu", help="a generation (Ampere, Hopper, Blackwell) or a GPU preset")
    parser.add_argument("--set", choices=("check", "used"), dest="run_set")
    parser.add_argument("--exact", action="store_true", help="only layouts expressed exactly")
    parser.add_argument("--brief", action="store_true", help="no per-run notes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--tp-comm-overlap",
        action="store_true",
        help="time the runs that published Transformer Engine's comm-GEMM overlap with it",
    )
    return parser


def selected(
    table: pd.DataFrame, gpu: str | None, run_set: str | None, exact: bool
) -> pd.DataFrame:
    """The rows the options keep; ValueError (one sentence) for an unknown --gpu."""
    if gpu is not None:
        generations = {g.lower() for g in GENERATIONS.values()}
        if gpu.lower() in generations:
            table = table[table["generation"].str.lower() == gpu.lower()]
        elif gpu in GENERATIONS:
            table = table[table["gpu"] == gpu]
        else:
            choices = ", ".join(sorted({*GENERATIONS.values(), *GENERATIONS}))
            raise ValueError(f"--gpu must be one of {choices}, got {gpu!r}")
    if run_set is not None:
        table = table[table["set"] == run_set]
    if exact:
        table = table[table["exact"]]
    if table.empty:
        raise ValueError("no published run matches these options")
    return table.reset_index(drop=True)


def _run_lines(row: Any, brief: bool) -> list[str]:
    fits = "fits" if row.fits else "NO FIT"
    memory = f"{row.estimated_peak_gib:7.1f} / {row.gpu_gib:5.1f} GiB {fits}"
    if not math.isnan(row.measured_memory_gib):
        memory += (
            f" (measured {row.measured_memory_gib:.1f} GiB against {row.comparable_peak_gib:.1f}"
            f" GiB in the allocator, {row.memory_error:+.4%})"
        )
    lines = [
        f"{row.id:54} {row.gpu:9} {row.gpus:6} {row.published_tokens_per_s_per_gpu:10.1f} "
        f"{row.estimated_tokens_per_s_per_gpu:10.1f} {row.error:+10.4%}  {memory}",
        f"    {row.framework}, {row.model}, {row.precision}, {row.layout}",
    ]
    if not brief:
        for label, text in (
            ("inexact", row.inexact),
            ("not modelled", row.unmodelled),
            ("missing", row.missing),
            ("notes", getattr(row, "notes", "")),
        ):
            if text:
                lines.append(f"    {label}: {text}")
    return lines


def _summary_lines(table: pd.DataFrame) -> list[str]:
    lines = ["", "Summary (|error| of tokens/s per GPU; too high = estimate above published)"]
    for label, rows in (("all runs", table), ("exact layouts", table[table["exact"]])):
        if rows.empty:
            continue
        lines.append(f"  {label}:")
        for s in summary(rows).itertuples(index=False):
            lines.append(
                f"    {s.group:9} runs {s.runs:3}  mean {s.mean_abs_error:.4%}  median "
                f"{s.median_abs_error:.4%}  worst {s.worst_error:+.4%} ({s.worst_id})  too high "
                f"{s.too_high}/{s.runs}  not fitting {s.not_fitting}/{s.runs}"
            )
    return lines


def render(table: pd.DataFrame, brief: bool = False) -> str:
    """The printed report: one block per run, then the summary."""
    header = (
        f"{'run':54} {'gpu':9} {'gpus':>6} {'published':>10} {'estimate':>10} {'error':>10}  "
        "peak / GPU memory"
    )
    lines = [header, "-" * len(header)]
    for row in table.itertuples(index=False):
        lines += _run_lines(row, brief)
    lines.append("(tokens/s per GPU; error = (estimate - published) / published; GiB = 2^30 B)")
    return "\n".join(lines + _summary_lines(table))


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    def clean(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        return value.item() if hasattr(value, "item") else value

    return [{k: clean(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        table = published_table(tp_comm_overlap=args.tp_comm_overlap)
        table = selected(table, args.gpu, args.run_set, args.exact)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"runs": _records(table), "summary": _records(summary(table))}))
    else:
        print(render(table, args.brief))
    return 0


if __name__ == "__main__":
    sys.exit(main())
