"""The report's ranking section: the best layouts with why, and the rejected ones with reasons.

``from_search`` adapts an ``explorer.search.SearchResult`` (the app passes the one it holds in
its cache; the CLI runs the search when no layout is given); ``current_only`` ranks the chosen
layout alone when no search result is given, so building a report never waits for a search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from explorer.estimate import Estimate
from explorer.report.tables import Section, Table
from explorer.report.training import TrainingCase, layout_label
from explorer.search import SearchResult
from explorer.search.rows import time_components
from explorer.specs import Layout
from explorer.units import GiB

TOP = 5
"""Layouts shown in the ranking table."""


@dataclass(frozen=True, slots=True)
class RankedLayout:
    """One evaluated layout and the sentence that says why it ranks where it does."""

    layout: Layout
    peak_bytes: float
    fits: bool
    step_time_s: float
    tokens_per_s: float
    mfu: float
    why: str


@dataclass(frozen=True, slots=True)
class Ranking:
    """Ranked layouts (best first), rejected ones by kind, and how many were considered."""

    layouts: tuple[RankedLayout, ...]
    rejected: tuple[tuple[str, str, int], ...] = ()
    """(kind of rule, an example reason, layouts rejected for that kind)."""
    evaluated: int = 0
    source: str = ""
    """Where the ranking comes from, in words."""
    chosen_rank: int | None = None
    """1-based rank of the chosen layout, None when it is not among the ranked."""
    chosen: RankedLayout | None = None
    """The chosen layout when it is not among the ranked (shown below them for comparison)."""


def why(e: Estimate, best: Estimate) -> str:
    """What a ranked layout's step is made of, and how far it is from the best."""
    parts = time_components(e)
    axis = max(e.exposed_comm_by_axis_s, key=e.exposed_comm_by_axis_s.__getitem__, default="")
    comm = f"exposed comm. {parts['exposed_comm_s']:.2f} s"
    if parts["exposed_comm_s"] > 0 and axis:
        comm += f" (mostly {axis.upper()})"
    gap = e.step_time_s / best.step_time_s - 1 if best.step_time_s else 0.0
    spare = (e.memory.gpu_bytes - e.memory.peak_bytes) / GiB
    lead = "fastest" if e is best else f"{gap:+.2%} step time vs the best"
    fit = f"{spare:.1f} GiB spare" if spare >= 0 else f"{-spare:.1f} GiB over the GPU"
    return (
        f"{lead}: compute {parts['compute_s']:.2f} s, {comm}, bubble "
        f"{max(parts['bubble_s'], 0.0):.2f} s, optimizer {parts['optimizer_s']:.2f} s; {fit}"
    )


def _ranked(e: Estimate, best: Estimate) -> RankedLayout:
    return RankedLayout(
        layout=e.layout,
        peak_bytes=e.memory.peak_bytes,
        fits=e.fits,
        step_time_s=e.step_time_s,
        tokens_per_s=e.tokens_per_s,
        mfu=e.mfu,
        why=why(e, best),
    )


def rejected_by_kind(frame: pd.DataFrame) -> tuple[tuple[str, str, int], ...]:
    """(kind, first reason, layouts) for every kind of rejection, most layouts first."""
    if frame.empty:
        return ()
    rows = []
    for kind, group in frame.groupby("kind", observed=True, sort=False):
        rows.append((str(kind), str(group["reason"].iloc[0]), int(group["num_layouts"].sum())))
    return tuple(sorted(rows, key=lambda r: -r[2]))


def from_search(result: SearchResult, chosen: Estimate) -> Ranking:
    """The search's ranked layouts with why, its rejections grouped by kind, and where the
    chosen layout (estimated as ``chosen``) stands."""
    estimates = result.estimates
    if not estimates:
        return Ranking((), rejected_by_kind(result.rejected), result.evaluated, "the search")
    layouts = tuple(_ranked(e, estimates[0]) for e in estimates)
    rank = next((i for i, e in enumerate(estimates, 1) if e.layout == chosen.layout), None)
    return Ranking(
        layouts=layouts,
        rejected=rejected_by_kind(result.rejected),
        evaluated=result.evaluated,
        source=f"the search over {result.problem.num_gpus:,} GPUs",
        chosen_rank=rank,
        chosen=None if rank else _ranked(chosen, estimates[0]),
    )


def current_only(case: TrainingCase) -> Ranking:
    """A ranking of the chosen layout alone (no search result given)."""
    est = case.estimate
    row = RankedLayout(
        layout=case.layout,
        peak_bytes=est.memory.peak_bytes,
        fits=est.fits,
        step_time_s=est.step_time_s,
        tokens_per_s=est.tokens_per_s,
        mfu=est.mfu,
        why="the layout you chose; no search result was given to compare it with",
    )
    return Ranking((row,), evaluated=1, source="the chosen layout only", chosen_rank=1)


def _row(rank: int | None, r: RankedLayout, mark: str) -> dict[str, object]:
    return {
        "rank": rank,
        "layout": f"{layout_label(r.layout)} {mark}".strip(),
        "peak (GiB)": r.peak_bytes / GiB,
        "fits": r.fits,
        "step (s)": r.step_time_s,
        "tokens/s": r.tokens_per_s,
        "MFU": r.mfu,
        "why": r.why,
    }


def ranking_table(ranking: Ranking, chosen: Layout) -> Table:
    """The top layouts (the chosen one marked, or added below when it is not ranked)."""
    rows = [
        _row(i, r, "(chosen)" if r.layout == chosen else "")
        for i, r in enumerate(ranking.layouts[:TOP], start=1)
    ]
    if ranking.chosen is not None:
        rows.append(_row(None, ranking.chosen, "(chosen, not ranked)"))
    formats = {"tokens/s": "{:,.0f}", "MFU": "{:.1%}", "rank": "{:.0f}"}
    return Table("Best layouts", pd.DataFrame(rows), formats, "GiB = 2^30 bytes, per GPU.")


def rejected_table(ranking: Ranking) -> Table:
    frame = pd.DataFrame(
        {
            "rule": [kind for kind, _, _ in ranking.rejected],
            "layouts rejected": [count for _, _, count in ranking.rejected],
            "for example": [reason for _, reason, _ in ranking.rejected],
        }
    )
    return Table("Rejected layouts, by rule", frame)


def _placement(ranking: Ranking) -> str:
    if ranking.chosen_rank is not None:
        return f"The chosen layout ranks {ranking.chosen_rank} of {len(ranking.layouts)}."
    return f"The chosen layout is not among the {len(ranking.layouts)} ranked."


def ranking_section(ranking: Ranking, chosen: Layout) -> Section:
    """The top of the ranking with why, and the rejections."""
    tables = [ranking_table(ranking, chosen)]
    if ranking.rejected:
        tables.append(rejected_table(ranking))
    return Section(
        "ranking",
        "Ranking",
        paragraphs=(
            f"Ranked from {ranking.source}; {ranking.evaluated:,} "
            f"layout{'s' if ranking.evaluated != 1 else ''} considered. {_placement(ranking)}",
        ),
        tables=tuple(tables),
    )


def ranking_results(ranking: Ranking) -> dict[str, Any]:
    """The ranking as the ``search`` command's JSON keys."""
    return {
        "source": ranking.source,
        "evaluated": ranking.evaluated,
        "chosen_rank": ranking.chosen_rank,
        "layouts": [_ranked_json(r) for r in ranking.layouts[:TOP]],
        "chosen": _ranked_json(ranking.chosen) if ranking.chosen else None,
        "rejected": [
            {"kind": kind, "example_reason": reason, "num_layouts": count}
            for kind, reason, count in ranking.rejected
        ],
    }


def layout_json(lay: Layout) -> dict[str, Any]:
    """A layout's settings under the ``search`` command's keys."""
    return {
        "tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "cp": lay.cp, "ep": lay.ep, "etp": lay.etp,
        "zero": lay.zero, "mbs": lay.micro_batch_size, "recompute": lay.recompute,
        "schedule": lay.schedule, "virtual": lay.virtual_stages,
        "sequence_parallel": lay.sp,
    }  # fmt: skip


def _ranked_json(r: RankedLayout) -> dict[str, Any]:
    return {
        **layout_json(r.layout),
        "peak_bytes": r.peak_bytes,
        "fits": r.fits,
        "step_time_s": r.step_time_s,
        "tokens_per_s": r.tokens_per_s,
        "mfu": r.mfu,
        "why": r.why,
    }
