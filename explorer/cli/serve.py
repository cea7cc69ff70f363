"""``python -m explorer serve``: serving layouts of a model on N GPUs: fit, latency, throughput."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping

from explorer.cli.args import (
    add_assume,
    add_calibration,
    add_cluster,
    add_model,
    add_serving,
    assumed,
    calibration_from,
    calibration_json,
    calibration_lines,
    cluster_from,
    model_from,
    serving_from,
)
from explorer.cli.cost_args import add_cost, cost_from
from explorer.cost import serving_cost
from explorer.memory.serving import MemoryAssumptions, ServingLayout
from explorer.report.assumptions import SERVING_PREFIX
from explorer.serving import (
    LEAVES_OUT,
    Roofline,
    ServingAssumptions,
    ServingEstimate,
    plan_serving,
    serving_answers,
)
from explorer.specs import GpuSpec
from explorer.units import GiB

NAME = "serve"
HELP = "serving layouts on N GPUs: memory fit, max concurrency, TTFT, ITL, tokens/s, frontier"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    add_cluster(parser, gpus=True)
    add_serving(parser)
    group = parser.add_argument_group("assumptions")
    group.add_argument(
        "--gpu-memory-utilization", type=float, default=0.9, help="vLLM's fraction (0.9)"
    )
    group.add_argument(
        "--allow-tp-across-nodes",
        action="store_true",
        help="accept TP groups larger than a node (warned) instead of rejecting them",
    )
    add_assume(
        group,
        "set a named serving assumption as the app names it (repeatable), e.g. "
        "serving.hbm_efficiency=0.7",
    )
    add_calibration(group)
    add_cost(parser, training=False)
    parser.add_argument(
        "--target-rps",
        type=float,
        help="requests per second to serve: replicas and GPUs needed per layout",
    )


def assumptions_from(
    args: argparse.Namespace, calibrated: Mapping[str, float] = {}
) -> ServingAssumptions:
    memory = MemoryAssumptions(gpu_memory_utilization=args.gpu_memory_utilization)
    base = ServingAssumptions(memory=memory, allow_tp_across_nodes=args.allow_tp_across_nodes)
    return assumed(args, base, SERVING_PREFIX, calibrated=calibrated)


def _layout_json(layout: ServingLayout) -> dict[str, int]:
    return {"tp": layout.tp, "pp": layout.pp, "ep": layout.ep, "replicas": layout.replicas}


def _roofline_json(r: Roofline) -> dict[str, object]:
    return {
        "compute_s": r.compute_s,
        "memory_s": r.memory_s,
        "communication_s": r.communication_s,
        "total_s": r.total_s,
        "bound": r.bound,
    }


def estimate_json(e: ServingEstimate) -> dict[str, object]:
    """One layout as the contract's JSON object (DESIGN.md, ``serve``)."""
    out: dict[str, object] = {
        **_layout_json(e.layout),
        "label": e.layout.label,
        "gpus_per_replica": e.layout.gpus_per_replica,
        "concurrency": e.concurrency,
        "weights_bytes": e.memory.weights,
        "kv_bytes_per_token": e.kv_bytes_per_token,
        "kv_bytes_per_token_per_gpu": e.kv_bytes_per_token_per_gpu,
        "max_concurrency": e.max_concurrency,
        "ttft_s": e.ttft_s,
        "decode_step_s": e.decode_step_s,
        "itl_s": e.itl_s,
        "tokens_per_s": e.tokens_per_s,
        "tokens_per_s_per_gpu": e.tokens_per_s_per_gpu,
        "memory_bound_tokens_per_s": e.memory_bound_tokens_per_s,
        "fits": e.fits,
        "total_bytes": e.memory.total,
        "bytes": e.memory.as_dict(),
        "prefill": _roofline_json(e.prefill),
        "decode": _roofline_json(e.decode),
        "prefill_bound": e.prefill.bound,
        "decode_bound": e.decode.bound,
        "warnings": list(e.warnings),
    }
    if not e.fits:
        out["reason"] = e.reason
    return out


def _cost_json(
    args: argparse.Namespace, e: ServingEstimate, output_len: int, gpu: GpuSpec
) -> dict[str, object] | None:
    """Cost per million output tokens at the planned load, and GPUs for --target-rps."""
    if not e.fits or e.tokens_per_s <= 0:
        return None
    return serving_cost(
        output_tokens_per_s_per_replica=e.tokens_per_s / e.layout.replicas,
        output_len=output_len,
        gpus_per_replica=e.layout.gpus_per_replica,
        gpu=gpu,
        target_requests_per_s=args.target_rps,
        assumptions=cost_from(args),
    ).as_dict()


def run(args: argparse.Namespace) -> dict[str, object]:
    model = model_from(args)
    cluster = cluster_from(args, args.gpus)
    workload = serving_from(args)
    figures = calibration_from(args, cluster)
    assumptions = assumptions_from(args, figures.overrides() if figures else {})
    plan = plan_serving(model, cluster, args.gpus, workload, assumptions)
    return {
        "model": model.name,
        "gpu": cluster.gpu.name,
        "gpu_bytes": cluster.gpu.memory_bytes,
        "num_gpus": args.gpus,
        "workload": dataclasses.asdict(workload),
        "layouts": [
            {**estimate_json(e), "cost": _cost_json(args, e, workload.output_len, cluster.gpu)}
            for e in plan.layouts
        ],
        "rejected": [{**_layout_json(lay), "reason": why} for lay, why in plan.rejected],
        "pareto": [dataclasses.asdict(p) for p in plan.pareto if p.pareto],
        "sweep": [dataclasses.asdict(p) for p in plan.pareto],
        "answers": list(serving_answers(plan)),
        "assumptions": dataclasses.asdict(assumptions),
        "leaves_out": LEAVES_OUT,
        "calibration": calibration_json(args, figures),
    }


def _row(e: dict) -> str:
    fits = "yes" if e["fits"] else "no "
    return (
        f"  {e['label']:<20} {fits}  {e['total_bytes'] / GiB:7.1f} GiB  "
        f"max {e['max_concurrency']:>6}  TTFT {e['ttft_s'] * 1e3:8.1f} ms  "
        f"ITL {e['itl_s'] * 1e3:7.2f} ms  {e['tokens_per_s']:10,.0f} tok/s  "
        f"prefill {e['prefill_bound']:<13} decode {e['decode_bound']}" + _cost_text(e.get("cost"))
    )


def _cost_text(cost: dict | None) -> str:
    if not cost:
        return ""
    text = ""
    if cost["cost_per_million_output_tokens_usd"] is not None:
        text += f"  ${cost['cost_per_million_output_tokens_usd']:.3f}/M out"
    if cost["gpus_needed"] is not None:
        text += f"  {cost['gpus_needed']} GPUs for {cost['target_requests_per_s']:g} req/s"
    return text


def render(result: dict) -> str:
    w = result["workload"]
    lines = [
        f"{result['model']} on {result['num_gpus']} x {result['gpu']}: prompt {w['prompt_len']}, "
        f"output {w['output_len']}, {w['concurrency']} sequences per replica, weights "
        f"{w['weights_dtype']}, KV {w['kv_dtype']} (GiB = 2^30 bytes, memory per GPU)",
        *(_row(e) for e in result["layouts"]),
    ]
    lines += [f"  rejected {_label(r)}: {r['reason']}" for r in result["rejected"]]
    lines += [f"- {answer}" for answer in result["answers"]]
    return "\n".join(lines + calibration_lines(result))


def _label(r: dict) -> str:
    return f"TP{r['tp']} PP{r['pp']} EP{r['ep']} x{r['replicas']}"
