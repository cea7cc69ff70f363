"""Prefill and decode latency of one serving replica: stage rooflines, TTFT, ITL, HBM bound.

Model (per replica of ``tp x pp x ep`` GPUs; memory conventions in explorer.memory.serving_layout):
- Decode runs the replica's sequences as ``pp`` micro-batches (vLLM's pipeline engines). One
  micro-batch on one stage is a roofline per kernel class (GEMMs, routed experts, attention,
  one after another: ``Roofline.kernels_s``), CUDA graphs padding a decode-only batch to its
  captured size (``ServingAssumptions.cuda_graphs``), plus exposed communication
  (2 TP all-reduces per block, 2 EP all-to-alls per MoE block). Memory traffic is the weights
  once, routed experts only as touched (E (1 - (1 - k/E)^tokens) per MoE block) and every
  sequence's KV cache at its mean context, prompt + output / 2.
- Prefill runs chunks of ``prefill_chunk_tokens``; each attention data-parallel group prefills
  its own prompt at the same time (the loaded case). TTFT = chunks through the pipeline.
- Chunked prefill under a token budget (``prefill_chunk_tokens`` = max_num_batched_tokens):
  each step runs the decodes and mixes in the prompt tokens of the requests replacing those
  that finish (concurrency / output_len requests a step), at most the budget the decodes
  leave, so ITL grows by at most one budget of prefill; beyond what the budget sustains,
  sequences wait for prefill and TTFT grows instead (``sustained_decodes``).
Left out: see ``LEAVES_OUT`` (explorer.serving.assumptions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from explorer.comm.collectives import CollectiveKind, collective_s
from explorer.comm.topology import GroupName, GroupPlacement, placement_links
from explorer.counting import param_counts
from explorer.flops import block_forward_flops, mlp_weights
from explorer.memory.serving import (
    ACTIVATION_BYTES,
    MemoryAssumptions,
    ServingLayout,
    StageShape,
    kv_bytes_per_token,
    stage_shapes,
    weight_bytes_per_param,
)
from explorer.serving.assumptions import ServingAssumptions, graph_batch
from explorer.serving.deepep import copy_bytes, ep_exchange_s
from explorer.serving.drafts import (
    Speculation,
    check_speculation,
    draft_case,
    expected_tokens_per_step,
)
from explorer.serving.experts import expert_imbalance, expert_slots, experts_touched
from explorer.serving.kernels import (
    decode_attention_compute_share,
    decode_attention_flop_scale,
    dense_gemm_cost,
    elementwise_bytes_per_token,
    expert_gemm_cost,
    gemm_format,
    logits_cost,
    prefill_attention_share,
)
from explorer.serving.keys import attention_flops_share, decode_kv_share
from explorer.serving.mla import absorbed_attention_flops_per_key
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload, WeightDType
from explorer.units import BYTES_PER_DTYPE

Bound = Literal["compute", "memory", "communication"]


@dataclass(frozen=True, slots=True)
class Roofline:
    """Seconds of one stage step, by resource; ``total_s`` = the kernels' time (at least
    max(compute, memory)) plus exposed communication."""

    compute_s: float
    memory_s: float
    communication_s: float
    kernels_s: float = 0.0
    """The step's kernel classes one after another, each at its own max(compute, memory): the
    GEMMs against their weights, the routed experts against theirs, attention against the KV
    cache. Engines run them in sequence on one stream, so one's memory time does not hide
    another's compute (NanoFlow, Zhu et al. 2024, arXiv:2408.12757, which overlaps them
    with nano-batches because engines do not); 0 leaves max(compute, memory). Eager steps
    also wait for their host launches (``ServingAssumptions.cuda_graphs``)."""

    @property
    def total_s(self) -> float:
        return max(self.compute_s, self.memory_s, self.kernels_s) + self.communication_s

    @property
    def bound(self) -> Bound:
        """The resource that takes longest: compute, memory or communication."""
        parts: dict[Bound, float] = {
            "compute": self.compute_s,
            "memory": self.memory_s,
            "communication": self.communication_s,
        }
        return max(parts, key=parts.__getitem__)


@dataclass(frozen=True, slots=True)
class _Case:
    """The inputs every step formula reads, bundled once per estimate."""

    model: ModelSpec
    cluster: ClusterSpec
    layout: ServingLayout
    workload: ServingWorkload
    a: ServingAssumptions


@dataclass(frozen=True, slots=True)
class _StageFlops:
    """Forward FLOPs per token through one stage, whole width (before TP or EP)."""

    dense: float  # attention projections, dense and shared MLPs, router
    experts: float  # the top-k routed experts
    attention_per_key: float  # scores and values, per token and per key in context
    logits: float
    decode_attention_per_key: float  # the same in decode (MLA: absorbed, explorer.serving.mla)
    dense_blocks: int = 0  # blocks with a dense MLP (their GEMM shapes: explorer.serving.kernels)
    moe_blocks: int = 0  # blocks with an MoE MLP


@lru_cache(maxsize=4096)
def _stage_flops(model: ModelSpec, layers: tuple[int, ...], has_lm_head: bool) -> _StageFlops:
    """Forward FLOPs per token of the blocks ``layers`` (flops.py's matmul convention)."""
    dense = experts = per_key = 0.0
    routed = 2.0 * model.num_experts_per_tok * mlp_weights(model, model.moe_intermediate_size)
    for index in layers:
        block = block_forward_flops(model, index, seq_len=1, causal=False)  # one key
        expert = routed if model.is_moe_layer(index) else 0.0
        dense += block.attention_projections + block.mlp + block.router - expert
        experts += expert
        if index in model.mamba_layers or index in model.linear_attention_layers:
            # Nemotron-H's scan and Qwen3-Next's delta rule cost the same at any context
            dense += block.attention_core
        else:
            per_key += block.attention_core
    logits = 2.0 * model.hidden_size * model.vocab_size if has_lm_head else 0.0
    absorbed = absorbed_attention_flops_per_key(model) * len(layers) if model.is_mla else per_key
    moe = sum(1 for index in layers if model.is_moe_layer(index))
    return _StageFlops(dense, experts, per_key, logits, absorbed, len(layers) - moe, moe)


def _group(cluster: ClusterSpec, name: GroupName, size: int, stride: int) -> GroupPlacement:
    """Placement of a group of ``size`` ranks ``stride`` apart (TP innermost, then EP, then PP):
    as many of them share a scale-up domain as the stride allows."""
    per_domain = min(size, max(1, cluster.domain_size // stride))
    up, out, nvls, sharp = placement_links(cluster)  # the cluster's link models
    return GroupPlacement(
        group=name,
        size=size,
        ranks_per_domain=per_domain,
        num_domains=-(-size // per_domain),
        fast_bytes_per_s=cluster.fast_bytes_per_s,
        fabric_bytes_per_s=cluster.fabric_bytes_per_s,
        fast_latency_s=cluster.intra_node_latency_s,
        fabric_latency_s=cluster.inter_node_latency_s,
        scale_up_fabric=up,
        scale_out_fabric=out,
        nvls=nvls,
        sharp=sharp,
        measured=cluster.measured_busbw,
    )


def _collective_s(case: _Case, kind: CollectiveKind, size_bytes: float, axis: GroupName) -> float:
    """Seconds of one collective of the replica's ``axis`` group (tp, ep or pp), explorer.comm."""
    tp, ep, pp = case.layout.tp, case.layout.ep, case.layout.pp
    size, stride = {"tp": (tp, 1), "ep": (ep, tp), "pp": (pp, tp * ep)}[axis]
    return collective_s(kind, size_bytes, _group(case.cluster, axis, size, stride), case.a.links)


def peak_flops_per_s(cluster: ClusterSpec, weights_dtype: WeightDType) -> float:
    """Dense peak FLOP/s of the GEMMs: fp8 weights run fp8 GEMMs where the GPU has them; NVFP4
    and MXFP4 run FP4 GEMMs only where the GPU has FP4 tensor cores (Blackwell: B200, GB200);
    elsewhere they, int8 and int4 are weight-only (dequantised to bf16, as vLLM's Marlin
    kernels run FP4 checkpoints on Hopper)."""
    gpu = cluster.gpu
    if weights_dtype == "fp8" and gpu.fp8_flops_per_s:
        return gpu.fp8_flops_per_s
    if weights_dtype in ("nvfp4", "mxfp4") and gpu.fp4_flops_per_s:
        return gpu.fp4_flops_per_s
    return gpu.bf16_flops_per_s


def _comm_s(case: _Case, shape: StageShape, tokens: float, low_latency: bool = False) -> float:
    """Exposed seconds of one stage step's TP all-reduces and EP dispatch + combine (DeepEP's
    normal kernels, or its low-latency ones in a decode-only step: explorer.serving.deepep)."""
    model, a = case.model, case.a
    hidden = tokens * model.hidden_size * ACTIVATION_BYTES
    # 2 all-reduces per block (after attention, after the MLP): Shoeybi et al. 2019, sec. 3
    reduce = _collective_s(case, "all-reduce", hidden, "tp")
    fp8 = a.ep_fp8_dispatch and case.workload.weights_dtype in ("fp8", "nvfp4", "mxfp4")
    lay = case.layout
    if lay.ep == 1:
        exchange = 0.0
    elif lay.tp * lay.ep <= case.cluster.domain_size:  # one NVLink domain: the fabric model
        # each TP rank sends its 1/tp share of the token copies, dispatch then combine
        copies = tokens * model.num_experts_per_tok / lay.tp
        exchange = sum(
            _collective_s(case, "all-to-all", copies * size, "ep")
            for size in copy_bytes(model.hidden_size, fp8)
        )
    else:  # across nodes: DeepEP's kernels and figures
        exchange = ep_exchange_s(model, case.cluster, lay, tokens, low_latency, fp8)
    total = 2 * len(shape.layers) * reduce + shape.num_moe_layers * exchange
    return total * (1 - a.comm_overlap)


@dataclass(frozen=True, slots=True)
class _Kernels:
    """Compute seconds of one stage step by kernel class, and the GEMMs' activation bytes."""

    gemms: float  # attention projections, dense and shared MLPs, router, LM head
    attention: float  # scores and values over the context
    experts: float  # the routed experts' GEMMs
    gemm_bytes: float = 0.0  # activations the dense GEMMs read and write (per GPU)
    expert_bytes: float = 0.0  # activations the routed experts' GEMMs read and write


def _expert_shape(case: _Case, slots: int) -> tuple[float, int]:
    """(FFN width on one GPU, local experts) of the routed experts: TP-sharded experts
    (ep 1, tp > 1) keep every expert at 1 / tp of its width; experts parallel over the TP
    ranks, or over the tp x ep GPUs of an attention-DP layout, are whole, slots / GPUs a GPU."""
    model, lay, a = case.model, case.layout, case.a
    width = float(model.moe_intermediate_size)
    if lay.ep == 1 and lay.tp > 1 and not a.experts_parallel_in_tp:
        return width / lay.tp, max(1, slots)
    return width, max(1, slots // (lay.tp * lay.ep))


def _compute_parts(
    case: _Case,
    f: _StageFlops,
    tokens: float,
    context: float,
    prefill: bool,
    rows: float,
    per_seq: float = 1.0,
) -> _Kernels:
    """Compute seconds of one stage's FLOPs for ``tokens`` per attention group, ``context``
    keys each, by kernel class: each GEMM at the shared kernel model's share at its shape
    (explorer.serving.kernels; ``rows`` >= tokens when a CUDA graph pads the batch, the padded
    rows computed too), prefill attention at the GPU's attention table at the prompt's length
    (2 x the mean keys of a causal prompt), decode attention at the decode kernel's share with
    MLA's query rows padded (``per_seq`` tokens a sequence)."""
    model, lay, a = case.model, case.layout, case.a
    if tokens <= 0:
        return _Kernels(0.0, 0.0, 0.0)
    gpu = case.cluster.gpu
    fmt = gemm_format(gpu, case.workload.weights_dtype)
    cap = a.prefill_compute_efficiency
    fp8_kv = case.workload.kv_dtype == "fp8" and bool(gpu.fp8_flops_per_s)
    per_key = f.attention_per_key if prefill else f.decode_attention_per_key
    dense_s, dense_b = dense_gemm_cost(model, f.dense_blocks, f.moe_blocks, lay.tp, rows, fmt,
                                       gpu, cap)  # fmt: skip
    gemms = rows * f.dense / lay.tp * dense_s
    flops = tokens * per_key * context / lay.tp
    if prefill:
        heads = model.num_attention_heads / lay.tp
        share = prefill_attention_share(model, gpu, 2.0 * context, fp8_kv, heads)
    else:
        flops *= decode_attention_flop_scale(model, lay.tp, per_seq)
        share = min(a.decode_attention_compute_efficiency, 1.0)
        share = decode_attention_compute_share(fp8_kv, share)
    attention = flops / (attention_peak_flops_per_s(case) * share)
    # ep groups' tokens spread over tp x ep GPUs; the busiest EP rank sets the pace; each
    # expert's GEMM gets the token copies routed to it (ep groups x tokens x k / slots)
    imbalance = expert_imbalance(
        model, lay.ep, lay.redundant_experts, rows, a.expert_load_cv, a.balanced_load_cv
    )
    if a.experts_parallel_in_tp and lay.ep == 1 and lay.tp > 1:  # EP over the TP ranks
        imbalance = expert_imbalance(  # each rank takes its experts' copies of all the tokens
            model, lay.tp, lay.redundant_experts, rows / lay.tp, a.expert_load_cv,
            a.balanced_load_cv,
        )  # fmt: skip
    experts = expert_bytes = 0.0
    if f.experts:
        slots = expert_slots(model, lay.redundant_experts)
        routed = rows * lay.ep * model.num_experts_per_tok / slots if slots else rows
        width, groups = _expert_shape(case, slots)
        expert_s, per_copy = expert_gemm_cost(model, routed, width, groups, fmt, gpu, cap)
        experts = rows * f.experts / lay.tp * imbalance * expert_s
        expert_bytes = routed * groups * per_copy * imbalance * f.moe_blocks
    heads = 1.0 if prefill else rows  # the LM head runs on the last token of each sequence
    if f.logits:
        head_s, head_b = logits_cost(model, heads, lay.tp, gpu, cap)
        gemms += heads * f.logits / lay.tp * head_s
        dense_b = rows * dense_b + heads * head_b
    else:
        dense_b = rows * dense_b
    return _Kernels(gemms, attention, experts, dense_b, expert_bytes)


def attention_peak_flops_per_s(case: _Case) -> float:
    """Dense peak FLOP/s of the attention core: its inputs are the activations and the KV
    cache, not the weights, so it runs FP8 only with an FP8 KV cache on a GPU with FP8 tensor
    cores (FlashAttention-3, Shah et al. 2024, arXiv:2407.08608, sec. 3.3: FP8 attention;
    TensorRT-LLM's FP8 context FMHA), else BF16, whatever the weights' format."""
    gpu = case.cluster.gpu
    if case.workload.kv_dtype == "fp8" and gpu.fp8_flops_per_s:
        return gpu.fp8_flops_per_s
    return gpu.bf16_flops_per_s


def _compute_s(case: _Case, f: _StageFlops, tokens: float, context: float, prefill: bool) -> float:
    """Seconds of one stage's FLOPs for ``tokens`` per attention group (``_compute_parts``)."""
    k = _compute_parts(case, f, tokens, context, prefill, tokens)
    return k.gemms + k.attention + k.experts


def _decode_kv_share(case: _Case, shape: StageShape, context: float) -> float:
    """Share of a stage's full-context KV a decode reads at ``context`` keys: blocks with a
    sliding window or chunked attention read their window only (Mistral 7B, arXiv:2310.06825,
    sec. 2), DeepSeek-V3.2 its top-k keys and the indexer's (explorer.serving.keys); 1
    without either."""
    return decode_kv_share(case.model, shape.layers, case.workload.kv_dtype, context)


def _mixed_stage_step(
    case: _Case,
    shape: StageShape,
    decode: float,
    context: float,
    prefill: float,
    keys: float,
    comm_s: float | None = None,
    per_seq: float = 1.0,
    half_comm_s: float | None = None,
) -> Roofline:
    """Roofline of one stage running ``decode`` decode sequences (``per_seq`` tokens each,
    ``context`` keys each) and ``prefill`` prefill tokens (``keys`` keys each) per attention
    group in one step: the FLOPs add, the weights are read once, each decode sequence reads
    its KV cache once (a speculative verify step scores ``per_seq`` tokens against it).
    A decode-only step replays a CUDA graph padded to its captured batch, or runs eagerly at
    least as long as its host launches; with two-batch overlap (EP only) the step is two
    half micro-batches, each one's compute hiding the other's EP exchange
    (``ServingAssumptions.two_batch_overlap``; ``half_comm_s``: one half's collectives)."""
    lay, a = case.layout, case.a
    tokens = decode * per_seq + prefill
    comm = _comm_s(case, shape, tokens, prefill == 0) if comm_s is None else comm_s
    if a.two_batch_overlap and lay.ep > 1 and tokens >= 2:
        half = _kernel_step(case, shape, decode / 2, context, prefill / 2, keys, per_seq)
        if half_comm_s is None:
            half_comm_s = _comm_s(case, shape, tokens / 2, prefill == 0)
        busy = half.total_s
        layers = max(1, len(shape.layers))
        # the two halves alternate: compute of one under the other's exchange, plus the
        # first half's compute of one block before any exchange can overlap it
        overlapped = max(2 * busy, 2 * half_comm_s) + min(busy, half_comm_s) / layers
        return Roofline(2 * half.compute_s, 2 * half.memory_s, overlapped - 2 * busy, 2 * busy)
    step = _kernel_step(case, shape, decode, context, prefill, keys, per_seq)
    return Roofline(step.compute_s, step.memory_s, comm, step.kernels_s)


def _kernel_step(
    case: _Case,
    shape: StageShape,
    decode: float,
    context: float,
    prefill: float,
    keys: float,
    per_seq: float,
) -> Roofline:
    """The kernels of ``_mixed_stage_step`` without communication."""
    model, lay, a = case.model, case.layout, case.a
    f = _stage_flops(model, shape.layers, shape.has_lm_head)
    graph = graph_batch(a, decode) if prefill == 0 else None
    rows = (graph if graph is not None else decode) * per_seq
    window = _decode_kv_share(case, shape, context)
    dec_keys = context * attention_flops_share(model, shape.layers, context, False)
    dec = _compute_parts(case, f, decode * per_seq, dec_keys, False, rows, per_seq)
    pre_keys = keys * attention_flops_share(model, shape.layers, keys, True)  # windows, top-k
    pre = _compute_parts(case, f, prefill, pre_keys, True, prefill)
    tokens = decode * per_seq + prefill
    slots = expert_slots(model, lay.redundant_experts)
    touched = experts_touched(model.n_routed_experts, model.num_experts_per_tok, tokens * lay.ep)
    # each touched expert's copies are read (replicas of a hot expert each get some tokens)
    copies = touched * slots / model.n_routed_experts if model.n_routed_experts else 0.0
    experts = copies / lay.ep * shape.num_moe_layers * shape.expert_bytes  # per GPU
    kv = decode * context * window * shape.kv_bytes_per_token
    bandwidth = a.hbm_efficiency * case.cluster.gpu.hbm_bytes_per_s
    gemm_c, att_c = dec.gemms + pre.gemms, dec.attention + pre.attention
    exp_c = dec.experts + pre.experts
    # the roofline's bytes: weights once and the GEMMs' activations in and out; the KV cache
    # at the decode attention kernel's bandwidth (explorer.serving.kernels)
    weights_s = (shape.read_bytes + dec.gemm_bytes + pre.gemm_bytes) / bandwidth
    experts_s = (experts + dec.expert_bytes + pre.expert_bytes) / bandwidth
    kv_s = kv / (a.decode_attention_hbm_efficiency * case.cluster.gpu.hbm_bytes_per_s)
    kernels = max(gemm_c, weights_s) + max(exp_c, experts_s) + max(att_c, kv_s)
    # the memory-bound kernels between them (norms, residuals, activation: .kernels)
    elementwise = (rows + prefill) * elementwise_bytes_per_token(
        model, f.dense_blocks, f.moe_blocks, lay.tp
    )
    kernels += elementwise / bandwidth
    if graph is None and a.launch_s > 0:  # eager: the host launches every kernel
        kernels = max(kernels, len(shape.layers) * a.kernels_per_block * a.launch_s)
    memory_s = weights_s + experts_s + kv_s + elementwise / bandwidth
    return Roofline(gemm_c + att_c + exp_c, memory_s, 0.0, kernels)


def _stage_step(
    case: _Case,
    shape: StageShape,
    tokens: float,
    context: float,
    prefill: bool,
    per_seq: float = 1.0,
) -> Roofline:
    """Roofline of one stage running ``tokens`` per attention group, ``context`` keys each
    (decode: ``tokens`` sequences of ``per_seq`` tokens, k + 1 in a speculative verify)."""
    if prefill:
        return _mixed_stage_step(case, shape, 0.0, 0.0, tokens, context)
    return _mixed_stage_step(case, shape, tokens, context, 0.0, 0.0, per_seq=per_seq)


def _handoff_s(case: _Case, tokens: float) -> float:
    """Seconds to pass one micro-batch's hidden states to the next stage (0 without PP)."""
    message = tokens * case.model.hidden_size * ACTIVATION_BYTES
    return _collective_s(case, "point-to-point", message, "pp")


def _slowest(
    case: _Case, tokens: float, context: float, prefill: bool, per_seq: float = 1.0
) -> Roofline:
    """The slowest stage's roofline (stages differ by embedding, LM head and layer count)."""
    w, a = case.workload, case.a
    shapes = stage_shapes(case.model, case.layout, w.weights_dtype, w.kv_dtype, a.memory)
    steps = [_stage_step(case, s, tokens, context, prefill, per_seq) for s in shapes]
    return max(steps, key=lambda r: r.total_s)


class EngineStep:
    """Seconds of one scheduler step of a replica as a function of the work scheduled in it:
    the per-stage mixed roofline (``_mixed_stage_step``) of the slowest stage, run by each of
    ``pp`` micro-batches, with the work spread evenly over the ``ep`` attention groups.
    Communication depends on the tokens only, so it is kept per token count.

    With ``speculation`` (k draft tokens), a step with decodes verifies k + 1 tokens a
    sequence and first runs the draft k times for them; it yields ``tokens_per_step`` tokens
    a decoding sequence on average (explorer.serving.speculative). k = 0 is plain decode."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        layout: ServingLayout,
        workload: ServingWorkload,
        assumptions: ServingAssumptions,
        speculation: Speculation | None = None,
    ) -> None:
        w, a = workload, assumptions
        self._case = _Case(model, cluster, layout, workload, assumptions)
        self._shapes = stage_shapes(model, layout, w.weights_dtype, w.kv_dtype, a.memory)
        self._comm: dict[tuple[float, bool], tuple[tuple[float, ...], float]] = {}
        self._spec = speculation if speculation and speculation.draft_tokens > 0 else None
        self._draft: EngineStep | None = None
        if self._spec is not None:
            check_speculation(model, self._spec)
            draft, on = draft_case(model, layout, self._spec)
            self._draft = EngineStep(draft, cluster, on, workload, assumptions)

    @property
    def draft_tokens(self) -> int:
        """Tokens drafted a step (k; 0 without speculation): KV slots each decode reserves."""
        return self._spec.draft_tokens if self._spec else 0

    def draft_seconds(self, decode_seqs: float, context: float) -> float:
        """Seconds of a step's k draft passes for ``decode_seqs`` sequences of the replica at
        ``context`` keys (0 without speculation)."""
        if self._draft is None or decode_seqs <= 0:
            return 0.0
        return self.draft_tokens * self._draft.seconds(round(decode_seqs), 0, context, 0.0)

    @property
    def tokens_per_step(self) -> float:
        """Tokens a decoding sequence gets from one step on average (1 without speculation):
        (1 - a^(k+1)) / (1 - a), Leviathan et al. 2023 eq. 1."""
        if self._spec is None:
            return 1.0
        return expected_tokens_per_step(self._spec.acceptance, self._spec.draft_tokens)

    def _communication(self, tokens: float, low_latency: bool) -> tuple[tuple[float, ...], float]:
        """(per-stage exposed collectives, pipeline handoff) seconds for ``tokens``."""
        key = (tokens, low_latency)
        if key not in self._comm:
            per_stage = tuple(_comm_s(self._case, s, tokens, low_latency) for s in self._shapes)
            self._comm[key] = (per_stage, _handoff_s(self._case, tokens))
        return self._comm[key]

    def seconds(
        self,
        decode_seqs: int,
        prefill_tokens: int,
        context: float,
        prefill_keys: float,
        tokens_per_seq: float = 1.0,
    ) -> float:
        """One step: ``decode_seqs`` decodes at ``context`` keys on average (``tokens_per_seq``
        tokens each: k + 1 in a speculative verify step) and ``prefill_tokens`` prompt tokens
        at ``prefill_keys`` keys on average (seconds)."""
        if self._draft is not None and decode_seqs > 0 and tokens_per_seq == 1.0:
            k = self.draft_tokens
            verify = self._plain(decode_seqs, prefill_tokens, context, prefill_keys, k + 1.0)
            return verify + self.draft_seconds(decode_seqs, context)
        return self._plain(decode_seqs, prefill_tokens, context, prefill_keys, tokens_per_seq)

    def _plain(
        self,
        decode_seqs: int,
        prefill_tokens: int,
        context: float,
        prefill_keys: float,
        tokens_per_seq: float,
    ) -> float:
        lay, q = self._case.layout, tokens_per_seq
        share = lay.pp * lay.ep  # micro-batches x attention groups
        decode, prefill = decode_seqs / share, prefill_tokens / share
        tokens, alone = decode * q + prefill, prefill_tokens == 0
        comm, handoff = self._communication(tokens, alone)
        halves: tuple[float | None, ...] = (None,) * len(comm)
        if self._case.a.two_batch_overlap and lay.ep > 1:
            halves = self._communication(tokens / 2, alone)[0]
        stage_s = max(
            _mixed_stage_step(
                self._case, s, decode, context, prefill, prefill_keys, c, q, h
            ).total_s
            for s, c, h in zip(self._shapes, comm, halves, strict=True)
        )
        return lay.pp * stage_s + (lay.pp - 1) * handoff + self._case.a.step_overhead_s


@dataclass(frozen=True, slots=True)
class ReplicaLatency:
    """Step rooflines and latencies of one replica at one concurrency (seconds)."""

    prefill: Roofline
    """One prefill chunk on the slowest stage."""
    decode: Roofline
    """One decode micro-batch on the slowest stage."""
    ttft_s: float
    decode_step_s: float
    itl_s: float
    decoding: float
    """Sequences per replica decoding in a step (the rest wait for prefill when the token
    budget cannot keep up with the prompts arriving)."""


def sustained_decodes(budget_tokens: float, prompt_len: float, output_len: int) -> float:
    """Most sequences per scheduler step that can keep decoding under a token budget.

    Source: vLLM V1 / SGLang / TensorRT-LLM chunked prefill schedule at most
    ``max_num_batched_tokens`` per step, decodes first; a sequence decoding for O steps
    brings a successor's P prompt tokens, so d sequences need d (1 + P / O) tokens a step.
    """
    return budget_tokens * output_len / (output_len + prompt_len)


def whole_prompt_decodes(
    budget_tokens: float, prompt_len: float, decode_steps: float, tokens_per_decode: float = 1.0
) -> float:
    """Most sequences per scheduler step that can keep decoding when prompts enter whole (no
    chunked prefill): a step holds d decodes of q tokens and n whole prompts of P tokens when
    n P + d q <= B, and d sequences that decode S steps each need d / S successors a step,
    so d = max over whole n of min(n S, (B - n P) / q). A budget below P + S q counts as
    P + S q: engines refuse a smaller one without chunking (vLLM requires
    max_num_batched_tokens >= max_model_len; trtllm-bench raises max_num_tokens to the longest
    prompt + max_batch_size).

    Source: the schedulers' token budget (``sustained_decodes``) with prompts indivisible
    (TensorRT-LLM's capacity scheduler with ``enable_chunked_prefill`` off).
    """
    if prompt_len <= 0:
        return budget_tokens / tokens_per_decode
    budget = max(budget_tokens, prompt_len + decode_steps * tokens_per_decode)
    whole = int(budget // prompt_len)
    # n S rises and (B - n P) / q falls with n: they cross at n = B / (S q + P)
    cross = budget / (decode_steps * tokens_per_decode + prompt_len)
    near = {min(whole, max(1, math.floor(cross))), min(whole, max(1, math.ceil(cross)))}
    return max(min(n * decode_steps, (budget - n * prompt_len) / tokens_per_decode) for n in near)


def replica_latency(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: ServingAssumptions,
    speculation: Speculation | None = None,
) -> ReplicaLatency:
    """TTFT, decode step and mean ITL of one replica (model in the module docstring); with
    ``speculation`` each decode step verifies k + 1 tokens a sequence after k draft steps
    and yields E tokens (``EngineStep.tokens_per_step``): the step and ITL are per token."""
    case = _Case(model, cluster, layout, workload, assumptions)
    w, pp, ep = case.workload, case.layout.pp, case.layout.ep
    spec = EngineStep(model, cluster, layout, workload, assumptions, speculation)
    k, per_step = spec.draft_tokens, spec.tokens_per_step
    budget = case.a.memory.prefill_chunk_tokens  # max_num_batched_tokens, per scheduler step
    # prefix-cache hits are not prefilled; the new tokens attend to the cached ones too
    computed = w.prompt_len * (1.0 - case.a.prefix_cache_hit_rate)
    # without chunked prefill each prompt runs whole in one step
    chunk = min(computed, budget) if case.a.chunked_prefill else computed
    keys = w.prompt_len - computed / 2  # causal: P/2 keys on average without hits
    pre = _slowest(case, chunk, keys, prefill=True)
    ttft = (computed / chunk + pp - 1) * pre.total_s + (pp - 1) * _handoff_s(case, chunk)
    wanted = -(-w.concurrency // pp) / ep  # sequences per micro-batch and attention group
    # a decode takes k + 1 budget tokens a step and finishes in output_len / E steps
    most = budget / (k + 1 + computed * per_step / w.output_len)
    if not case.a.chunked_prefill:  # prompts enter whole: fewer fit beside the decodes
        most = min(most, whole_prompt_decodes(budget, computed, w.output_len / per_step, k + 1))
    micro = min(wanted, most)
    context = w.prompt_len + w.output_len / 2
    dec = _slowest(case, micro, context, prefill=False, per_seq=k + 1.0)
    step = pp * dec.total_s + (pp - 1) * _handoff_s(case, micro * (k + 1))
    step += spec.draft_seconds(micro * pp * ep, context)  # k draft passes for them
    step += case.a.step_overhead_s  # the host's share (the drafts' is in draft_seconds)
    # each step mixes in the successors' prompt tokens, at most the budget left by decodes;
    # the prompts (or chunks) of one step run as one batch, so they are costed at the seconds
    # per token of a prefill of that many tokens, or of one chunk when they are fewer
    mixed = min(micro * computed * per_step / w.output_len, max(0.0, budget - micro * (k + 1)))
    packed = pre if mixed <= chunk else _slowest(case, mixed, keys, prefill=True)
    itl = (step + pp * mixed * packed.total_s / max(chunk, mixed)) / per_step
    # closed loop (Little): the sequences not decoding wait, a share 1 - micro / wanted of
    # each request's time, whose decoding part is output_len inter-token latencies
    ttft += w.output_len * itl * (wanted / micro - 1)
    decoding = min(w.concurrency, micro * pp * ep)
    return ReplicaLatency(pre, dec, ttft, step / per_step, itl, decoding)


_param_counts = lru_cache(maxsize=256)(param_counts)
"""param_counts per model, kept: a plan asks for the same model's counts at every point."""


def memory_bound_tokens_per_s(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: MemoryAssumptions | None = None,
) -> float:
    """Output tokens/s if decode only streamed the minimum bytes at full HBM bandwidth.

    Source: roofline (Williams et al. 2009): each step reads every dense weight once, the
    experts the step's tokens touch and each sequence's KV cache; counted from whole-model
    parameter counts with no replication, so any layout's estimate stays below it.
    """
    counts = _param_counts(model)
    bpp = weight_bytes_per_param(workload.weights_dtype, assumptions or MemoryAssumptions())
    c, e, k = workload.concurrency, model.n_routed_experts, model.num_experts_per_tok
    dense = counts.total_without_mtp - counts.routed_experts - counts.embeddings
    per_expert = counts.routed_experts / e if e else 0.0
    touched = experts_touched(e, k, c) * per_expert
    context = workload.prompt_len + workload.output_len / 2
    kv = c * context * kv_bytes_per_token(model, workload.kv_dtype)
    kv *= decode_kv_share(model, tuple(range(model.num_hidden_layers)), workload.kv_dtype, context)
    bytes_per_step = (dense + touched) * min(bpp, BYTES_PER_DTYPE["bf16"]) + kv
    bandwidth = layout.gpus_per_replica * cluster.gpu.hbm_bytes_per_s
    return layout.replicas * c * bandwidth / bytes_per_step
