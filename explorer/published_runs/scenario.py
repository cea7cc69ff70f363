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
from explorer.specs import (
    RECOMPUTE_MODULES,
    ClusterSpec,
    Layout,
    ModelSpec,
    Precision,
    TrainingWorkload,
)

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
        return ("bf16-pure" if run.bf16_parameters else "bf16-mixed"), []
    if run.precision in PER_TENSOR_FP8:
        return "fp8-mixed", []
    reason = {
        "fp8": "FP8 recipe not stated: timed as per-tensor FP8",
        "nvfp4": "NVFP4 not modelled: timed as FP8",
    }.get(run.precision, f"{run.precision} scaling not modelled: timed as per-tensor FP8")
    return "fp8-mixed", [reason]


def _recompute(run: PublishedRun) -> tuple[dict[str, Any], list[str]]:
    """The run's recompute recipe as Layout fields (explorer.specs.Layout), and what differs."""
    if run.recompute_num_layers:  # Megatron-Bridge: full granularity, block method
        return {"recompute": "full", "recompute_method": "block",
                "recompute_num_layers": run.recompute_num_layers}, []  # fmt: skip
    if run.activation_recipe != "standard" or run.recompute != "selective":
        return {"recompute": run.recompute}, []
    if run.selective_ac == "op":
        return {"recompute": "selective", "recompute_ops": True}, []
    if run.selective_ac == "layer":  # torchtitan selective_ac_option = "2"
        return {"recompute": "full", "recompute_every": 2}, []
    known = tuple(m for m in run.recompute_modules if m in RECOMPUTE_MODULES)
    dropped = [m for m in run.recompute_modules if m not in RECOMPUTE_MODULES]
    fields: dict[str, Any] = {"recompute": "selective"}
    if known:
        fields["recompute_modules"] = known
    return fields, [f"recompute_modules {', '.join(dropped)} not modelled"] if dropped else []


def _unmodelled(run: PublishedRun) -> tuple[str, ...]:
    flags = (
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


TE_FP8_ELEMENT_BYTES: Final = {
    "fp8-cs": 1.0,
    "fp8-delayed": 1.0,
    "fp8": 1.0,  # per-tensor scale
    "mxfp8": 1.0 + 1 / 32,  # an E8M0 scale per 32 elements (OCP MX spec)
    "fp8-blockwise": 1.0 + 4 / 128,  # an fp32 scale per 1 x 128 tile
    "nvfp4": 1.0,  # taken as FP8, as its time is
}
"""Bytes per element of a GEMM input or weight Transformer Engine quantizes, by recipe."""


def _te_fp8(run: PublishedRun) -> dict[str, Any]:
    """Transformer Engine's FP8 memory (Megatron-Core runs): GEMM inputs saved quantized, and
    the FP8 weights (row- and column-wise) beyond the 2-byte bf16 ones the states count.

    Megatron-Bridge's FP8 configs (bf16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed)
    set fp8_param_gather: the FP8 weights replace the bf16 ones (2 x width - 2 bytes more per
    weight); other sources do not say, and no copies are counted for them.
    """
    width = TE_FP8_ELEMENT_BYTES.get(run.precision)
    te = run.framework not in PYTORCH_FRAMEWORKS and run.activation_recipe == "standard"
    if width is None or not te:
        return {}
    copies = 2 * width - 2 if run.framework == "Megatron-Bridge" else 0.0
    return {"fp8_linear_input_bytes": width, "fp8_weight_copy_bytes": copies}


def _pytorch_memory(run: PublishedRun) -> dict[str, Any]:
    """Memory behaviours of the PyTorch frameworks' runs beyond ``framework="pytorch"``.

    torch.optim.Adam(W) keeps its moments in the parameters' dtype (torch/optim/adam.py
    _init_group: zeros_like(p)): 8 bytes over torchtitan's fp32 FSDP2 shards, float8 runs
    included (torchao float8 casts only the matmul inputs), 4 over bf16 parameters. NeMo
    AutoModel's MoE parallelizer (nemo_automodel/components/moe/parallelizer.py apply_fsdp)
    leaves the experts out of FSDP when EP spans the DP ranks and reduces in fp32
    (MixedPrecisionPolicy reduce_dtype=torch.float32), so FSDP2 accumulates unsharded
    gradients in fp32 (FSDPParam.to_accumulated_grad_if_needed).
    """
    if run.framework not in PYTORCH_FRAMEWORKS:
        return {}
    fields: dict[str, Any] = {"optimizer_state_bytes": 4.0 if run.bf16_parameters else 8.0}
    if run.framework == "torchtitan":
        fields["fsdp_torchtitan_units"] = True
    if run.framework == "NeMo AutoModel":
        fields |= {"fsdp_ignores_unsharded_experts": True, "fsdp_accumulated_grad_bytes": 4.0}
    if run.local_batch is not None:  # one schedule per local batch, repeated GA times
        fields["pipeline_schedule_microbatches"] = run.local_batch // run.micro_batch
    if not run.loss_fp32:  # the fp32 figures (4 saved, 8 temporary per logit) in bf16
        fields |= {"loss_logits_bytes": 2.0, "loss_backward_bytes_per_logit": 4.0}
    if run.loss_compiled:
        fields |= COMPILED_LOSS
    return fields


COMPILED_LOSS: Final = {"loss_logits_bytes": 2.0, "loss_backward_bytes_per_logit": 2.0}
"""A compiled cross-entropy over bf16 logits: a named assumption, not measured here. Inductor
fuses the fp32 upcast, log-softmax and NLL into one kernel each way, and AOTAutograd's min-cut
partitioner (torch/_functorch/partitioners.py min_cut_rematerialization_partition) saves the
smallest set the backward can rebuild from: the bf16 logits (2 bytes each) and a per-token
log-sum-exp; the backward writes the logits' gradient in bf16 (2 bytes each). Eager PyTorch
keeps the fp32 log-softmax (4) and 8 bytes of fp32 gradients (measured, CR-4)."""


def _dispatch_and_graphs(run: PublishedRun) -> dict[str, Any]:
    """DeepEP's buffers where the run dispatches with DeepEP (HybridEP's are not modelled) and
    the per-layer CUDA-graph scopes of a transformer_engine capture ("impl: scope, ...")."""
    fields: dict[str, Any] = {}
    if run.ep_dispatcher == "deepep":
        fields["moe_dispatcher"] = "deepep"
    impl, _, scopes = run.cuda_graphs.partition(":")
    if impl.strip() == "transformer_engine":
        fields["cuda_graph_modules"] = tuple(m.strip() for m in scopes.split(",") if m.strip())
    return fields


def _assumptions(run: PublishedRun) -> EstimateAssumptions:
    base = DEFAULT_ESTIMATE_ASSUMPTIONS
    memory = replace(
        base.memory,
        framework="pytorch" if run.framework in PYTORCH_FRAMEWORKS else "megatron",
        moe_imbalance=1.0 if run.balanced_routing else base.memory.moe_imbalance,
        activation_recipe=run.activation_recipe,
        **_te_fp8(run),
        **_pytorch_memory(run),
        **_dispatch_and_graphs(run),
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
    recipe, more = _recompute(run)
    if run.pipeline_layout:
        recipe["pipeline_layout"] = run.pipeline_layout
    schedule = run.schedule or ("interleaved" if run.virtual_stages > 1 else "1f1b")
    layout = Layout(
        dp=run.dp, tp=run.tp, pp=run.pp, cp=run.cp, ep=run.ep, etp=run.etp,
        zero=ZERO_OF_SHARDING[run.sharding],
        sequence_parallel=run.sequence_parallel, micro_batch_size=run.micro_batch,
        schedule=schedule, virtual_stages=run.virtual_stages,
        offload_layers=run.offload_layers, first_stage_layers=run.first_stage_layers,
        last_stage_layers=run.last_stage_layers, **recipe,
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
