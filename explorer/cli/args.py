"""Argument groups shared by subcommands (MODEL, CLUSTER, LAYOUT, WORKLOAD, SERVING)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from explorer.specs import (
    PRECISIONS,
    RECOMPUTES,
    SCHEDULES,
    ClusterSpec,
    Layout,
    ModelSpec,
    ServingWorkload,
    TrainingWorkload,
)

if TYPE_CHECKING:
    from explorer.probe.derive import CalibratedFigures

T = TypeVar("T")


def add_model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, help="preset id (e.g. llama-3.1-70b) or path to a config.json"
    )


def model_from(args: argparse.Namespace) -> ModelSpec:
    from explorer.presets import load_model

    return load_model(args.model)


def add_cluster(parser: argparse.ArgumentParser, *, gpus: bool = False) -> None:
    group = parser.add_argument_group("cluster")
    group.add_argument("--gpu", required=True, help="GPU preset id (e.g. h100-sxm)")
    group.add_argument("--gpus-per-node", type=int, default=8)
    group.add_argument("--intra-node-GBps", type=float, help="GB/s per GPU, one direction")
    group.add_argument("--inter-node-GBps", type=float, help="GB/s per GPU, one direction")
    group.add_argument(
        "--scale-up-domain",
        type=int,
        help="GPUs sharing the fast links (default: the node, or the GPU's rack-scale domain "
        "when it spans nodes, e.g. 72 for GB200 NVL72)",
    )
    if gpus:
        group.add_argument("--gpus", type=int, required=True, help="GPUs in the cluster")


def cluster_from(args: argparse.Namespace, world_size: int) -> ClusterSpec:
    """The cluster of ``world_size`` GPUs (rounded up to whole nodes) described by the flags."""
    from explorer.presets import load_gpu

    gpu = load_gpu(args.gpu)
    per_node = args.gpus_per_node
    if per_node <= 0:
        raise ValueError(f"--gpus-per-node must be positive, got {per_node}")
    if world_size <= 0:
        raise ValueError(f"the number of GPUs must be positive, got {world_size}")
    extra = {}
    if args.intra_node_GBps is not None:
        extra["scale_up_bytes_per_s"] = args.intra_node_GBps * 1e9
    if args.inter_node_GBps is not None:
        extra["scale_out_bytes_per_s"] = args.inter_node_GBps * 1e9
    num_nodes = max(1, -(-world_size // per_node))
    return ClusterSpec(
        gpu=gpu,
        gpus_per_node=per_node,
        num_nodes=num_nodes,
        scale_up_domain_size=scale_up_domain(
            args.scale_up_domain, gpu.scale_up_domain_size, per_node
        ),
        **extra,
    )


def scale_up_domain(requested: int | None, gpu_domain: int, gpus_per_node: int) -> int:
    """GPUs on the fast links: as asked, else the GPU's domain when it spans several nodes
    (an NVL72 rack of 4-GPU trays), else one node."""
    if requested is not None:
        if requested <= 0:
            raise ValueError(f"--scale-up-domain must be positive, got {requested}")
        return requested
    return gpu_domain if gpu_domain > gpus_per_node else gpus_per_node


def add_layout(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    group = parser.add_argument_group("layout")
    group.add_argument("--tp", type=int, required=required, default=None if required else 1)
    group.add_argument("--pp", type=int, required=required, default=None if required else 1)
    group.add_argument("--dp", type=int, required=required, default=None if required else 1)
    group.add_argument("--cp", type=int, default=1)
    group.add_argument("--ep", type=int, default=1)
    group.add_argument("--etp", type=int, default=1)
    group.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0)
    group.add_argument("--schedule", choices=SCHEDULES, default="1f1b")
    group.add_argument("--virtual", type=int, default=1, help="virtual stages per rank")
    group.add_argument("--recompute", choices=RECOMPUTES, default="none")
    group.add_argument("--sequence-parallel", choices=("on", "off"), default="on")


def layout_from(args: argparse.Namespace) -> Layout:
    schedule = args.schedule
    if args.virtual > 1 and schedule == "1f1b":
        schedule = "interleaved"  # --virtual V with the default schedule means interleaved 1F1B
    return Layout(
        dp=args.dp,
        tp=args.tp,
        pp=args.pp,
        cp=args.cp,
        ep=args.ep,
        etp=args.etp,
        zero=args.zero,
        schedule=schedule,
        virtual_stages=args.virtual,
        recompute=args.recompute,
        sequence_parallel=args.sequence_parallel == "on",
        micro_batch_size=args.mbs,
    )


def add_workload(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("workload")
    group.add_argument("--seq", type=int, required=True, help="tokens per sequence")
    group.add_argument("--mbs", type=int, default=1, help="sequences per micro-batch")
    group.add_argument("--gbs", type=int, required=True, help="sequences per step")
    group.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed")
    group.add_argument("--grad-dtype", choices=("fp32", "bf16"), default=None)


def workload_from(args: argparse.Namespace) -> TrainingWorkload:
    return TrainingWorkload(
        seq_len=args.seq,
        global_batch_size=args.gbs,
        precision=args.precision,
        grad_dtype=args.grad_dtype,
    )


def add_serving(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("serving")
    group.add_argument("--prompt-len", type=int, required=True)
    group.add_argument("--output-len", type=int, required=True)
    group.add_argument("--concurrency", type=int, required=True)
    group.add_argument("--weights-dtype", choices=("bf16", "fp8", "int8", "int4"), default="bf16")
    group.add_argument("--kv-dtype", choices=("bf16", "fp8"), default="bf16")


def serving_from(args: argparse.Namespace) -> ServingWorkload:
    return ServingWorkload(
        prompt_len=args.prompt_len,
        output_len=args.output_len,
        concurrency=args.concurrency,
        weights_dtype=args.weights_dtype,
        kv_dtype=args.kv_dtype,
    )


ASSUME_HELP = (
    "set a named assumption, as the app and the report name it (repeatable), e.g. "
    "comm.ep_domain_dedup=true, memory.moe_imbalance=1.0, compute.comm_sm_share=0.15, "
    "pipeline_model=simulate; the report's assumptions table lists every key"
)


def add_assume(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, help: str = ASSUME_HELP
) -> None:
    parser.add_argument("--assume", action="append", default=[], metavar="KEY=VALUE", help=help)


def overrides_from(args: argparse.Namespace, base: object, prefix: str = "") -> dict[str, object]:
    """The ``--assume`` pairs as overrides of ``base``, keys named with ``prefix``
    (ValueError: one sentence)."""
    from explorer.report.assumptions import parse_override

    return dict(parse_override(base, text, prefix) for text in args.assume)


def assumed(
    args: argparse.Namespace, base: T, prefix: str = "", calibrated: Mapping[str, Any] = {}
) -> T:
    """``base`` (estimate or serving assumptions) with the ``calibrated`` overrides (from a
    ``--calibration`` file) and then the ``--assume`` overrides (which win) applied."""
    from explorer.report.assumptions import with_overrides

    overrides = {**calibrated, **overrides_from(args, base, prefix)}
    return with_overrides(base, overrides, prefix)


CALIBRATION_HELP = (
    "a file written by python -m explorer probe on your GPUs: its measured GEMM, attention, "
    "HBM and bus bandwidths set the named assumptions they measure (--assume still wins)"
)


def add_calibration(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--calibration", metavar="FILE.toml", help=CALIBRATION_HELP)
    parser.add_argument(
        "--calibration-force",
        action="store_true",
        help="use the calibration file even when it was measured on another device than --gpu",
    )


def calibration_from(
    args: argparse.Namespace, cluster: ClusterSpec, compute: str | None = None
) -> CalibratedFigures | None:
    """The figures ``--calibration`` sets for training (GEMMs in ``compute``: bf16, fp8, tf32)
    or, when ``compute`` is None, for serving; None without the flag. CalibrationError (a
    ValueError, one sentence) for a malformed or foreign file."""
    from explorer.probe.derive import check_device, serving_figures, training_figures
    from explorer.probe.schema import load_calibration

    if not getattr(args, "calibration", None):
        return None
    calibration = load_calibration(args.calibration)
    check_device(calibration, args.gpu, cluster.gpu.name, args.calibration_force)
    if compute is None:
        return serving_figures(calibration, cluster)
    return training_figures(calibration, cluster, compute)


def calibration_json(args: argparse.Namespace, figures: CalibratedFigures | None) -> dict | None:
    """The output's ``calibration`` key: the file, its device, each figure it set and why."""
    if figures is None:
        return None
    return {
        "file": str(args.calibration),
        "device_name": figures.device_name,
        "figures": [dataclasses.asdict(f) for f in figures.figures],
        "notes": list(figures.notes),
    }


def calibration_lines(result: dict) -> list[str]:
    """Text lines naming each figure the calibration file set (empty without one)."""
    calibration = result.get("calibration")
    if not calibration:
        return []
    lines = [f"  calibration from {calibration['file']} ({calibration['device_name']}):"]
    lines += [
        f"    {f['key']} = {f['value']:.4g}: {f['measurement']}" for f in calibration["figures"]
    ]
    return lines + [f"    note: {note}" for note in calibration["notes"]]


def add_space(group: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """What the mesh search may choose (``explorer.mesh.SearchSpace``'s shared fields)."""
    group.add_argument("--zero-stages", type=int, nargs="+", choices=(0, 1, 2, 3))
    group.add_argument("--mbs-values", type=int, nargs="+", help="micro-batch sizes to try")
    group.add_argument("--recomputes", nargs="+", choices=RECOMPUTES)
    group.add_argument("--schedules", nargs="+", choices=SCHEDULES)
    group.add_argument("--max-virtual", type=int, help="most interleaved virtual stages")
    group.add_argument(
        "--tp-across-nodes", action="store_true", help="allow TP beyond the scale-up domain"
    )


def space_choices(args: argparse.Namespace) -> dict[str, Any]:
    """The ``add_space`` flags given, as ``SearchSpace`` fields (tuples)."""
    chosen = {
        "zero_stages": args.zero_stages,
        "micro_batch_sizes": args.mbs_values,
        "recomputes": args.recomputes,
        "schedules": args.schedules,
        "max_virtual": args.max_virtual,
    }
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in chosen.items() if v is not None}
    return {**given, "tp_across_domain": args.tp_across_nodes}
