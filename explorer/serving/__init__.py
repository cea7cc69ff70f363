"""Serving layouts: fit, prefill and decode latency, throughput, max concurrency, Pareto frontier.

Modules, in import order: ``assumptions`` (efficiencies, what is left out), ``latency`` (the
model: stage rooflines, TTFT, ITL, the HBM bound), ``layouts`` (enumeration, rules, warnings),
``estimate`` (one layout at one concurrency), ``frontier`` (Pareto), ``planner`` (every layout
of N GPUs and the answers in sentences). Memory conventions: explorer.memory.serving_layout.
"""

from explorer.memory.serving import MemoryAssumptions, ServingLayout, ServingMemory
from explorer.serving.assumptions import LEAVES_OUT, ServingAssumptions
from explorer.serving.estimate import ServingEstimate, estimate_serving
from explorer.serving.frontier import DEFAULT_CONCURRENCIES, ParetoPoint, mark_pareto, pareto_points
from explorer.serving.latency import (
    Bound,
    Roofline,
    experts_touched,
    memory_bound_tokens_per_s,
    peak_flops_per_s,
)
from explorer.serving.layouts import layout_problem, layout_warnings, serving_layouts
from explorer.serving.planner import ServingPlan, plan_serving, serving_answers

__all__ = [
    "DEFAULT_CONCURRENCIES",
    "LEAVES_OUT",
    "Bound",
    "MemoryAssumptions",
    "ParetoPoint",
    "Roofline",
    "ServingAssumptions",
    "ServingEstimate",
    "ServingLayout",
    "ServingMemory",
    "ServingPlan",
    "estimate_serving",
    "experts_touched",
    "layout_problem",
    "layout_warnings",
    "mark_pareto",
    "memory_bound_tokens_per_s",
    "pareto_points",
    "peak_flops_per_s",
    "plan_serving",
    "serving_answers",
    "serving_layouts",
]
