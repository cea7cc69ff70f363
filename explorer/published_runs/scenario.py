"""One published run as the core's inputs, with what they change and leave out.

Nothing is fitted: the default assumptions are changed only where the run's source says how it
ran (framework, forced-balanced routing, its dispatcher, FP8 dispatch, its GPU's memory and
bandwidth, its activation recipe). A setting the core cannot express is replaced by the nearest
one it can, with one sentence saying so (``Scenario.inexact``); a speed or memory feature it has
no term for is named in ``Scenario.unmodelled``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Final

from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, EstimateAssumptions
from explorer.presets import load_cluster, load_model
from explorer.published_runs.table import PER_TENSOR_FP8, ZERO_OF_SHARDING, PublishedRun
from explorer.specs import ClusterSpec, Layout, ModelSpec, Precision, Recompute, TrainingWorkload

PYTORCH_FRAMEWORKS: Final = ("torchtitan", "NeMo AutoModel")
"""Frameworks whose memory behaviour is PyTorch's (FSDP2, eager autograd): explorer.memory's
``framework="pytorch"``; the others run Megatron-Core."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """The core's inputs for one run and what they leave out of it."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: Layout
    workload: TrainingWorkload
    assumptions: EstimateAssumptions
    inexact: tuple[str, ...]
    """Settings of the run the scenario changes (the nearest expressible one is estimated)."""
    unmodelled: tuple[str, ...]
    """Speed and memory features the run used that the core has no term for (its estimate
    leaves them out)."""


def _precision(run: PublishedRun) -> tuple[Precision, list[str]]:
    if run.precision == "bf16":
        return "bf16-mixed", []
    if run.precision in PER_TENSOR_FP8:
        return "fp8-mixed", []
    reason = {
        "fp8": "FP8 recipe not stated: timed as per-tensor FP8",
        "nvfp4": "NVFP4 not modelled: timed as FP8",
    }.get(run.precision, f"{run.precision} scaling not modelled: timed as per-tensor FP8")
    return "fp8-mixed", [reason]


def _recompute(run: PublishedRun, model: ModelSpec) -> tuple[Recompute, list[str]]:
    if run.recompute_num_layers:
        per_stage = model.num_hidden_layers / (run.pp * run.virtual_stages)
        nearest: Recompute = "full" if run.recompute_num_layers >= per_stage / 2 else "none"
        return nearest, [
            f"full recompute of {run.recompute_num_layers} layers per chunk not modelled: "
            f"estimated with {nearest}"
        ]
    if run.activation_recipe != "standard" or run.recompute != "selective":
        return run.recompute, []
    if run.selective_ac:
        return "selective", [f"torchtitan {run.selective_ac}-level SAC taken as selective"]
    if run.recompute_modules not in ((), ("core_attn",)):
        modules = ", ".join(run.recompute_modules)
        return "selective", [f"recompute_modules {modules} not modelled: attention core taken"]
    return "selective", []


def _unmodelled(run: PublishedRun) -> tuple[str, ...]:
    flags = (
        (run.offload_layers, f"activation offload of {run.offload_layers} layers"),
        (run.cuda_graphs, f"CUDA graphs ({run.cuda_graphs})"),
        (run.torch_compile, "torch.compile"),
        (run.async_tp, "async TP"),
        (run.moe_a2a_overlap, "MoE all-to-all overlap"),
    )
    return tuple(words for on, words in flags if on)


def _cluster(run: PublishedRun) -> ClusterSpec:
    base = load_cluster(run.cluster)
    per_node = base.gpus_per_node
    cluster = replace(base, num_nodes=max(1, math.ceil(run.gpus / per_node)))
    gpu = cluster.gpu
    if run.gpu_memory_gb is not None:
        gpu = replace(gpu, memory_bytes=int(run.gpu_memory_gb * 1e9))
    if run.gpu_hbm_tb_per_s is not None:
        gpu = replace(gpu, hbm_bytes_per_s=run.gpu_hbm_tb_per_s * 1e12)
    return replace(cluster, gpu=gpu)


def _assumptions(run: PublishedRun) -> EstimateAssumptions:
    base = DEFAULT_ESTIMATE_ASSUMPTIONS
    memory = replace(
        base.memory,
        framework="pytorch" if run.framework in PYTORCH_FRAMEWORKS else "megatron",
        moe_imbalance=1.0 if run.balanced_routing else base.memory.moe_imbalance,
        activation_recipe=run.activation_recipe,
    )
    comm = replace(
        base.comm, ep_domain_dedup=run.ep_dispatcher != "alltoall", fp8_dispatch=run.fp8_dispatch
    )
    return replace(base, memory=memory, comm=comm)


def scenario(run: PublishedRun) -> Scenario:
    """The core's inputs for a run, with what they change and leave out."""
    overrides: dict[str, Any] = dict(run.model_overrides)
    model = replace(load_model(run.model), **overrides)
    precision, inexact = _precision(run)
    recompute, more = _recompute(run, model)
    if run.pipeline_layout:
        more.append(f"pipeline layout {run.pipeline_layout} not expressed: balanced split taken")
    schedule = run.schedule or ("interleaved" if run.virtual_stages > 1 else "1f1b")
    layout = Layout(
        dp=run.dp, tp=run.tp, pp=run.pp, cp=run.cp, ep=run.ep, etp=run.etp,
        zero=ZERO_OF_SHARDING[run.sharding],
        sequence_parallel=run.sequence_parallel, micro_batch_size=run.micro_batch,
        recompute=recompute, schedule=schedule, virtual_stages=run.virtual_stages,
    )  # fmt: skip
    workload = TrainingWorkload(
        seq_len=run.seq_len,
        global_batch_size=run.global_batch,
        precision=precision,
        grad_dtype=run.grad_dtype,
    )
    return Scenario(
        model=model,
        cluster=_cluster(run),
        layout=layout,
        workload=workload,
        assumptions=_assumptions(run),
        inexact=tuple(inexact + more),
        unmodelled=_unmodelled(run),
    )
