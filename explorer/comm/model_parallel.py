"""Tensor-, expert- and pipeline-parallel collectives of one micro-batch on one stage.

Sources per function; the overview is in ``explorer.comm.step``.
"""

from __future__ import annotations

from dataclasses import fields, replace

from explorer.comm.collectives import CollectiveKind, collective_s, deduplicated_all_to_all_s
from explorer.comm.ep_kernels import published_dispatch_floor_s
from explorer.comm.step import (
    BACKWARD,
    FORWARD,
    Collective,
    PhasedCollective,
    StageContext,
    Window,
    both_ways,
    hidden_s,
    timed,
    tokens_per_rank,
    window_s,
)
from explorer.comm.tp_overlap import ub_tp_collectives
from explorer.compute import PassTimes, StageWork
from explorer.specs import Layout


def tp_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """TP all-reduces (all-gather + reduce-scatter under SP) of one micro-batch, per rank.

    Ledger: 2 per block forward (attention and MLP outputs), 2 backward, 2 more backward with
    full recompute; bytes b (s / cp) h x activation bytes. Under SP with torchtitan's op-level
    SAC the backward also repeats the forward's 2 all-gathers (``sac_regathers``). Source:
    Shoeybi et al. 2019 (arXiv:1909.08053) sec. 3 (f and g operators); Korthikanti et al. 2022
    (arXiv:2205.05198) sec. 4.2.2 (SP: the same bytes as a gather plus a scatter).
    """
    if ctx.layout.tp == 1 or work.num_layers == 0:
        return []
    if ctx.assumptions.tp_comm_overlap and ctx.layout.sp:  # fused with the GEMMs
        return ub_tp_collectives(work, ctx)
    size = tokens_per_rank(ctx) * ctx.model.hidden_size * ctx.policy.activation_bytes
    per_pass = 2 * work.num_layers
    counts = (per_pass, per_pass * (2 if ctx.layout.recompute == "full" else 1))
    kinds: tuple[CollectiveKind, ...] = ("all-gather", "reduce-scatter")
    if not ctx.layout.sp:
        kinds = ("all-reduce",)
    part = 1 / len(kinds)
    windows = (Window(forward=part), Window(backward=part))
    what = ("layer activations", "activation gradients")
    share = ctx.assumptions.tp_overlap
    regather = per_pass if sac_regathers(ctx.layout) else 0
    return [
        c
        for kind in kinds
        for c in both_ways(
            ctx,
            axis="tp",
            kind=kind,
            what=what,
            size_bytes=size,
            counts=(counts[0], counts[1] + (regather if kind == "all-gather" else 0)),
            passes=passes,
            windows=windows,
            share=share,
        )
    ]


def sac_regathers(layout: Layout) -> bool:
    """Whether the backward repeats the forward's sequence-parallel all-gathers: torchtitan's
    op-level selective activation checkpointing saves the outputs of the ops in its
    ``_save_list`` (mm, SDPA, ``_c10d_functional.reduce_scatter_tensor``, max) and recomputes
    the rest, so the all-gathers before attention and the MLP (``all_gather_into_tensor``, not
    in the list) run again before their block's backward. Source: torchtitan
    torchtitan/models/llama3/infra/parallelize.py (820504e, 2025-06) and
    parallelisms/parallelize_llama.py (9dec370, 2024-12), ``_save_list`` and
    ``_apply_ac_to_transformer_block``; torch.utils.checkpoint CheckpointPolicy
    PREFER_RECOMPUTE for unlisted ops."""
    return layout.recompute_ops and layout.recompute == "selective" and layout.sp


def ep_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """EP all-to-all dispatch and combine of one micro-batch, forward and backward, per rank.

    Ledger: 2 per MoE block each way (2 more backward with full recompute); bytes b s / (cp tp)
    local tokens (sequence-parallel before dispatch) x top-k x h x activation bytes x the
    busiest rank's imbalance. Overlap: DualPipe hides the forward's calls behind the forward
    and the backward's behind the backward; Megatron-Core's 1F1B A2A overlap (ep_overlap > 0)
    hides each dispatch and combine behind its phase partner (MEGATRON_A2A_PAIRS), the
    hidden part costing ``ep_contention`` of compute. Source: Megatron-Core
    MoEAlltoAllTokenDispatcher; DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.1 for
    DualPipe's overlap.
    """
    if ctx.layout.ep == 1 or work.num_moe_layers == 0:
        return []
    local = tokens_per_rank(ctx) / ctx.layout.tp * ctx.model.num_experts_per_tok
    size = local * ctx.moe_imbalance * ctx.model.hidden_size * ep_bytes_per_element(ctx)
    per_pass = 2 * work.num_moe_layers
    counts = (per_pass, per_pass * (2 if ctx.layout.recompute == "full" else 1))
    share = ctx.assumptions.ep_overlap
    dualpipe = ctx.layout.schedule in ("dualpipe", "dualpipev")
    if dualpipe:  # DualPipeV: the same F&B overlap
        share = max(share, ctx.assumptions.dualpipe_ep_overlap)
    one = ep_all_to_all_s(ctx, size)
    if share > 0 and not dualpipe:  # Megatron-Core's 1F1B all-to-all overlap, phase by phase
        halves = (counts[0] / 2, counts[1] / 2)  # dispatch and combine apart
        calls = []
        for what, windows in MEGATRON_A2A_PAIRS:
            calls += both_ways(
                ctx, axis="ep", kind="all-to-all", what=what, size_bytes=size, counts=halves,
                passes=passes, windows=windows, share=share, one_call_s=one,
            )  # fmt: skip
        paired = paired_share(ctx)
        if paired < 1.0:  # warm-up forwards and cool-down backwards run alone: exposed
            calls = [_paired(c, paired, passes) for c in calls]
        calls = [PhasedCollective(**{f.name: getattr(c, f.name) for f in fields(c)}) for c in calls]
    else:  # the contention taken off as each call is made (``timed``), not by a copy
        what = ("token dispatch and combine", "their gradients")
        windows = (FORWARD, BACKWARD)
        return both_ways(
            ctx, axis="ep", kind="all-to-all", what=what, size_bytes=size, counts=counts,
            passes=passes, windows=windows, share=share, one_call_s=one,
            contention=ep_contention(ctx) if share > 0 else 0.0,
        )  # fmt: skip
    lost = ep_contention(ctx) if share > 0 else 0.0
    if not lost:
        return calls
    return [replace(c, hidden_s=c.hidden_s * (1.0 - lost), contention=lost) for c in calls]


MEGATRON_A2A_PAIRS: tuple[tuple[tuple[str, str], tuple[Window, Window]], ...] = (
    (
        ("token dispatch", "combine gradients"),
        (Window(expert_backward=1.0), Window(forward=1.0, expert_forward=-1.0)),
    ),
    (
        ("token combine", "dispatch gradients"),
        (Window(backward=1.0, expert_backward=-1.0), Window(expert_forward=1.0)),
    ),
)
"""What each all-to-all hides behind under Megatron-Core's 1F1B A2A overlap
(--overlap-moe-expert-parallel-comm), which runs one layer's forward of a micro-batch with a
layer's backward of another in four phases, comm stream against compute stream: the backward
combine beside the forward's pre-dispatch part (attention, router), the forward dispatch then
the backward dispatch beside the backward's expert part then the forward's, the forward
combine beside the backward's pre-dispatch part. So the forward dispatch hides behind the
experts' backward, the forward combine behind the rest of the backward, the combine's gradient
behind the forward outside the experts, the dispatch's gradient behind the experts' forward;
each phase lasts the longer of its two. Source: Megatron-Core
megatron/core/models/common/model_chunk_schedule_plan.py (TransformerLayerSchedulePlan.run)."""


def paired_share(ctx: StageContext) -> float:
    """Share of a step's forward (and backward) model chunks that Megatron-Core's 1F1B A2A
    overlap runs paired with another micro-batch's backward (forward): all but the warm-up
    forwards and the cool-down backwards, which run alone.

    Ledger, with M micro-batches, p pipeline ranks and v model chunks each: the interleaved
    schedule runs M v chunks per rank, of which min(M v, 2 (p - 1 - r) + (v - 1) p + 1)
    forwards on rank r warm up (one more than without the overlap, so that each paired
    forward and backward are independent; the micro-batch group per virtual stage is p, the
    default), as many backwards cool down; taken at the mean over the ranks. Without a
    pipeline the first forward and the last backward run alone: (M - 1) / M. 1 where M is not
    known (``StageContext.microbatches`` 0). Source: Megatron-Core
    megatron/core/pipeline_parallel/schedules.py (get_pp_rank_microbatches, the combined 1F1B
    path of forward_backward_pipelining_with_interleaving; combined_1f1b.py for p = 1)."""
    m, p, v = ctx.microbatches, ctx.layout.pp, ctx.layout.virtual_stages
    if m <= 0:
        return 1.0
    if p == 1:
        return (m - 1) / m
    total = m * v
    warmup = sum(min(total, 2 * (p - 1 - r) + (v - 1) * p + 1) for r in range(p)) / p
    return 1.0 - warmup / total


def _paired(call: Collective, paired: float, passes: PassTimes) -> Collective:
    """``call`` with only its ``paired`` share hidden (behind that share of its window): the
    rest, the unpaired chunks' calls, stays exposed."""
    share, floor = call.share * paired, 1.0 - paired
    hidden = hidden_s(call.time_s, floor * call.time_s, share, window_s(call.window, passes))
    return replace(call, share=share, floor_share=floor, hidden_s=hidden)


def ep_contention(ctx: StageContext) -> float:
    """Compute seconds lost per second an EP all-to-all hides behind compute: NCCL's
    all-to-all kernels slow the compute beside them by ``CommAssumptions.ep_overlap_slowdown``
    (a hidden second covers 1 / (1 + slowdown) seconds of standalone compute); 0 under
    DeepEP-style dispatch, whose reserved SMs the compute already pays
    (``ComputeAssumptions.comm_sm_share``). Source: CommAssumptions.ep_overlap_slowdown."""
    if ctx.assumptions.ep_domain_dedup:
        return 0.0
    slowdown = ctx.assumptions.ep_overlap_slowdown
    return slowdown / (1.0 + slowdown)


def etp_collectives(work: StageWork, passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """Expert-TP all-gather of the dispatched tokens and reduce-scatter of the experts' output
    of one micro-batch, per rank, on the ETP group (counted on the tp axis).

    Ledger: per MoE block forward, an all-gather of the ETP group's received tokens (etp x the
    dispatch buffer of ``ep_collectives``, at the activation width) before the experts and a
    reduce-scatter of the same bytes after them; the backward runs the mirror pair (once more
    with full recompute). Source: Megatron-Core MoEAlltoAllTokenDispatcher
    (gather_from_sequence_parallel_region / reduce_scatter_to_sequence_parallel_region over
    the expert-tensor-parallel group).
    """
    etp = ctx.layout.etp
    if etp == 1 or work.num_moe_layers == 0:
        return []
    local = tokens_per_rank(ctx) / ctx.layout.tp * ctx.model.num_experts_per_tok
    size = etp * local * ctx.moe_imbalance * ctx.model.hidden_size * ctx.policy.activation_bytes
    per_pass = work.num_moe_layers
    counts = (per_pass, per_pass * (2 if ctx.layout.recompute == "full" else 1))
    windows = (Window(forward=0.5), Window(backward=0.5))  # two kinds share
    share = ctx.assumptions.tp_overlap
    what = ("expert tokens (expert TP)", "expert token gradients (expert TP)")
    kinds: tuple[CollectiveKind, ...] = ("all-gather", "reduce-scatter")
    return [
        c
        for kind in kinds
        for c in both_ways(
            ctx,
            axis="tp",
            group="etp",
            kind=kind,
            what=what,
            size_bytes=size,
            counts=counts,
            passes=passes,
            windows=windows,
            share=share,
        )
    ]


def tied_embedding_collectives(ctx: StageContext, first: bool, last: bool) -> list[Collective]:
    """The all-reduce of the word-embedding gradient between the first and the last pipeline
    stage, once per step, when the embedding and the LM head share one matrix.

    Ledger: V / TP x h gradients at the policy's gradient width, over the pair of ranks that
    hold the two ends; exposed (it runs after the last backward, before the optimizer step).
    None where one rank holds both ends (PP 1, DualPipe's rank 0). Source: Megatron-LM
    finalize_model_grads (_allreduce_word_embedding_grads).
    """
    model, layout = ctx.model, ctx.layout
    if not model.tie_word_embeddings or first == last or layout.schedule == "dualpipe":
        return []
    size = model.vocab_size * model.hidden_size / layout.tp * ctx.policy.grad_bytes
    pp = ctx.groups["pp"]
    crosses = pp.crosses_domains  # the ends sit as far apart as the pipeline spans
    pair = replace(
        pp, size=2, ranks_per_domain=1 if crosses else 2, num_domains=2 if crosses else 1
    )
    one = collective_s("all-reduce", size, pair, ctx.assumptions.links)
    what = "tied embedding gradients"
    return [
        timed(
            ctx, axis="pp", kind="all-reduce", what=what, phase="step", size_bytes=size,
            count=1, one_call_s=one,
        )
    ]  # fmt: skip


def ep_bytes_per_element(ctx: StageContext) -> float:
    """Mean bytes per element of a dispatch and a combine: FP8 dispatch (1 byte + an fp32
    scale per 128) with a bf16 combine when fp8_dispatch, else the activation dtype.
    Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 3.3.4."""
    if not ctx.assumptions.fp8_dispatch:
        return ctx.policy.activation_bytes
    return (1 + 4 / 128 + ctx.policy.activation_bytes) / 2


def ep_all_to_all_s(ctx: StageContext, size_bytes: float) -> float | None:
    """One EP all-to-all call, s: DeepEP-style deduplication where it applies, else the plain
    all-to-all of explorer.comm.collectives; at least the published dispatch-kernel time
    inside an NVLink 5 domain (``ep_published_floor_s``). None: the plain all-to-all as
    ``both_ways`` times it (no floor applies)."""
    group, links = ctx.groups["ep"], ctx.assumptions.links
    floor = ep_published_floor_s(ctx, size_bytes)
    if ctx.assumptions.ep_domain_dedup:
        top_k, max_domains = ctx.model.num_experts_per_tok, ctx.model.topk_group
        found = deduplicated_all_to_all_s(size_bytes, top_k, group, links, max_domains)
        return max(found, floor)
    if floor <= 0:
        return None
    return max(collective_s("all-to-all", size_bytes, group, links), floor)


def ep_published_floor_s(ctx: StageContext, size_bytes: float) -> float:
    """The published Hybrid-EP time of one call of ``size_bytes`` (the mean of a dispatch and a
    combine, ``ep_bytes_per_element`` per element) inside one NVLink 5 domain; 0 where
    ``CommAssumptions.ep_published_floor`` is off, the group has a measured all-to-all
    sweep (the user's cluster speaks for itself) or no table applies. Source:
    explorer.comm.ep_kernels."""
    a, group = ctx.assumptions, ctx.groups["ep"]
    if not a.ep_published_floor or any(m.kind == "all-to-all" for m in group.measured):
        return 0.0
    elements = size_bytes / ep_bytes_per_element(ctx)
    dispatch = elements * ((1 + 4 / 128) if a.fp8_dispatch else ctx.policy.activation_bytes)
    combine = elements * ctx.policy.activation_bytes
    return published_dispatch_floor_s(group, dispatch, combine, a.fp8_dispatch, a.links.scale_up)


def pp_collectives(passes: PassTimes, ctx: StageContext) -> list[Collective]:
    """Pipeline sends of one micro-batch: an activation forward and a gradient backward.

    Ledger: one exchange per chunk per pass (send and receive of send_forward_recv_backward
    run at once, full duplex); bytes b (s / cp) h x activation bytes, / tp under sequence
    parallelism. Source: Megatron-LM p2p_communication (scatter-gather of pipeline tensors).
    """
    layout = ctx.layout
    if layout.pp == 1:
        return []
    size = tokens_per_rank(ctx) * ctx.model.hidden_size * ctx.policy.activation_bytes
    size /= layout.tp if layout.sp else 1
    counts = (layout.virtual_stages, layout.virtual_stages)
    what = ("activations", "activation gradients")
    share, windows = ctx.assumptions.pp_overlap, (FORWARD, BACKWARD)
    return both_ways(
        ctx, axis="pp", kind="point-to-point", what=what, size_bytes=size, counts=counts,
        passes=passes, windows=windows, share=share,
    )  # fmt: skip
