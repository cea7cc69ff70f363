"""The serving report's sections: the planner's answers, its layouts, rejections, what is left out.

Every number comes from ``explorer.serving.plan_serving``; GiB = 2^30 bytes, ms = 10^-3 s.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from explorer.cost import DEFAULT_COST_ASSUMPTIONS, ServingCost, serving_cost
from explorer.report.tables import Section, Table
from explorer.serving import LEAVES_OUT, ServingAssumptions, ServingEstimate, ServingPlan
from explorer.serving.capacity import CapacityRow, capacity_rows, capacity_sentences
from explorer.serving.estimate import fitted
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload
from explorer.units import GiB

TOP = 8
"""Layouts shown in the serving table (fitting first, then by tokens/s)."""


@dataclass(frozen=True, slots=True)
class ServingCase:
    """One serving scenario resolved to specs, with the planner's result."""

    model: ModelSpec
    cluster: ClusterSpec
    num_gpus: int
    workload: ServingWorkload
    assumptions: ServingAssumptions
    plan: ServingPlan

    @property
    def best(self) -> ServingEstimate | None:
        """The planner's first layout (fitting, most tokens/s), None when none is valid."""
        return self.plan.layouts[0] if self.plan.layouts else None


def workload_rows(w: ServingWorkload) -> list[tuple[str, object]]:
    return [
        ("prompt tokens per request", w.prompt_len),
        ("output tokens per request", w.output_len),
        ("sequences decoded together per replica", w.concurrency),
        ("weights format", w.weights_dtype),
        ("KV cache format", w.kv_dtype),
    ]


def summary_paragraphs(case: ServingCase) -> tuple[str, ...]:
    best = case.best
    head = (
        f"Serving {case.model.name} on {case.num_gpus:,} × {case.cluster.gpu.name}: prompts of "
        f"{case.workload.prompt_len:,} tokens, {case.workload.output_len:,} output tokens, "
        f"{case.workload.concurrency} sequences per replica."
    )
    if best is None or not best.fits:
        return (head, "No serving layout fits at this concurrency; see the rejections below.")
    return (
        head,
        f"Best layout {best.layout.label}: {fitted(best.tokens_per_s):,.0f} output tokens/s, "
        f"TTFT {fitted(best.ttft_s) * 1e3:,.1f} ms, inter-token latency "
        f"{fitted(best.itl_s) * 1e3:,.2f} ms, "
        f"{best.memory.total / GiB:,.1f} GiB per GPU.",
    )


def layouts_table(plan: ServingPlan) -> Table:
    rows = [
        {
            "layout": e.layout.label,
            "fits": e.fits,
            "memory per GPU (GiB)": e.memory.total / GiB,
            "max concurrency": e.max_concurrency,
            "TTFT (ms)": _ms(e.ttft_s),
            "ITL (ms)": _ms(e.itl_s),
            "tokens/s": e.tokens_per_s,
            "prefill bound": e.prefill.bound,
            "decode bound": e.decode.bound,
        }
        for e in plan.layouts[:TOP]
    ]
    formats = {"tokens/s": "{:,.0f}", "TTFT (ms)": "{:,.1f}"}
    note = (
        "TP, PP, EP (+ redundant experts) per replica × replicas; memory of the heaviest "
        "stage's GPU; latency and tokens/s only for layouts that fit."
    )
    return Table("Serving layouts", pd.DataFrame(rows), formats, note)


def _ms(seconds: float | None) -> float | None:
    """Milliseconds, or None (an empty cell) for a layout that does not fit."""
    return None if seconds is None else seconds * 1e3


def rejected_groups(plan: ServingPlan) -> list[tuple[str, list[str]]]:
    """Rejections grouped by the shape of their reason (numbers aside): (first reason, labels)."""
    groups: dict[str, tuple[str, list[str]]] = {}
    for layout, reason in plan.rejected:
        key = re.sub(r"\d+", "#", reason)
        groups.setdefault(key, (reason, []))[1].append(layout.label)
    return sorted(groups.values(), key=lambda g: -len(g[1]))


def rejected_table(plan: ServingPlan) -> Table:
    groups = rejected_groups(plan)
    frame = pd.DataFrame(
        {
            "layouts rejected": [len(labels) for _, labels in groups],
            "for example": [reason for reason, _ in groups],
            "such as": [", ".join(labels[:3]) for _, labels in groups],
        }
    )
    note = "Rejections with the same reason (numbers aside) share a row; the JSON lists each."
    return Table("Rejected serving layouts", frame, note=note)


def capacity(case: ServingCase) -> tuple[CapacityRow, ...]:
    """Users by context of every valid layout (explorer.serving.capacity)."""
    return capacity_rows(case.model, case.cluster, case.plan, case.workload, case.assumptions)


def capacity_table(rows: tuple[CapacityRow, ...]) -> Table:
    frame = pd.DataFrame(
        [
            {
                "layout": r.label,
                **{f"users at {c // 1024}K tokens": n for c, n in r.users},
                "weights (GiB/GPU)": round(r.weights_bytes / GiB, 1),
                "free for KV (GiB/GPU)": round(r.kv_free_bytes / GiB, 1),
            }
            for r in rows[:TOP]
        ]
    )
    note = "Users all replicas hold, each at prompt + output = the context, nothing else cached."
    return Table("Concurrent users by context", frame, note=note)


def layout_costs(case: ServingCase) -> list[tuple[str, ServingCost]]:
    """The fitting layouts among the first ``TOP`` priced at the GPU preset's published price
    (explorer.cost.serving_cost with the default cost assumptions, as ``serve`` prices them)."""
    return [
        (
            e.layout.label,
            serving_cost(
                output_tokens_per_s_per_replica=e.tokens_per_s / e.layout.replicas,
                output_len=case.workload.output_len,
                gpus_per_replica=e.layout.gpus_per_replica,
                gpu=case.cluster.gpu,
                assumptions=DEFAULT_COST_ASSUMPTIONS,
            ),
        )
        for e in case.plan.layouts[:TOP]
        if e.fits and e.tokens_per_s
    ]


def cost_table(costs: list[tuple[str, ServingCost]]) -> Table:
    frame = pd.DataFrame(
        [
            {
                "layout": label,
                "GPUs per replica": c.gpus_per_replica,
                "price per GPU-hour (US$)": c.price_per_gpu_hour,
                "US$ per M output tokens": c.cost_per_million_output_tokens_usd,
                "requests/s per replica": c.requests_per_s_per_replica,
            }
            for label, c in costs
        ]
    )
    formats = {"US$ per M output tokens": "{:,.3f}", "requests/s per replica": "{:,.2f}"}
    note = (
        f"At the planned load; price: {costs[0][1].price_source}. The replica's GPUs' price over "
        "its decode throughput (prefill time not taken out). GPUs for a target request rate: "
        "serve --target-rps."
    )
    return Table("Serving cost", frame, formats, note)


def plan_section(case: ServingCase, answers: tuple[str, ...]) -> Section:
    """The planner's answers in sentences, its best layouts, the rejected ones, and the
    users each layout holds by context."""
    rows = capacity(case)
    tables = [layouts_table(case.plan)]
    if case.plan.rejected:
        tables.append(rejected_table(case.plan))
    if rows:
        tables.append(capacity_table(rows))
    if costs := layout_costs(case):
        tables.append(cost_table(costs))
    sentences = capacity_sentences(case.model, case.cluster, rows, case.workload)
    return Section(
        "serving",
        "Serving plan",
        bullets=(*answers, *sentences),
        tables=tuple(tables),
        figures=("serving_memory", "serving_frontier"),
    )


LEFT_OUT = f"Left out of the serving model: {LEAVES_OUT}."


def serving_results(case: ServingCase, answers: tuple[str, ...]) -> dict[str, Any]:
    """The plan as the ``serve`` command's JSON keys (bytes, seconds)."""
    return {
        "num_gpus": case.num_gpus,
        "workload": asdict(case.workload),
        "layouts": [_estimate_json(e) for e in case.plan.layouts],
        "rejected": [
            {"tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "replicas": lay.replicas, "reason": why}
            for lay, why in case.plan.rejected
        ],
        "pareto": [asdict(p) for p in case.plan.pareto if p.pareto],
        "answers": list(answers),
        "cost": [{"label": label, **c.as_dict()} for label, c in layout_costs(case)],
        "leaves_out": LEAVES_OUT,
    }


def _estimate_json(e: ServingEstimate) -> dict[str, Any]:
    lay = e.layout
    return {
        "tp": lay.tp, "pp": lay.pp, "ep": lay.ep, "replicas": lay.replicas,
        "redundant_experts": lay.redundant_experts, "label": lay.label,
        "fits": e.fits, "reason": e.reason,
        "weights_bytes": e.memory.weights, "kv_bytes_per_token": e.kv_bytes_per_token,
        "total_bytes": e.memory.total, "bytes": e.memory.as_dict(),
        "max_concurrency": e.max_concurrency, "ttft_s": e.ttft_s, "itl_s": e.itl_s,
        "tokens_per_s": e.tokens_per_s, "warnings": list(e.warnings),
    }  # fmt: skip
