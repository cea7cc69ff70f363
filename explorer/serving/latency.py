"""Prefill and decode latency of one serving replica: stage rooflines, TTFT, ITL, HBM bound.

Model (per replica of ``tp x pp x ep`` GPUs; memory conventions in explorer.memory.serving_layout):
- Decode runs the replica's sequences as ``pp`` micro-batches (vLLM's pipeline engines). One
  micro-batch on one stage is a roofline: max(compute, memory) plus exposed communication
  (2 TP all-reduces per block, 2 EP all-to-alls per MoE block). Memory traffic is the weights
  once, routed experts only as touched (E (1 - (1 - k/E)^tokens) per MoE block) and every
  sequence's KV cache at its mean context, prompt + output / 2.
- Prefill runs chunks of ``prefill_chunk_tokens``; each attention data-parallel group prefills
  its own prompt at the same time (the loaded case). TTFT = chunks through the pipeline.
- Prefill interference: each request's prefill stalls decoding once, so the mean inter-token
  latency is the decode step plus (concurrency / output_len) prefills' worth of stage time.
Left out: see ``LEAVES_OUT`` (explorer.serving.assumptions).
"""

from __future__ import annotations

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
from explorer.serving.assumptions import ServingAssumptions
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload, WeightDType
from explorer.units import BYTES_PER_DTYPE

Bound = Literal["compute", "memory", "communication"]


@dataclass(frozen=True, slots=True)
class Roofline:
    """Seconds of one stage step, by resource; ``total_s`` = max(compute, memory) + exposed
    communication."""

    compute_s: float
    memory_s: float
    communication_s: float

    @property
    def total_s(self) -> float:
        return max(self.compute_s, self.memory_s) + self.communication_s

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
        per_key += block.attention_core
    logits = 2.0 * model.hidden_size * model.vocab_size if has_lm_head else 0.0
    return _StageFlops(dense, experts, per_key, logits)


def experts_touched(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts a batch of ``tokens`` visits in one MoE block.

    Source: each token picks k of E experts; an expert is missed by one token with probability
    1 - k/E, by all with (1 - k/E)^tokens (uniform routing, independent tokens).
    """
    if num_experts == 0:
        return 0.0
    return num_experts * (1 - (1 - top_k / num_experts) ** tokens)


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
    """Dense peak FLOP/s of the GEMMs: fp8 weights run fp8 GEMMs where the GPU has them; int8
    and int4 are taken as weight-only (dequantised to bf16)."""
    gpu = cluster.gpu
    if weights_dtype == "fp8" and gpu.fp8_flops_per_s:
        return gpu.fp8_flops_per_s
    return gpu.bf16_flops_per_s


def _comm_s(case: _Case, shape: StageShape, tokens: float) -> float:
    """Exposed seconds of one stage step's TP all-reduces and EP all-to-alls."""
    model = case.model
    hidden = tokens * model.hidden_size * ACTIVATION_BYTES
    # 2 all-reduces per block (after attention, after the MLP): Shoeybi et al. 2019, sec. 3
    reduce = _collective_s(case, "all-reduce", hidden, "tp")
    # dispatch + combine per MoE block; each TP rank sends its 1/tp share of the token copies
    copies = hidden * model.num_experts_per_tok / case.layout.tp
    a2a = _collective_s(case, "all-to-all", copies, "ep")
    total = 2 * len(shape.layers) * reduce + 2 * shape.num_moe_layers * a2a
    return total * (1 - case.a.comm_overlap)


def _stage_step(
    case: _Case, shape: StageShape, tokens: float, context: float, prefill: bool
) -> Roofline:
    """Roofline of one stage running ``tokens`` per attention group, ``context`` keys each."""
    model, lay, a = case.model, case.layout, case.a
    f = _stage_flops(model, shape.layers, shape.has_lm_head)
    flops = tokens * (f.dense + f.attention_per_key * context) / lay.tp  # per attention group
    flops += tokens * f.experts / lay.tp  # ep groups' tokens spread over tp x ep GPUs
    flops += (1.0 if prefill else tokens) * f.logits / lay.tp  # last token of each sequence
    efficiency = a.prefill_compute_efficiency if prefill else a.decode_compute_efficiency
    compute_s = flops / (efficiency * peak_flops_per_s(case.cluster, case.workload.weights_dtype))
    touched = experts_touched(model.n_routed_experts, model.num_experts_per_tok, tokens * lay.ep)
    experts = touched / lay.ep * shape.num_moe_layers * shape.expert_bytes  # per GPU
    kv = 0.0 if prefill else tokens * context * shape.kv_bytes_per_token
    read = shape.read_bytes + experts + kv
    memory_s = read / (a.hbm_efficiency * case.cluster.gpu.hbm_bytes_per_s)
    return Roofline(compute_s, memory_s, _comm_s(case, shape, tokens))


def _handoff_s(case: _Case, tokens: float) -> float:
    """Seconds to pass one micro-batch's hidden states to the next stage (0 without PP)."""
    message = tokens * case.model.hidden_size * ACTIVATION_BYTES
    return _collective_s(case, "point-to-point", message, "pp")


def _slowest(case: _Case, tokens: float, context: float, prefill: bool) -> Roofline:
    """The slowest stage's roofline (stages differ by embedding, LM head and layer count)."""
    w, a = case.workload, case.a
    shapes = stage_shapes(case.model, case.layout, w.weights_dtype, w.kv_dtype, a.memory)
    steps = [_stage_step(case, s, tokens, context, prefill) for s in shapes]
    return max(steps, key=lambda r: r.total_s)


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


def replica_latency(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: ServingAssumptions,
) -> ReplicaLatency:
    """TTFT, decode step and mean ITL of one replica (model in the module docstring)."""
    case = _Case(model, cluster, layout, workload, assumptions)
    w, pp, ep = case.workload, case.layout.pp, case.layout.ep
    chunk = min(w.prompt_len, case.a.memory.prefill_chunk_tokens)
    chunks = w.prompt_len / chunk
    pre = _slowest(case, chunk, w.prompt_len / 2, prefill=True)  # causal: P/2 keys on average
    ttft = (chunks + pp - 1) * pre.total_s + (pp - 1) * _handoff_s(case, chunk)
    micro = -(-w.concurrency // pp) / ep  # sequences per micro-batch and attention group
    dec = _slowest(case, micro, w.prompt_len + w.output_len / 2, prefill=False)
    step = pp * dec.total_s + (pp - 1) * _handoff_s(case, micro)
    # every output_len steps each sequence is replaced, and its prefill stalls the replica
    stall = w.concurrency / w.output_len / ep * chunks * pre.total_s
    return ReplicaLatency(pre, dec, ttft, step, step + stall)


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
    counts = param_counts(model)
    bpp = weight_bytes_per_param(workload.weights_dtype, assumptions or MemoryAssumptions())
    c, e, k = workload.concurrency, model.n_routed_experts, model.num_experts_per_tok
    dense = counts.total_without_mtp - counts.routed_experts - counts.embeddings
    per_expert = counts.routed_experts / e if e else 0.0
    touched = experts_touched(e, k, c) * per_expert
    kv = (
        c
        * (workload.prompt_len + workload.output_len / 2)
        * kv_bytes_per_token(model, workload.kv_dtype)
    )
    bytes_per_step = (dense + touched) * min(bpp, BYTES_PER_DTYPE["bf16"]) + kv
    bandwidth = layout.gpus_per_replica * cluster.gpu.hbm_bytes_per_s
    return layout.replicas * c * bandwidth / bytes_per_step
