"""A step's collectives: assumptions, the timed record, and the rules shared by every axis.

What each axis moves lives in ``model_parallel`` (TP, EP, PP), ``context_parallel`` (CP) and
``data_parallel`` (DP, ZeRO); the summary below is their map.

Per micro-batch (phase ``forward`` / ``backward``, added to the stage's pass times):
- TP: 2 all-reduces of the layer output per block forward and 2 backward (Shoeybi et al. 2019,
  arXiv:1909.08053, sec. 3, the f and g operators); with sequence parallelism each becomes an
  all-gather plus a reduce-scatter of the same bytes (Korthikanti et al. 2022,
  arXiv:2205.05198, sec. 4.2.2). Full recompute repeats the forward's two in the backward.
- CP: ring attention passes K and V around the CP ring, cp - 1 hops per block forward, twice
  that backward (K, V and their gradients), overlapped with the attention core (Megatron-Core
  context parallelism; Liu et al. 2023, Ring Attention, arXiv:2310.01889). Variants: an
  all-gather of K and V (Llama 3, arXiv:2407.21783, sec. 3.3.2) and Ulysses all-to-all of
  q, k, v and the output (Jacobs et al. 2023, arXiv:2309.14509); neither overlaps.
- EP: all-to-all dispatch and combine per MoE block, forward and backward (Megatron-Core
  MoEAlltoAllTokenDispatcher); DualPipe hides them behind another micro-batch's compute
  (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.2.1), Megatron-Core's 1F1B A2A overlap each
  behind its phase partner (model_chunk_schedule_plan.py); NCCL's all-to-all kernels slow the
  compute they hide behind (``ep_overlap_slowdown``). Expert TP (ETP > 1): the dispatched
  tokens are all-gathered over the ETP group before the experts and their outputs
  reduce-scattered after, counted on the tp axis (the same dispatcher).
- PP: one activation to the next stage in the forward and one gradient back, per chunk;
  Megatron-LM's 1F1B exchanges are blocking (send_forward_recv_backward), so exposed.
- ZeRO-2: reduce-scatter of each micro-batch's gradients; ZeRO-3 / FSDP: all-gather of the
  parameters in forward and again in backward, reduce-scatter of gradients, prefetched one
  block ahead (Zhao et al. 2023, PyTorch FSDP, arXiv:2304.11277, sec. 3.3). Where the stack
  accumulates gradients over the micro-batches they are reduced once a step: ZeRO-2 as ZeRO-1
  below (Llama 3, arXiv:2407.21783, sec. 3.3.2; CommAssumptions.zero2_grad_sync_per_step),
  ZeRO-3 under a torch.distributed.pipelining schedule gathering once in the first forward and
  reduce-scattering after the last backward (explorer.comm.data_parallel).
Per step (phase ``step``, after the pipeline):
- DP (ZeRO 0): all-reduce of the gradients, bucketed and overlapped with the last
  micro-batch's backward except the last bucket (Li et al. 2020, PyTorch DDP,
  arXiv:2006.15704, sec. 3.2.3). ZeRO-1/2: reduce-scatter of gradients (ZeRO-1) and
  all-gather of the updated parameters, overlapped with the next forward (Megatron-Core
  distributed optimizer, overlap_param_gather). Dense weights reduce over dp x cp ranks,
  expert weights over the expert-data-parallel ranks.
Exposed time = time - min(time - floor, overlap x window), floor = what cannot hide (the last
bucket, the first prefetch); the window is a share of the pass times (``Window``), so a
collective's exposure under other pass times needs no new timing (``Collective.exposed_for``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from explorer.comm.collectives import (
    DEFAULT_LINK_EFFICIENCY,
    CollectiveKind,
    LinkEfficiency,
    collective_s,
)
from explorer.comm.topology import GroupPlacement
from explorer.comm.userbuffers import UB_CONFIGS, UbConfigName
from explorer.compute import ComputeContext, PassTimes
from explorer.compute.attention import TorchCp
from explorer.frozen import fast_init
from explorer.specs import Layout, MeshAxis, ModelSpec, PrecisionPolicy

Phase = Literal["forward", "backward", "step"]
CpComm = Literal["p2p", "all-gather", "all-to-all"]
FsdpPrefetch = Literal["pre", "post"]


class Window(NamedTuple):
    """Compute a collective may hide behind, as multiples of one micro-batch's pass times
    (``PassTimes``)."""

    forward: float = 0.0
    """Multiples of the forward."""
    backward: float = 0.0
    """Multiples of the whole backward."""
    attention: float = 0.0
    """Multiples of the attention core's forward."""
    expert_forward: float = 0.0
    """Multiples of the routed experts' part of the forward (``PassTimes.expert_forward_s``)."""
    expert_backward: float = 0.0
    """Multiples of the routed experts' part of the backward."""


NO_WINDOW = Window()
FORWARD = Window(forward=1.0)
BACKWARD = Window(backward=1.0)


class Overlap(NamedTuple):
    """How a collective hides behind compute: ``share`` of ``window``, except ``floor`` (a
    share of its own time: the last bucket, the first prefetch) that never hides."""

    share: float = 0.0
    """Share of the window it can hide behind."""
    window: Window = NO_WINDOW
    """The compute it hides behind."""
    floor: float = 0.0
    """Share of its time that cannot hide."""


NO_OVERLAP = Overlap()


def window_s(window: Window, passes: PassTimes | None) -> float:
    """Seconds of compute ``window`` spans under ``passes`` (none without pass times)."""
    if passes is None:
        return 0.0
    return (
        window.forward * passes.forward_s
        + window.backward * passes.backward_s
        + window.attention * passes.attention_forward_s
        + window.expert_forward * passes.expert_forward_s
        + window.expert_backward * passes.expert_backward_s
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CommAssumptions:
    """Overlap of each collective with compute, and link efficiency (shares in [0, 1])."""

    links: LinkEfficiency = DEFAULT_LINK_EFFICIENCY
    """Achievable share of link peak bandwidth."""
    dp_overlap: float = 1.0
    """Share of the last micro-batch's backward (and the first one's forward, for the ZeRO
    parameter all-gather) that gradient reduction can hide behind. 1 models Megatron-Core's
    --overlap-grad-reduce / --overlap-param-gather and PyTorch DDP buckets; 0 means none."""
    dp_bucket_params: float = 40e6
    """Parameters per gradient bucket; the last one cannot overlap. Source: Megatron-Core
    DistributedDataParallelConfig.bucket_size (max(40M, 1M x DP) elements)."""
    tp_overlap: float = 0.0
    """Share of the pass compute that TP collectives hide behind. 0: Megatron's TP
    all-reduces sit on the critical path unless --tp-comm-overlap (Transformer Engine
    userbuffers) is on, which hides most of them (Wang et al. 2023, arXiv:2105.05720)."""
    cp_overlap: float = 1.0
    """Share of the attention core that ring-attention transfers hide behind (double
    buffered in Megatron-Core). The all-gather and all-to-all variants do not overlap."""
    ep_overlap: float = 0.0
    """Share of its phase partner that each EP all-to-all hides behind outside DualPipe, as
    Megatron-Core's 1F1B A2A overlap (--overlap-moe-expert-parallel-comm) pairs a layer's
    dispatch and combine with another micro-batch's compute (explorer.comm.model_parallel.
    MEGATRON_A2A_PAIRS). 0: Megatron-Core's dispatcher waits."""
    dualpipe_ep_overlap: float = 1.0
    """The same share under DualPipe, which overlaps one micro-batch's all-to-all with
    another's compute (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.2.1, fig. 4)."""
    tp_comm_overlap: UbConfigName = ""
    """Transformer Engine's comm-GEMM overlap (Megatron-Core --tp-comm-overlap, NeMo's
    ub_tp_comm_overlap) with the named userbuffers config (a key of explorer.comm.userbuffers.
    UB_CONFIGS): each sequence-parallel TP collective of a dense block runs inside its GEMM,
    timed per GEMM (explorer.comm.tp_overlap); it replaces ``tp_overlap`` for the block's TP
    collectives. "": off, the collectives as ``tp_overlap`` says (Megatron-Core's default).
    Needs sequence parallelism (Megatron-Bridge's CommOverlapConfig turns it off without)."""
    pp_overlap: float = 0.0
    """Share of the pass compute that pipeline sends hide behind (0: blocking p2p;
    --overlap-p2p-communication of interleaved 1F1B hides them)."""
    cp_comm: CpComm = "p2p"
    """Context-parallel exchange: p2p ring (Megatron-Core), all-gather (Llama 3) or
    all-to-all (DeepSpeed-Ulysses)."""
    torch_cp: TorchCp = "none"
    """Context parallelism is PyTorch's (torch.distributed.tensor.experimental.context_parallel,
    torchtitan's): K/V rotate by ``cp_comm`` (all-gather: torch's default rotate method
    "allgather", once per layer before the first SDPA call and again in the backward; p2p:
    its "alltoall" ring) and the K/V gradients travel the ring in fp32, one hop per step
    (explorer.comm.context_parallel.torch_collectives). "eager": each transfer hides behind
    the SDPA calls of the ring steps; "compiled": the block is compiled with its ring, where
    every transfer is waited for as soon as it is issued (exposed). "none": Megatron-Core /
    Transformer Engine's ring, Llama 3's all-gather, Ulysses."""
    cp_kv_repeated: bool = False
    """K and V reach the attention with their heads repeated to the query heads, so the CP
    exchange carries that many (torchtitan's models call repeat_kv before SDPA until PR 2259,
    "GQA without kv repeats", 2026-01-27: torchtitan/models/llama/model.py at 9dec370)."""
    ep_domain_dedup: bool = False
    """DeepEP-style dispatch: a token crosses the fabric once per remote scale-up domain its
    experts sit in (at most the model's topk_group), then fans out over the fast links.
    False: Megatron-Core's plain all-to-all, one copy per expert. Source: DeepSeek-V3 report
    (arXiv:2412.19437) sec. 3.2.2; deepseek-ai/DeepEP README (normal kernels)."""
    fp8_dispatch: bool = False
    """Dispatch (and the backward's gradient dispatch) in FP8 with 1x128 fp32 scales; combine
    stays bf16. Source: DeepSeek-V3 report sec. 3.3.4 (low-precision communication)."""
    dp_overlap_slowdown: float = 0.189
    """How much longer compute takes while data-parallel communication (gradient reduction,
    ZeRO / FSDP gathers) runs beside it: NCCL kernels hold SMs and HBM bandwidth. Compute
    that runs s x longer under a collective loses s / (1 + s) seconds per second the
    collective hides (explorer.comm.data_parallel). Source: Characterizing
    Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning
    (arXiv:2507.03114, 2025), abstract: an average computational slowdown of 18.9% (at most
    40.0%) while communication overlaps, GPT and LLaMA models on 4 A100s, H100s, MI250s and
    MI210s; the mean of their cases, not measured on the published runs (an assumption).
    0 models free overlap."""
    ep_overlap_slowdown: float = 0.189
    """The same compute slowdown while EP all-to-alls hide behind compute (Megatron-Core
    --overlap-moe-expert-parallel-comm, DualPipe) when NCCL's all-to-all kernels run them:
    they take SMs and HBM bandwidth beside the GEMMs, as the collectives of
    ``dp_overlap_slowdown`` do (its source and figure, arXiv:2507.03114: an assumption for
    all-to-alls, which that study did not time separately). Not applied under DeepEP-style
    dispatch (``ep_domain_dedup``): those kernels hold a fixed SM count, charged to the compute
    as ``ComputeAssumptions.comm_sm_share`` (DeepEP README: SM number control; Megatron-Core
    moe_deepep_num_sms 20, moe_hybridep_num_sms 16). 0 models free overlap."""

    fsdp_backward_prefetch: FsdpPrefetch = "pre"
    """When ZeRO-3 / FSDP issues the next unit's all-gather in the backward: "pre", before the
    current unit's gradient computation (FSDP1 BackwardPrefetch.BACKWARD_PRE, FSDP2's
    prefetch), so it hides behind it; "post", after it (BACKWARD_POST), so the next unit's
    gradients wait for their gather: exposed, while the reduce-scatter hides behind the next
    unit's gradients. Source: PyTorch torch/distributed/fsdp/api.py BackwardPrefetch;
    _runtime_utils.py _post_backward_hook (the prefetch is issued before the reduce-scatter).
    Composer (LLM Foundry's trainer) defaults to BACKWARD_POST (composer/trainer/
    dist_strategy.py, fsdp_config.get('backward_prefetch', 'BACKWARD_POST'))."""

    zero2_grad_sync_per_step: bool = False
    """ZeRO-2 accumulates the gradients over the micro-batches and reduce-scatters them once a
    step, behind the last backward (Llama 3's FSDP: arXiv:2407.21783 sec. 3.3.2, data
    parallelism "synchronizes after each training step", and sec. 3.3.4, FP32 gradient
    accumulation over micro-batches, then an FP32 reduce-scatter). False: a reduce-scatter per
    micro-batch inside its backward, as PyTorch FSDP SHARD_GRAD_OP (the post-backward final
    callback waits for it) and DeepSpeed ZeRO-2 run it."""
    ep_published_floor: bool = True
    """EP all-to-alls inside one NVLink 5 domain (B200 node, GB200 NVL72) last at least as long
    as the published Hybrid-EP dispatch and combine bandwidth allows, for either dispatcher
    (explorer.comm.ep_kernels: the NCCL all-to-all taken as no faster than Hybrid-EP). False:
    the fast links' NCCL model alone."""

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "cp", "ep", "dualpipe_ep", "pp"):
            value = getattr(self, f"{name}_overlap")
            if not 0 <= value <= 1:
                raise ValueError(f"{name}_overlap must be between 0 and 1, got {value!r}")
        if not 0 <= self.dp_overlap_slowdown <= 1:
            raise ValueError(
                f"dp_overlap_slowdown must be between 0 and 1, got {self.dp_overlap_slowdown!r}"
            )
        if not 0 <= self.ep_overlap_slowdown <= 1:
            raise ValueError(
                f"ep_overlap_slowdown must be between 0 and 1, got {self.ep_overlap_slowdown!r}"
            )
        if self.dp_bucket_params <= 0:
            raise ValueError(f"dp_bucket_params must be positive, got {self.dp_bucket_params}")
        if self.fsdp_backward_prefetch not in ("pre", "post"):
            raise ValueError(
                f"fsdp_backward_prefetch must be pre or post, got {self.fsdp_backward_prefetch!r}"
            )
        if self.torch_cp not in ("none", "eager", "compiled"):
            raise ValueError(f"torch_cp must be none, eager or compiled, got {self.torch_cp!r}")
        if self.tp_comm_overlap and self.tp_comm_overlap not in UB_CONFIGS:
            raise ValueError(
                f"tp_comm_overlap must name a userbuffers config ({', '.join(UB_CONFIGS)}) or "
                f"be empty, got {self.tp_comm_overlap!r}"
            )
        if self.cp_comm not in ("p2p", "all-gather", "all-to-all"):
            raise ValueError(f"cp_comm must be p2p, all-gather or all-to-all, got {self.cp_comm!r}")


DEFAULT_COMM_ASSUMPTIONS = CommAssumptions()
"""The defaults above."""


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Collective:
    """One kind of collective on one axis of one stage, with its time and overlap."""

    axis: MeshAxis
    """Mesh axis whose group runs it (dp covers dense dp x cp and expert-data-parallel)."""
    kind: CollectiveKind
    """all-reduce, all-gather, reduce-scatter, all-to-all or point-to-point."""
    what: str
    """What moves (for tables)."""
    phase: Phase
    """forward / backward: per micro-batch, in that pass; step: once per step."""
    size_bytes: float
    """Bytes of one call, per rank (the full buffer; see explorer.comm.collectives)."""
    count: float
    """Calls per micro-batch (forward/backward) or per step."""
    time_s: float
    """Seconds of all ``count`` calls."""
    hidden_s: float
    """Seconds of it hidden behind compute."""
    share: float = 0.0
    """Share of its window it can hide behind."""
    floor_share: float = 0.0
    """Share of its time that cannot hide (the last bucket, the first prefetch)."""
    window: Window = NO_WINDOW
    """The compute it hides behind, as multiples of the pass times."""
    contention: float = 0.0
    """Compute seconds lost per second it hides (its kernels slow the compute beside them):
    ``hidden_s`` is already net of it (CommAssumptions.dp_overlap_slowdown)."""

    @property
    def exposed_s(self) -> float:
        """Seconds on the critical path."""
        return self.time_s - self.hidden_s

    def exposed_for(self, passes: PassTimes) -> float:
        """Seconds on the critical path were the pass times ``passes``: the same calls
        hidden behind other compute (a search re-times one set of calls for many)."""
        t, w = self.time_s, self.window  # hidden_s and window_s inlined: the search's hot path
        window = w[0] * passes.forward_s + w[1] * passes.backward_s
        window += w[2] * passes.attention_forward_s
        hidden = max(0.0, min(t - self.floor_share * t, self.share * window))
        return t - hidden * (1.0 - self.contention)


@dataclass(frozen=True, slots=True, kw_only=True)
class PhasedCollective(Collective):
    """A collective whose window also spans the experts' parts of the passes
    (``Window.expert_forward``, ``expert_backward``): the EP all-to-alls under Megatron-Core's
    1F1B A2A overlap (explorer.comm.model_parallel). The other collectives keep the plain
    ``exposed_for``, the search's hot path."""

    def exposed_for(self, passes: PassTimes) -> float:
        """As ``Collective.exposed_for``, with the experts' parts in the window."""
        t = self.time_s
        hidden = max(0.0, min(t - self.floor_share * t, self.share * window_s(self.window, passes)))
        return t - hidden * (1.0 - self.contention)


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class StageContext:
    """What a stage's collectives depend on besides its work and pass times."""

    model: ModelSpec
    layout: Layout
    policy: PrecisionPolicy
    seq_len: int
    groups: dict[str, GroupPlacement]
    """Placements by group name (explorer.comm.topology.place_groups)."""
    assumptions: CommAssumptions
    moe_imbalance: float = 1.0
    """Busiest EP rank's tokens over the mean."""
    pipeline_keeps_unsharded: bool = False
    """ZeRO-3 under pipeline parallelism keeps the stage's weights gathered and its gradients
    unsharded over the micro-batches (the memory model's framework behaviour of that name,
    explorer.memory.frameworks: PyTorch's torch.distributed.pipelining yes, Megatron no), so
    its collectives run once a step (explorer.comm.data_parallel)."""
    microbatches: int = 0
    """Micro-batches per step on one pipeline (explorer.comm.model_parallel.paired_share); 0:
    not known, every micro-batch counted as paired (the search's bounds: a lower bound)."""
    compute: ComputeContext | None = None
    """The stage's compute context where a collective is timed with its GEMMs (Transformer
    Engine's comm-GEMM overlap, ``CommAssumptions.tp_comm_overlap``: explorer.comm.tp_overlap);
    None: not known (the search's bounds), those calls taken as hidden."""


def hidden_s(time_s: float, floor_s: float, overlap: float, window_s: float) -> float:
    """Seconds of a collective hidden behind ``window_s`` of compute at share ``overlap``.

    Source: the exposure rule of this module: min(time - floor, overlap x window), >= 0.
    """
    return max(0.0, min(time_s - floor_s, overlap * window_s))


def timed(
    ctx: StageContext,
    *,
    axis: MeshAxis,
    kind: CollectiveKind,
    what: str,
    phase: Phase,
    size_bytes: float,
    count: float,
    group: str | None = None,
    passes: PassTimes | None = None,
    overlap: Overlap = NO_OVERLAP,
    one_call_s: float | None = None,
    contention: float = 0.0,
) -> Collective:
    """A collective on ``axis``'s own group (or ``group``), hiding as ``overlap`` says behind
    the window taken of ``passes``; ``one_call_s`` replaces the collective model's time of one
    call when given; ``contention``: compute seconds lost per second hidden (``Collective.
    contention``), taken off the hidden seconds (one object, not a copy: a search hot path)."""
    one = one_call_s
    if one is None:
        one = collective_s(kind, size_bytes, ctx.groups[group or axis], ctx.assumptions.links)
    time_s = one * count
    share, window, floor = overlap
    # hidden_s(time_s, floor * time_s, share, window_s(window, passes)) inlined, the same
    # arithmetic in the same order: a hot path of the search and the estimate
    if passes is None:
        span = 0.0
    else:
        span = (
            window.forward * passes.forward_s
            + window.backward * passes.backward_s
            + window.attention * passes.attention_forward_s
            + window.expert_forward * passes.expert_forward_s
            + window.expert_backward * passes.expert_backward_s
        )
    hidden = max(0.0, min(time_s - floor * time_s, share * span))
    return Collective(
        axis=axis,
        kind=kind,
        what=what,
        phase=phase,
        size_bytes=size_bytes,
        count=count,
        time_s=time_s,
        hidden_s=hidden * (1.0 - contention) if contention else hidden,
        share=share,
        floor_share=floor,
        window=window,
        contention=contention,
    )


def tokens_per_rank(ctx: StageContext) -> float:
    """Tokens of one micro-batch on one CP rank."""
    return ctx.layout.micro_batch_size * ctx.seq_len / ctx.layout.cp


def both_ways(
    ctx: StageContext,
    *,
    axis: MeshAxis,
    kind: CollectiveKind,
    what: tuple[str, str],
    size_bytes: float,
    counts: tuple[float, float],
    passes: PassTimes | None = None,
    windows: tuple[Window, Window] = (NO_WINDOW, NO_WINDOW),
    share: float = 0.0,
    one_call_s: float | None = None,
    group: str | None = None,
    contention: float = 0.0,
) -> list[Collective]:
    """A forward and a backward collective of one kind on ``axis``'s own group (or ``group``).

    ``what``, ``counts`` and ``windows`` (the compute of ``passes`` it may hide behind at
    ``share``) are (forward, backward) pairs; ``one_call_s`` overrides the time of one call
    and ``contention`` takes compute lost off the hidden seconds (see timed).
    """
    phases: tuple[Phase, Phase] = ("forward", "backward")
    return [
        timed(
            ctx,
            axis=axis,
            group=group,
            kind=kind,
            what=what[i],
            phase=phases[i],
            size_bytes=size_bytes,
            count=counts[i],
            passes=passes,
            overlap=Overlap(share=share, window=windows[i]),
            one_call_s=one_call_s,
            contention=contention,
        )
        for i in (0, 1)
        if counts[i]
    ]
