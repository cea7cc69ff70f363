"""Published runs against the estimate: one row per run, and the summary per GPU generation.

Error convention: (estimate - published) / published of tokens/s per GPU, so positive means the
estimate is too optimistic. A run published in TFLOP/s per GPU is converted with the core's model
FLOPs per token (``Estimate.model_flops_per_token``), as the run's ``formula`` states.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from explorer.estimate import Estimate, estimate
from explorer.memory.training import StageMemory
from explorer.published_runs.scenario import TP_COMM_OVERLAP_DEFAULT, scenario
from explorer.published_runs.table import GENERATIONS, RUNS_PATH, PublishedRun, load_published_runs
from explorer.units import TERA, GiB


def published_tokens_per_s_per_gpu(run: PublishedRun, result: Estimate) -> float:
    """The published figure as tokens/s per GPU (the run's ``formula`` for other metrics)."""
    if run.metric == "tflops_per_s_per_gpu":
        return run.published * TERA / result.model_flops_per_token
    return run.published  # tokens/s per GPU, or the report's GPU-hour average already in it


def layout_text(run: PublishedRun) -> str:
    """The layout in words: "TP4 PP8 VP5 DP2 dist-opt"."""
    parts = [f"{k}{v}" for k, v in (("TP", run.tp), ("PP", run.pp), ("VP", run.virtual_stages),
             ("CP", run.cp), ("EP", run.ep), ("ETP", run.etp)) if v > 1]  # fmt: skip
    return " ".join([*parts, f"DP{run.dp}", run.sharding, f"mbs{run.micro_batch}"])


RESERVED_PEAK_FRAMEWORKS = ("torchtitan",)
"""Frameworks whose published memory is PyTorch's peak reserved bytes (torchtitan
components/metrics.py DeviceMemoryMonitor: torch.cuda.memory_stats reserved_bytes.all.peak,
in GiB); NCCL's buffers (cudaMalloc'd by NCCL) and the CUDA context lie outside it."""


def allocator_comparable_bytes(run: PublishedRun, result: Estimate) -> float:
    """The estimated peak as the run measured it, bytes. For a reserved-bytes peak: the
    largest over the stages (the source takes the maximum over GPUs) of the live tensors
    (without the NCCL buffers, the CUDA context and the assumed headroom) with what the
    caching allocator reserves beyond them (``StageMemory.allocator_parts``,
    ``explorer.memory.allocator``); else the whole estimate."""
    memory = result.memory
    if run.framework not in RESERVED_PEAK_FRAMEWORKS:
        return memory.peak_bytes
    context = memory.assumptions.cuda_context_bytes

    def reserved(stage: StageMemory) -> float:
        b = stage.breakdown
        live = stage.total_bytes - b.headroom - b.communication - context
        return live + sum(size for _, size in stage.allocator_parts)

    return max(reserved(stage) for stage in memory.stages)


def compare(run: PublishedRun, tp_comm_overlap: bool = TP_COMM_OVERLAP_DEFAULT) -> dict[str, Any]:
    """One run: published against estimated tokens/s per GPU, memory, and what differs;
    ``tp_comm_overlap``: as ``scenario``'s."""
    s = scenario(run, tp_comm_overlap)
    result = estimate(s.model, s.cluster, s.layout, s.workload, s.assumptions)
    published = published_tokens_per_s_per_gpu(run, result)
    ours = result.tokens_per_s_per_gpu
    peak_gib = result.memory.peak_bytes / GiB
    measured = run.measured_memory_gib
    comparable_gib = allocator_comparable_bytes(run, result) / GiB
    ratio = math.nan
    if run.published_tflops_per_s_per_gpu and run.metric == "tokens_per_s_per_gpu":
        ratio = run.published_tflops_per_s_per_gpu * TERA / run.published
        ratio /= result.model_flops_per_token
    return {
        "id": run.id,
        "set": run.set,
        "generation": run.generation,
        "gpu": run.gpu,
        "gpus": run.gpus,
        "framework": run.framework,
        "model": run.model,
        "precision": run.precision,
        "layout": layout_text(run),
        "published_tokens_per_s_per_gpu": published,
        "estimated_tokens_per_s_per_gpu": ours,
        "error": (ours - published) / published,
        "estimated_mfu": result.mfu,
        "estimated_peak_gib": peak_gib,
        "gpu_gib": s.cluster.gpu.memory_bytes / GiB,
        "fits": result.fits,
        "measured_memory_gib": measured if measured is not None else math.nan,
        "comparable_peak_gib": comparable_gib,
        "memory_error": (comparable_gib - measured) / measured if measured else math.nan,
        "published_flops_per_token_ratio": ratio,
        "exact": not s.inexact,
        "inexact": "; ".join(s.inexact),
        "unmodelled": "; ".join(s.unmodelled),
        "missing": "; ".join(run.missing),
        "notes": run.notes,
    }


def published_table(
    path: Path = RUNS_PATH, tp_comm_overlap: bool = TP_COMM_OVERLAP_DEFAULT
) -> pd.DataFrame:
    """One row per published run (``compare``), in file order."""
    runs = load_published_runs(path).run
    return pd.DataFrame([compare(r, tp_comm_overlap) for r in runs])


def _summary_row(group: str, rows: pd.DataFrame) -> dict[str, Any]:
    magnitude = rows["error"].abs()
    worst = magnitude.idxmax()
    return {
        "group": group,
        "runs": len(rows),
        "exact_layouts": int(rows["exact"].sum()),
        "mean_abs_error": float(magnitude.mean()),
        "median_abs_error": float(magnitude.median()),
        "worst_error": float(rows.loc[worst, "error"]),
        "worst_id": rows.loc[worst, "id"],
        "too_high": int((rows["error"] > 0).sum()),
        "not_fitting": int((~rows["fits"].astype(bool)).sum()),
    }


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per GPU generation (oldest first: Ampere, Hopper, Blackwell, ...) and overall: mean and
    median |error|, the worst run, how many estimates are too high and how many layouts do not
    fit (``table``: ``published_table()`` or any frame with its id, generation, error, fits and
    exact columns)."""
    seen = set(table["generation"])
    known = [g for g in dict.fromkeys(GENERATIONS.values()) if g in seen]
    present = known + sorted(seen - set(known))
    groups = [_summary_row(g, table[table["generation"] == g]) for g in present]
    return pd.DataFrame([*groups, _summary_row("all", table)])
