"""``python -m explorer estimate``: training memory per GPU of one layout, per pipeline stage.

The layout's world size (DP x TP x PP x CP) defines the cluster; ``--gpus-per-node`` (and the
GPU preset's scale-up domain) decide whether TP crosses nodes.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import get_args

from explorer.cli.args import (
    add_assume,
    add_calibration,
    add_cluster,
    add_layout,
    add_model,
    add_workload,
    assumed,
    calibration_from,
    calibration_json,
    calibration_lines,
    cluster_from,
    layout_from,
    model_from,
    overrides_from,
    workload_from,
)
from explorer.cli.cost_args import add_cost, cost_lines, training_cost_json
from explorer.cli.importing import (
    LAYOUT_DESTS,
    WORKLOAD_DESTS,
    add_import,
    apply_import,
    imported_lines,
    imported_result,
)
from explorer.cli.measured_args import add_measured, measured_from, measured_lines
from explorer.estimate import EstimateAssumptions, estimate, estimate_dict
from explorer.hetero import HELD_TO_MEMORY, hetero_dict, hetero_dp, hetero_pp, parse_groups
from explorer.memory import (
    DEFAULT_TRAINING_ASSUMPTIONS,
    ActivationRecipe,
    TrainingAssumptions,
    TrainingMemory,
    parallel_axes_in_words,
)
from explorer.memory.training import StageMemory
from explorer.precision import precision_policy
from explorer.presets import load_cluster
from explorer.specs import MESH_ORDER, Layout, ModelSpec, TrainingWorkload
from explorer.straggler import STRAGGLER_WHERE, Straggler, straggler_cost, straggler_dict
from explorer.units import GiB

NAME = "estimate"
HELP = "training memory per GPU and step time of one layout, by category and pipeline stage"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    add_cluster(parser)
    add_layout(parser)
    add_workload(parser)
    add_straggler(parser)
    add_mixed(parser)
    group = parser.add_argument_group("assumptions")
    group.add_argument(
        "--attention",
        choices=("flash", "classic"),
        default="flash",
        help="flash keeps no s x s scores; classic keeps softmax (and dropout) tensors",
    )
    group.add_argument("--dropout", action="store_true", help="dropout masks (GPT setting)")
    group.add_argument(
        "--activation-recipe",
        choices=get_args(ActivationRecipe),
        default=DEFAULT_TRAINING_ASSUMPTIONS.activation_recipe,
        help="deepseek-v3: recompute norms and MLA up-projections, cache linear inputs in FP8 "
        "and the MoE SwiGLU input (DeepSeek-V3 report sec. 3.2.3, 3.3.3)",
    )
    group.add_argument(
        "--headroom",
        type=float,
        default=DEFAULT_TRAINING_ASSUMPTIONS.headroom_fraction * 100,
        help="percent of GPU memory kept free for the allocator (default 5)",
    )
    add_assume(group)
    add_calibration(group)
    add_import(parser, LAYOUT_DESTS + WORKLOAD_DESTS[:-1])  # estimate takes no --gpus
    add_cost(parser)
    add_measured(parser)


def add_straggler(parser: argparse.ArgumentParser) -> None:
    """``--straggler-*``: one slow replica, pipeline rank or link (explorer.straggler)."""
    group = parser.add_argument_group("straggler")
    group.add_argument(
        "--straggler-slowdown",
        type=float,
        default=None,
        help="extra time of the slow part as a fraction (0.1 = 10%% slower)",
    )
    group.add_argument(
        "--straggler-where",
        choices=STRAGGLER_WHERE,
        default="dp",
        help="dp: one data-parallel replica; pp-stage: one pipeline rank; "
        "link: the links of one pipeline rank's group on --straggler-axis",
    )
    group.add_argument(
        "--straggler-stage",
        type=int,
        default=0,
        help="pipeline rank of the slow GPUs or link, 0-based",
    )
    group.add_argument("--straggler-axis", choices=MESH_ORDER, default="dp",
                       help="mesh axis whose collectives cross the slow link")  # fmt: skip


def add_mixed_groups(group: argparse._ArgumentGroup, groups_help: str) -> None:
    """``--mixed-groups`` and ``--mixed-split``, shared by estimate, search and report."""
    group.add_argument("--mixed-groups", default=None, metavar="PRESET:NODES,...", help=groups_help)
    group.add_argument(
        "--mixed-split",
        choices=("even", "speed"),
        default="even",
        help="data-parallel batch split over the types: even, or by speed",
    )


def add_mixed(parser: argparse.ArgumentParser) -> None:
    """``--mixed-*``: a cluster of several GPU types (explorer.hetero)."""
    group = parser.add_argument_group("mixed cluster")
    add_mixed_groups(group, "cluster presets and node counts, e.g. hgx-h100:4,dgx-a100:4")
    group.add_argument(
        "--mixed-placement",
        default=None,
        metavar="G,G,...",
        help="group index of each pipeline rank: a pipeline across types",
    )


def mixed_from(
    args: argparse.Namespace,
    model: ModelSpec,
    layout: Layout,
    workload: TrainingWorkload,
    assumptions: EstimateAssumptions,
) -> dict | None:
    """The mixed step the flags describe, as JSON; None without ``--mixed-groups``."""
    if getattr(args, "mixed_groups", None) is None:
        return None
    groups = tuple(load_cluster(name, nodes) for name, nodes in parse_groups(args.mixed_groups))
    if args.mixed_placement is None:
        step = hetero_dp(model, groups, layout, workload, args.mixed_split, assumptions)
        return hetero_dict(step, "dp", args.mixed_split)
    words = args.mixed_placement.split(",")
    if not all(w.strip().isdigit() for w in words):
        raise ValueError(
            f"--mixed-placement is group indices separated by commas, got {args.mixed_placement!r}"
        )
    placement = tuple(int(w) for w in words)
    step = hetero_pp(model, groups, placement, layout, workload, assumptions)
    return hetero_dict(step, "pp", "layers by speed")


def straggler_from(args: argparse.Namespace) -> Straggler | None:
    """The straggler the flags describe; None without ``--straggler-slowdown``."""
    if getattr(args, "straggler_slowdown", None) is None:
        return None
    return Straggler(
        slowdown=args.straggler_slowdown, where=args.straggler_where,
        stage=args.straggler_stage, axis=args.straggler_axis,
    )  # fmt: skip


def assumptions_from(args: argparse.Namespace) -> TrainingAssumptions:
    if not 0 <= args.headroom < 100:
        raise ValueError(f"--headroom must be a percentage in [0, 100), got {args.headroom}")
    return dataclasses.replace(
        DEFAULT_TRAINING_ASSUMPTIONS,
        flash_attention=args.attention == "flash",
        dropout=args.dropout,
        headroom_fraction=args.headroom / 100,
        activation_recipe=args.activation_recipe,
    )


def _stage_json(stage: StageMemory) -> dict[str, object]:
    return {
        "stage": stage.stage,
        "total_bytes": stage.total_bytes,
        "bytes": stage.breakdown.as_dict(),
        "layers": list(stage.layers),
        "num_params": stage.num_params,
        "microbatches_in_flight": stage.microbatches_in_flight,
        "activation_parts": dataclasses.asdict(stage.activation_parts),
        "temporary_parts": dict(stage.temporary_parts),
        "communication_parts": dict(stage.communication_parts),
    }


def memory_json(result: TrainingMemory) -> dict[str, object]:
    """The contract's ``estimate`` keys (docs/ARCHITECTURE.md) for a training memory result."""
    return {
        "gpu_bytes": result.gpu_bytes,
        "peak_bytes": result.peak_bytes,
        "fits": result.fits,
        "peak_stage": result.peak_stage,
        "stages": [_stage_json(s) for s in result.stages],
        "warnings": list(result.warnings),
        "assumptions": {**result.assumptions.as_dict(), "notes": list(result.notes)},
    }


def run(args: argparse.Namespace) -> dict:
    apply_import(args)
    model, layout, workload = model_from(args), layout_from(args), workload_from(args)
    cluster = cluster_from(args, layout.world_size)
    compute = precision_policy(workload.precision, workload.grad_dtype).compute
    figures = calibration_from(args, cluster, compute)
    calibrated = figures.overrides() if figures else {}
    base = EstimateAssumptions(memory=assumptions_from(args))
    assumptions = assumed(args, base, calibrated=calibrated)
    step = estimate(model, cluster, layout, workload, assumptions)
    step, measured = measured_from(
        args, step, lambda a: estimate(model, cluster, layout, workload, a)
    )
    assumptions = step.assumptions  # with the correction, when one is applied
    result = step.memory  # training_memory, as estimate computes it
    timing = estimate_dict(step)
    straggler = straggler_from(args)
    slow = None
    if straggler is not None:
        slow = straggler_cost(model, cluster, layout, workload, straggler, assumptions)
    mixed = mixed_from(args, model, layout, workload, assumptions)
    return {
        "model": model.name,
        "gpu": cluster.gpu.name,
        "world_size": layout.world_size,
        **memory_json(result),
        "parallel_axes": list(parallel_axes_in_words(model, layout, workload)),
        **{k: v for k, v in timing.items() if k != "warnings"},
        "comm_warnings": [w for w in step.warnings if w not in result.warnings],
        "assumed": overrides_from(args, assumptions),
        "calibration": calibration_json(args, figures),
        "imported": imported_result(args),
        "cost": training_cost_json(
            args,
            tokens_per_s=step.tokens_per_s,
            tokens_per_step=workload.tokens_per_step,
            num_gpus=layout.world_size,
            gpu=cluster.gpu,
        ),
        **({"straggler": straggler_dict(slow)} if slow else {}),
        **({"mixed": mixed} if mixed else {}),
        **({"measured": measured} if measured else {}),
    }


def render(result: dict) -> str:
    fits = "fits" if result["fits"] else "does NOT fit"
    lines = [
        f"{result['model']} on {result['world_size']} x {result['gpu']}: peak "
        f"{result['peak_bytes'] / GiB:.2f} GiB on stage {result['peak_stage']} of "
        f"{result['gpu_bytes'] / GiB:.2f} GiB ({fits}); GiB = 2^30 bytes"
    ]
    for stage in result["stages"]:
        parts = ", ".join(f"{k} {v / GiB:.2f}" for k, v in stage["bytes"].items() if v)
        lines.append(
            f"  stage {stage['stage']:>2} ({len(stage['layers'])} layers): "
            f"{stage['total_bytes'] / GiB:.2f} GiB = {parts}"
        )
    peak = result["stages"][result["peak_stage"]]
    for kind in ("activation_parts", "temporary_parts", "communication_parts"):
        parts = ", ".join(f"{k} {v / GiB:.3f}" for k, v in peak[kind].items() if v)
        lines.append(f"  peak stage {kind.replace('_', ' ')} (GiB): {parts or 'none'}")
    lines += [f"  axis: {line}" for line in result["parallel_axes"]]
    lines += [f"  note: {line}" for line in result["assumptions"]["notes"]]
    lines += [f"  warning: {w}" for w in result["warnings"]]
    lines += _step_lines(result)
    if result.get("assumed"):
        lines.append("  assumed: " + ", ".join(f"{k}={v}" for k, v in result["assumed"].items()))
    lines += calibration_lines(result)
    lines += cost_lines(result.get("cost"))
    lines += _straggler_lines(result.get("straggler"))
    lines += _mixed_lines(result.get("mixed"))
    lines += measured_lines(result.get("measured"))
    return "\n".join(lines + imported_lines(result))


def _straggler_lines(found: dict | None) -> list[str]:
    """The straggler's step and the mitigations, fastest first (seconds)."""
    if not found:
        return []
    where = found["where"] + ("" if found["where"] == "dp" else f" {found['stage']}")
    lines = [
        f"  straggler {found['slowdown']:.0%} slower ({where}): step {found['step_time_s']:.3f} s"
        f" (+{found['cost_fraction']:.1%})"
    ]
    lines += [
        f"    {m['name']}: {m['step_time_s']:.3f} s, {m['detail']}" for m in found["mitigations"]
    ]
    return lines


def _step_lines(result: dict) -> list[str]:
    """Step time, throughput and exposed communication (SI seconds, TFLOP/s = 1e12 FLOP/s)."""
    exposed = ", ".join(f"{k} {v:.3f} s" for k, v in result["exposed_comm_s"].items() if v)
    return [
        f"  step {result['step_time_s']:.3f} s, {result['tokens_per_s']:,.0f} tokens/s "
        f"({result['tokens_per_s_per_gpu']:,.0f} per GPU), "
        f"{result['model_flops_per_s_per_gpu'] / 1e12:.1f} model TFLOP/s per GPU, "
        f"MFU {result['mfu']:.1%}, HFU {result['hfu']:.1%}",
        f"  pipeline bubble {result['bubble_fraction']:.1%} of {result['pipeline_s']:.3f} s "
        f"({result['pipeline_method']}), {result['microbatches']} micro-batches",
        f"  exposed communication per step: {exposed or 'none'}",
        *[f"  warning: {w}" for w in result["comm_warnings"]],
    ]


def _mixed_lines(found: dict | None) -> list[str]:
    """The mixed cluster's step and each GPU type's share (seconds, GiB = 2^30 bytes)."""
    if not found:
        return []
    layers = f", layers per rank {found['stage_layers']}" if found["stage_layers"] else ""
    if found.get("memory_held"):
        layers += f" ({HELD_TO_MEMORY})"
    lines = [
        f"  mixed cluster ({found['mode']}, {found['split']}): step "
        f"{found['step_time_s']:.3f} s{layers}" + ("" if found["fits"] else " (does NOT fit)")
    ]
    lines += [
        f"    {t['gpu']}: {t['replicas']} x, {t['microbatches']} micro-batches, "
        f"{t['step_time_s']:.3f} s, peak {t['peak_bytes'] / GiB:.2f} GiB"
        + ("" if t["fits"] else " (does NOT fit)")
        for t in found["types"]
    ]
    return lines
