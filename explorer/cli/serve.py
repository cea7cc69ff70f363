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
from explorer.memory.serving import MemoryAssumptions, ServingLayout
from explorer.report.assumptions import SERVING_PREFIX
from explorer.serving import (
    LEAVES_OUT,
    Roofline,
    ServingAssumptions,
    ServingEstimate,
    ServingPlan,
    plan_serving,
    serving_answers,
)
from explorer.serving.scheduler import EngineLoad, LoadResult, Percentiles, serve_under_load
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
    group.add_argument(
        "--redundant-experts",
        type=int,
        default=0,
        help="extra expert copies EPLB may place per MoE block (DeepSeek: 32); EP degrees "
        "that do not divide the experts get the fewest that make them even",
    )
    load = parser.add_argument_group(
        "engine under load (simulates the best fitting layout's scheduler; explorer.serving."
        "scheduler)"
    )
    arrivals = load.add_mutually_exclusive_group()
    arrivals.add_argument("--rate", type=float, help="Poisson arrivals, requests per second")
    arrivals.add_argument("--users", type=int, help="concurrent users, closed loop")
    load.add_argument("--engine-batch", type=int, default=256, help="max_num_seqs (256)")
    load.add_argument(
        "--token-budget", type=int, default=8192, help="max_num_batched_tokens (8192)"
    )
    load.add_argument("--batching", choices=("continuous", "static"), default="continuous")
    load.add_argument("--requests", type=int, default=1000, help="requests simulated (1000)")
    load.add_argument("--seed", type=int, default=0, help="seed of the Poisson arrivals")
    add_assume(
        group,
        "set a named serving assumption as the app names it (repeatable), e.g. "
        "serving.hbm_efficiency=0.7",
    )
    add_calibration(group)


def assumptions_from(
    args: argparse.Namespace, calibrated: Mapping[str, float] = {}
) -> ServingAssumptions:
    memory = MemoryAssumptions(gpu_memory_utilization=args.gpu_memory_utilization)
    base = ServingAssumptions(
        memory=memory,
        allow_tp_across_nodes=args.allow_tp_across_nodes,
        redundant_experts=args.redundant_experts,
    )
    return assumed(args, base, SERVING_PREFIX, calibrated=calibrated)


def _layout_json(layout: ServingLayout) -> dict[str, int]:
    return {
        "tp": layout.tp,
        "pp": layout.pp,
        "ep": layout.ep,
        "replicas": layout.replicas,
        "redundant_experts": layout.redundant_experts,
    }


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


def load_from(args: argparse.Namespace) -> EngineLoad | None:
    """The engine load the flags ask for, None without --rate or --users."""
    if args.rate is None and args.users is None:
        return None
    return EngineLoad(
        rate_per_s=args.rate,
        users=args.users,
        max_batch=args.engine_batch,
        token_budget=args.token_budget,
        batching=args.batching,
        num_requests=args.requests,
        seed=args.seed,
    )


def _percentiles_json(p: Percentiles) -> dict[str, float]:
    return {"p50_s": p.p50_s, "p90_s": p.p90_s, "p99_s": p.p99_s, "mean_s": p.mean_s}


def load_json(layout: ServingLayout, load: EngineLoad, r: LoadResult) -> dict[str, object]:
    """The simulated load on one layout as JSON (seconds, tokens per second)."""
    return {
        "label": layout.label,
        "load": dataclasses.asdict(load),
        "finished": r.finished,
        "ttft": _percentiles_json(r.ttft),
        "tpot": _percentiles_json(r.tpot),
        "e2e": _percentiles_json(r.e2e),
        "tokens_per_s": r.tokens_per_s,
        "tokens_per_s_per_gpu": r.tokens_per_s / layout.world_size,
        "requests_per_s": r.requests_per_s,
        "mean_in_system": r.mean_in_system,
        "steps": r.steps,
        "preemptions": r.preemptions,
        "note": r.note,
    }


def _under_load(plan: ServingPlan, args: argparse.Namespace, run_args: tuple) -> object:
    """The simulation of the plan's best fitting layout, or a sentence why there is none."""
    load = load_from(args)
    if load is None:
        return None
    fitting = [e for e in plan.layouts if e.fits]
    if not fitting:
        return {"note": "no layout fits, so no engine runs under load"}
    best = fitting[0].layout
    model, cluster, workload, assumptions = run_args
    result = serve_under_load(model, cluster, best, workload, load, assumptions)
    return load_json(best, load, result)


def run(args: argparse.Namespace) -> dict[str, object]:
    model = model_from(args)
    cluster = cluster_from(args, args.gpus)
    workload = serving_from(args)
    figures = calibration_from(args, cluster)
    assumptions = assumptions_from(args, figures.overrides() if figures else {})
    load_from(args)  # bad load flags fail before the plan runs
    plan = plan_serving(model, cluster, args.gpus, workload, assumptions)
    return {
        "model": model.name,
        "gpu": cluster.gpu.name,
        "gpu_bytes": cluster.gpu.memory_bytes,
        "num_gpus": args.gpus,
        "workload": dataclasses.asdict(workload),
        "layouts": [estimate_json(e) for e in plan.layouts],
        "rejected": [{**_layout_json(lay), "reason": why} for lay, why in plan.rejected],
        "pareto": [dataclasses.asdict(p) for p in plan.pareto if p.pareto],
        "sweep": [dataclasses.asdict(p) for p in plan.pareto],
        "answers": list(serving_answers(plan)),
        "assumptions": dataclasses.asdict(assumptions),
        "leaves_out": LEAVES_OUT,
        "calibration": calibration_json(args, figures),
        "under_load": _under_load(plan, args, (model, cluster, workload, assumptions)),
    }


def _row(e: dict) -> str:
    fits = "yes" if e["fits"] else "no "
    if e["fits"]:  # latency only for a layout that runs
        speed = (
            f"TTFT {e['ttft_s'] * 1e3:8.1f} ms  ITL {e['itl_s'] * 1e3:7.2f} ms  "
            f"{e['tokens_per_s']:10,.0f} tok/s"
        )
    else:
        speed = f"{'(does not fit: no latency)':<50}"
    return (
        f"  {e['label']:<20} {fits}  {e['total_bytes'] / GiB:7.1f} GiB  "
        f"max {e['max_concurrency']:>6}  {speed}  "
        f"prefill {e['prefill_bound']:<13} decode {e['decode_bound']}"
    )


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
    if result.get("under_load"):
        lines.append(_load_line(result["under_load"]))
    return "\n".join(lines + calibration_lines(result))


def _load_line(u: dict) -> str:
    if "ttft" not in u:
        return f"- Under load: {u['note']}."

    def ms(p: dict) -> str:
        return f"{p['p50_s'] * 1e3:,.1f}/{p['p90_s'] * 1e3:,.1f}/{p['p99_s'] * 1e3:,.1f} ms"

    note = f" ({u['note']})" if u["note"] else ""
    return (
        f"- Under load ({u['load']['batching']} batching) on {u['label']}: {u['finished']:,} "
        f"requests, TTFT p50/p90/p99 {ms(u['ttft'])}, TPOT {ms(u['tpot'])}, end to end "
        f"{ms(u['e2e'])}; {u['tokens_per_s']:,.0f} output tokens/s, {u['preemptions']} "
        f"preemptions{note}."
    )


def _label(r: dict) -> str:
    extra = f"+{r['redundant_experts']}" if r.get("redundant_experts") else ""
    return f"TP{r['tp']} PP{r['pp']} EP{r['ep']}{extra} x{r['replicas']}"
