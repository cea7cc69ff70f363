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
    whole,
)
from explorer.cli.cost_args import add_cost, cost_from, train_tokens_from
from explorer.cost import point_cost, price_of
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
from explorer.limits import limit
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
    group.add_argument("--seq", type=whole("seq_len"), required=True, help="tokens per sequence")
    group.add_argument(
        "--gbs",
        type=whole("global_batch_size"),
        required=True,
        help="sequences per step (at the smallest count)",
    )
    group.add_argument(
        "--mbs", type=whole("micro_batch_size"), default=1, help="sequences per micro-batch"
    )
    group.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed")
    group.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=1)
    group.add_argument(
        "--recompute", choices=RECOMPUTES, nargs="+", default=list(RECOMPUTES), help="tried"
    )
    assumptions = parser.add_argument_group("assumptions")
    add_assume(assumptions)
    add_calibration(assumptions)
    add_cost(parser)


def counts_from(text: str) -> list[int]:
    """GPU counts from "64,128,256", each at most the GPU limit, at most ``gpu_counts`` of them."""
    parts = [part for part in text.split(",") if part.strip()]
    most = int(limit("gpu_counts"))
    if len(parts) > most:
        raise ValueError(f"--gpu-counts takes at most {most} counts, got {len(parts)}")
    parse = whole("world_size")
    try:
        counts = [parse(part) for part in parts]
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"--gpu-counts: each count {error}") from None
    if not counts:
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
    price, price_source = price_of(cluster.gpu, cost_from(args))
    train_tokens = train_tokens_from(args, workload.tokens_per_step)
    points = [
        {**row, **point_cost(p.num_gpus, _rate(row), price, train_tokens)}
        for p, row in zip(sweep.points, sweep.rows(), strict=True)
    ]
    return {
        "kind": sweep.kind,
        "model": sweep.model,
        "gpu": cluster.gpu.name,
        "baseline_gpus": sweep.baseline_gpus,
        "denominator": sweep.denominator,
        "points": points,
        "price_per_gpu_hour": price,
        "price_source": price_source,
        "train_tokens": train_tokens,
        "calibration": calibration_json(args, figures),
    }


def _rate(row: dict[str, object]) -> float | None:
    rate = row["tokens_per_s"]
    return rate if isinstance(rate, float) else None


def _cost_text(point: dict) -> str:
    parts = []
    if point.get("cost_per_million_tokens_usd") is not None:
        parts.append(f"${point['cost_per_million_tokens_usd']:.4f}/M tokens")
    if point.get("train_days") is not None:
        parts.append(f"run {point['train_days']:.1f} days")
    if point.get("train_cost_usd") is not None:
        parts.append(f"${point['train_cost_usd']:,.0f}")
    return (", " + ", ".join(parts)) if parts else ""


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
            f"efficiency {p['efficiency']:.2f}" + _cost_text(p)
        )
    return "\n".join(lines + calibration_lines(result))
