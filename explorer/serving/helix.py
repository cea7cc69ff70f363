"""Helix parallelism for long-context decode: KV-parallel attention, then TP over the same GPUs.

Helix (Bhatia et al., NVIDIA, arXiv:2507.07120, sec. 3) runs attention on N = TPA x KVP GPUs:
TPA-way tensor parallel over the KV heads (TPA <= KV heads, so the KV cache is not
duplicated) and KVP-way over the sequence (each GPU holds 1/KVP of every sequence's KV and
attends to it; attention weights are replicated over the KVP ranks). An all-to-all over the
KVP ranks then exchanges the partial attention outputs (and their softmax statistics) for the
exact combine; its volume is B x H / TPA per GPU, independent of the context length. The FFN
(dense or experts) then runs tensor parallel over all N GPUs, so its weights are read 1/N each.

This module re-times the serving planner's decode roofline of a TP = TPA replica
(explorer.serving.latency) for KVP > 1: the KV reads and attention-core FLOPs shrink by KVP,
the FFN weights and FLOPs by KVP (TP over N instead of TPA), the two per-block all-reduces run
over N GPUs, and the KVP all-to-all is added (exposed at the planner's comm_overlap; Helix's
HOP-B batch-wise overlap is a share of it). With KVP = 1 it is the planner's TP decode step.
Left out: pipeline and expert parallelism under Helix (pp = ep = 1), the softmax statistics'
bytes (2 floats per head, small beside B x H / TPA), prefill.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.comm.collectives import collective_s
from explorer.counting import layer_params
from explorer.memory.serving import ACTIVATION_BYTES, ServingLayout, StageShape, stage_shapes
from explorer.memory.serving_layout import weight_bytes_per_param
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.experts import expert_slots, experts_touched
from explorer.serving.kernels import dense_gemm_cost, gemm_format
from explorer.serving.keys import attention_flops_share, decode_kv_share
from explorer.serving.latency import (
    Roofline,
    _Case,
    _compute_parts,
    _group,
    _mixed_stage_step,
    _stage_flops,
    sustained_decodes,
)
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload


@dataclass(frozen=True, slots=True, kw_only=True)
class HelixStep:
    """One decode step of a Helix replica: its roofline and what it serves."""

    kvp: int
    """KV-parallel degree (1: plain TP)."""
    tpa: int
    """Attention tensor-parallel degree."""
    decode_seqs: float
    """Sequences decoding in the step (one token each)."""
    roofline: Roofline
    """Compute, memory and exposed communication of the step, s."""
    weights_bytes: float
    """Weights on one GPU: attention over TPA, the FFN and experts over TPA x KVP."""
    kv_bytes: float
    """KV cache on one GPU at the full context of every sequence: 1/KVP of its TPA share."""
    fits: bool
    """Whether weights and KV fit the engine's share of the GPU (gpu_memory_utilization)."""

    @property
    def token_latency_s(self) -> float:
        """Seconds per output token of one sequence (one step), s."""
        return self.roofline.total_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Output tokens per second per GPU of the replica."""
        return self.decode_seqs / self.roofline.total_s / (self.kvp * self.tpa)


def _check(layout: ServingLayout, kvp: int) -> None:
    if kvp < 1:
        raise ValueError(f"kvp must be at least 1, got {kvp}")
    if kvp > 1 and (layout.pp > 1 or layout.ep > 1):
        raise ValueError("helix here runs on one pipeline stage without expert parallelism")


def decode_seqs(workload: ServingWorkload, assumptions: ServingAssumptions) -> float:
    """Sequences a replica decodes per step, as the planner schedules them (pp = ep = 1)."""
    budget = assumptions.memory.prefill_chunk_tokens
    return min(workload.concurrency, sustained_decodes(budget, workload.prompt_len,
                                                       workload.output_len))  # fmt: skip


def helix_decode_step(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    kvp: int,
    workload: ServingWorkload,
    assumptions: ServingAssumptions,
    decoding: float | None = None,
) -> HelixStep:
    """One decode step of a replica with attention TP ``layout.tp`` (TPA) x KV parallel
    ``kvp`` and the FFN over all TPA x KVP GPUs, s (module docstring). ``decoding`` sequences
    decode in the step; None takes the planner's (chunked prefill caps them).

    Raises ValueError (one sentence) for kvp < 1, or kvp > 1 with pipeline or expert parallel.
    Source: Helix (arXiv:2507.07120) sec. 3; explorer.serving.latency's roofline.
    """
    _check(layout, kvp)
    w, a, tpa, n = workload, assumptions, layout.tp, layout.tp * kvp
    case = _Case(model, cluster, layout, workload, assumptions)
    (shape,) = stage_shapes(model, layout, w.weights_dtype, w.kv_dtype, a.memory)
    b = decode_seqs(w, a) if decoding is None else decoding
    context = w.prompt_len + w.output_len / 2
    base = _mixed_stage_step(case, shape, b, context, 0.0, 0.0)
    keep = 1.0 - 1.0 / kvp  # the share KV parallelism takes off each GPU
    # bytes: the FFN's weights (TP over N, not TPA), the touched experts, the KV cache
    bpp = weight_bytes_per_param(w.weights_dtype, a.memory)
    ffn = sum(layer_params(model, i).mlp + layer_params(model, i).shared_experts
              for i in shape.layers) / tpa * bpp  # fmt: skip
    touched = experts_touched(model.n_routed_experts, model.num_experts_per_tok, b)
    slots = expert_slots(model, layout.redundant_experts)
    copies = touched * slots / model.n_routed_experts if model.n_routed_experts else 0.0
    experts = copies * shape.num_moe_layers * shape.expert_bytes
    kv = b * context * shape.kv_bytes_per_token  # as the base step reads it (windows, top-k)
    kv *= decode_kv_share(model, shape.layers, w.kv_dtype, context)
    hbm = a.hbm_efficiency * cluster.gpu.hbm_bytes_per_s
    kv_hbm = a.decode_attention_hbm_efficiency * cluster.gpu.hbm_bytes_per_s
    memory_s = base.memory_s - (ffn + experts) * keep / hbm - kv * keep / kv_hbm
    compute_s = base.compute_s - _split_flops_s(case, shape, b, context) * keep
    # what running the kernel classes one after another adds at KVP 1, kept as it is
    serial = base.kernels_s - max(base.compute_s, base.memory_s) if base.kernels_s else 0.0
    kernels = max(compute_s, memory_s) + max(0.0, serial)
    roofline = Roofline(compute_s, memory_s, _comm_s(case, shape, b, n, kvp), kernels)
    routed = sum(layer_params(model, i).routed_experts for i in shape.layers)
    spare = 1.0 + layout.redundant_experts / model.n_routed_experts if model.is_moe else 1.0
    weights = shape.weights_bytes - (ffn + routed * spare / tpa * bpp) * keep
    held = w.concurrency * (w.prompt_len + w.output_len) * shape.kv_bytes_per_token / kvp
    room = a.memory.gpu_memory_utilization * cluster.gpu.memory_bytes
    return HelixStep(kvp=kvp, tpa=tpa, decode_seqs=b, roofline=roofline,
                     weights_bytes=weights, kv_bytes=held, fits=weights + held <= room)  # fmt: skip


def helix_points(
    model: ModelSpec,
    cluster: ClusterSpec,
    gpus: int,
    workload: ServingWorkload,
    concurrencies: tuple[int, ...],
    assumptions: ServingAssumptions,
) -> list[HelixStep]:
    """Token latency against concurrent users on ``gpus`` GPUs, as Helix fig. 1 draws them:
    plain TP (KVP 1), KV parallel alone (TPA 1) and every TPA x KVP = gpus between, at each
    concurrency, every user decoding each step (decode on its own GPUs, prefill elsewhere, as
    the paper times it); the points that do not fit are kept, marked (``fits``).

    Source: Helix (arXiv:2507.07120) sec. 4 (the throughput-latency Pareto over layouts).
    """
    out = []
    for kvp in (d for d in range(1, gpus + 1) if gpus % d == 0):
        layout = ServingLayout(tp=gpus // kvp)
        for users in concurrencies:
            w = replace(workload, concurrency=users)
            out.append(helix_decode_step(model, cluster, layout, kvp, w, assumptions, users))
    return out


def _split_flops_s(case: _Case, shape: StageShape, tokens: float, context: float) -> float:
    """Seconds of the FLOPs KV parallelism divides further, timed as the planner's decode step
    times them (explorer.serving.latency._compute_parts): the attention core over the context
    (MLA's absorbed decode where it applies) at the decode attention kernel's share, the dense
    MLP and shared experts (2 FLOPs per weight) at the dense GEMMs' cost at ``tokens`` rows,
    the routed experts at that of the rows each expert receives."""
    model, lay, a = case.model, case.layout, case.a
    layers = shape.layers
    f = _stage_flops(model, layers, shape.has_lm_head)
    mlp = 2.0 * sum(layer_params(model, i).mlp + layer_params(model, i).shared_experts
                    for i in layers)  # fmt: skip
    keys = context * attention_flops_share(model, layers, context, False)  # windows, top-k
    k = _compute_parts(case, f, tokens, keys, False, tokens)
    gpu = case.cluster.gpu
    fmt = gemm_format(gpu, case.workload.weights_dtype)
    per_flop, _ = dense_gemm_cost(model, f.dense_blocks, f.moe_blocks, lay.tp, tokens, fmt, gpu,
                                  a.prefill_compute_efficiency)  # fmt: skip
    return k.attention + k.experts + tokens * mlp / lay.tp * per_flop


def _comm_s(case: _Case, shape: StageShape, tokens: float, n: int, kvp: int) -> float:
    """Exposed seconds of a Helix step's collectives: per block two all-reduces of the hidden
    states over the N GPUs (after attention's output projection and the FFN, as TP over N)
    and the KVP all-to-all of the partial attention outputs, B x H / TPA per GPU."""
    model, cluster, links = case.model, case.cluster, case.a.links
    hidden = tokens * model.hidden_size * ACTIVATION_BYTES
    reduce = collective_s("all-reduce", hidden, _group(cluster, "tp", n, 1), links)
    partial = hidden / case.layout.tp
    exchange = collective_s("all-to-all", partial, _group(cluster, "tp", kvp, case.layout.tp),
                            links)  # fmt: skip
    layers = len(shape.layers)
    return layers * (2 * reduce + exchange) * (1 - case.a.comm_overlap)
