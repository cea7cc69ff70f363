"""The throughput-latency frontier: (layout, concurrency) points and the Pareto marks."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from explorer.memory.serving import ServingLayout
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.estimate import ServingEstimate, estimate_serving, fitted
from explorer.serving.latency import Bound
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload

DEFAULT_CONCURRENCIES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Sequences per replica swept for the throughput-latency frontier."""


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """One (layout, concurrency) point of the throughput-latency sweep."""

    label: str
    tp: int
    pp: int
    ep: int
    replicas: int
    concurrency: int
    itl_s: float
    ttft_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    bound: Bound
    pareto: bool


def mark_pareto(points: list[ParetoPoint]) -> list[ParetoPoint]:
    """The points with ``pareto`` set where no other point has both lower ITL and higher
    tokens/s per GPU (sorted by ITL)."""
    ordered = sorted(points, key=lambda p: (p.itl_s, -p.tokens_per_s_per_gpu))
    best, out = -math.inf, []
    for point in ordered:
        on_front = point.tokens_per_s_per_gpu > best
        best = max(best, point.tokens_per_s_per_gpu)
        out.append(replace(point, pareto=on_front))
    return out


def _point(e: ServingEstimate) -> ParetoPoint:
    lay = e.layout
    return ParetoPoint(
        label=lay.label,
        tp=lay.tp,
        pp=lay.pp,
        ep=lay.ep,
        replicas=lay.replicas,
        concurrency=e.concurrency,
        itl_s=fitted(e.itl_s),
        ttft_s=fitted(e.ttft_s),
        tokens_per_s=fitted(e.tokens_per_s),
        tokens_per_s_per_gpu=fitted(e.tokens_per_s_per_gpu),
        bound=e.decode.bound,
        pareto=False,
    )


def pareto_points(
    model: ModelSpec,
    cluster: ClusterSpec,
    layouts: list[ServingLayout],
    workload: ServingWorkload,
    concurrencies: tuple[int, ...] = DEFAULT_CONCURRENCIES,
    assumptions: ServingAssumptions | None = None,
) -> list[ParetoPoint]:
    """Fitting (layout, concurrency) points with the throughput-latency frontier marked."""
    points = []
    for layout in layouts:
        for c in sorted(set(concurrencies)):
            e = estimate_serving(
                model, cluster, layout, replace(workload, concurrency=c), assumptions
            )
            if e.fits:
                points.append(_point(e))
    return mark_pareto(points)
