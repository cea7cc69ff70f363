"""The training report's sections: layout, step time, memory per stage, schedule, communication,
launch settings. Every number comes from ``explorer.estimate.estimate`` (which holds the memory
estimate); the sections only arrange and label it (GiB = 2^30 bytes, s = seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from explorer.estimate import Estimate, EstimateAssumptions, StageTime, bottleneck_part
from explorer.memory import CATEGORIES, StageMemory, parallel_axes_in_words
from explorer.report.tables import Section, Table
from explorer.specs import ClusterSpec, Layout, ModelSpec, TrainingWorkload
from explorer.units import GB, GiB

CATEGORY_LABELS = {
    "parameters": "parameters",
    "gradients": "gradients",
    "master_weights": "master weights",
    "optimizer_states": "optimizer states",
    "activations": "activations",
    "temporary": "temporary",
    "communication": "comm. buffers",
    "runtime": "runtime",
    "headroom": "headroom",
}
"""Short column labels of the memory categories (docs/ARCHITECTURE.md names)."""


@dataclass(frozen=True, slots=True)
class TrainingCase:
    """One training scenario resolved to specs, with its estimate."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    workload: TrainingWorkload
    assumptions: EstimateAssumptions
    estimate: Estimate


def layout_label(layout: Layout) -> str:
    """``TP 8 · PP 4 · DP 2 · ZeRO-1 · 1f1b`` (axes at 1 left out, except DP)."""
    axes = [("TP", layout.tp), ("PP", layout.pp), ("CP", layout.cp), ("EP", layout.ep)]
    parts = [f"{name} {degree}" for name, degree in axes if degree > 1]
    parts += [f"DP {layout.dp}", f"ZeRO-{layout.zero}", layout.schedule]
    if layout.virtual_stages > 1:
        parts.append(f"V {layout.virtual_stages}")
    return " · ".join(parts)


def layers_text(layers: tuple[int, ...]) -> str:
    """Block indices as ranges: ``0-19`` or ``0-3, 56-60``."""
    runs: list[list[int]] = []
    for index in layers:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) or "none"


# ------------------------------------------------------------------------------ summary


def summary_paragraphs(case: TrainingCase) -> tuple[str, ...]:
    """Two sentences: what runs where, and the headline numbers."""
    est, mem = case.estimate, case.estimate.memory
    fit = (
        f"fits: the peak stage ({mem.peak_stage}) needs {mem.peak_bytes / GiB:,.1f} GiB of "
        f"{mem.gpu_bytes / GiB:,.1f} GiB"
        if mem.fits
        else f"does not fit: stage {mem.peak_stage} needs {mem.peak_bytes / GiB:,.1f} GiB, "
        f"more than the {mem.gpu_bytes / GiB:,.1f} GiB of one GPU"
    )
    return (
        f"Training {case.model.name} on {est.num_gpus:,} × {case.cluster.gpu.name} with "
        f"{layout_label(case.layout)}, {case.workload.precision}, sequences of "
        f"{case.workload.seq_len:,} tokens, {case.workload.global_batch_size:,} per step.",
        f"The layout {fit}. One step takes {est.step_time_s:,.2f} s: "
        f"{est.tokens_per_s:,.0f} tokens/s ({est.tokens_per_s_per_gpu:,.0f} per GPU), "
        f"MFU {est.mfu:.1%}.",
    )


# ------------------------------------------------------------------------------ layout


def layout_section(case: TrainingCase) -> Section:
    """The chosen layout's settings, what each axis splits, where its groups sit."""
    lay = case.layout
    settings = [
        ("TP", lay.tp), ("PP", lay.pp), ("DP", lay.dp), ("CP", lay.cp), ("EP", lay.ep),
        ("ETP", lay.etp), ("ZeRO stage", lay.zero), ("sequence parallel", lay.sp),
        ("recompute", lay.recompute), ("schedule", lay.schedule),
        ("virtual stages", lay.virtual_stages), ("micro-batch (sequences)", lay.micro_batch_size),
        ("micro-batches per step", case.estimate.microbatches), ("GPUs", lay.world_size),
    ]  # fmt: skip
    frame = pd.DataFrame(
        {"setting": [k for k, _ in settings], "value": [_plain(v) for _, v in settings]},
        dtype=object,
    )
    return Section(
        "layout",
        "Chosen layout",
        paragraphs=(layout_label(lay) + ". What each parallel axis splits and replicates:",),
        bullets=parallel_axes_in_words(case.model, lay, case.workload),
        tables=(Table("Settings", frame), groups_table(case)),
    )


def _plain(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


GROUP_NAMES = {
    "tp": "TP",
    "cp": "CP",
    "ep": "EP",
    "dp": "DP",
    "pp": "PP",
    "dp_cp": "DP x CP (gradients, ZeRO)",
    "etp": "expert TP",
    "edp": "expert DP",
}
"""Process group -> its name in tables."""


def shown_groups(model: ModelSpec, layout: Layout) -> set[str]:
    """Groups that mean something for this model and layout (expert groups only for MoE)."""
    groups = {"tp", "cp", "dp", "pp"}
    if layout.cp > 1:
        groups.add("dp_cp")  # with CP 1 it is the DP group
    if model.is_moe:
        groups |= {"ep", "etp", "edp"}
    return groups


def groups_table(case: TrainingCase) -> Table:
    """Each process group's size and placement on scale-up domains."""
    shown = shown_groups(case.model, case.layout)
    rows = [
        {
            "group": GROUP_NAMES.get(g.group, g.group),
            "size": g.size,
            "ranks per domain": g.ranks_per_domain,
            "domains": g.num_domains,
            "crosses nodes": g.crosses_domains,
            "bus bandwidth (GB/s)": g.bandwidth_bytes_per_s / GB,
        }
        for g in case.estimate.groups.values()
        if g.size > 1 and g.group in shown
    ]
    note = "Worst group of each axis; bandwidth per rank, one direction, link peak."
    return Table("Process groups on the topology", pd.DataFrame(rows), {}, note)


# ------------------------------------------------------------------------------ step time


def performance_section(case: TrainingCase) -> Section:
    """Step time and its parts, throughput and utilisation."""
    est = case.estimate
    rows = [
        ("step time (s)", est.step_time_s),
        ("pipelined part (s)", est.pipeline.makespan_s),
        ("per-step tail: exposed DP/ZeRO communication + optimizer (s)", est.tail_s),
        ("tokens per step", est.tokens_per_step),
        ("tokens/s", est.tokens_per_s),
        ("tokens/s per GPU", est.tokens_per_s_per_gpu),
        ("model TFLOP/s per GPU", est.model_flops_per_s_per_gpu / 1e12),
        ("MFU", f"{est.mfu:.1%}"),
        ("HFU (recomputation counted)", f"{est.hfu:.1%}"),
    ]
    frame = pd.DataFrame(
        {"quantity": [k for k, _ in rows], "value": [_number(v) for _, v in rows]}, dtype=object
    )
    return Section(
        "performance",
        "Step time and throughput",
        paragraphs=(
            f"Pipeline timed by the {est.pipeline.method} method; MFU against the dense "
            f"peak of {est.peak_flops_per_s / 1e12:,.0f} TFLOP/s per GPU.",
        ),
        tables=(Table("Step", frame),),
    )


def _number(value: object) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}" if value < 100 else f"{value:,.0f}"
    return str(value)


# ------------------------------------------------------------------------------ memory


def memory_table(case: TrainingCase) -> Table:
    """Bytes per GPU by category for every stage, in GiB, with micro-batches in flight."""
    rows = []
    for stage in case.estimate.memory.stages:
        row: dict[str, object] = {"stage": stage.stage, "layers": layers_text(stage.layers)}
        for category, value in stage.breakdown.as_dict().items():
            row[f"{CATEGORY_LABELS[category]} (GiB)"] = value / GiB
        row["total (GiB)"] = stage.total_bytes / GiB
        row["micro-batches in flight"] = stage.microbatches_in_flight
        rows.append(row)
    note = "GiB = 2^30 bytes, per GPU of each pipeline stage."
    formats = {"micro-batches in flight": "{:g}"}
    return Table("Memory per GPU by stage and category (GiB)", pd.DataFrame(rows), formats, note)


def peak_parts_table(stage: StageMemory) -> Table:
    """The peak stage's activation, temporary and communication buffers by name (GiB)."""
    acts = stage.activation_parts
    parts = [
        ("activations", "transformer blocks", acts.blocks),
        ("activations", "embedding", acts.embedding),
        ("activations", "LM head and logits", acts.head),
        ("activations", "multi-token prediction", acts.mtp),
        ("activations", "recompute working set", acts.recompute_working),
        *(("temporary", name, value) for name, value in stage.temporary_parts),
        *(("communication", name, value) for name, value in stage.communication_parts),
    ]
    shown = [p for p in parts if p[2]]
    frame = pd.DataFrame(
        {
            "category": [p[0] for p in shown],
            "part": [p[1] for p in shown],
            "GiB": [p[2] / GiB for p in shown],
        }
    )
    return Table(f"Inside the peak stage ({stage.stage})", frame)


def memory_section(case: TrainingCase) -> Section:
    """Memory per stage by category against the GPU, the peak stage's parts, the notes."""
    mem = case.estimate.memory
    peak = mem.stages[mem.peak_stage]
    verdict = "fits" if mem.fits else "does not fit"
    share = mem.peak_bytes / mem.gpu_bytes
    return Section(
        "memory",
        "Memory per GPU",
        paragraphs=(
            f"Peak {mem.peak_bytes / GiB:,.2f} GiB on stage {mem.peak_stage} of "
            f"{len(mem.stages)}: {share:.0%} of the {mem.gpu_bytes / GiB:,.1f} GiB "
            f"({mem.gpu_bytes / GB:,.0f} GB) of one {case.cluster.gpu.name}; the layout "
            f"{verdict}.",
        ),
        bullets=mem.notes,
        tables=(memory_table(case), peak_parts_table(peak)),
        figures=("memory",),
    )


def memory_results(case: TrainingCase) -> dict[str, Any]:
    """The memory estimate as the ``estimate`` command's JSON keys (bytes)."""
    mem = case.estimate.memory
    return {
        "gpu_bytes": mem.gpu_bytes,
        "peak_bytes": mem.peak_bytes,
        "fits": mem.fits,
        "peak_stage": mem.peak_stage,
        "stages": [
            {
                "stage": s.stage,
                "layers": list(s.layers),
                "total_bytes": s.total_bytes,
                "bytes": s.breakdown.as_dict(),
                "microbatches_in_flight": s.microbatches_in_flight,
            }
            for s in mem.stages
        ],
        "categories": list(CATEGORIES),
        "notes": list(mem.notes),
    }


def stage_time_rows(stages: tuple[StageTime, ...]) -> pd.DataFrame:
    """Per part: seconds of forward, backward and weight passes per micro-batch."""
    return pd.DataFrame(
        [
            {
                "part": s.stage,
                "layers": layers_text(s.layers),
                "forward (s)": s.forward_s,
                "backward (s)": s.backward_s,
                "weight grad (s)": s.weight_s,
                "cycle (s)": s.cycle_s,
                "paces the pipeline": s is bottleneck_part(stages),
            }
            for s in stages
        ]
    )
