"""Compute seconds of one micro-batch on one stage by pass, and of the optimizer step.

Per GPU: each block's GEMMs at their own shapes and efficiencies (explorer.compute.kernels and
.gemm: tile and wave quantisation, depth, the roofline, anchored on the GPU's measured GEMMs),
the attention core at the GPU's published attention-kernel figures by sequence length, mask
and pass (explorer.compute.attention), memory-bound elements and FP8 casts over achievable
HBM bandwidth (explorer.compute.elementwise, .casts), and named kernel gaps. The routed
experts' work spreads over the same tp x cp x dp ranks of a stage as the dense work
(Megatron-Core folds EP into them); the busiest GPU's experts see ``moe_imbalance`` times the
mean. Times are linear in the stage's work: a block of each kind costs the same wherever it
sits, which the search's bounds rely on (explorer.search.shapes).
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from functools import lru_cache

from explorer.compute.assumptions import DEFAULT_COMPUTE_ASSUMPTIONS, ComputeAssumptions
from explorer.compute.attention import (
    BACKWARD_FLOPS_RATIO,
    FP8_SHARE_RATIO,
    TorchCp,
    attention_share,
    ring_attention_share,
    ring_merge_bytes,
)
from explorer.compute.casts import CastRecipe, cast_bytes
from explorer.compute.elementwise import stage_traffic
from explorer.compute.framework import (
    foreach_adam_bytes_per_param,
    framework_profile,
    fsdp1_grad_bytes_per_param,
    fsdp_copies_per_microbatch,
    fsdp_copy_bytes_per_param,
    issue_bound_s,
    loss_elements,
    tp_chunk_cat_copies,
)
from explorer.compute.gemm import (
    BLOCK_SCALED_GEMM_SHARE,
    gemm_efficiency,
    kernel_figures,
    peak_flops_per_s,
    with_sms,
)
from explorer.compute.kernels import Gemm, GemmTimes, block_gemms, gemm_times
from explorer.compute.moe import chunk_sort_elements
from explorer.compute.recompute import recompute_shares
from explorer.compute.work import StageWork
from explorer.frozen import fast_init
from explorer.presets import attention_curves
from explorer.specs import (
    AttentionCurve,
    GemmDType,
    GpuSpec,
    Layout,
    ModelSpec,
    PrecisionPolicy,
    TrainingWorkload,
)
from explorer.workload import ResolvedWorkload, resolve_workload

MEMORY_BOUND_LAUNCHES = 7
"""Memory-bound kernels of a block's forward besides its GEMMs: two norms, two residual adds,
the activation, RoPE and the attention core (twice as many backward)."""


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
    fp8_dispatch: bool = False
    """Routed tokens dispatched in FP8 (the comm model's ``CommAssumptions.fp8_dispatch``): the
    experts' input cast runs once per token before the dispatch; False, on each of the top-k
    BF16 copies after it (explorer.compute.kernels.expert_gemms)."""
    torch_cp: TorchCp = "none"
    """Context parallelism runs as PyTorch's ring (the comm model's ``CommAssumptions.torch_cp``):
    per layer, cp SDPA calls per rank and their merges (explorer.compute.attention
    ring_sdpa_calls, ring_merge_bytes), fused by the compiler under "compiled"; "none": one
    attention kernel per rank at s / cp."""
    kv_heads_repeated: bool = False
    """K and V reach the attention kernel with their heads repeated to the query heads (the
    comm model's ``CommAssumptions.cp_kv_repeated``): the ring's dk, dv passes are that wide."""
    resolved_policy: PrecisionPolicy | None = None
    """The workload's precision policy when the caller resolved it already (the search does,
    once per problem); None looks it up by its name (unless ``resolved`` is given)."""
    resolved: InitVar[ResolvedWorkload | None] = None
    """``workload`` resolved for ``layout`` (explorer.workload.resolve_workload) when the caller
    has it (the estimate does, once per layout: explorer.estimate.core.estimate); None resolves
    it here, once. Not kept as given: ``dataclasses.replace`` with another layout or workload
    resolves again."""
    inputs: ResolvedWorkload = field(init=False, compare=False, repr=False)
    """The workload as this layout runs it: sequence, policy, micro-batches and tokens. Left out
    of equality and hashing: it follows from ``layout`` and ``workload``, which are in them."""

    def __post_init__(self, resolved: ResolvedWorkload | None) -> None:
        if resolved is None:  # no check of M: the search's bounds' contexts too
            resolved = resolve_workload(
                self.layout, self.workload, policy=self.resolved_policy, check=False
            )
        object.__setattr__(self, "inputs", resolved)

    @property
    def policy(self) -> PrecisionPolicy:
        """The workload's precision policy (bytes per element, GEMM format)."""
        return self.inputs.policy


@fast_init
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
    attention_backward_s: float = 0.0
    """Attention core backward (what torch's ring hides its backward transfers behind)."""
    expert_forward_s: float = 0.0
    """The routed experts' part of ``forward_s``: their grouped GEMMs and the dispatcher's sort
    (Megatron-Core's ``mlp`` node, which its 1F1B all-to-all overlap pairs with the other
    micro-batch's dispatch gradient: explorer.comm.model_parallel.ep_collectives)."""
    expert_backward_s: float = 0.0
    """The routed experts' part of ``backward_s``: their input- and weight-gradient GEMMs, the
    sort's mirror and their recomputation."""

    @property
    def backward_s(self) -> float:
        """Whole backward: input gradient, weight gradient and recomputation."""
        return self.backward_input_s + self.weight_s + self.recompute_s


def cast_recipe(ctx: ComputeContext) -> CastRecipe:
    """The recipe whose casts the GEMM inputs pay: NVFP4 under an FP4 policy (Transformer
    Engine's only FP4 training recipe), else the FP8 recipe assumed or the GPU's default."""
    if ctx.policy.compute == "fp4":
        return "nvfp4"
    return ctx.assumptions.fp8_recipe or kernel_figures(ctx.gpu).fp8_recipe


def all_to_alls_overlap(layout: Layout) -> bool:
    """Whether EP all-to-alls run beside the compute (DualPipe or DualPipeV with EP), holding
    some SMs (``ComputeAssumptions.comm_sm_share``). Source: DeepSeek-V3 report sec. 3.2.2;
    deepseek-ai/DualPipe (DualPipeV keeps DualPipe's F&B overlap)."""
    return layout.schedule in ("dualpipe", "dualpipev") and layout.pp > 1 and layout.ep > 1


@dataclass(frozen=True, slots=True)
class _Kinds:
    """GEMM seconds per micro-batch of one dense and one MoE block: (dense GEMMs, routed
    experts) each; and the LM head's BF16 efficiency."""

    dense: GemmTimes
    moe: GemmTimes
    experts: GemmTimes
    head_efficiency: float


def _kinds(ctx: ComputeContext, bandwidth: float, bf16: bool = False) -> _Kinds:
    """The block kinds' GEMM seconds for ``ctx`` (cached on what they read of it); ``bf16``:
    of its blocks kept in BF16."""
    layout, a = ctx.layout, ctx.assumptions
    figures = kernel_figures(ctx.gpu)  # training shapes against the best-shape anchors
    bf16_share, low_share = figures.training_shape_share, figures.fp8_training_shape_share
    if ctx.policy.compute == "fp4" and figures.fp4_training_shape_share is not None:
        low_share = figures.fp4_training_shape_share
    return _kinds_of(
        ctx.model, ctx.gpu, layout.tp, layout.cp, layout.ep, layout.etp,
        layout.micro_batch_size, ctx.inputs.seq_len, "bf16" if bf16 else ctx.policy.compute,
        bandwidth, a.gemm_efficiency_scale * bf16_share, a.max_efficiency,
        a.grouped_gemm_call_s,
        BLOCK_SCALED_GEMM_SHARE.get(cast_recipe(ctx), 1.0) * low_share / bf16_share,
        ctx.fp8_dispatch, cast_recipe(ctx),
    )  # fmt: skip


@lru_cache(maxsize=4096)
def _kinds_of(
    model: ModelSpec,
    gpu: GpuSpec,
    tp: int,
    cp: int,
    ep: int,
    etp: int,
    mbs: int,
    seq: int,
    fmt: GemmDType,
    bandwidth: float,
    scale: float,
    cap: float,
    call_s: float = 0.0,
    block_share: float = 1.0,
    fp8_dispatch: bool = True,
    recipe: str = "",
) -> _Kinds:
    layout = Layout(tp=tp, cp=cp, ep=ep, etp=etp, micro_batch_size=mbs)

    def timed(moe: bool) -> tuple[GemmTimes, GemmTimes]:
        gemms = tuple(block_gemms(model, layout, seq, moe, fp8_dispatch))
        return gemm_times(gemms, fmt, gpu, bandwidth, scale, cap, call_s, block_share, recipe)

    dense, _ = timed(False)
    moe, experts = timed(True) if model.is_moe else (GemmTimes(), GemmTimes())
    tokens = mbs * seq / cp  # the LM head: T x V/tp x h, in BF16
    head = gemm_efficiency(tokens, model.vocab_size / tp, model.hidden_size, "bf16", gpu,
                           bandwidth)  # fmt: skip
    return _Kinds(dense, moe, experts, min(cap, head * scale))


def linear_s(ctx: ComputeContext, m: float, n: float, k: float, sms_held: int = 0) -> float:
    """Seconds of one m x n x k GEMM of a block's linear layers in the policy's format, at the
    efficiency ``pass_times`` gives the block's GEMMs (the same scale, cap and recipe as
    ``_kinds``), on the GPU less ``sms_held`` SMs (explorer.compute.gemm.with_sms): the chunks
    of Transformer Engine's comm-GEMM overlap (explorer.comm.tp_overlap)."""
    a = ctx.assumptions
    figures = kernel_figures(ctx.gpu)
    bf16_share, low_share = figures.training_shape_share, figures.fp8_training_shape_share
    if ctx.policy.compute == "fp4" and figures.fp4_training_shape_share is not None:
        low_share = figures.fp4_training_shape_share
    bandwidth = ctx.gpu.hbm_bytes_per_s * a.hbm_efficiency
    dense, _ = gemm_times(
        (Gemm(m, n, k),), ctx.policy.compute, with_sms(ctx.gpu, sms_held), bandwidth,
        a.gemm_efficiency_scale * bf16_share, a.max_efficiency, a.grouped_gemm_call_s,
        BLOCK_SCALED_GEMM_SHARE.get(cast_recipe(ctx), 1.0) * low_share / bf16_share,
        cast_recipe(ctx),
    )  # fmt: skip
    return dense.forward_s


@lru_cache(maxsize=1024)
def _curve_shares(
    curve: AttentionCurve, length: float, causal: bool, head_dim: float | None = None
) -> tuple[float, float]:
    """(forward, backward) shares of an attention table at ``length`` (cached)."""
    forward = attention_share(curve, length, causal, backward=False, head_dim=head_dim)
    return forward, attention_share(curve, length, causal, backward=True, head_dim=head_dim)


def attention_head_dim(model: ModelSpec) -> float:
    """Head dimension the attention kernel runs at: MLA's mean of its Q K^T width (nope +
    rope) and its P V width, which weigh the two products' FLOPs; else the head size."""
    if model.is_mla:
        return (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim) / 2
    return model.head_size


def attention_curve(gpu: GpuSpec, a: ComputeAssumptions) -> AttentionCurve | None:
    """The attention table a training stack calls on ``gpu``: the stack's own kernel where
    named (``compute.attention_kernel``), Transformer Engine's fused attention under
    Megatron-Core (``KernelFigures.te_attention``: cuDNN on Hopper, which TE prefers to
    FlashAttention there), else the GPU preset's table."""
    if a.attention_kernel is not None:
        return attention_curves()[a.attention_kernel]
    figures = kernel_figures(gpu)
    if a.framework == "megatron" and figures.te_attention is not None:
        return figures.te_attention
    return figures.attention


def _attention_s(work: StageWork, ctx: ComputeContext) -> tuple[float, float]:
    """(forward, backward) seconds of the attention core of one micro-batch."""
    layout, seq, a = ctx.layout, ctx.inputs.seq_len, ctx.assumptions
    fp8 = ctx.policy.compute == "fp8" and a.fp8_attention
    peak = peak_flops_per_s(ctx.gpu, "fp8" if fp8 else "bf16")
    flops = work.attention_core_flops * layout.micro_batch_size * seq / (layout.tp * layout.cp)
    curve = attention_curve(ctx.gpu, a)
    causal = a.causal_attention_flops
    if a.attention_efficiency is not None:
        forward = backward = a.attention_efficiency
    elif not ctx.flash_attention:  # batched Q K^T and P V per head: GEMMs of depth d and s
        heads = layout.micro_batch_size * ctx.model.num_attention_heads / layout.tp
        d = ctx.model.head_size
        forward = (
            gemm_efficiency(seq, seq * heads, d, "bf16", ctx.gpu)
            + gemm_efficiency(seq, d * heads, seq, "bf16", ctx.gpu)
        ) / 2
        return flops / (peak * forward), 2 * flops / (peak * forward)
    elif curve is not None and ctx.torch_cp != "none" and layout.cp > 1 and causal:  # torch ring
        head_dim = attention_head_dim(ctx.model)
        forward, backward = _ring_shares(curve, seq, layout.cp, head_dim)
        if fp8:
            forward, backward = forward * FP8_SHARE_RATIO, backward * FP8_SHARE_RATIO
    elif curve is not None:  # CP ranks run the kernel on s / cp long blocks
        head_dim = attention_head_dim(ctx.model)
        forward, backward = _curve_shares(curve, seq / layout.cp, causal, head_dim)
        if fp8:
            forward, backward = forward * FP8_SHARE_RATIO, backward * FP8_SHARE_RATIO
    else:  # no published figures: the BF16 GEMM efficiency of P V, all heads side by side
        heads = layout.micro_batch_size * ctx.model.num_attention_heads / layout.tp
        length = seq / layout.cp
        forward = gemm_efficiency(length, ctx.model.head_size * heads, length, "bf16", ctx.gpu)
        backward = forward
    forward, backward = min(forward, a.max_efficiency), min(backward, a.max_efficiency)
    merge_f, merge_b = _ring_merge_s(work, ctx) if ctx.torch_cp != "none" else (0.0, 0.0)
    return (
        flops / (peak * forward) + merge_f,
        BACKWARD_FLOPS_RATIO * flops / (peak * backward) + merge_b,
    )


@lru_cache(maxsize=1024)
def _ring_shares(
    curve: AttentionCurve, seq: float, cp: int, head_dim: float | None
) -> tuple[float, float]:
    """(forward, backward) shares of torch's ring steps (explorer.compute.attention)."""
    forward = ring_attention_share(curve, seq, cp, backward=False, head_dim=head_dim)
    return forward, ring_attention_share(curve, seq, cp, backward=True, head_dim=head_dim)


def _ring_merge_s(work: StageWork, ctx: ComputeContext) -> tuple[float, float]:
    """(forward, backward) seconds of torch's ring bookkeeping (its fp32 merges, copies and
    gradient accumulators: explorer.compute.attention.ring_merge_bytes) for one micro-batch
    over achievable HBM bandwidth; fused when the block is compiled with its ring."""
    layout, model = ctx.layout, ctx.model
    if layout.cp <= 1 or work.num_layers == 0:
        return 0.0, 0.0
    tokens = layout.micro_batch_size * ctx.inputs.seq_len / layout.cp
    heads = model.num_attention_heads / layout.tp
    out = tokens * heads * model.head_size
    kv_heads = heads if ctx.kv_heads_repeated else max(1.0, model.kv_heads / layout.tp)
    kv = tokens * 2 * kv_heads * model.head_size
    forward, backward = ring_merge_bytes(layout.cp, out, kv, ctx.torch_cp == "compiled")
    bandwidth = ctx.gpu.hbm_bytes_per_s * ctx.assumptions.hbm_efficiency
    return work.num_layers * forward / bandwidth, work.num_layers * backward / bandwidth


def _head_s(work: StageWork, ctx: ComputeContext, bandwidth: float, k: _Kinds) -> float:
    """Forward seconds of the LM head and multi-token-prediction modules of one micro-batch:
    the logits in BF16 at the LM head's GEMM shape (T x V/tp x h), each MTP module's block and
    projection at the rate of the model's own blocks (MoE if it has them)."""
    if not work.head_flops:
        return 0.0
    layout, m = ctx.layout, ctx.model
    tokens = ctx.inputs.microbatch_tokens
    eff = k.head_efficiency
    logits = 2.0 * m.hidden_size * m.vocab_size * (1 + m.num_nextn_predict_layers)
    logits = min(logits, work.head_flops)
    per_gpu = tokens / layout.tp  # head FLOPs are per token of the whole width
    seconds = logits * per_gpu / (peak_flops_per_s(ctx.gpu, "bf16") * eff)
    block = k.moe + k.experts if m.is_moe else k.dense
    rate = block.forward_s / block.flops if block.flops else 0.0  # s per FLOP of a block
    return seconds + (work.head_flops - logits) * per_gpu * rate


def _stage_gemms(k: _Kinds, dense: float, moe: float, experts: float) -> GemmTimes:
    """The GEMMs of ``dense`` dense blocks and ``moe`` MoE blocks, their routed experts run
    ``experts`` times (the busiest GPU's imbalance included)."""
    d, m, e = k.dense, k.moe, k.experts
    return GemmTimes(
        forward_s=dense * d.forward_s + moe * m.forward_s + experts * e.forward_s,
        dgrad_s=dense * d.dgrad_s + moe * m.dgrad_s + experts * e.dgrad_s,
        wgrad_s=dense * d.wgrad_s + moe * m.wgrad_s + experts * e.wgrad_s,
        flops=dense * d.flops + moe * m.flops + experts * e.flops,
        cast_forward=dense * d.cast_forward + moe * m.cast_forward + experts * e.cast_forward,
        cast_backward=dense * d.cast_backward + moe * m.cast_backward + experts * e.cast_backward,
        launches=dense * d.launches + moe * (m.launches + e.launches),
    )


@lru_cache(maxsize=16384)
def pass_times(work: StageWork, ctx: ComputeContext) -> PassTimes:
    """Seconds of forward, backward (input and weight parts) and recompute of one micro-batch.

    Ledger: forward = the blocks' GEMMs at their shapes + LM head (BF16) + attention core +
    memory-bound bytes and FP8 casts of the GEMM inputs over achievable HBM + kernel gaps;
    input gradient = the GEMMs' input-gradient shapes + head + attention backward (2.5 x the
    forward FLOPs with FlashAttention, 2 x with the classic core) + 2 x the memory-bound bytes
    + casts of the output gradients; weight gradient = the GEMMs' weight-gradient shapes +
    head; recompute repeats the shares of the forward that the layout's recipe recomputes
    (explorer.compute.recompute: full the blocks', selective the attention core's or its
    modules'; Korthikanti et al. 2022, arXiv:2205.05198, sec. 5). Source: module docstring.
    """
    a, layout, seq = ctx.assumptions, ctx.layout, ctx.inputs.seq_len
    bandwidth = ctx.gpu.hbm_bytes_per_s * a.hbm_efficiency
    k = _kinds(ctx, bandwidth)
    moe, dense = work.num_moe_layers, work.num_layers - work.num_moe_layers
    # blocks kept in BF16 (TrainingWorkload.bf16_layers_at_start / _at_end): their GEMMs in
    # BF16, no casts; the rest in the policy's format
    kb = _kinds(ctx, bandwidth, bf16=True) if work.bf16_layers else k
    b_moe, b_dense = work.bf16_moe_layers, work.bf16_layers - work.bf16_moe_layers
    l_moe, l_dense = moe - b_moe, dense - b_dense
    imbalance = ctx.moe_imbalance
    g = _stage_gemms(k, l_dense, l_moe, l_moe * imbalance)
    if work.bf16_layers:
        g = g + _stage_gemms(kb, b_dense, b_moe, b_moe * imbalance)
    peak = peak_flops_per_s(ctx.gpu, ctx.policy.compute)
    share = k.dense.flops / (peak * k.dense.forward_s) if k.dense.forward_s else 1.0
    attention_f, attention_b = _attention_s(work, ctx)
    head = _head_s(work, ctx, bandwidth, k)
    overlapped = all_to_alls_overlap(layout) or (a.a2a_overlap and layout.ep > 1)
    sms = 1 / (1 - a.comm_sm_share) if overlapped else 1.0  # SMs the all-to-alls hold
    profile = framework_profile(a.framework)
    traffic = stage_traffic(
        work, ctx.model, layout, seq, ctx.flash_attention, ctx.dropout, profile.ledger,
        a.fused_norm, profile.triton_attention,
    )  # fmt: skip
    tokens = ctx.inputs.microbatch_tokens  # b s / cp: traffic is per token / tp
    per_element = ctx.policy.activation_bytes * tokens / bandwidth
    memory, attention_memory = traffic.blocks * per_element, traffic.attention * per_element
    extra_f, extra_b = _framework_s(work, ctx, bandwidth, per_element)
    sort = 0.0  # the dispatcher's sort by local expert and back, each pass (compute.moe)
    if a.ep_chunk_sort and moe:
        sort = moe * ctx.moe_imbalance * chunk_sort_elements(ctx.model, layout) * per_element
    recipe = cast_recipe(ctx)
    cast_f = cast_bytes(g.cast_forward, recipe) / bandwidth
    cast_b = cast_bytes(g.cast_backward, recipe) / bandwidth
    launches = g.launches + 3 * MEMORY_BOUND_LAUNCHES * work.num_layers
    gap = 0.0 if a.cuda_graphs else a.kernel_gap_s  # a graph replays without gaps
    gap_f, gap_b = gap * launches / 3, gap * launches / 3
    linear_f = sms * g.forward_s
    blocks = linear_f + sms * attention_f + memory + cast_f + gap_f + extra_f + sort
    r = recompute_shares(ctx.model, layout, work.num_layers, moe, seq)
    lin = sms * (l_dense * k.dense.forward_s + l_moe * k.moe.forward_s)  # dense GEMMs, routers
    lin += sms * (b_dense * kb.dense.forward_s + b_moe * kb.moe.forward_s)
    exp = sms * imbalance * (l_moe * k.experts.forward_s + b_moe * kb.experts.forward_s)
    recompute = r.linear * (lin + cast_f + gap_f) + r.expert * (exp + sort)
    grads = l_moe * (k.experts.dgrad_s + k.experts.wgrad_s)
    grads += b_moe * (kb.experts.dgrad_s + kb.experts.wgrad_s)
    expert_b = sms * imbalance * grads + sort + r.expert * (exp + sort)
    recompute += r.attention * (sms * attention_f + attention_memory)
    recompute += r.memory_bound * (memory - attention_memory)
    backward = sms * (g.dgrad_s + head + attention_b) + traffic.backward * per_element
    backward += cast_b + gap_b + extra_b + sort
    weight = sms * (g.wgrad_s + head) + gap_b
    issue = _issue_s(work, ctx, g.launches / 3, traffic.forward_launches)
    forward = blocks + sms * head
    issue_b = _issue_s(work, ctx, 2 * g.launches / 3, traffic.backward_launches)
    return PassTimes(
        forward_s=forward + issue_bound_s(1.0, forward, issue),
        backward_input_s=backward + issue_bound_s(1.0, backward + weight, issue_b),
        weight_s=weight,
        recompute_s=recompute,
        attention_forward_s=sms * attention_f,
        dense_efficiency=share,
        attention_backward_s=sms * attention_b,
        expert_forward_s=exp + sort,
        expert_backward_s=expert_b,
    )


def _framework_s(
    work: StageWork, ctx: ComputeContext, bandwidth: float, per_element: float
) -> tuple[float, float]:
    """(forward, backward) seconds of the framework profile's work beside the blocks' own:
    the fp32 loss on the last stage, FSDP2's copies around its collectives (FSDP1's flat
    gradient and its cast) under ZeRO-3, and DTensor's copies around batch-first SP
    collectives (explorer.compute.framework)."""
    profile, layout = framework_profile(ctx.assumptions.framework), ctx.layout
    forward = backward = 0.0
    if profile.fp32_loss and work.head_flops:
        f, b = loss_elements(ctx.model.vocab_size / layout.tp, profile.loss_ledger)
        forward, backward = f * per_element, b * per_element
    if (profile.fsdp2_copies or profile.fsdp1_flat_grads) and layout.zero >= 3:
        params = work.dense_params / layout.tp + work.expert_params / (layout.ep * layout.etp)
        times = fsdp_copies_per_microbatch(layout, ctx.inputs.microbatches) * params / bandwidth
        f, b = fsdp_copy_bytes_per_param(ctx.policy) if profile.fsdp2_copies else (0.0, 0.0)
        if profile.fsdp1_flat_grads:
            b += fsdp1_grad_bytes_per_param(ctx.policy)
        forward, backward = forward + f * times, backward + b * times
    if profile.tp_chunk_cat and work.num_layers:  # read + write the whole buffer per copy
        f, b = tp_chunk_cat_copies(layout, work.num_layers)
        copy = 2.0 * ctx.model.hidden_size * per_element
        forward, backward = forward + f * copy, backward + b * copy
    return forward, backward


def _issue_s(work: StageWork, ctx: ComputeContext, gemms: float, memory_bound: float) -> float:
    """CPU seconds to issue a pass's kernels (GEMMs, attention, memory-bound) at the
    profile's (or ``compute.kernel_issue_s``'s) cost each; 0 under CUDA graphs."""
    a = ctx.assumptions
    if a.cuda_graphs:
        return 0.0
    cost = a.kernel_issue_s
    cost = framework_profile(a.framework).kernel_issue_s if cost is None else cost
    return cost * (gemms + work.num_layers + memory_bound)


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
    foreach = framework_profile(ctx.assumptions.framework).optimizer == "foreach"
    per_param = (foreach_adam_bytes_per_param if foreach else optimizer_bytes_per_param)(ctx.policy)
    moved = (dense + experts) * per_param
    return moved / (ctx.gpu.hbm_bytes_per_s * ctx.assumptions.hbm_efficiency)
