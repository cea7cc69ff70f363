"""Argument groups shared by subcommands (MODEL, CLUSTER, LAYOUT, WORKLOAD, SERVING).

Every number a flag takes is parsed by ``count`` or ``number``, which hold it to the limits of
``explorer.limits`` (the same as the app's and the URL's), so a bad value stops at the flag with
one sentence naming it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from explorer.limits import MAX_ASSUMPTION, limit, shown
from explorer.specs import (
    OFFLOAD_MODULES,
    PRECISIONS,
    RECOMPUTE_MODULES,
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


def whole(name: str, least: int = 1) -> Callable[[str], int]:
    """An argparse type: a whole number from ``least`` to the limit of field ``name``."""

    def parse(text: str) -> int:
        digits = text.strip().lstrip("+-")
        try:
            value = int(text)
        except ValueError:
            if digits.isdigit() and not text.strip().startswith("-"):  # over 4,300 digits
                value = 10 ** len(digits)
            else:
                raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        if value > limit(name):
            raise argparse.ArgumentTypeError(
                f"must be at most {shown(limit(name))} (this tool's limit), got {shown(value)}"
            )
        return value

    return parse


def number(most: float, least: float = 0.0, *, above: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from ``least`` (excluded when ``above``) to ``most``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        low = value > least if above else value >= least
        if not (math.isfinite(value) and low and value <= most):
            span = (
                f"greater than {shown(least)} and at most {shown(most)}"
                if above
                else f"from {shown(least)} to {shown(most)}"
            )
            raise argparse.ArgumentTypeError(f"must be a finite number {span}, got {text}")
        return value

    return parse


GBPS = number(limit("scale_up_bytes_per_s") / 1e9, above=True)
"""A link bandwidth in GB/s (1e9 bytes/s)."""


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
    group.add_argument("--gpus-per-node", type=whole("gpus_per_node"), default=8)
    group.add_argument("--intra-node-GBps", type=GBPS, help="GB/s per GPU, one direction")
    group.add_argument("--inter-node-GBps", type=GBPS, help="GB/s per GPU, one direction")
    group.add_argument(
        "--scale-up-domain",
        type=whole("scale_up_domain_size"),
        help="GPUs sharing the fast links (default: the node, or the GPU's rack-scale domain "
        "when it spans nodes, e.g. 72 for GB200 NVL72)",
    )
    if gpus:
        group.add_argument(
            "--gpus", type=whole("world_size"), required=True, help="GPUs in the cluster"
        )


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
    for axis in ("tp", "pp", "dp"):
        default = None if required else 1
        group.add_argument(f"--{axis}", type=whole(axis), required=required, default=default)
    for axis in ("cp", "ep", "etp"):
        group.add_argument(f"--{axis}", type=whole(axis), default=1)
    group.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0)
    group.add_argument("--schedule", choices=SCHEDULES, default="1f1b")
    group.add_argument(
        "--virtual", type=whole("virtual_stages"), default=1, help="virtual stages per rank"
    )
    group.add_argument("--recompute", choices=RECOMPUTES, default="none")
    group.add_argument("--sequence-parallel", choices=("on", "off"), default="on")
    add_recipes(parser)


def add_recipes(parser: argparse.ArgumentParser) -> None:
    """Memory recipes as Megatron-LM and torchtitan spell them (explorer.specs.Layout)."""
    group = parser.add_argument_group("memory recipes")
    group.add_argument(
        "--recompute-modules",
        nargs="+",
        choices=RECOMPUTE_MODULES,
        default=["core_attn"],
        help="selective: Megatron --recompute-modules",
    )
    group.add_argument(
        "--recompute-ops", action="store_true", help="selective: torchtitan op-level SAC"
    )
    group.add_argument("--recompute-method", choices=("uniform", "block"), default="uniform")
    group.add_argument("--recompute-num-layers", type=int, default=None)
    group.add_argument(
        "--recompute-every",
        type=int,
        default=1,
        help="full recompute of every n-th block (torchtitan selective_ac_option)",
    )
    group.add_argument("--first-stage-layers", type=int, default=None)
    group.add_argument("--last-stage-layers", type=int, default=None)
    group.add_argument(
        "--pipeline-layout",
        default=None,
        help='Megatron --pipeline-model-parallel-layout, e.g. "Et*3|(tt|)*29,m|L"',
    )
    group.add_argument(
        "--offload-modules",
        nargs="+",
        choices=OFFLOAD_MODULES,
        default=[],
        help="Megatron fine-grained activation offloading",
    )
    group.add_argument(
        "--offload-layers",
        type=int,
        default=0,
        help="Megatron --cpu-offloading-num-layers: blocks offloaded whole",
    )
    group.add_argument("--optimizer-offload-fraction", type=float, default=0.0)
    group.add_argument(
        "--no-reshard-after-forward",
        action="store_true",
        help="ZeRO-3: keep gathered weights from forward to backward (FSDP2)",
    )
    group.add_argument("--dp-shard", type=int, default=None,
                       help="HSDP: data-parallel ranks per shard group")  # fmt: skip


def recipes_from(args: argparse.Namespace) -> dict[str, object]:
    """The Layout fields of ``add_recipes``' flags."""
    return {
        "recompute_modules": tuple(args.recompute_modules),
        "recompute_ops": args.recompute_ops,
        "recompute_method": args.recompute_method,
        "recompute_num_layers": args.recompute_num_layers,
        "recompute_every": args.recompute_every,
        "first_stage_layers": args.first_stage_layers,
        "last_stage_layers": args.last_stage_layers,
        "pipeline_layout": args.pipeline_layout,
        "activation_offload": tuple(args.offload_modules),
        "offload_layers": args.offload_layers,
        "optimizer_offload_fraction": args.optimizer_offload_fraction,
        "reshard_after_forward": not args.no_reshard_after_forward,
        "dp_shard": args.dp_shard,
    }


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
        stage_layers=getattr(args, "stage_layers", None),  # from --from-megatron/torchtitan
        **recipes_from(args),  # type: ignore[arg-type]
    )


def add_workload(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("workload")
    group.add_argument("--seq", type=whole("seq_len"), required=True, help="tokens per sequence")
    group.add_argument(
        "--mbs", type=whole("micro_batch_size"), default=1, help="sequences per micro-batch"
    )
    group.add_argument(
        "--gbs", type=whole("global_batch_size"), required=True, help="sequences per step"
    )
    group.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed")
    group.add_argument("--grad-dtype", choices=("fp32", "bf16"), default=None)
    for end in ("start", "end"):
        group.add_argument(
            f"--bf16-layers-at-{end}", type=int, default=None, metavar="N",
            help=f"blocks at the {end} of the model kept in BF16 under fp8-mixed / nvfp4-mixed "
            "(Megatron-Core first_last_layers_bf16)",
        )  # fmt: skip


def workload_from(args: argparse.Namespace) -> TrainingWorkload:
    return TrainingWorkload(
        seq_len=args.seq,
        global_batch_size=args.gbs,
        precision=args.precision,
        grad_dtype=args.grad_dtype,
        bf16_layers_at_start=getattr(args, "bf16_layers_at_start", None) or 0,
        bf16_layers_at_end=getattr(args, "bf16_layers_at_end", None) or 0,
    )


def add_serving(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("serving")
    group.add_argument("--prompt-len", type=whole("prompt_len"), required=True)
    group.add_argument("--output-len", type=whole("output_len"), required=True)
    group.add_argument("--concurrency", type=whole("concurrency"), required=True)
    group.add_argument(
        "--weights-dtype",
        choices=("bf16", "fp8", "int8", "int4", "nvfp4", "mxfp4"),
        default="bf16",
    )
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

    pairs = dict(parse_override(base, text, prefix) for text in args.assume)
    for key, value in pairs.items():
        if isinstance(value, float) and not abs(value) <= MAX_ASSUMPTION:  # inf, NaN, 1e308
            raise ValueError(
                f"--assume {key} must be a finite number of at most {MAX_ASSUMPTION:g} in "
                f"magnitude, got {value}"
            )
    return pairs


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
    group.add_argument(
        "--mbs-values", type=whole("micro_batch_size"), nargs="+", help="micro-batch sizes to try"
    )
    group.add_argument("--recomputes", nargs="+", choices=RECOMPUTES)
    group.add_argument("--schedules", nargs="+", choices=SCHEDULES)
    group.add_argument(
        "--max-virtual", type=whole("max_virtual"), help="most interleaved virtual stages"
    )
    group.add_argument(
        "--tp-across-nodes", action="store_true", help="allow TP beyond the scale-up domain"
    )


def space_choices(args: argparse.Namespace) -> dict[str, Any]:
    """The ``add_space`` flags given, as ``SearchSpace`` fields (tuples)."""
    chosen = {
        "zero_stages": few(args.zero_stages, "--zero-stages"),
        "micro_batch_sizes": few(args.mbs_values, "--mbs-values"),
        "recomputes": few(args.recomputes, "--recomputes"),
        "schedules": few(args.schedules, "--schedules"),
        "max_virtual": args.max_virtual,
    }
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in chosen.items() if v is not None}
    return {**given, "tp_across_domain": args.tp_across_nodes}


def few(values: list[T] | None, flag: str) -> list[T] | None:
    """``values`` given to ``flag``, at most the limit of search values (ValueError)."""
    most = int(limit("search_values"))
    if values is not None and len(values) > most:
        raise ValueError(f"{flag} takes at most {most} values, got {len(values)}")
    return values
