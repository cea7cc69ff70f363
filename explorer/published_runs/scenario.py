"""One published run as the core's inputs, with what they change and leave out.

Nothing is fitted: the default assumptions are changed only where the run's source says how it
ran (framework and its compute profile, torch.compile, whole-step CUDA graphs, the attention
kernel its stack calls, forced-balanced routing, its dispatcher, FP8 dispatch, its GPU's memory
and bandwidth, its activation recipe). A setting the core cannot express is replaced by the nearest
one it can, with one sentence saying so (``Scenario.inexact``); a speed or memory feature it has
no term for is named in ``Scenario.unmodelled``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Final

from explorer.comm.userbuffers import UbConfigName
from explorer.compute.assumptions import AttentionKernel
from explorer.compute.attention import TorchCp
from explorer.compute.framework import ComputeFramework
from explorer.compute.gemm import kernel_figures
from explorer.compute.moe import drop_and_pad
from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS, EstimateAssumptions
from explorer.precision import NVFP4_BYTES_PER_ELEMENT
from explorer.presets import load_cluster, load_gpu, load_model
from explorer.published_runs.table import ZERO_OF_SHARDING, PublishedRun, load_published_runs
from explorer.specs import (
    RECOMPUTE_MODULES,
    ClusterSpec,
    Fp8Recipe,
    GpuSpec,
    Layout,
    ModelSpec,
    Precision,
    TrainingWorkload,
)

PYTORCH_FRAMEWORKS: Final = ("torchtitan", "NeMo AutoModel", "LLM Foundry")
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


FP8_RECIPE_OF: Final[dict[str, Fp8Recipe]] = {
    "fp8-cs": "current",
    "fp8-delayed": "delayed",
    "fp8-tensorwise": "current",  # torchao dynamic scaling: this tensor's amax, then the cast
    "fp8-blockwise": "blockwise",
    "mxfp8": "mxfp8",
}
"""The published FP8 recipe as the cast model's (explorer.compute.casts). Sources: Transformer
Engine Float8CurrentScaling / DelayedScaling / Float8BlockScaling / MXFP8BlockScaling; torchao
float8 tensorwise (dynamic) scaling."""


def _precision(run: PublishedRun) -> tuple[Precision, Fp8Recipe | None, list[str]]:
    """The policy, the FP8 recipe its casts follow (None: the GPU's default) and what differs."""
    if run.precision == "bf16":
        return ("bf16-pure" if run.bf16_parameters else "bf16-mixed"), None, []
    if run.precision == "nvfp4":
        return "nvfp4-mixed", None, []
    if run.precision in FP8_RECIPE_OF:
        return "fp8-mixed", FP8_RECIPE_OF[run.precision], []
    if run.precision == "fp8":
        return "fp8-mixed", None, ["FP8 recipe not stated: timed with the GPU's default recipe"]
    return "fp8-mixed", None, [f"{run.precision} scaling not modelled: timed as FP8"]


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


FULL_CUDA_GRAPHS: Final = "full_iteration"
"""Megatron-Bridge's cuda_graph_scope that captures the whole step (cuda_graph_impl "local");
the transformer_engine scopes capture some modules only."""


def compute_framework(run: PublishedRun) -> ComputeFramework:
    """The framework profile (explorer.compute.framework) a run's stack maps to: torchtitan
    eager, or compiled where the run used torch.compile; NeMo AutoModel, Meta's and
    DeepSeek's stacks keep the default Megatron-Core profile (their kernels are not
    published in these sources)."""
    if run.framework == "torchtitan":
        return "torchtitan-compile" if run.torch_compile else "torchtitan"
    if run.framework == "LLM Foundry":  # Composer's PyTorch FSDP1, eager MPT blocks
        return "pytorch-fsdp1"
    return "megatron"


SDPA_FLASH_HOPPER: Final[AttentionKernel] = "fa2-h100"
"""PyTorch's scaled_dot_product_attention on Hopper before torch 2.9: its flash backend,
FlashAttention-2, is first in the default priority order and cuDNN attention is opt-in
(pytorch/pytorch#142132, Dec 2024: SDPA 329 against cuDNN 631 TFLOP/s on H100;
pytorch/torchtitan#1209, May 2025: cuDNN enabled on B200 only; pytorch/pytorch#162073 makes
cuDNN the default on SM 9.0 for torch 2.9)."""


FLASH1: Final[dict[str, AttentionKernel]] = {"Ampere": "fa1-a100", "Hopper": "fa1-h100"}
"""LLM Foundry's MPT attention in its 2023 tables: FlashAttention's first-generation kernels.
scripts/train/benchmarking/submit_benchmarks.py (ef350d9e6, 2023-07, the A100 tables;
b2a43a147, 2023-10, the H100 ones) sets attn_impl from --attn_impl, default triton (the
Triton FlashAttention of llmfoundry/models/layers/flash_attn_triton.py), and installs
llm-foundry's [gpu] extra, flash-attn 1.0.3 / 1.0.9 (setup.py; FP8 runs pip-install
flash-attn 1.0.7): no FlashAttention-2 anywhere (presets/kernels/attention.toml fa1-*)."""


MBRIDGE_CUDNN: Final[dict[tuple[str, str], AttentionKernel]] = {
    ("25.11", "b200"): "cudnn-b200",
    ("25.11", "gb200"): "cudnn913-gb200",
    ("26.04.01", "b200"): "cudnn917-b200",
    ("26.04.01", "gb200"): "cudnn-gb200",
}
"""The cuDNN attention table of a Megatron-Bridge Blackwell row by release (its table's
container) and GPU: the 25.11 release (Megatron-Bridge v0.2.0, 2025-11-26) builds on NGC
PyTorch 25.09 (docker/Dockerfile.ci), cuDNN 9.13, the image of cudnn-frontend's B200
figures; the 26.04 one (v0.4.0) on PyTorch 26.02, newer than cuDNN 9.17, the newest measured
here. The GPU presets carry each GPU's own measurement (presets/kernels/attention.toml)."""


NOT_TE_HOPPER: Final[AttentionKernel] = "fa3-h100"
"""Meta's and DeepSeek's own stacks on Hopper: neither is Transformer Engine, so the TE table
the Megatron-Core profile follows there (cuDNN, ``KernelFigures.te_attention``) is not
theirs; neither source names its attention kernel, so the GPU preset's general table
(FlashAttention-3) is kept, as before that table existed."""


def _attention_kernel(run: PublishedRun) -> AttentionKernel | None:
    """The attention table a run's stack calls where it is not the profile's: torchtitan's
    SDPA on Hopper (every torchtitan run here predates torch 2.9); LLM Foundry's 2023
    FlashAttention v1 kernels (FLASH1); Megatron-Bridge's cuDNN by release on Blackwell
    (MBRIDGE_CUDNN); Meta's and DeepSeek's stacks on Hopper (NOT_TE_HOPPER). NeMo,
    Megatron-Bridge on Hopper and NeMo AutoModel follow the Megatron-Core profile's TE
    attention (AutoModel: BackendConfig.attn defaults to "te" where Transformer Engine and CUDA
    are present, nemo_automodel/components/models/common/utils.py, as read at 005f663)."""
    if run.framework == "torchtitan" and run.generation == "Hopper":
        return SDPA_FLASH_HOPPER
    if run.framework in ("Meta (Llama 3 paper)", "DeepSeek HAI-LLM") and run.generation == "Hopper":
        return NOT_TE_HOPPER
    if run.framework == "LLM Foundry":
        return FLASH1.get(run.generation)
    if run.framework == "Megatron-Bridge" and run.generation == "Blackwell":
        return MBRIDGE_CUDNN.get((run.table.split(" ", 1)[0], run.gpu))
    return None


def dropless_host_sync(run: PublishedRun) -> bool:
    """Whether the run's MoE layers synchronise the host before their dispatch: Megatron-Core's
    alltoall dispatcher, token-dropless (or dropping without padding, whose output size is
    dynamic too), EP > 1 and a MoE model. It copies the token counts per expert to the host on
    a side stream and waits for the copy before the all-to-all, whose split sizes it needs
    (MoEAlltoAllTokenDispatcher.preprocess and _maybe_dtoh_and_synchronize); padded to
    capacity the sizes are fixed and it copies nothing. The flex dispatcher (DeepEP, HybridEP)
    is not this path. Source: megatron/core/transformer/moe/token_dispatcher.py at
    core_v0.14.0 and core_v0.15.0."""
    return (
        run.framework in MEGATRON_CORE_FRAMEWORKS
        and run.ep > 1
        and run.ep_dispatcher == "alltoall"
        and not run.moe_pad_to_capacity
        and load_model(run.model).is_moe
    )


def _unmodelled(run: PublishedRun, tp_comm_overlap: bool = False) -> tuple[str, ...]:
    ub = _ub_config(run)
    partial_graphs = run.cuda_graphs and FULL_CUDA_GRAPHS not in run.cuda_graphs
    flags = (
        (partial_graphs, f"CUDA graphs ({run.cuda_graphs})"),
        (run.torch_compile and run.framework != "torchtitan", "torch.compile"),
        (run.async_tp, "async TP"),
        (
            bool(ub) and not tp_comm_overlap,
            f"TP comm-GEMM overlap (userbuffers {ub}): TP collectives timed exposed "
            "(python -m validation.published --tp-comm-overlap times it)",
        ),
        (
            dropless_host_sync(run),
            "the dropless all-to-all dispatcher's host sync before each MoE layer's dispatch "
            "(Megatron-Core token_dispatcher.py: the CPU waits on the copy of the token counts, "
            "cuda_sync_point before_ep_alltoall, and cannot run ahead of the GPU past it)",
        ),
        (
            run.framework == "torchtitan" and run.tp > 1 and run.precision in FP8_RECIPE_OF,
            "float8 TP all-gathers (torchao Float8ColwiseParallel / PrepareFloat8ModuleInput "
            "gather the float8 input: the core gathers, and copies, 2 bytes per element)",
        ),
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
    if run.gpu_bf16_tflops is not None:
        gpu = with_bf16_peak(gpu, run.gpu_bf16_tflops * 1e12)
    return replace(cluster, gpu=gpu)


def with_bf16_peak(gpu: GpuSpec, bf16_flops_per_s: float) -> GpuSpec:
    """``gpu`` at another dense BF16 peak, its FP8 and TF32 peaks scaled alike: a lower
    sustained clock (a power limit, another SKU of the same die) slows every tensor-core format
    by the same factor, and the GEMM and attention figures, shares of the peak
    (explorer.compute.gemm, explorer.compute.attention), follow it."""
    scale = bf16_flops_per_s / gpu.bf16_flops_per_s
    return replace(
        gpu,
        bf16_flops_per_s=bf16_flops_per_s,
        fp8_flops_per_s=gpu.fp8_flops_per_s * scale if gpu.fp8_flops_per_s else None,
        tf32_flops_per_s=gpu.tf32_flops_per_s * scale if gpu.tf32_flops_per_s else None,
        fp4_flops_per_s=gpu.fp4_flops_per_s * scale if gpu.fp4_flops_per_s else None,
    )


TE_FP8_ELEMENT_BYTES: Final = {
    "fp8-cs": 1.0,
    "fp8-delayed": 1.0,
    "fp8": 1.0,  # per-tensor scale
    "mxfp8": 1.0 + 1 / 32,  # an E8M0 scale per 32 elements (OCP MX spec)
    "fp8-blockwise": 1.0 + 4 / 128,  # an fp32 scale per 1 x 128 tile
    "nvfp4": NVFP4_BYTES_PER_ELEMENT,  # E2M1 and an E4M3 scale per 16 elements
}
"""Bytes per element of a GEMM input or weight Transformer Engine quantizes, by recipe."""


def _te_fp8(run: PublishedRun) -> dict[str, Any]:
    """Transformer Engine's FP8 memory (Megatron-Core runs): GEMM inputs saved quantized, and
    the FP8 weights (row- and column-wise) beyond the 2-byte bf16 ones the states count.

    Megatron-Bridge's FP8 configs (bf16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed)
    set fp8_param_gather: the FP8 weights replace the bf16 ones (2 x width - 2 bytes more per
    weight); other sources do not say, and no copies are counted for them. Its NVFP4 config
    (bf16_with_nvfp4_mixed) sets fp4_param_gather: the two NVFP4 copies (1.125 bytes) replace
    the bf16 weights, 0.875 bytes less per weight, which the memory model cannot subtract: 0
    more (the saving is left out).
    """
    width = TE_FP8_ELEMENT_BYTES.get(run.precision)
    te = run.framework not in PYTORCH_FRAMEWORKS and run.activation_recipe == "standard"
    if width is None or not te:
        return {}
    copies = max(0.0, 2 * width - 2) if run.framework == "Megatron-Bridge" else 0.0
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
    if run.framework == "torchtitan":  # repeat_kv before SDPA: models/llama/model.py (9dec370)
        fields |= {"fsdp_torchtitan_units": True, "sdpa_repeats_kv": True}
        if (date := _source_date(run)) is not None and date < PP_RETURN_OUTPUTS_DATE:
            fields["pipeline_keeps_outputs"] = True
    if run.framework == "NeMo AutoModel":
        fields |= {"fsdp_ignores_unsharded_experts": True, "fsdp_accumulated_grad_bytes": 4.0}
    if run.framework == "LLM Foundry":  # Composer wraps torch's FSDP1 (FullyShardedDataParallel)
        fields["fsdp_version"] = "fsdp1"
    if run.local_batch is not None:  # one schedule per local batch, repeated GA times
        fields["pipeline_schedule_microbatches"] = run.local_batch // run.micro_batch
    if not run.loss_fp32:  # the fp32 figures (4 saved, 8 temporary per logit) in bf16
        fields |= {"loss_logits_bytes": 2.0, "loss_backward_bytes_per_logit": 4.0}
    if run.loss_compiled:
        fields |= COMPILED_LOSS
    if run.loss_fused:
        fields |= FUSED_LOSS
    return fields


PP_RETURN_OUTPUTS_DATE: Final = "2025-10-22"
"""torchtitan PR 1922 ("Update PP to release memory earlier", 2025-10-22) passes
``step(return_outputs=False)`` (pytorch/pytorch PR 165822): a torchtitan run published before
it keeps the last pipeline stage's outputs of every micro-batch (``pipeline_keeps_outputs``)."""


def _source_date(run: PublishedRun) -> str | None:
    """The ISO date of the run's source (its [sources] table in the stored file), if there."""
    source = load_published_runs().sources.get(run.source)
    return source.date if source is not None else None


FUSED_LOSS: Final = {"loss_logits_bytes": 2.0, "loss_backward_bytes_per_logit": 2.0}
"""A fused softmax cross-entropy kernel over bf16 logits: it saves the logits (2 bytes each),
the per-token max-log-sum-exp and the labels, and its backward returns one logits-shaped
gradient in their dtype (2 bytes each). Source: apex contrib xentropy SoftmaxCrossEntropyLoss
(save_for_backward(logits, max_log_sum_exp, labels); xentropy_cuda.backward), the kernel
flash-attn 1.0.9's losses.cross_entropy wraps (llm-foundry setup.py, modeling_mpt.py
loss_fn fused_crossentropy)."""

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


STEP_GRAD_SYNC_FRAMEWORKS: Final = ("Meta (Llama 3 paper)",)
"""Stacks whose sharded data parallelism accumulates gradients over the micro-batches and
reduce-scatters once a step (CommAssumptions.zero2_grad_sync_per_step). Source: Llama 3 paper
(arXiv:2407.21783) sec. 3.3.2 (FSDP "synchronizes after each training step"; Numerical
stability: FP32 gradient accumulation over micro-batches, FP32 reduce-scatter). Their memory
counts the unsharded accumulation (``_step_grad_sync_memory``)."""


def _step_grad_sync_memory(run: PublishedRun) -> dict[str, Any]:
    """The memory side of a once-a-step ZeRO-2 reduce-scatter (STEP_GRAD_SYNC_FRAMEWORKS):
    every micro-batch's gradients accumulate unsharded in FP32 until it (Llama 3 paper,
    arXiv:2407.21783, sec. 3.3.2, Numerical stability: FP32 accumulation of the gradients over
    the micro-batches in the backward, then an FP32 reduce-scatter), so memory and
    communication agree (explorer.memory.accumulation)."""
    if run.framework not in STEP_GRAD_SYNC_FRAMEWORKS:
        return {}
    return {"zero2_accumulates_unsharded": True, "fsdp_accumulated_grad_bytes": 4.0}


DEEPEP_SMS: Final = 20
"""SMs DeepEP's dispatch and combine kernels hold while DualPipe overlaps them with compute.
Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.2 (20 of the H800's 132 SMs)."""

MEGATRON_DISPATCHER_SMS: Final = {"deepep": 20, "hybridep": 16}
"""SMs Megatron-Core's flex dispatcher kernels use (moe_deepep_num_sms, moe_hybridep_num_sms
defaults). Source: Megatron-Core megatron/core/transformer/transformer_config.py; NCCL's
all-to-all (the alltoall dispatcher) has no published count, so none is held for it."""

MEGATRON_CORE_FRAMEWORKS: Final = ("Megatron-Bridge", "NeMo", "Megatron-LM")
"""Frameworks whose MoE experts run Transformer Engine's GroupedLinear (one cuBLAS call per
local expert, ``ComputeAssumptions.grouped_gemm_call_s``); the others run a single-launch
grouped kernel (DeepSeek's DeepGEMM, torch._grouped_mm)."""


TORCH_CP_FRAMEWORKS: Final = ("torchtitan",)
"""Stacks whose context parallelism is PyTorch's ring (CommAssumptions.torch_cp): torchtitan
enters torch.distributed.tensor.experimental.context_parallel around the step
(torchtitan/utils.py create_context_parallel_ctx at 9dec370) with SDPA held to its flash and
memory-efficient backends."""

KV_REPEAT_UNTIL: Final = "2026-01-27"
"""torchtitan PR 2259 ("GQA without kv repeats", 2026-01-27) passes enable_gqa to SDPA; before
it the models repeat K and V to the query heads (repeat_kv before
F.scaled_dot_product_attention, torchtitan/models/llama/model.py at 9dec370), which is what
the CP exchange and its gradients carry (CommAssumptions.cp_kv_repeated)."""


def _torch_cp(run: PublishedRun) -> TorchCp:
    """How a run's stack runs PyTorch's context-parallel ring (CommAssumptions.torch_cp):
    compiled with its blocks under torch.compile, else eagerly; "none" off torchtitan."""
    if run.framework not in TORCH_CP_FRAMEWORKS:
        return "none"
    return "compiled" if run.torch_compile else "eager"


TP_COMM_OVERLAP_DEFAULT: Final = False
"""Whether the runs that published Transformer Engine's comm-GEMM overlap (``tp_comm_overlap``:
ub_tp_comm_overlap with a userbuffers config) are timed with it (explorer.comm.tp_overlap), or
with their TP collectives exposed as Megatron-Core's default (named in ``Scenario.unmodelled``).
Off by default: timed with it, the table's mean |error| rises (the large-TP rows' compute
optimism, cancelled today by the exposed collectives, shows: the tp13 report, issue 13);
``python -m validation.published --tp-comm-overlap`` times it."""


def _ub_config(run: PublishedRun) -> UbConfigName:
    """The run's userbuffers config where the overlap applies: TP > 1 with sequence parallelism
    (Megatron-Bridge's CommOverlapConfig turns it off otherwise)."""
    return run.tp_comm_overlap if run.tp > 1 and run.sequence_parallel else ""


def _token_drop(run: PublishedRun, model: ModelSpec, layout: Layout) -> dict[str, Any]:
    """The expert load of a token-drop run (memory.moe_capacity_factor, which the compute and
    communication models read as the busiest GPU's load: explorer.memory.activations
    expert_load): padded to capacity, every expert runs at its capacity whatever the routing
    (explorer.compute.moe.drop_and_pad: Megatron-Core's capacity, rounded up per expert);
    dropped but not padded, no expert runs above it. Nothing for a dropless run."""
    factor = run.moe_capacity_factor
    if factor is None or not model.is_moe:
        return {}
    if run.moe_pad_to_capacity:
        return {"moe_capacity_factor": drop_and_pad(model, layout, run.seq_len, factor).load}
    imbalance = 1.0 if run.balanced_routing else DEFAULT_ESTIMATE_ASSUMPTIONS.memory.moe_imbalance
    return {"moe_imbalance": min(imbalance, factor)}


def _assumptions(
    run: PublishedRun,
    recipe: Fp8Recipe | None,
    tp_comm_overlap: bool = TP_COMM_OVERLAP_DEFAULT,
    token_drop: dict[str, Any] | None = None,
) -> EstimateAssumptions:
    base = DEFAULT_ESTIMATE_ASSUMPTIONS
    memory = replace(
        base.memory,
        framework="pytorch" if run.framework in PYTORCH_FRAMEWORKS else "megatron",
        moe_imbalance=1.0 if run.balanced_routing else base.memory.moe_imbalance,
        activation_recipe=run.activation_recipe,
        **_te_fp8(run),
        **_pytorch_memory(run),
        **_dispatch_and_graphs(run),
        **_step_grad_sync_memory(run),
    )
    if token_drop:
        memory = replace(memory, **token_drop)
    comm = replace(
        base.comm,
        ep_domain_dedup=run.ep_dispatcher != "alltoall",
        fp8_dispatch=run.fp8_dispatch,
        cp_comm=run.cp_comm,
        fsdp_backward_prefetch="post" if run.framework == "LLM Foundry" else "pre",
        zero2_grad_sync_per_step=run.framework in STEP_GRAD_SYNC_FRAMEWORKS,
        torch_cp=_torch_cp(run),
        tp_comm_overlap=_ub_config(run) if tp_comm_overlap else "",
        cp_kv_repeated=run.framework == "torchtitan"
        and (date := _source_date(run)) is not None
        and date < KV_REPEAT_UNTIL,
    )
    compute = replace(
        base.compute,
        framework=compute_framework(run),
        attention_kernel=_attention_kernel(run),
        cuda_graphs=FULL_CUDA_GRAPHS in run.cuda_graphs,
        fused_norm=run.norm_type == "fused_rmsnorm",
        fp8_recipe=recipe or base.compute.fp8_recipe,
    )
    if run.moe_a2a_overlap:  # --overlap-moe-expert-parallel-comm: DualPipe's batch-level overlap
        comm = replace(comm, ep_overlap=comm.dualpipe_ep_overlap)
    if run.framework not in MEGATRON_CORE_FRAMEWORKS:
        compute = replace(compute, grouped_gemm_call_s=0.0, ep_chunk_sort=False)
    if run.ep_dispatcher != "alltoall":  # the flex dispatcher: tokens arrive grouped by expert
        compute = replace(compute, ep_chunk_sort=False)
    sms = kernel_figures(load_gpu(run.gpu)).num_sms
    if run.schedule in ("dualpipe", "dualpipev") and run.ep_dispatcher == "deepep":
        compute = replace(compute, comm_sm_share=DEEPEP_SMS / sms)  # DeepEP beside compute
    if run.moe_a2a_overlap:  # Megatron-Core's flex dispatcher kernels beside the compute
        held = MEGATRON_DISPATCHER_SMS.get(run.ep_dispatcher, 0)
        compute = replace(compute, a2a_overlap=True, comm_sm_share=held / sms)
    return replace(base, memory=memory, comm=comm, compute=compute)


def scenario(run: PublishedRun, tp_comm_overlap: bool = TP_COMM_OVERLAP_DEFAULT) -> Scenario:
    """The core's inputs for a run, with what they change and leave out; ``tp_comm_overlap``:
    time the run's published comm-GEMM overlap (``TP_COMM_OVERLAP_DEFAULT``)."""
    overrides: dict[str, Any] = dict(run.model_overrides)
    model = replace(load_model(run.model), **overrides)
    precision, fp8_recipe, inexact = _precision(run)
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
        assumptions=_assumptions(run, fp8_recipe, tp_comm_overlap, _token_drop(run, model, layout)),
        inexact=tuple(inexact + more),
        unmodelled=_unmodelled(run, tp_comm_overlap),
    )
