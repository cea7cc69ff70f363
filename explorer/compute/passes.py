"""Compute seconds of one micro-batch on one stage by pass, and of the optimizer step.

Per GPU: GEMM FLOPs over b s / (tp cp) tokens at the tensor-core peak times the kernel
efficiency (explorer.compute.kernels), plus memory-bound elements over HBM bandwidth
(explorer.compute.elementwise). The routed experts' work spreads over the same tp x cp x dp
ranks of a stage as the dense work (Megatron-Core folds EP into them), so it divides by tp x cp
too; the busiest GPU's experts see ``moe_imbalance`` times the mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from explorer.compute.assumptions import DEFAULT_COMPUTE_ASSUMPTIONS, ComputeAssumptions
from explorer.compute.elementwise import stage_traffic
from explorer.compute.kernels import (
    dense_gemm_size,
    expert_gemm_size,
    kernel_efficiency,
    peak_flops_per_s,
)
from explorer.compute.work import StageWork
from explorer.precision import precision_policy
from explorer.specs import GpuSpec, Layout, ModelSpec, PrecisionPolicy, TrainingWorkload


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeContext:
    """Everything besides a stage's work that its compute time depends on."""

    model: ModelSpec
    gpu: GpuSpec
    layout: Layout
    workload: TrainingWorkload
    assumptions: ComputeAssumptions = DEFAULT_COMPUTE_ASSUMPTIONS
    moe_imbalance: float = 1.0
    """Busiest GPU's routed tokens over the mean (the memory model's assumption)."""
    flash_attention: bool = True
    """FlashAttention: no s x s scores in HBM (the memory model's switch)."""
    dropout: bool = False
    """Dropout layers present (the memory model's switch)."""

    @property
    def policy(self) -> PrecisionPolicy:
        """The workload's precision policy (bytes per element, GEMM format)."""
        return precision_policy(self.workload.precision, self.workload.grad_dtype)


@dataclass(frozen=True, slots=True, kw_only=True)
class PassTimes:
    """Compute seconds of one micro-batch on one stage, per GPU, by pass."""

    forward_s: float
    """Forward pass."""
    backward_input_s: float
    """Input-gradient part of the backward (B of zero-bubble schedules)."""
    weight_s: float
    """Weight-gradient part of the backward (W)."""
    recompute_s: float
    """Forward work repeated before the backward (activation recomputation)."""
    attention_forward_s: float
    """Attention core forward (what context-parallel transfers hide behind)."""
    dense_efficiency: float
    """Kernel efficiency of the dense GEMMs."""

    @property
    def backward_s(self) -> float:
        """Whole backward: input gradient, weight gradient and recomputation."""
        return self.backward_input_s + self.weight_s + self.recompute_s


@dataclass(frozen=True, slots=True)
class _Forward:
    """Forward seconds of one micro-batch by kind of work."""

    linear: float
    head: float
    expert: float
    attention: float
    memory_bound: float
    attention_memory_bound: float
    efficiency: float


def _peaks(ctx: ComputeContext) -> tuple[float, float]:
    """(linear GEMM peak, attention core peak), FLOP/s."""
    compute = ctx.policy.compute
    attention = "bf16" if compute == "fp8" and not ctx.assumptions.fp8_attention else compute
    return peak_flops_per_s(ctx.gpu, compute), peak_flops_per_s(ctx.gpu, attention)


def all_to_alls_overlap(layout: Layout) -> bool:
    """Whether EP all-to-alls run beside the compute (DualPipe or DualPipeV with EP), holding
    some SMs (``ComputeAssumptions.comm_sm_share``). Source: DeepSeek-V3 report sec. 3.2.2;
    deepseek-ai/DualPipe (DualPipeV keeps DualPipe's F&B overlap)."""
    return layout.schedule in ("dualpipe", "dualpipev") and layout.pp > 1 and layout.ep > 1


def _forward(work: StageWork, ctx: ComputeContext) -> _Forward:
    layout, seq = ctx.layout, ctx.workload.seq_len
    linear_peak, attention_peak = _peaks(ctx)
    dense = kernel_efficiency(dense_gemm_size(layout, ctx.model, seq), ctx.assumptions)
    expert = kernel_efficiency(expert_gemm_size(layout, ctx.model, seq), ctx.assumptions)
    attention_eff = ctx.assumptions.attention_efficiency or dense
    tokens = layout.micro_batch_size * seq / (layout.tp * layout.cp)  # per GPU, TP-split
    if all_to_alls_overlap(layout):  # SMs held by the all-to-alls (ComputeAssumptions)
        linear_peak *= 1 - ctx.assumptions.comm_sm_share
        attention_peak *= 1 - ctx.assumptions.comm_sm_share
    traffic = stage_traffic(work, ctx.model, layout, seq, ctx.flash_attention, ctx.dropout)
    bytes_per_s = ctx.gpu.hbm_bytes_per_s * ctx.assumptions.hbm_efficiency
    per_element = ctx.policy.activation_bytes * tokens * layout.tp / bytes_per_s  # b s / cp
    return _Forward(
        linear=work.linear_flops * tokens / (linear_peak * dense),
        head=work.head_flops * tokens / (linear_peak * dense),
        expert=work.expert_flops * tokens * ctx.moe_imbalance / (linear_peak * expert),
        attention=work.attention_core_flops * tokens / (attention_peak * attention_eff),
        memory_bound=traffic.blocks * per_element,
        attention_memory_bound=traffic.attention * per_element,
        efficiency=dense,
    )


@lru_cache(maxsize=16384)
def pass_times(work: StageWork, ctx: ComputeContext) -> PassTimes:
    """Seconds of forward, backward (input and weight parts) and recompute of one micro-batch.

    Ledger: forward = GEMM FLOPs / (peak x efficiency) + memory-bound bytes / HBM; input
    gradient = 1 x the linear forward + 2 x the attention core (dS, dQ, dK, dV: two products
    per forward one; the core has no weights) + 2 x the memory-bound bytes; weight gradient =
    1 x the linear forward; full recompute repeats the blocks' forward, selective the
    attention core's (Korthikanti et al. 2022, arXiv:2205.05198, sec. 5).
    Source: explorer.flops convention; module docstring.
    """
    f = _forward(work, ctx)
    gemms = f.linear + f.head + f.expert
    attention = f.attention + f.attention_memory_bound
    blocks = f.linear + f.expert + f.attention + f.memory_bound
    recompute = {"none": 0.0, "selective": attention, "full": blocks}[ctx.layout.recompute]
    return PassTimes(
        forward_s=gemms + f.attention + f.memory_bound,
        backward_input_s=gemms + 2 * f.attention + 2 * f.memory_bound,
        weight_s=gemms,
        recompute_s=recompute,
        attention_forward_s=f.attention,
        dense_efficiency=f.efficiency,
    )


def optimizer_bytes_per_param(policy: PrecisionPolicy) -> float:
    """HBM bytes an Adam step reads and writes per parameter it owns.

    Ledger: read and write the master weights (or the weights when there is no master),
    moments m and v; read the gradient twice (norm for clipping, then the update); write the
    working copy when a master copy exists. Source: torch.optim.AdamW / Megatron-Core
    DistributedOptimizer step (multi-tensor apply), one pass each.
    """
    weights = policy.master_bytes or policy.param_bytes
    working = policy.param_bytes if policy.master_bytes else 0.0
    return 2 * weights + 2 * policy.optimizer_bytes + 2 * policy.grad_bytes + working


def optimizer_step_s(work: StageWork, ctx: ComputeContext) -> float:
    """Seconds of the optimizer step on one GPU of a stage (memory bound).

    Parameters a GPU updates: dense / tp and experts / (ep etp), each divided by its
    data-parallel group (dp cp, resp. edp) under ZeRO >= 1 (the distributed optimizer).
    Source: Rajbhandari et al. 2020 (arXiv:1910.02054) sec. 5 (optimizer state partitioning).
    """
    layout = ctx.layout
    dense = work.dense_params / layout.tp
    experts = work.expert_params / (layout.ep * layout.etp)
    if layout.zero >= 1:
        dense /= layout.dp * layout.cp
        experts /= layout.tp * layout.cp * layout.dp / (layout.ep * layout.etp)
    moved = (dense + experts) * optimizer_bytes_per_param(ctx.policy)
    return moved / (ctx.gpu.hbm_bytes_per_s * ctx.assumptions.hbm_efficiency)
