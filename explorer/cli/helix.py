"""``python -m explorer helix``: long-context decode with Helix parallelism (arXiv:2507.07120)
against plain TP and KV parallelism alone: token latency against concurrent users on the same
GPUs, the throughput-latency frontier and the paper's two headline figures."""

from __future__ import annotations

import argparse
from typing import get_args

from explorer.cli.args import (
    add_assume,
    add_cluster,
    add_model,
    assumed,
    cluster_from,
    model_from,
    whole,
)
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.helix import helix_points
from explorer.serving.helix_paper import PAPER_TTL_SPEEDUP, PAPER_USERS_RATIO, pareto, summarize
from explorer.specs import KvDType, ServingWorkload, WeightDType

NAME = "helix"
HELP = (
    "long-context decode: Helix (KV parallel attention, then TP over the same GPUs) against "
    "plain TP and KV parallel alone, token latency against users"
)
MAX_USERS_LIST = 32
"""Concurrencies one --users may list."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    add_cluster(parser, gpus=True)
    group = parser.add_argument_group("decode")
    group.add_argument("--context", type=whole("prompt_len"), default=1_000_000,
                       help="tokens of KV history per user")  # fmt: skip
    group.add_argument("--output-len", type=whole("output_len"), default=1024)
    group.add_argument("--users", default="1,2,4,8,16,32,64,128,256,512,1024",
                       help="comma-separated concurrencies")  # fmt: skip
    group.add_argument("--weights-dtype", choices=get_args(WeightDType), default="bf16")
    group.add_argument("--kv-dtype", choices=get_args(KvDType), default="bf16")
    group.add_argument(
        "--batch",
        type=whole("concurrency"),
        default=None,
        help="the fixed batch of the TTL comparison (default: the smallest)",
    )
    add_assume(parser)


def _users(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or len(parts) > MAX_USERS_LIST:
        raise ValueError(f"--users takes 1 to {MAX_USERS_LIST} comma-separated concurrencies")
    parse = whole("concurrency")
    try:
        return tuple(sorted({parse(p) for p in parts}))
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"--users: {error}") from None


def run(args: argparse.Namespace) -> dict[str, object]:
    model = model_from(args)
    cluster = cluster_from(args, args.gpus)
    workload = ServingWorkload(
        prompt_len=args.context,
        output_len=args.output_len,
        concurrency=1,
        weights_dtype=args.weights_dtype,
        kv_dtype=args.kv_dtype,
    )
    a = assumed(args, ServingAssumptions(), "serving.")
    points = helix_points(model, cluster, args.gpus, workload, _users(args.users), a)
    rows = [
        {
            "tpa": p.tpa,
            "kvp": p.kvp,
            "users": int(p.decode_seqs),
            "ttl_ms": p.token_latency_s * 1e3,
            "tokens_per_s_per_user": 1 / p.token_latency_s,
            "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu,
            "fits": p.fits,
        }
        for p in points
    ]
    front = [(p.tpa, p.kvp, int(p.decode_seqs)) for p in pareto(points)]
    s = summarize(points, args.batch)
    return {
        "model": args.model,
        "gpus": args.gpus,
        "context": args.context,
        "points": rows,
        "frontier": [{"tpa": t, "kvp": k, "users": u} for t, k, u in front],
        "summary": {
            "batch": s.batch,
            "tp_ttl_ms": s.tp_ttl_s * 1e3,
            "helix_ttl_ms": s.helix_ttl_s * 1e3,
            "helix_split": list(s.helix_split),
            "ttl_speedup": s.ttl_speedup,
            "paper_ttl_speedup": PAPER_TTL_SPEEDUP,
            "budget_ms": s.budget_s * 1e3,
            "tp_users": s.tp_users,
            "helix_users": s.helix_users,
            "helix_users_split": list(s.helix_users_split),
            "users_ratio": s.users_ratio,
            "paper_users_ratio": PAPER_USERS_RATIO,
        },
    }


def render(result: dict) -> str:
    s = result["summary"]
    lines = [
        f"{result['model']} on {result['gpus']} GPUs, {result['context']:,} tokens of context:",
        "  TPA x KVP  users  TTL ms  tokens/s/user  tokens/s/GPU",
    ]
    front = {(f["tpa"], f["kvp"], f["users"]) for f in result["frontier"]}
    for r in result["points"]:
        mark = " *" if (r["tpa"], r["kvp"], r["users"]) in front else ""
        fits = "" if r["fits"] else " (does not fit)"
        lines.append(
            f"  {r['tpa']:>3} x {r['kvp']:<4} {r['users']:>6} {r['ttl_ms']:>7.2f} "
            f"{r['tokens_per_s_per_user']:>14.1f} {r['tokens_per_s_per_gpu']:>13.2f}{fits}{mark}"
        )
    tpa, kvp = s["helix_split"]
    lines += [
        "  (* on the throughput-latency frontier)",
        f"  at {s['batch']} users: Helix {tpa} x {kvp} {s['helix_ttl_ms']:.2f} ms against plain "
        f"TP {s['tp_ttl_ms']:.2f} ms: {s['ttl_speedup']:.2f}x lower TTL (paper: up to "
        f"{s['paper_ttl_speedup']:g}x)",
        f"  within plain TP's {s['budget_ms']:.2f} ms at its most users ({s['tp_users']}): "
        f"Helix serves {s['helix_users']}, {s['users_ratio']:.1f}x (paper: up to "
        f"{s['paper_users_ratio']:g}x)",
    ]
    return "\n".join(lines)
