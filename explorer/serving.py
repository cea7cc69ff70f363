"""Serving layouts: fit, prefill and decode latency, throughput, max concurrency, Pareto frontier.

Model (per replica of ``tp x pp x ep`` GPUs; memory conventions in explorer.memory.serving):
- Decode runs the replica's sequences as ``pp`` micro-batches (vLLM's pipeline engines). One
  micro-batch on one stage is a roofline: max(compute, memory) plus exposed communication
  (2 TP all-reduces per block, 2 EP all-to-alls per MoE block). Memory traffic is the weights
  once, routed experts only as touched (E (1 - (1 - k/E)^tokens) per MoE block) and every
  sequence's KV cache at its mean context, prompt + output / 2.
- Prefill runs chunks of ``prefill_chunk_tokens``; each attention data-parallel group prefills
  its own prompt at the same time (the loaded case). TTFT = chunks through the pipeline.
- Prefill interference: each request's prefill stalls decoding once, so the mean inter-token
  latency is the decode step plus (concurrency / output_len) prefills' worth of stage time.
Left out: see ``LEAVES_OUT``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal

from explorer.comm.collectives import CollectiveKind, LinkEfficiency, collective_s
from explorer.comm.topology import GroupName, GroupPlacement
from explorer.counting import param_counts
from explorer.flops import block_forward_flops, mlp_weights
from explorer.memory.serving import (
    ACTIVATION_BYTES,
    MemoryAssumptions,
    ServingLayout,
    ServingMemory,
    StageShape,
    kv_bytes_per_token,
    max_concurrency,
    serving_memory,
    stage_shapes,
    weight_bytes_per_param,
)
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload, WeightDType
from explorer.units import BYTES_PER_DTYPE, GiB

Bound = Literal["compute", "memory", "communication"]
LEAVES_OUT = (
    "queueing and scheduler overheads, speculative decoding (and the MTP module), prefix "
    "caching, overlap of prefill with decode inside a step, expert load imbalance, MLA's "
    "absorbed decode kernels, kernel launch gaps, CPU sampling and detokenisation"
)
"""What the serving model leaves out, shown with every result."""
DEFAULT_CONCURRENCIES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Sequences per replica swept for the throughput-latency frontier."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingAssumptions:
    """Adjustable efficiency assumptions of the serving model, with their sources."""

    memory: MemoryAssumptions = field(default_factory=MemoryAssumptions)
    """Engine memory assumptions (headroom, paged blocks, prefill chunk, runtime, buffers)."""
    prefill_compute_efficiency: float = 0.6
    """Fraction of dense peak FLOP/s prefill reaches. Source: large bf16 GEMMs on H100 reach
    about 70% of the dense peak (cuBLAS); attention and non-GEMM kernels take some of it."""
    decode_compute_efficiency: float = 0.4
    """Fraction of peak FLOP/s small-batch decode GEMMs reach (skinny matrices, split-K)."""
    hbm_efficiency: float = 0.8
    """Fraction of HBM bandwidth decode kernels sustain. Source: memory-bound GEMV and paged
    attention kernels on H100 measure 75-85% of the data-sheet bandwidth."""
    links: LinkEfficiency = field(default_factory=LinkEfficiency)
    """Achievable share of NVLink and fabric bandwidth for collectives (explorer.comm)."""
    comm_overlap: float = 0.0
    """Fraction of collective time hidden under compute; 0 because TP all-reduces and EP
    all-to-alls sit between dependent GEMMs (overlap needs two-micro-batch tricks)."""
    allow_tp_across_nodes: bool = False
    """Accept TP groups larger than the scale-up domain (with a warning) instead of rejecting."""

    def __post_init__(self) -> None:
        for name in (
            "prefill_compute_efficiency",
            "decode_compute_efficiency",
            "hbm_efficiency",
        ):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)}")
        if not 0 <= self.comm_overlap <= 1:
            raise ValueError(f"comm_overlap must be in [0, 1], got {self.comm_overlap}")


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
class ServingEstimate:
    """One serving layout at one concurrency per replica: memory, latency and throughput."""

    layout: ServingLayout
    concurrency: int
    fits: bool
    reason: str
    """Why it does not fit ('' when it does)."""
    warnings: tuple[str, ...]
    memory: ServingMemory
    max_concurrency: int
    """Most sequences per replica the memory holds at prompt + output tokens each."""
    kv_bytes_per_token: float
    """Whole-model KV bytes per token (one copy, before TP)."""
    kv_bytes_per_token_per_gpu: float
    """KV bytes per token one GPU holds (its stage's blocks, its share or copy of the heads)."""
    prefill: Roofline
    """One prefill chunk on the slowest stage."""
    decode: Roofline
    """One decode micro-batch on the slowest stage."""
    ttft_s: float
    decode_step_s: float
    """Time between a sequence's tokens without prefill interference."""
    itl_s: float
    """Mean inter-token latency with each request's prefill stalling decode once."""
    tokens_per_s: float
    """Output tokens per second, all replicas."""
    memory_bound_tokens_per_s: float
    """Upper bound on output tokens/s from HBM bandwidth alone (whole-model bytes read)."""

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.layout.world_size


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    """One (layout, concurrency) point of the throughput-latency sweep."""

    label: str
    tp: int
    pp: int
    ep: int
    replicas: int
    concurrency: int
    itl_s: float
    ttft_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    bound: Bound
    pareto: bool


@dataclass(frozen=True, slots=True)
class ServingPlan:
    """Every layout for a number of GPUs: valid ones estimated, invalid ones with reasons."""

    layouts: tuple[ServingEstimate, ...]
    """Valid layouts, fitting first, then by output tokens/s."""
    rejected: tuple[tuple[ServingLayout, str], ...]
    pareto: tuple[ParetoPoint, ...]


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


def _crossings(cluster: ClusterSpec, layout: ServingLayout) -> tuple[bool, bool, bool]:
    """Whether the TP, EP and PP groups leave the scale-up domain (TP innermost, then EP, PP)."""
    domain, tp, ep = cluster.domain_size, layout.tp, layout.ep
    return tp > domain, tp * ep > domain, tp * ep * layout.pp > domain


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
class _Latency:
    prefill: Roofline
    decode: Roofline
    ttft_s: float
    decode_step_s: float
    itl_s: float


def _latency(case: _Case) -> _Latency:
    """TTFT, decode step and mean ITL of one replica (model in the module docstring)."""
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
    return _Latency(pre, dec, ttft, step, step + stall)


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


def _divides_heads(model: ModelSpec, layout: ServingLayout) -> str:
    # vLLM shards whole heads: it asserts num_attention_heads % tp == 0
    heads = model.num_attention_heads
    return (
        f"TP {layout.tp} does not divide the {heads} attention heads" if heads % layout.tp else ""
    )


def _divides_kv_heads(model: ModelSpec, layout: ServingLayout) -> str:
    # vLLM needs kv_heads % tp == 0 (split) or tp % kv_heads == 0 (replicated): rejected, not
    # warned, because no engine runs an uneven split. MLA has one latent, so no rule.
    kv, tp = model.kv_heads, layout.tp
    if model.is_mla or kv % tp == 0 or tp % kv == 0:
        return ""
    return f"TP {tp} neither divides nor is a multiple of the {kv} KV heads"


def _ep_splits_experts(model: ModelSpec, layout: ServingLayout) -> str:
    # expert parallelism places whole routed experts; a dense model has none to place
    ep, experts = layout.ep, model.n_routed_experts
    if ep > 1 and not model.is_moe:
        return f"EP {ep} needs an MoE model; {model.name} is dense"
    return f"EP {ep} does not divide the {experts} routed experts" if experts % ep else ""


def _pp_fits_layers(model: ModelSpec, layout: ServingLayout) -> str:
    layers = model.num_hidden_layers
    return f"PP {layout.pp} exceeds the {layers} blocks" if layout.pp > layers else ""


def _tp_divides_ffn(model: ModelSpec, layout: ServingLayout) -> str:
    # column-parallel MLP matrices are split evenly across TP ranks
    width = model.moe_intermediate_size if model.is_moe else model.intermediate_size
    return f"TP {layout.tp} does not divide the FFN width {width}" if width % layout.tp else ""


_RULES = (_divides_heads, _divides_kv_heads, _ep_splits_experts, _pp_fits_layers, _tp_divides_ffn)


def layout_problem(
    model: ModelSpec, cluster: ClusterSpec, layout: ServingLayout, a: ServingAssumptions
) -> str:
    """Why ``layout`` cannot run at all ('' when it can): the first failing rule."""
    for rule in _RULES:
        if reason := rule(model, layout):
            return reason
    # TP's 2 all-reduces per block sit on every decode step: over the fabric they dominate it
    domain = cluster.domain_size
    if layout.tp > domain and not a.allow_tp_across_nodes:
        return f"the TP group of {layout.tp} GPUs crosses the {domain}-GPU NVLink domain"
    return ""


def layout_warnings(
    model: ModelSpec, cluster: ClusterSpec, layout: ServingLayout
) -> tuple[str, ...]:
    """Things that run but cost: replicated KV heads or latent, crossings, uneven stages."""
    tp, ep, pp, kv = layout.tp, layout.ep, layout.pp, model.kv_heads
    tp_crosses, ep_crosses, _ = _crossings(cluster, layout)
    checks = (
        (model.is_mla and tp > 1, f"MLA's latent KV cache is replicated on all {tp} TP ranks"),
        (not model.is_mla and tp > kv, f"{kv} KV heads over TP {tp}: each stored {tp // kv}x"),
        (tp_crosses, f"TP {tp} crosses nodes: its all-reduces run over the fabric"),
        (ep_crosses and ep > 1, f"EP {ep} all-to-all crosses nodes over the fabric"),
        (model.num_hidden_layers % pp > 0, f"{model.num_hidden_layers} blocks on PP {pp}: uneven"),
    )
    return tuple(text for hit, text in checks if hit)


def _fit_reason(memory: ServingMemory, capacity: float, most: int, wanted: int) -> str:
    """Why the memory does not fit ('' when it does), in words and GiB."""
    fixed = memory.total - memory.kv_cache
    if fixed > capacity:
        return (
            f"weights ({memory.weights / GiB:.1f} GiB) with workspace, runtime and headroom "
            f"need {fixed / GiB:.1f} GiB of the GPU's {capacity / GiB:.1f} GiB"
        )
    if most < wanted:
        return f"the KV cache holds {most} sequences per replica, fewer than the {wanted} requested"
    return ""


def estimate_serving(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: ServingAssumptions | None = None,
) -> ServingEstimate:
    """Memory, TTFT, ITL and output tokens/s of one valid layout at the workload's concurrency
    per replica. Source: the model in this module's docstring."""
    a = assumptions or ServingAssumptions()
    memory = serving_memory(model, cluster.gpu, layout, workload, a.memory)
    most = max_concurrency(model, cluster.gpu, layout, workload, a.memory)
    t = _latency(_Case(model, cluster, layout, workload, a))
    shapes = stage_shapes(model, layout, workload.weights_dtype, workload.kv_dtype, a.memory)
    reason = _fit_reason(memory, cluster.gpu.memory_bytes, most, workload.concurrency)
    return ServingEstimate(
        layout=layout,
        concurrency=workload.concurrency,
        fits=not reason,
        reason=reason,
        warnings=layout_warnings(model, cluster, layout),
        memory=memory,
        max_concurrency=most,
        kv_bytes_per_token=kv_bytes_per_token(model, workload.kv_dtype),
        kv_bytes_per_token_per_gpu=max(s.kv_bytes_per_token for s in shapes),
        prefill=t.prefill,
        decode=t.decode,
        ttft_s=t.ttft_s,
        decode_step_s=t.decode_step_s,
        itl_s=t.itl_s,
        tokens_per_s=layout.replicas * workload.concurrency / t.itl_s,
        memory_bound_tokens_per_s=memory_bound_tokens_per_s(
            model, cluster, layout, workload, a.memory
        ),
    )


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def serving_layouts(num_gpus: int) -> list[ServingLayout]:
    """Every replicas x (tp x pp x ep) factorisation of ``num_gpus``."""
    if num_gpus <= 0:
        raise ValueError(f"the number of GPUs must be positive, got {num_gpus}")
    out = []
    for tp in _divisors(num_gpus):
        for pp in _divisors(num_gpus // tp):
            for ep in _divisors(num_gpus // (tp * pp)):
                replicas = num_gpus // (tp * pp * ep)
                out.append(ServingLayout(tp=tp, pp=pp, ep=ep, replicas=replicas))
    return out


def mark_pareto(points: list[ParetoPoint]) -> list[ParetoPoint]:
    """The points with ``pareto`` set where no other point has both lower ITL and higher
    tokens/s per GPU (sorted by ITL)."""
    ordered = sorted(points, key=lambda p: (p.itl_s, -p.tokens_per_s_per_gpu))
    best, out = -math.inf, []
    for point in ordered:
        on_front = point.tokens_per_s_per_gpu > best
        best = max(best, point.tokens_per_s_per_gpu)
        out.append(replace(point, pareto=on_front))
    return out


def _point(e: ServingEstimate) -> ParetoPoint:
    lay = e.layout
    return ParetoPoint(
        label=lay.label,
        tp=lay.tp,
        pp=lay.pp,
        ep=lay.ep,
        replicas=lay.replicas,
        concurrency=e.concurrency,
        itl_s=e.itl_s,
        ttft_s=e.ttft_s,
        tokens_per_s=e.tokens_per_s,
        tokens_per_s_per_gpu=e.tokens_per_s_per_gpu,
        bound=e.decode.bound,
        pareto=False,
    )


def pareto_points(
    model: ModelSpec,
    cluster: ClusterSpec,
    layouts: list[ServingLayout],
    workload: ServingWorkload,
    concurrencies: tuple[int, ...] = DEFAULT_CONCURRENCIES,
    assumptions: ServingAssumptions | None = None,
) -> list[ParetoPoint]:
    """Fitting (layout, concurrency) points with the throughput-latency frontier marked."""
    points = []
    for layout in layouts:
        for c in sorted(set(concurrencies)):
            e = estimate_serving(
                model, cluster, layout, replace(workload, concurrency=c), assumptions
            )
            if e.fits:
                points.append(_point(e))
    return mark_pareto(points)


def plan_serving(
    model: ModelSpec,
    cluster: ClusterSpec,
    num_gpus: int,
    workload: ServingWorkload,
    assumptions: ServingAssumptions | None = None,
    concurrencies: tuple[int, ...] = DEFAULT_CONCURRENCIES,
) -> ServingPlan:
    """Every layout of ``num_gpus``: estimates at the workload, rejects, and the frontier."""
    if num_gpus > cluster.world_size:
        raise ValueError(f"{num_gpus} GPUs requested but the cluster has {cluster.world_size}")
    a = assumptions or ServingAssumptions()
    valid, rejected = [], []
    for layout in serving_layouts(num_gpus):
        if reason := layout_problem(model, cluster, layout, a):
            rejected.append((layout, reason))
        else:
            valid.append(layout)
    estimates = [estimate_serving(model, cluster, lay, workload, a) for lay in valid]
    estimates.sort(key=lambda e: (not e.fits, -e.tokens_per_s))
    sweep = (*concurrencies, workload.concurrency)
    pareto = pareto_points(model, cluster, valid, workload, sweep, a)
    return ServingPlan(tuple(estimates), tuple(rejected), tuple(pareto))


def _share(part_s: float, roofline: Roofline) -> str:
    return f"{100 * part_s / roofline.total_s:.0f}%"


def serving_answers(plan: ServingPlan) -> tuple[str, ...]:
    """The questions asked before serving, answered in sentences from a plan's numbers."""
    fitting = [e for e in plan.layouts if e.fits]
    if not fitting:
        first = plan.layouts[0].reason if plan.layouts else "no layout is valid"
        return (f"No layout fits at this concurrency: {first}.",)
    small = min(fitting, key=lambda e: (e.layout.gpus_per_replica, e.itl_s))
    fast = max(fitting, key=lambda e: e.tokens_per_s)
    quick = min(fitting, key=lambda e: e.itl_s)
    m = small.memory
    counts = {kind: sum(e.prefill.bound == kind for e in fitting) for kind in _BOUNDS}
    decode = {kind: sum(e.decode.bound == kind for e in fitting) for kind in _BOUNDS}
    comm = _share(quick.decode.communication_s, quick.decode)
    reads = _share(quick.decode.memory_s, quick.decode)
    return (
        f"The smallest replica that fits is {small.layout.gpus_per_replica} GPUs "
        f"({small.layout.label}): weights {m.weights / GiB:.1f} GiB, KV cache "
        f"{m.kv_cache / GiB:.1f} GiB, workspace {m.activations / GiB:.1f} GiB per GPU; it holds "
        f"up to {small.max_concurrency} sequences.",
        f"At {fast.concurrency} sequences per replica, most output tokens/s: "
        f"{fast.layout.label} ({fast.tokens_per_s:,.0f}); lowest inter-token latency: "
        f"{quick.layout.label} ({quick.itl_s * 1e3:.1f} ms).",
        *_tp_trade(fitting),
        f"On {quick.layout.label} communication takes {comm} of a decode step and weights "
        f"and KV reads {reads}.",
        f"Prefill is bound by compute/memory/communication on {counts['compute']}/"
        f"{counts['memory']}/{counts['communication']} fitting layouts; decode on "
        f"{decode['compute']}/{decode['memory']}/{decode['communication']}.",
    )


def _tp_trade(fitting: list[ServingEstimate]) -> tuple[str, ...]:
    """Whether doubling TP (no PP, no EP) shortens decode enough to pay for its all-reduces."""
    by_tp = {e.layout.tp: e for e in fitting if e.layout.pp == e.layout.ep == 1}
    pairs = [(by_tp[t], by_tp[2 * t]) for t in sorted(by_tp) if 2 * t in by_tp]
    if not pairs:
        return ()
    low, high = (e.decode for e in pairs[-1])
    t1, t2 = pairs[-1][0].layout.tp, pairs[-1][1].layout.tp
    verdict = "shortens" if high.total_s < low.total_s else "lengthens"
    return (
        f"TP {t1} to {t2} cuts a decode step's reads from {low.memory_s * 1e3:.2f} to "
        f"{high.memory_s * 1e3:.2f} ms while communication goes from "
        f"{low.communication_s * 1e3:.2f} to {high.communication_s * 1e3:.2f} ms: "
        f"it {verdict} the step.",
    )


_BOUNDS: tuple[Bound, ...] = ("compute", "memory", "communication")
