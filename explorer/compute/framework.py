"""Framework profiles: what a training stack runs around its GEMMs and attention kernels.

The same model costs different memory-bound work under different stacks. A profile names, per
stack, which ledger of memory-bound kernels its blocks launch (explorer.compute.elementwise:
``fused`` as Megatron-Core with Transformer Engine, ``eager`` as PyTorch eager autograd runs
the model code op by op, ``compiled`` as torch.compile / Inductor fuses each block), whether the
loss casts the logits to fp32 and runs an unfused cross-entropy, whether FSDP2 copies the
parameters out of and the gradients into its flat collective buffers on the compute stream,
the optimizer step's form (one fused multi-tensor pass, or torch.optim's foreach AdamW), and
the CPU time to issue one kernel (the launch-gap term; zero under CUDA graphs).

Data loading is not charged under any profile: torchtitan's and Megatron's loaders prefetch in
worker processes and no published run here states a loader stall (a named zero).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from explorer.specs import Layout, PrecisionPolicy

ComputeFramework = Literal[
    "megatron", "torchtitan", "torchtitan-compile", "deepspeed", "pytorch", "pytorch-fsdp1"
]
"""Training stacks with a profile (``compute.framework``)."""
MemoryBoundLedger = Literal["fused", "eager", "compiled"]
"""Which kernels a block's norms, RoPE, activations and residuals run as."""
OptimizerForm = Literal["fused", "foreach"]
"""One fused multi-tensor Adam pass, or torch.optim's foreach AdamW (one pass per op)."""
LossLedger = Literal["torch", "megatron"]
"""Which fp32 cross-entropy ops a stack runs over the logits (loss_elements)."""

EAGER_KERNEL_ISSUE_S: Final = 5e-6
"""CPU seconds to issue one kernel from eager PyTorch (Python, autograd recording, dispatcher,
cudaLaunchKernel). Source: Meta's Holistic Trace Analysis docs (facebookresearch/
HolisticTraceAnalysis, docs/source/features/cuda_kernel_launch_stats.rst): the CPU-side launch
of a kernel in PyTorch traces usually takes 5-20 us; the low end is taken. Not measured on the
published runs' hosts: a named assumption (``compute.kernel_issue_s``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkProfile:
    """What one training stack runs besides its GEMMs and attention kernels."""

    ledger: MemoryBoundLedger
    fp32_loss: bool
    """The logits are cast to fp32 before the cross-entropy, whose passes over them
    ``loss_ledger`` names (explorer.compute.framework.loss_elements); False: a fused kernel
    over the bf16 logits, not charged."""
    fsdp2_copies: bool
    """Under ZeRO-3, FSDP2's copy-out after each parameter all-gather and copy-in before each
    gradient reduce-scatter run on the compute stream (fsdp_copy_bytes_per_param)."""
    optimizer: OptimizerForm
    kernel_issue_s: float
    """CPU seconds to issue one kernel; a pass cannot finish before its kernels are issued."""
    source: str
    triton_attention: bool = False
    """The attention core is the Triton FlashAttention of 2022 behind a fused QKV projection
    (llm-foundry's attn_impl triton), whose backward moves more than the kernel
    (explorer.compute.elementwise.triton_flash_attention_glue)."""
    fsdp1_flat_grads: bool = False
    """Under ZeRO-3, FSDP1's flat parameter: the backward of its views gathers the
    parameters' gradients into the flat gradient, and the post-backward hook casts it to the
    reduce dtype before the reduce-scatter (fsdp1_grad_bytes_per_param)."""
    loss_ledger: LossLedger = "torch"
    """``torch``: log_softmax + nll_loss (torchtitan's F.cross_entropy); ``megatron``:
    Megatron-Core's vocab-parallel cross-entropy (loss_elements)."""
    tp_chunk_cat: bool = False
    """Tensor parallelism through DTensor on batch-first activations: sequence parallelism
    shards dim 1, so every SP all-gather and reduce-scatter copies the whole buffer once on
    the compute stream (tp_chunk_cat_copies)."""


FRAMEWORKS: Final[dict[ComputeFramework, FrameworkProfile]] = {
    "megatron": FrameworkProfile(
        ledger="fused",
        fp32_loss=True,
        loss_ledger="megatron",
        fsdp2_copies=False,
        optimizer="fused",
        kernel_issue_s=0.0,
        source="Megatron-Core with Transformer Engine: fused norm, bias-dropout-add and SwiGLU "
        "kernels (megatron/core/fusions); its vocab-parallel cross-entropy, fused or not, "
        "upcasts the logits to fp32 (tensor_parallel/cross_entropy.py calculate_logits_max, "
        "fusions/fused_cross_entropy.py: loss_elements); DistributedOptimizer's "
        "multi-tensor Adam; issue cost 0 as the estimate had it (set compute.kernel_issue_s "
        "to charge one)",
    ),
    "torchtitan": FrameworkProfile(
        ledger="eager",
        fp32_loss=True,
        fsdp2_copies=True,
        optimizer="foreach",
        kernel_issue_s=EAGER_KERNEL_ISSUE_S,
        source="pytorch/torchtitan 9dec370 (2024-12): torchtitan/models/llama/model.py and "
        "models/norms.py RMSNorm run eager; train.py casts the logits with .float() before "
        "F.cross_entropy; optimizer.py builds AdamW with foreach=not fused (fused False); "
        "parallelize_llama.py applies FSDP2 fully_shard with bf16 params and fp32 reduce",
        tp_chunk_cat=True,
    ),
    "torchtitan-compile": FrameworkProfile(
        ledger="compiled",
        fp32_loss=True,
        fsdp2_copies=True,
        optimizer="foreach",
        kernel_issue_s=EAGER_KERNEL_ISSUE_S,
        source="torchtitan 9dec370 parallelize_llama.py apply_compile: torch.compile of each "
        "TransformerBlock (fullgraph); the loss, FSDP2 hooks and optimizer stay eager",
        tp_chunk_cat=True,
    ),
    "deepspeed": FrameworkProfile(
        ledger="eager",
        fp32_loss=True,
        fsdp2_copies=False,
        optimizer="fused",
        kernel_issue_s=EAGER_KERNEL_ISSUE_S,
        source="DeepSpeed with an eager Hugging Face model (LlamaRMSNorm runs the same "
        "fp32 upcast, pow, mean, rsqrt, mul ops; logits cast to fp32 before the loss); "
        "DeepSpeed's FusedAdam (multi-tensor apply); ZeRO-3 parameters are views of the "
        "gathered flat buffer, taken as no copy-out (not checked in DeepSpeed's source)",
    ),
    "pytorch": FrameworkProfile(
        ledger="eager",
        fp32_loss=True,
        fsdp2_copies=True,
        optimizer="foreach",
        kernel_issue_s=EAGER_KERNEL_ISSUE_S,
        source="plain PyTorch eager with FSDP2 (or DDP) and torch.optim.AdamW, whose default "
        "on CUDA tensors is the foreach implementation (torch/optim/optimizer.py "
        "_default_to_fused_or_foreach)",
        tp_chunk_cat=True,
    ),
    "pytorch-fsdp1": FrameworkProfile(
        ledger="eager",
        fp32_loss=False,
        fsdp2_copies=False,
        optimizer="foreach",
        kernel_issue_s=EAGER_KERNEL_ISSUE_S,
        source="plain PyTorch eager with FSDP1 (FullyShardedDataParallel), as MosaicML's "
        "Composer / LLM Foundry run it: flat parameters are all-gathered into the unsharded "
        "flat buffer the parameters view, so no copy-out; the views' backward writes the "
        "gradients into the flat gradient, which is cast to the reduce dtype before the "
        "reduce-scatter (torch/distributed/fsdp/_flat_param.py, _runtime_utils.py; "
        "fsdp1_grad_bytes_per_param); LLM Foundry's MPT loss is flash-attn's fused "
        "CUDA cross-entropy (llmfoundry/models/mpt/modeling_mpt.py loss_fn default "
        "fused_crossentropy, flash_attn.losses.cross_entropy, 2023), not an fp32 cast; "
        "attention: attn_impl triton, the submit_benchmarks.py default (2023); "
        "torch.optim AdamW (foreach)",
        fsdp1_flat_grads=True,
        triton_attention=True,
    ),
}
"""The profiles by name; ``megatron`` is the default and keeps the estimate's Megatron-Core
figures."""


def framework_profile(name: ComputeFramework) -> FrameworkProfile:
    """The named stack's profile (ValueError, one sentence, for an unknown name)."""
    if name not in FRAMEWORKS:
        raise ValueError(f"compute.framework must be one of {', '.join(FRAMEWORKS)}, got {name!r}")
    return FRAMEWORKS[name]


def loss_elements(vocab_per_gpu: float, ledger: LossLedger = "torch") -> tuple[float, float]:
    """(forward, backward) 2-byte elements per token of an fp32 cross-entropy over the logits.

    ``megatron``, in bytes per logit: the upcast fused with the row max reads 2 and writes 4;
    exp(x - max) in place 4 + 4; the row sum reads 4; the division into the softmax saved for
    backward 4 + 4 (26 bytes, 13 elements); backward scales it in place by the output gradient
    (4 + 4) and casts it to the logits' dtype (4 + 2; 14 bytes, 7 elements). Source:
    Megatron-Core megatron/core/fusions/fused_cross_entropy.py (calculate_logits_max,
    _exp_logits_inplace, sum, calculate_cross_entropy_loss's div_; calculate_gradients:
    _scale_gradients_inplace, .to(logits_dtype)) over tensor_parallel/cross_entropy.py's
    VocabParallelCrossEntropy, whose unfused path adds an in-place subtraction (8 bytes): the
    fused count is the lower bound of the two.

    ``torch`` (fp32 counted as two elements): forward ``logits.float()`` reads 1 and writes 2,
    log_softmax reads 2 and writes 2 (each row read once: a lower bound, as rows of 128k do
    not fit on chip); backward nll_loss_backward writes a zero-filled 2, log_softmax_backward
    reads 4 and writes 2, the cast back reads 2 and writes 1. Per vocabulary entry on the GPU
    (V / tp under torchtitan's loss parallel). Source: torchtitan 9dec370 train.py loss_fn;
    F.cross_entropy is log_softmax + nll_loss (torch/nn/functional.py).
    """
    if ledger == "megatron":
        return 13.0 * vocab_per_gpu, 7.0 * vocab_per_gpu
    return 7.0 * vocab_per_gpu, 11.0 * vocab_per_gpu


def fsdp_copy_bytes_per_param(policy: PrecisionPolicy) -> tuple[float, float]:
    """(forward, backward) HBM bytes FSDP2 moves on the compute stream per unsharded parameter
    and micro-batch: the copy-out of each all-gather (split_with_sizes_copy of the gathered
    buffer into the parameters: read and write at the working width), in forward and again in
    backward (parameters resharded after forward), and the reduce-scatter copy-in (chunk_cat
    of the bf16 gradients into the fp32 reduce buffer: read the working width, write the
    gradient width). The all-gather copy-in (cast of the fp32 shard and foreach_copy) runs on
    its own stream on 1/dp of the parameters and is left out. Source: PyTorch
    torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py (torch/distributed/_composable/
    fsdp/ in torch 2.5-2.6; foreach_all_gather_copy_out
    waits on the all-gather event in the current stream; foreach_reduce runs
    foreach_reduce_scatter_copy_in before reduce_scatter_stream.wait_stream).
    """
    width = policy.param_bytes
    return 2 * width, 2 * width + width + policy.grad_bytes


def fsdp1_grad_bytes_per_param(policy: PrecisionPolicy) -> float:
    """HBM bytes FSDP1 moves per unsharded parameter and micro-batch after the backward's
    GEMMs: the backward of the flat parameter's views (torch.split in
    FlatParamHandle._get_unflat_views; split_with_sizes_backward is an at::cat of the
    gradients, tools/autograd/derivatives.yaml) reads and writes every gradient at the
    working width, and _post_backward_hook casts the flat gradient to the reduce dtype
    (flat_param.grad.to(handle._reduce_dtype): read the working width, write the reduce
    width) when they differ, as under Composer's mixed_precision DEFAULT (fp32 reduce). The
    cast runs on the post-backward stream beside the compute; it is counted here with the
    compute's HBM time (an approximation: it shares the HBM). The sharded gradient's
    accumulation and the fp32 shard's cast before the all-gather touch 1 / dp of the
    parameters and are left out. Source: torch/distributed/fsdp/_flat_param.py,
    _runtime_utils.py (torch 2.0-2.3).
    """
    width = policy.param_bytes
    cast = width + policy.grad_bytes if policy.grad_bytes != width else 0.0
    return 2 * width + cast


def fsdp_copies_per_microbatch(layout: Layout, microbatches: int) -> float:
    """How many times per micro-batch FSDP2's gathers and copies run: every micro-batch
    without pipeline parallelism; once per step with it (torch.distributed.pipelining keeps
    FSDP modules unsharded over the micro-batches and reduce-scatters after the last:
    stage.py, set_reshard_after_backward / set_requires_gradient_sync)."""
    return 1.0 if layout.pp == 1 else 1.0 / max(1, microbatches)


def tp_chunk_cat_copies(layout: Layout, layers: int) -> tuple[float, float]:
    """(forward, backward) full-buffer copies per micro-batch that DTensor's sequence-parallel
    collectives make on batch-first activations ([b, s, h] sharded on dim 1): the functional
    all-gather gathers along dim 0 and then runs torch.cat(torch.chunk(out, tp, 0), dim=1);
    the reduce-scatter first runs torch.cat(torch.chunk(x, tp, dim=1)) to make dim 0 the
    scattered one. Each copy reads and writes the whole (gathered / unscattered) buffer. Per
    block: 2 all-gathers and 2 reduce-scatters forward, the mirror 4 backward, 4 more with full
    recompute and 2 more (the all-gathers) under torchtitan's op-level SAC, as
    explorer.comm.model_parallel.tp_collectives counts them. Source: PyTorch
    torch/distributed/_functional_collectives.py all_gather_tensor and reduce_scatter_tensor
    (gather_dim / scatter_dim != 0); torchtitan parallelize_llama.py apply_tp
    (SequenceParallel and PrepareModuleInput on Shard(1)). Megatron-Core's SP is
    sequence-first (gathers dim 0): no copy."""
    if not layout.sp:
        return 0.0, 0.0
    forward = 4.0 * layers
    backward = forward * (2 if layout.recompute == "full" else 1)
    if layout.recompute_ops and layout.recompute == "selective":
        backward += 2.0 * layers
    return forward, backward


def foreach_adam_bytes_per_param(policy: PrecisionPolicy) -> float:
    """HBM bytes torch.optim's foreach AdamW (and clip_grad_norm_) moves per parameter.

    Ledger (w weight width, s one moment's width, g gradient width): weight decay
    param.mul_ (2 w); exp_avg.lerp_(grad) (2 s + g); exp_avg_sq.mul_ (2 s); addcmul_(grad,
    grad) (2 s + 2 g); sqrt, div_ and add_ of the denominator (3 x 2 s); addcdiv_ into the
    weights (2 w + 2 s); clip_grad_norm_'s foreach_norm and foreach_mul_ of the gradients
    (3 g). FSDP2 keeps no separate bf16 copy (its all-gather casts). Source:
    torch/optim/adamw.py _multi_tensor_adamw (capturable False); torch/nn/utils/clip_grad.py.
    """
    w = policy.master_bytes or policy.param_bytes
    s = policy.optimizer_bytes / 2
    g = policy.grad_bytes
    return 4 * w + 14 * s + 6 * g


def issue_bound_s(launches: float, gpu_s: float, issue_s: float) -> float:
    """Seconds a pass waits on the CPU beyond its GPU time: the CPU issues ``launches``
    kernels at ``issue_s`` each while the GPU works through them, so the pass takes the
    longer of the two (the CPU runs ahead of large kernels: 0 then)."""
    return max(0.0, launches * issue_s - gpu_s)
