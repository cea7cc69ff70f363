"""The throughput-latency frontier: (layout, concurrency) points and the Pareto marks."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from explorer.memory.serving import ServingLayout
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.drafts import Speculation
from explorer.serving.estimate import ServingEstimate, estimate_serving, fitted
from explorer.serving.latency import Bound
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload

DEFAULT_CONCURRENCIES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Sequences per replica swept for the throughput-latency frontier."""
FRONTIER_CONCURRENCIES: tuple[int, ...] = (*DEFAULT_CONCURRENCIES, 512, 1024)
"""The loads ``serve --frontier`` sweeps: 1 to 1024 sequences per replica, as InferenceMAX and
SGLang's benchmarks sweep concurrency from one user to the engine's full batch."""


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
    tokens_per_s_per_user: float = 0.0
    """One sequence's output tokens per second, 1 / ITL: the serving benchmarks' x axis
    (InferenceMAX, SGLang and TensorRT-LLM draw tokens/s per GPU against it)."""
    two_batch_overlap: bool = False
    """Whether the point runs with two-batch overlap (an EP layout option)."""
    speculative: bool = False
    """Whether the point decodes speculatively (``Speculation`` with k > 0)."""


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


def _point(e: ServingEstimate, overlap: bool = False, speculative: bool = False) -> ParetoPoint:
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
        tokens_per_s_per_user=1.0 / fitted(e.itl_s),
        two_batch_overlap=overlap,
        speculative=speculative,
    )


def pareto_points(
    model: ModelSpec,
    cluster: ClusterSpec,
    layouts: list[ServingLayout],
    workload: ServingWorkload,
    concurrencies: tuple[int, ...] = DEFAULT_CONCURRENCIES,
    assumptions: ServingAssumptions | None = None,
    speculation: Speculation | None = None,
    overlap_options: tuple[bool, ...] | None = None,
) -> list[ParetoPoint]:
    """Fitting (layout, concurrency) points with the throughput-latency frontier marked:
    across layouts and loads (sequences per replica), as tokens/s per GPU against tokens/s
    per user. ``overlap_options`` (e.g. (False, True)) also sweeps two-batch overlap on the
    EP layouts (None: the assumptions' setting only); ``speculation`` decodes speculatively."""
    a = assumptions or ServingAssumptions()
    options = (a.two_batch_overlap,) if overlap_options is None else overlap_options
    speculative = speculation is not None and speculation.draft_tokens > 0
    points = []
    for layout in layouts:
        for overlap in sorted(set(options if layout.ep > 1 else (False,))):
            at = replace(a, two_batch_overlap=overlap)
            for c in sorted(set(concurrencies)):
                w = replace(workload, concurrency=c)
                e = estimate_serving(model, cluster, layout, w, at, speculation)
                if e.fits:
                    points.append(_point(e, overlap, speculative))
    return mark_pareto(points)
