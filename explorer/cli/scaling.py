"""``python -m explorer scaling``: strong or weak scaling of a model over GPU counts.

At each count the fastest fitting layout of a small family (explorer.scaling) is taken;
efficiency is tokens/s per GPU relative to the smallest count that fits, as ``denominator``
says.
"""

from __future__ import annotations

import argparse

from explorer.cli.args import (
    add_assume,
    add_calibration,
    add_cluster,
    add_model,
    assumed,
    calibration_from,
    calibration_json,
    calibration_lines,
    cluster_from,
    model_from,
)
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
from explorer.precision import precision_policy
from explorer.scaling import LayoutFamily, scaling_sweep
from explorer.specs import PRECISIONS, RECOMPUTES, TrainingWorkload

NAME = "scaling"
HELP = "strong or weak scaling over GPU counts: best layout, tokens/s and efficiency per count"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """MODEL, CLUSTER and the sweep: kind, GPU counts, workload, layout family."""
    add_model(parser)
    add_cluster(parser)
    group = parser.add_argument_group("sweep")
    group.add_argument("--kind", choices=("strong", "weak"), default="strong")
    group.add_argument(
        "--gpu-counts",
        required=True,
        help="comma-separated GPU counts, e.g. 64,128,256 (the smallest is the baseline)",
    )
    group.add_argument("--seq", type=int, required=True, help="tokens per sequence")
    group.add_argument(
        "--gbs", type=int, required=True, help="sequences per step (at the smallest count)"
    )
    group.add_argument("--mbs", type=int, default=1, help="sequences per micro-batch")
    group.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed")
    group.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=1)
    group.add_argument(
        "--recompute", choices=RECOMPUTES, nargs="+", default=list(RECOMPUTES), help="tried"
    )
    assumptions = parser.add_argument_group("assumptions")
    add_assume(assumptions)
    add_calibration(assumptions)


def counts_from(text: str) -> list[int]:
    """GPU counts from "64,128,256"."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(
            f"--gpu-counts must be integers separated by commas, got {text!r}"
        ) from None
    if not counts or min(counts) < 1:
        raise ValueError(f"--gpu-counts must be positive integers, got {text!r}")
    return counts


def run(args: argparse.Namespace) -> dict:
    """The sweep as JSON: kind, baseline, denominator and one record per GPU count."""
    model = model_from(args)
    counts = counts_from(args.gpu_counts)
    workload = TrainingWorkload(
        seq_len=args.seq, global_batch_size=args.gbs, precision=args.precision
    )
    family = LayoutFamily(
        recomputes=tuple(args.recompute), zero=args.zero, micro_batch_size=args.mbs
    )
    cluster = cluster_from(args, max(counts))
    figures = calibration_from(args, cluster, precision_policy(workload.precision).compute)
    calibrated = figures.overrides() if figures else {}
    assumptions = assumed(args, DEFAULT_ESTIMATE_ASSUMPTIONS, calibrated=calibrated)
    sweep = scaling_sweep(args.kind, model, cluster, counts, workload, family, assumptions)
    return {
        "kind": sweep.kind,
        "model": sweep.model,
        "gpu": cluster.gpu.name,
        "baseline_gpus": sweep.baseline_gpus,
        "denominator": sweep.denominator,
        "points": sweep.rows(),
        "calibration": calibration_json(args, figures),
    }


def render(result: dict) -> str:
    """One line per GPU count, the denominator stated first."""
    lines = [
        f"{result['kind']} scaling of {result['model']} on {result['gpu']}; efficiency = "
        f"{result['denominator']}"
    ]
    for p in result["points"]:
        if p["step_time_s"] is None:
            lines.append(
                f"  {p['num_gpus']:>6} GPUs, batch {p['global_batch_size']}: no layout fits"
            )
            continue
        lines.append(
            f"  {p['num_gpus']:>6} GPUs, batch {p['global_batch_size']}: tp {p['tp']} pp {p['pp']} "
            f"dp {p['dp']} ep {p['ep']} recompute {p['recompute']}: step {p['step_time_s']:.2f} s, "
            f"{p['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, MFU {p['mfu']:.1%}, "
            f"efficiency {p['efficiency']:.2f}"
        )
    return "\n".join(lines + calibration_lines(result))
