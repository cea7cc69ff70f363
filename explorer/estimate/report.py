"""An Estimate as plain data (JSON keys: docs/ARCHITECTURE.md) and as a simulated timeline."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from explorer.comm import Collective, GroupPlacement
from explorer.estimate.core import Estimate
from explorer.estimate.stages import StageTime, schedule_times
from explorer.schedules import Timeline, build_schedule, simulate

FLOPS_CONVENTION = (
    "matmuls only, 2 FLOPs per multiply-add, backward = 2 x forward; causal attention "
    "{causal}; MFU against the dense peak of the precision's GEMM format"
)


def _stage_row(stage: StageTime) -> dict[str, Any]:
    return {
        "stage": stage.stage,
        "num_layers": len(stage.layers),
        "forward_s": stage.forward_s,
        "backward_s": stage.backward_s,
        "weight_s": stage.weight_s,
        "compute_forward_s": stage.compute.forward_s,
        "compute_backward_s": stage.compute.backward_s,
        "recompute_s": stage.compute.recompute_s,
        "kernel_efficiency": stage.compute.dense_efficiency,
        "step_comm_s": stage.step_comm_s,
        "optimizer_s": stage.optimizer_s,
    }


def _collective_row(stage: int, c: Collective) -> dict[str, Any]:
    return {
        "stage": stage,
        "axis": c.axis,
        "kind": c.kind,
        "what": c.what,
        "phase": c.phase,
        "size_bytes": c.size_bytes,
        "count": c.count,
        "time_s": c.time_s,
        "exposed_s": c.exposed_s,
    }


def _group_row(g: GroupPlacement) -> dict[str, Any]:
    return {
        "group": g.group,
        "size": g.size,
        "ranks_per_domain": g.ranks_per_domain,
        "num_domains": g.num_domains,
        "crosses_domains": g.crosses_domains,
        "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s,
        "latency_s": g.latency_s,
    }


def estimate_dict(est: Estimate) -> dict[str, Any]:
    """The step-time part of an estimate as JSON-ready data (seconds, bytes, FLOP/s)."""
    causal = est.assumptions.compute.causal_attention_flops
    return {
        "step_time_s": est.step_time_s,
        "tokens_per_s": est.tokens_per_s,
        "tokens_per_s_per_gpu": est.tokens_per_s_per_gpu,
        "model_flops_per_s_per_gpu": est.model_flops_per_s_per_gpu,
        "hardware_flops_per_s_per_gpu": est.hardware_flops_per_s_per_gpu,
        "mfu": est.mfu,
        "hfu": est.hfu,
        "bubble_fraction": est.bubble_fraction,
        "exposed_comm_s": dict(est.exposed_comm_s),
        "exposed_comm_by_axis_s": dict(est.exposed_comm_by_axis_s),
        "pipeline_s": est.pipeline.makespan_s,
        "pipeline_method": est.pipeline.method,
        "step_tail_s": est.tail_s,
        "microbatches": est.microbatches,
        "num_gpus": est.num_gpus,
        "stage_times": [_stage_row(s) for s in est.stages],
        "collectives": [_collective_row(s.stage, c) for s in est.stages for c in s.collectives],
        "groups": [_group_row(g) for g in est.groups.values()],
        "flops_convention": FLOPS_CONVENTION.format(causal="halved" if causal else "whole"),
        "step_assumptions": {
            "compute": asdict(est.assumptions.compute),
            "comm": asdict(est.assumptions.comm),
            "pipeline_model": est.assumptions.pipeline_model,
        },
        "warnings": list(est.warnings),
    }


def estimate_timeline(est: Estimate) -> Timeline:
    """The estimate's pipeline simulated event by event (for the schedule diagram).

    Its makespan equals ``est.pipeline.makespan_s`` wherever the closed form is exact
    (explorer.estimate.pipeline); otherwise it is the exact value the closed form bounds.
    """
    times = schedule_times(est.stages)
    layout = est.layout
    schedule = build_schedule(
        layout.schedule, times.stages, est.microbatches, layout.virtual_stages
    )
    return simulate(schedule, times)
