"""Serving layouts: fit, prefill and decode latency, throughput, max concurrency, Pareto frontier.

Modules, in import order: ``assumptions`` (efficiencies, what is left out), ``experts``
(experts touched, redundant expert slots, EP load imbalance), ``latency`` (the model: stage
rooflines, mixed prefill + decode steps, TTFT, ITL under the token budget, the HBM bound),
``layouts`` (enumeration, rules, warnings), ``estimate`` (one layout at one concurrency),
``frontier`` (Pareto), ``planner`` (every layout of N GPUs and the answers in sentences),
``scheduler`` (an engine under load: arrivals, batching, KV admission, percentiles).
Memory conventions: explorer.memory.serving_layout.
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
from explorer.serving.scheduler import EngineLoad, LoadResult, serve_under_load

__all__ = [
    "DEFAULT_CONCURRENCIES",
    "LEAVES_OUT",
    "Bound",
    "EngineLoad",
    "LoadResult",
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
    "serve_under_load",
    "serving_answers",
    "serving_layouts",
]
