"""The ranked meshes as the Meshes page shows them: columns in people's units, labels, the
layout a row stands for, and the rows of a two-layout comparison. Pure pandas."""

from __future__ import annotations

import pandas as pd

from explorer.estimate.fixes import fit_status
from explorer.scenario import LayoutInputs
from explorer.units import GiB

LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "zero", "mbs", "recompute", "schedule", "virtual")
# Shown columns: source column -> header (units in the headers).
COLUMNS = {
    "rank": "rank",
    "tp": "TP",
    "pp": "PP",
    "dp": "DP",
    "cp": "CP",
    "ep": "EP",
    "zero": "ZeRO",
    "mbs": "micro-batch",
    "recompute": "recompute",
    "schedule": "schedule",
    "virtual": "V",
    "step_time_s": "step (s)",
    "mfu_pct": "MFU (%)",
    "peak_gib": "peak (GiB)",
    "spare_gib": "spare (GiB)",
    "memory": "memory",
    "tokens_per_s_per_gpu": "tokens/s per GPU",
    "bubble_pct": "bubble (%)",
    "exposed_comm_s": "exposed comm (s)",
    "tokens_per_s": "tokens/s",
    "num_warnings": "warnings",
    "cost_per_million_tokens_usd": "US$ per M tokens",
}
"""Memory sits beside the step time, so it stays in view on a narrow screen."""
FORMATS = {
    "step (s)": "%.3f",
    "tokens/s": "%.0f",
    "tokens/s per GPU": "%.1f",
    "MFU (%)": "%.1f",
    "bubble (%)": "%.1f",
    "peak (GiB)": "%.1f",
    "spare (GiB)": "%.1f",
    "exposed comm (s)": "%.3f",
    "US$ per M tokens": "%.4f",
}


def layout_of(row: pd.Series, current: LayoutInputs) -> LayoutInputs:
    return LayoutInputs(
        dp=int(row["dp"]),
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        cp=int(row["cp"]),
        ep=int(row["ep"]),
        zero=int(row["zero"]),  # type: ignore[arg-type]
        recompute=row["recompute"],
        schedule=row["schedule"],
        virtual_stages=int(row["virtual"]),
        sequence_parallel=current.sequence_parallel,
        micro_batch_size=int(row["mbs"]),
    )


def label(row: pd.Series) -> str:
    parts = [f"{a.upper()} {int(row[a])}" for a in ("tp", "pp", "cp", "ep", "dp") if row[a] > 1]
    extra = f" V{int(row['virtual'])}" if row["virtual"] > 1 else ""
    recompute = "no" if row["recompute"] == "none" else row["recompute"]
    return (
        f"#{int(row['rank'])} " + " · ".join(parts or ["1 GPU"]) + f" · ZeRO-{int(row['zero'])}"
        f" · mbs {int(row['mbs'])} · {recompute} recompute · {row['schedule']}{extra}"
    )


TIGHT = "inside reserve"
"""The memory column of a layout whose free memory at the peak is less than the reserve."""


def display(layouts: pd.DataFrame, reserve_bytes: float = 0.0) -> pd.DataFrame:
    """The ranked rows with the shown columns, in units people read; ``memory`` says whether
    the free memory at the peak is inside ``reserve_bytes``."""
    frame = layouts.reset_index(drop=True).copy()
    frame["rank"] = frame.index + 1
    frame["mfu_pct"] = frame["mfu"] * 100
    frame["bubble_pct"] = frame["bubble_fraction"] * 100
    frame["peak_gib"] = frame["peak_bytes"] / GiB
    frame["spare_gib"] = frame["spare_bytes"] / GiB
    frame["num_warnings"] = frame["warnings"].map(len)
    if "cost_per_million_tokens_usd" not in frame:  # no price given (explorer.search.rows)
        frame["cost_per_million_tokens_usd"] = float("nan")
    status = [
        fit_status(peak, gpu, reserve_bytes)
        for peak, gpu in zip(frame["peak_bytes"], frame["gpu_bytes"], strict=True)
    ]
    frame["memory"] = [TIGHT if s == "tight" else s for s in status]
    return frame


def _seconds(value: float, signed: bool = False) -> str:
    return f"{value:+.3f} s" if signed else f"{value:.3f} s"


def _gib(value: float, signed: bool = False) -> str:
    return f"{value / GiB:+.1f} GiB" if signed else f"{value / GiB:.1f} GiB"


def _rate(value: float, signed: bool = False) -> str:
    return f"{value:+,.0f}" if signed else f"{value:,.0f}"


def _share(value: float, signed: bool = False) -> str:
    return f"{100 * value:+.1f} pts" if signed else f"{100 * value:.1f}%"


COMPARED = (
    ("step time", "step_time_s", _seconds),
    ("tokens/s", "tokens_per_s", _rate),
    ("MFU", "mfu", _share),
    ("peak memory per GPU", "peak_bytes", _gib),
    ("exposed communication", "exposed_comm_s", _seconds),
    ("pipeline bubble", "bubble_s", _seconds),
    ("compute", "compute_s", _seconds),
)
