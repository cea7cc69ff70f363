"""Prefill and decode latency of one serving replica: stage rooflines, TTFT, ITL, HBM bound.

Model (per replica of ``tp x pp x ep`` GPUs; memory conventions in explorer.memory.serving_layout):
- Decode runs the replica's sequences as ``pp`` micro-batches (vLLM's pipeline engines). One
  micro-batch on one stage is a roofline: max(compute, memory) plus exposed communication
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

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from explorer.comm.collectives import CollectiveKind, collective_s
from explorer.comm.topology import GroupName, GroupPlacement
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
from explorer.serving.assumptions import ServingAssumptions, gemm_efficiency
from explorer.serving.experts import expert_imbalance, expert_slots, experts_touched
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


def _group(cluster: ClusterSpec, name: GroupName, size: int, stride: int) -> GroupPlacement:
    """Placement of a group of ``size`` ranks ``stride`` apart (TP innermost, then EP, then PP):
    as many of them share a scale-up domain as the stride allows."""
    per_domain = min(size, max(1, cluster.domain_size // stride))
    return GroupPlacement(
        group=name,
        size=size,
        ranks_per_domain=per_domain,
        num_domains=-(-size // per_domain),
        fast_bytes_per_s=cluster.fast_bytes_per_s,
        fabric_bytes_per_s=cluster.fabric_bytes_per_s,
        fast_latency_s=cluster.intra_node_latency_s,
        fabric_latency_s=cluster.inter_node_latency_s,
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


def _compute_s(case: _Case, f: _StageFlops, tokens: float, context: float, prefill: bool) -> float:
    """Seconds of one stage's FLOPs for ``tokens`` per attention group, ``context`` keys each."""
    model, lay, a = case.model, case.layout, case.a
    if tokens <= 0:
        return 0.0
    flops = tokens * (f.dense + f.attention_per_key * context) / lay.tp  # per attention group
    # ep groups' tokens spread over tp x ep GPUs; the busiest EP rank sets the pace
    imbalance = expert_imbalance(
        model, lay.ep, lay.redundant_experts, tokens, a.expert_load_cv, a.balanced_load_cv
    )
    flops += tokens * f.experts / lay.tp * imbalance
    flops += (1.0 if prefill else tokens) * f.logits / lay.tp  # last token of each sequence
    efficiency = gemm_efficiency(a, tokens, prefill)
    return flops / (efficiency * peak_flops_per_s(case.cluster, case.workload.weights_dtype))


def _mixed_stage_step(
    case: _Case,
    shape: StageShape,
    decode: float,
    context: float,
    prefill: float,
    keys: float,
    comm_s: float | None = None,
) -> Roofline:
    """Roofline of one stage running ``decode`` decode tokens (``context`` keys each) and
    ``prefill`` prefill tokens (``keys`` keys each) per attention group in one step: the
    FLOPs add, the weights are read once, the decode tokens read their KV cache."""
    model, lay, a = case.model, case.layout, case.a
    f = _stage_flops(model, shape.layers, shape.has_lm_head)
    compute_s = _compute_s(case, f, decode, context, False)
    compute_s += _compute_s(case, f, prefill, keys, True)
    tokens = decode + prefill
    slots = expert_slots(model, lay.redundant_experts)
    touched = experts_touched(model.n_routed_experts, model.num_experts_per_tok, tokens * lay.ep)
    # each touched expert's copies are read (replicas of a hot expert each get some tokens)
    copies = touched * slots / model.n_routed_experts if model.n_routed_experts else 0.0
    experts = copies / lay.ep * shape.num_moe_layers * shape.expert_bytes  # per GPU
    kv = decode * context * shape.kv_bytes_per_token
    read = shape.read_bytes + experts + kv
    memory_s = read / (a.hbm_efficiency * case.cluster.gpu.hbm_bytes_per_s)
    comm = _comm_s(case, shape, tokens) if comm_s is None else comm_s
    return Roofline(compute_s, memory_s, comm)


def _stage_step(
    case: _Case, shape: StageShape, tokens: float, context: float, prefill: bool
) -> Roofline:
    """Roofline of one stage running ``tokens`` per attention group, ``context`` keys each."""
    if prefill:
        return _mixed_stage_step(case, shape, 0.0, 0.0, tokens, context)
    return _mixed_stage_step(case, shape, tokens, context, 0.0, 0.0)


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


class EngineStep:
    """Seconds of one scheduler step of a replica as a function of the work scheduled in it:
    the per-stage mixed roofline (``_mixed_stage_step``) of the slowest stage, run by each of
    ``pp`` micro-batches, with the work spread evenly over the ``ep`` attention groups.
    Communication depends on the tokens only, so it is kept per token count."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        layout: ServingLayout,
        workload: ServingWorkload,
        assumptions: ServingAssumptions,
    ) -> None:
        w, a = workload, assumptions
        self._case = _Case(model, cluster, layout, workload, assumptions)
        self._shapes = stage_shapes(model, layout, w.weights_dtype, w.kv_dtype, a.memory)
        self._comm: dict[float, tuple[tuple[float, ...], float]] = {}

    def _communication(self, tokens: float) -> tuple[tuple[float, ...], float]:
        """(per-stage exposed collectives, pipeline handoff) seconds for ``tokens``."""
        if tokens not in self._comm:
            per_stage = tuple(_comm_s(self._case, s, tokens) for s in self._shapes)
            self._comm[tokens] = (per_stage, _handoff_s(self._case, tokens))
        return self._comm[tokens]

    def seconds(
        self, decode_seqs: int, prefill_tokens: int, context: float, prefill_keys: float
    ) -> float:
        """One step: ``decode_seqs`` decodes at ``context`` keys on average and
        ``prefill_tokens`` prompt tokens at ``prefill_keys`` keys on average (seconds)."""
        lay = self._case.layout
        share = lay.pp * lay.ep  # micro-batches x attention groups
        decode, prefill = decode_seqs / share, prefill_tokens / share
        comm, handoff = self._communication(decode + prefill)
        stage_s = max(
            _mixed_stage_step(self._case, s, decode, context, prefill, prefill_keys, c).total_s
            for s, c in zip(self._shapes, comm, strict=True)
        )
        return lay.pp * stage_s + (lay.pp - 1) * handoff


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


def sustained_decodes(budget_tokens: float, prompt_len: int, output_len: int) -> float:
    """Most sequences per scheduler step that can keep decoding under a token budget.

    Source: vLLM V1 / SGLang / TensorRT-LLM chunked prefill schedule at most
    ``max_num_batched_tokens`` per step, decodes first; a sequence decoding for O steps
    brings a successor's P prompt tokens, so d sequences need d (1 + P / O) tokens a step.
    """
    return budget_tokens * output_len / (output_len + prompt_len)


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
    budget = case.a.memory.prefill_chunk_tokens  # max_num_batched_tokens, per scheduler step
    chunk = min(w.prompt_len, budget)
    pre = _slowest(case, chunk, w.prompt_len / 2, prefill=True)  # causal: P/2 keys on average
    ttft = (w.prompt_len / chunk + pp - 1) * pre.total_s + (pp - 1) * _handoff_s(case, chunk)
    wanted = -(-w.concurrency // pp) / ep  # sequences per micro-batch and attention group
    micro = min(wanted, sustained_decodes(budget, w.prompt_len, w.output_len))
    dec = _slowest(case, micro, w.prompt_len + w.output_len / 2, prefill=False)
    step = pp * dec.total_s + (pp - 1) * _handoff_s(case, micro)
    # each step mixes in the successors' prompt tokens, at most the budget left by decodes;
    # costed at the prefill chunk's seconds per token
    mixed = min(micro * w.prompt_len / w.output_len, max(0.0, budget - micro))
    itl = step + pp * mixed * pre.total_s / chunk
    # closed loop (Little): the sequences not decoding wait, a share 1 - micro / wanted of
    # each request's time, whose decoding part is output_len inter-token latencies
    ttft += w.output_len * itl * (wanted / micro - 1)
    return ReplicaLatency(pre, dec, ttft, step, itl, min(w.concurrency, micro * pp * ep))


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
