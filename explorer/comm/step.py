"""Every collective of one training step on one pipeline stage: volume, count, time, exposure.

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
  (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.2.1).
- PP: one activation to the next stage in the forward and one gradient back, per chunk;
  Megatron-LM's 1F1B exchanges are blocking (send_forward_recv_backward), so exposed.
- ZeRO-2: reduce-scatter of each micro-batch's gradients; ZeRO-3 / FSDP: all-gather of the
  parameters in forward and again in backward, reduce-scatter of gradients, prefetched one
  block ahead (Zhao et al. 2023, PyTorch FSDP, arXiv:2304.11277, sec. 3.3).
Per step (phase ``step``, after the pipeline):
- DP (ZeRO 0): all-reduce of the gradients, bucketed and overlapped with the last
  micro-batch's backward except the last bucket (Li et al. 2020, PyTorch DDP,
  arXiv:2006.15704, sec. 3.2.3). ZeRO-1/2: reduce-scatter of gradients (ZeRO-1) and
  all-gather of the updated parameters, overlapped with the next forward (Megatron-Core
  distributed optimizer, overlap_param_gather). Dense weights reduce over dp x cp ranks,
  expert weights over the expert-data-parallel ranks.
Exposed time = time - min(time - floor, overlap x window), floor = what cannot hide (the last
bucket, the first prefetch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from explorer.comm.collectives import (
    DEFAULT_LINK_EFFICIENCY,
    CollectiveKind,
    LinkEfficiency,
    collective_s,
)
from explorer.comm.topology import GroupPlacement
from explorer.compute import PassTimes, StageWork
from explorer.specs import Layout, MeshAxis, ModelSpec, PrecisionPolicy

Phase = Literal["forward", "backward", "step"]
CpComm = Literal["p2p", "all-gather", "all-to-all"]


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
    """Share of the pass compute that EP all-to-alls hide behind outside DualPipe (0:
    Megatron-Core's dispatcher waits; --moe-shared-expert-overlap hides some)."""
    dualpipe_ep_overlap: float = 1.0
    """The same share under DualPipe, which overlaps one micro-batch's all-to-all with
    another's compute (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.2.1, fig. 4)."""
    pp_overlap: float = 0.0
    """Share of the pass compute that pipeline sends hide behind (0: blocking p2p;
    --overlap-p2p-communication of interleaved 1F1B hides them)."""
    cp_comm: CpComm = "p2p"
    """Context-parallel exchange: p2p ring (Megatron-Core), all-gather (Llama 3) or
    all-to-all (DeepSpeed-Ulysses)."""

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "cp", "ep", "dualpipe_ep", "pp"):
            value = getattr(self, f"{name}_overlap")
            if not 0 <= value <= 1:
                raise ValueError(f"{name}_overlap must be between 0 and 1, got {value!r}")
        if self.dp_bucket_params <= 0:
            raise ValueError(f"dp_bucket_params must be positive, got {self.dp_bucket_params}")
        if self.cp_comm not in ("p2p", "all-gather", "all-to-all"):
            raise ValueError(f"cp_comm must be p2p, all-gather or all-to-all, got {self.cp_comm!r}")


DEFAULT_COMM_ASSUMPTIONS = CommAssumptions()
"""The defaults above."""


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

    @property
    def exposed_s(self) -> float:
        """Seconds on the critical path."""
        return self.time_s - self.hidden_s


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


def hidden_s(time_s: float, floor_s: float, overlap: float, window_s: float) -> float:
    """Seconds of a collective hidden behind ``window_s`` of compute at share ``overlap``.

    Source: the exposure rule of this module: min(time - floor, overlap x window), >= 0.
    """
    return max(0.0, min(time_s - floor_s, overlap * window_s))


def timed(
    ctx: StageContext,
    axis: MeshAxis,
    group: str,
    kind: CollectiveKind,
    what: str,
    phase: Phase,
    size_bytes: float,
    count: float,
    overlap: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> Collective:
    """A collective; ``overlap`` is (share, window s, floor as a share of the time)."""
    one = collective_s(kind, size_bytes, ctx.groups[group], ctx.assumptions.links)
    time_s = one * count
    share, window_s, floor = overlap
    return Collective(
        axis=axis,
        kind=kind,
        what=what,
        phase=phase,
        size_bytes=size_bytes,
        count=count,
        time_s=time_s,
        hidden_s=hidden_s(time_s, floor * time_s, share, window_s),
    )


def _tokens(ctx: StageContext) -> float:
    """Tokens of one micro-batch on one CP rank."""
    return ctx.layout.micro_batch_size * ctx.seq_len / ctx.layout.cp


def tp_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """TP all-reduces (or all-gather + reduce-scatter under SP) of one micro-batch.

    Bytes per call: b (s / cp) h x activation bytes (Korthikanti et al. 2022 sec. 4.2.2).
    """
    if ctx.layout.tp == 1 or work.num_layers == 0:
        return []
    size = _tokens(ctx) * ctx.model.hidden_size * ctx.policy.activation_bytes
    per_pass = 2 * work.num_layers
    backward = per_pass * (2 if ctx.layout.recompute == "full" else 1)
    share = ctx.assumptions.tp_overlap
    kinds: tuple[CollectiveKind, ...] = ("all-reduce",)
    if ctx.layout.sp:
        kinds = ("all-gather", "reduce-scatter")
    out = []
    for kind in kinds:
        window_f, window_b = passes.forward_s / len(kinds), passes.backward_s / len(kinds)
        out.append(
            timed(
                ctx,
                "tp",
                "tp",
                kind,
                "layer activations",
                "forward",
                size,
                per_pass,
                (share, window_f, 0.0),
            )
        )
        out.append(
            timed(
                ctx,
                "tp",
                "tp",
                kind,
                "activation gradients",
                "backward",
                size,
                backward,
                (share, window_b, 0.0),
            )
        )
    return out


def _kv_width(model: ModelSpec, tp: int) -> float:
    """Per-GPU width of K plus V per token (heads split over TP, at least one KV head)."""
    if model.is_mla:
        heads = model.num_attention_heads / tp
        return heads * (model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim)
    return 2 * max(1.0, model.kv_heads / tp) * model.head_size


def cp_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """Context-parallel K/V exchange of one micro-batch (ring p2p, all-gather or all-to-all).

    Source: module docstring (Ring Attention, Llama 3, Ulysses).
    """
    cp, layers = ctx.layout.cp, work.num_layers
    if cp == 1 or layers == 0:
        return []
    kv = _tokens(ctx) * _kv_width(ctx.model, ctx.layout.tp) * ctx.policy.activation_bytes
    rerun = 1 if ctx.layout.recompute == "full" else 0
    mode = ctx.assumptions.cp_comm
    if mode == "all-gather":  # gather K, V before attention; reduce-scatter their gradients
        return [
            timed(ctx, "cp", "cp", "all-gather", "K and V", "forward", kv * cp, layers),
            timed(
                ctx,
                "cp",
                "cp",
                "all-gather",
                "K and V (recompute)",
                "backward",
                kv * cp,
                layers * rerun,
            ),
            timed(
                ctx, "cp", "cp", "reduce-scatter", "K and V gradients", "backward", kv * cp, layers
            ),
        ]
    if mode == "all-to-all":
        q = _tokens(ctx) * ctx.model.num_attention_heads * ctx.model.head_size / ctx.layout.tp
        size = kv + 2 * q * ctx.policy.activation_bytes  # q, k, v in; output back
        return [
            timed(ctx, "cp", "cp", "all-to-all", "q, k, v and output", "forward", size, layers),
            timed(
                ctx,
                "cp",
                "cp",
                "all-to-all",
                "their gradients",
                "backward",
                size,
                layers * (1 + rerun),
            ),
        ]
    share = ctx.assumptions.cp_overlap
    hops = (cp - 1) * layers
    attention_b = 2 * passes.attention_forward_s + rerun * passes.attention_forward_s
    return [
        timed(
            ctx,
            "cp",
            "cp",
            "point-to-point",
            "K and V",
            "forward",
            kv,
            hops,
            (share, passes.attention_forward_s, 0.0),
        ),
        timed(
            ctx,
            "cp",
            "cp",
            "point-to-point",
            "K, V and their gradients",
            "backward",
            kv,
            hops * (2 + rerun),
            (share, attention_b, 0.0),
        ),
    ]


def ep_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """EP all-to-all dispatch and combine of one micro-batch, forward and backward.

    Bytes per call: b s / (cp tp) local tokens x top-k x h x activation bytes x imbalance
    (tokens are sequence-parallel over TP before dispatch; Megatron-Core's dispatcher).
    """
    if ctx.layout.ep == 1 or work.num_moe_layers == 0:
        return []
    local = _tokens(ctx) / ctx.layout.tp * ctx.model.num_experts_per_tok * ctx.moe_imbalance
    size = local * ctx.model.hidden_size * ctx.policy.activation_bytes
    per_pass = 2 * work.num_moe_layers  # dispatch + combine
    backward = per_pass * (2 if ctx.layout.recompute == "full" else 1)
    share = ctx.assumptions.ep_overlap
    if ctx.layout.schedule == "dualpipe":
        share = max(share, ctx.assumptions.dualpipe_ep_overlap)
    return [
        timed(
            ctx,
            "ep",
            "ep",
            "all-to-all",
            "token dispatch and combine",
            "forward",
            size,
            per_pass,
            (share, passes.forward_s, 0.0),
        ),
        timed(
            ctx,
            "ep",
            "ep",
            "all-to-all",
            "their gradients",
            "backward",
            size,
            backward,
            (share, passes.backward_s, 0.0),
        ),
    ]


def pp_collectives(passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """Pipeline sends of one micro-batch: an activation forward and a gradient backward.

    Bytes: b (s / cp) h x activation bytes, / tp under sequence parallelism (Megatron-LM
    scatter-gather of pipeline tensors). One exchange per chunk per pass: the send and the
    receive of send_forward_recv_backward run at once (full duplex).
    """
    layout = ctx.layout
    if layout.pp == 1:
        return []
    size = _tokens(ctx) * ctx.model.hidden_size * ctx.policy.activation_bytes
    size /= layout.tp if layout.sp else 1
    count = layout.virtual_stages
    share = ctx.assumptions.pp_overlap
    return [
        timed(
            ctx,
            "pp",
            "pp",
            "point-to-point",
            "activations",
            "forward",
            size,
            count,
            (share, passes.forward_s, 0.0),
        ),
        timed(
            ctx,
            "pp",
            "pp",
            "point-to-point",
            "activation gradients",
            "backward",
            size,
            count,
            (share, passes.backward_s, 0.0),
        ),
    ]
