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
from explorer.presets import load_model
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
from explorer.serving.capacity import CapacityRow, capacity_rows, capacity_sentences
from explorer.serving.disaggregated import Disaggregated, PoolRate, plan_disaggregated
from explorer.serving.drafts import check_speculation
from explorer.serving.frontier import DEFAULT_CONCURRENCIES, FRONTIER_CONCURRENCIES
from explorer.serving.scheduler import EngineLoad, LoadResult, Percentiles, serve_under_load
from explorer.serving.speculative import Speculation, SpeculativeDecode, speculative_decode
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
    group.add_argument(
        "--redundant-experts",
        type=int,
        default=0,
        help="extra expert copies EPLB may place per MoE block (DeepSeek: 32); EP degrees "
        "that do not divide the experts get the fewest that make them even",
    )
    parser.add_argument(
        "--disaggregate",
        action="store_true",
        help="also plan a prefill pool and a decode pool on the GPUs (explorer.serving."
        "disaggregated): their layouts, the split, the KV transfer, the balanced ratio",
    )
    spec = parser.add_argument_group(
        "speculative decoding (explorer.serving.speculative): the plan, the frontier and the "
        "load simulation decode speculatively; the best fitting layout's steps are shown"
    )
    spec.add_argument("--speculative", choices=("mtp", "draft"), help="the draft: MTP or a model")
    spec.add_argument("--draft-tokens", type=int, default=1, help="tokens drafted a step (1)")
    spec.add_argument(
        "--acceptance", type=float, default=0.85, help="each draft token's acceptance (0.85)"
    )
    spec.add_argument("--draft-model", help="model preset of the draft (with --speculative draft)")
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
    add_cost(parser, training=False)
    parser.add_argument(
        "--frontier",
        action="store_true",
        help="the Pareto frontier of tokens/s per GPU against tokens/s per user across layouts "
        "and loads (1 to 1024 sequences per replica), two-batch overlap on and off for EP "
        "layouts, as serving benchmarks draw it",
    )
    parser.add_argument(
        "--target-rps",
        type=float,
        help="requests per second to serve: replicas and GPUs needed per layout",
    )


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
    """One layout as the contract's JSON object (docs/ARCHITECTURE.md, ``serve``)."""
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


def _frontier_json(plan: ServingPlan) -> list[dict[str, object]]:
    """The Pareto points, fastest per user first (tokens/s per GPU rising along the list)."""
    front = [p for p in plan.pareto if p.pareto]
    front.sort(key=lambda p: -p.tokens_per_s_per_user)
    return [dataclasses.asdict(p) for p in front]


def _under_load(
    plan: ServingPlan,
    args: argparse.Namespace,
    run_args: tuple,
    speculation: Speculation | None = None,
) -> object:
    """The simulation of the plan's best fitting layout, or a sentence why there is none."""
    load = load_from(args)
    if load is None:
        return None
    fitting = [e for e in plan.layouts if e.fits]
    if not fitting:
        return {"note": "no layout fits, so no engine runs under load"}
    best = fitting[0].layout
    model, cluster, workload, assumptions = run_args
    result = serve_under_load(model, cluster, best, workload, load, assumptions, speculation)
    return load_json(best, load, result)


def _cost_json(
    args: argparse.Namespace, e: ServingEstimate, output_len: int, gpu: GpuSpec
) -> dict[str, object] | None:
    """Cost per million output tokens at the planned load, and GPUs for --target-rps."""
    if not e.fits or e.tokens_per_s is None or e.tokens_per_s <= 0:
        return None  # latency and throughput exist only for a layout that fits
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
    load_from(args)  # bad load flags fail before the plan runs
    speculation = speculation_from(args)
    if speculation is not None:
        check_speculation(model, speculation)
    sweep = FRONTIER_CONCURRENCIES if args.frontier else DEFAULT_CONCURRENCIES
    overlap = (False, True) if args.frontier else None
    plan = plan_serving(
        model, cluster, args.gpus, workload, assumptions, sweep,
        speculation=speculation, overlap_options=overlap,
    )  # fmt: skip
    rows = capacity_rows(model, cluster, plan, workload, assumptions)
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
        "frontier": _frontier_json(plan) if args.frontier else None,
        "answers": list(serving_answers(plan)),
        "capacity": {
            "sentences": list(capacity_sentences(model, cluster, rows, workload)),
            "rows": [capacity_json(r) for r in rows],
        },
        "assumptions": dataclasses.asdict(assumptions),
        "leaves_out": LEAVES_OUT,
        "calibration": calibration_json(args, figures),
        "under_load": _under_load(plan, args, (model, cluster, workload, assumptions), speculation),
        "speculative": _speculative(plan, speculation, (model, cluster, workload, assumptions)),
        "disaggregated": (
            [
                disaggregated_json(d)
                for d in plan_disaggregated(model, cluster, args.gpus, workload, assumptions)
            ]
            if args.disaggregate
            else None
        ),
    }


def capacity_json(r: CapacityRow) -> dict[str, object]:
    """One layout's memory and users by context (bytes per GPU, users all replicas)."""
    return {
        "label": r.label,
        "fits": r.estimate.fits,
        "weights_bytes": r.weights_bytes,
        "kv_free_bytes": r.kv_free_bytes,
        "kv_bytes_per_token_per_gpu": r.kv_bytes_per_token_per_gpu,
        "users": {str(context): n for context, n in r.users},
    }


def speculation_from(args: argparse.Namespace) -> Speculation | None:
    """The speculation the flags ask for, None without --speculative."""
    if args.speculative is None:
        if args.draft_model:
            raise ValueError("--draft-model needs --speculative draft")
        return None
    if args.speculative == "draft" and not args.draft_model:
        raise ValueError("--speculative draft needs --draft-model (a model preset)")
    draft = load_model(args.draft_model) if args.speculative == "draft" else None
    return Speculation(
        kind=args.speculative,
        draft_tokens=args.draft_tokens,
        acceptance=args.acceptance,
        draft_model=draft,
    )


def speculative_json(r: SpeculativeDecode) -> dict[str, object]:
    """Speculative decode on one layout as JSON (seconds, bytes, tokens a second)."""
    s = r.speculation
    return {
        "label": r.layout.label,
        "kind": s.kind,
        "draft_model": s.draft_model.name if s.draft_model else None,
        "draft_tokens": s.draft_tokens,
        "acceptance": s.acceptance,
        "concurrency": r.concurrency,
        "tokens_per_step": r.tokens_per_step,
        "plain_step_s": r.plain_step_s,
        "verify_step_s": r.verify_step_s,
        "draft_step_s": r.draft_step_s,
        "step_s": r.step_s,
        "tpot_s": r.tpot_s,
        "tokens_per_s": r.tokens_per_s,
        "speedup": r.speedup,
        "extra_bytes_per_gpu": r.extra_bytes_per_gpu,
        "fits": r.fits,
    }


def _speculative(plan: ServingPlan, spec: Speculation | None, run_args: tuple) -> object:
    if spec is None:
        return None
    fitting = [e for e in plan.layouts if e.fits]
    if not fitting:
        return {"note": "no layout fits, so nothing decodes speculatively"}
    model, cluster, workload, assumptions = run_args
    return speculative_json(
        speculative_decode(model, cluster, fitting[0].layout, workload, spec, assumptions)
    )


def _pool_json(r: PoolRate, replicas: int) -> dict[str, object]:
    return {
        **_layout_json(r.layout),
        "label": r.layout.label,
        "replicas": replicas,
        "gpus": replicas * r.layout.gpus_per_replica,
        "requests_per_s_per_replica": r.requests_per_s,
        "requests_per_s_per_gpu": r.requests_per_s_per_gpu,
        "step_s": r.step_s,
        "concurrency": r.concurrency,
    }


def disaggregated_json(d: Disaggregated) -> dict[str, object]:
    """A prefill pool and a decode pool as JSON (seconds, bytes, requests and tokens a second)."""
    prefill_bound, decode_bound = d.pool_bounds_tokens_per_s_per_gpu
    return {
        "prefill": _pool_json(d.prefill, d.prefill_replicas),
        "decode": _pool_json(d.decode, d.decode_replicas),
        "gpus": d.gpus,
        "requests_per_s": d.requests_per_s,
        "tokens_per_s": d.tokens_per_s,
        "tokens_per_s_per_gpu": d.tokens_per_s_per_gpu,
        "balanced_prefill_to_decode_gpus": d.balanced_ratio,
        "prefill_bound_tokens_per_s_per_gpu": prefill_bound,
        "decode_bound_tokens_per_s_per_gpu": decode_bound,
        "kv_transfer_bytes_per_request": d.transfer.bytes_per_request,
        "kv_transfer_bytes_per_s": d.transfer.bandwidth_bytes_per_s,
        "kv_transfer_s": d.transfer.seconds,
        "kv_transfer_overlapped": d.transfer.overlapped,
        "ttft_s": d.ttft_s,
        "itl_s": d.itl_s,
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
    lines += _capacity_lines(result["capacity"])
    if result.get("under_load"):
        lines.append(_load_line(result["under_load"]))
    if result.get("speculative"):
        lines.append(_speculative_line(result["speculative"]))
    if result.get("frontier") is not None:
        lines += _frontier_lines(result["frontier"])
    if result.get("disaggregated") is not None:
        lines += _disaggregated_lines(result["disaggregated"])
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


def _frontier_lines(points: list[dict]) -> list[str]:
    if not points:
        return ["- Frontier: no layout fits at any load swept."]
    lines = ["- Frontier (tokens/s per GPU against tokens/s per user, across layouts and loads):"]
    for p in points:
        option = " TBO" if p["two_batch_overlap"] else ""
        option += " speculative" if p["speculative"] else ""
        lines.append(
            f"  {p['label']:<20}{option:<5} {p['concurrency']:>5} seqs  "
            f"{p['tokens_per_s_per_user']:8,.1f} tok/s/user  "
            f"{p['tokens_per_s_per_gpu']:9,.0f} tok/s/GPU  TTFT {p['ttft_s'] * 1e3:,.0f} ms"
        )
    return lines


def _label(r: dict) -> str:
    extra = f"+{r['redundant_experts']}" if r.get("redundant_experts") else ""
    return f"TP{r['tp']} PP{r['pp']} EP{r['ep']}{extra} x{r['replicas']}"


def _disaggregated_lines(plans: list[dict]) -> list[str]:
    if not plans:
        return ["- Disaggregated: no prefill pool and decode pool both fit on these GPUs."]
    out = []
    for d in plans:
        p, q = d["prefill"], d["decode"]
        sent = "overlapped" if d["kv_transfer_overlapped"] else "after the prefill"
        out.append(
            f"- Disaggregated: prefill {p['replicas']} x {p['label'].rsplit(' x', 1)[0]} "
            f"({p['gpus']} GPUs) + decode {q['replicas']} x {q['label'].rsplit(' x', 1)[0]} "
            f"({q['gpus']} GPUs): {d['tokens_per_s']:,.0f} output tokens/s "
            f"({d['tokens_per_s_per_gpu']:,.0f} a GPU), TTFT {d['ttft_s'] * 1e3:,.1f} ms, ITL "
            f"{d['itl_s'] * 1e3:,.2f} ms; KV {d['kv_transfer_bytes_per_request'] / 1e6:,.1f} MB "
            f"a request in {d['kv_transfer_s'] * 1e3:,.2f} ms ({sent}); balanced at "
            f"{d['balanced_prefill_to_decode_gpus']:.2f} prefill GPUs per decode GPU."
        )
    return out


def _speculative_line(r: dict) -> str:
    if "tpot_s" not in r:
        return f"- Speculative decoding: {r['note']}."
    draft = "MTP" if r["kind"] == "mtp" else f"draft {r['draft_model']}"
    fit = "" if r["fits"] else " (the draft's memory does not fit beside this concurrency)"
    return (
        f"- Speculative decoding ({draft}, {r['draft_tokens']} tokens, acceptance "
        f"{r['acceptance']:.2f}) on {r['label']}: {r['tokens_per_step']:.2f} tokens a step of "
        f"{r['step_s'] * 1e3:,.2f} ms (verify {r['verify_step_s'] * 1e3:,.2f} + draft "
        f"{r['draft_step_s'] * 1e3:,.2f} ms each), TPOT {r['tpot_s'] * 1e3:,.2f} ms, "
        f"{r['speedup']:.2f}x plain decode, {r['extra_bytes_per_gpu'] / GiB:.2f} GiB more a GPU"
        f"{fit}."
    )


CAPACITY_ROWS = 8
"""Layouts the text output's users-by-context table shows (the JSON has every one)."""


def _capacity_lines(capacity: dict) -> list[str]:
    lines = [f"- {sentence}" for sentence in capacity["sentences"]]
    rows = capacity["rows"][:CAPACITY_ROWS]
    if not rows:
        return lines
    contexts = list(rows[0]["users"])
    head = "".join(f"{int(c) // 1024:>8}K" for c in contexts)
    lines.append(f"  users at a context   {head}   weights  KV free (GiB/GPU)")
    for r in rows:
        users = "".join(f"{r['users'][c]:>9,}" for c in contexts)
        lines.append(
            f"  {r['label']:<20}{users}   {r['weights_bytes'] / GiB:7.1f}  "
            f"{r['kv_free_bytes'] / GiB:7.1f}"
        )
    return lines
