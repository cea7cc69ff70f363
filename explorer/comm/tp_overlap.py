"""Tensor-parallel collectives fused with their GEMMs: Transformer Engine's comm-GEMM overlap.

Under Megatron-Core's --tp-comm-overlap (``CommAssumptions.tp_comm_overlap`` names the
userbuffers config, explorer.comm.userbuffers) each sequence-parallel collective of a block runs
inside the GEMM it feeds or follows. Per GEMM, with T = b s / cp tokens of the TP group, h the
hidden size, g(m) the GEMM at m rows (the kernel model's own time at that shape,
explorer.compute.passes.linear_s, on the SMs the config leaves it) and c the communication of
one chunk (explorer.comm.collectives):
- ring exchange, all-gather (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad): n = tp steps (tp / 2
  with ``aggregate``), step i multiplies chunk i (T / n rows) while the next chunk comes from a
  peer (one point-to-point message of T / n x h elements); the next GEMM waits for it, so
  exposed = (n - 1) max(0, c - g(T / n)).
- ring exchange, reduce-scatter (proj_fprop, fc2_fprop where so configured): tp chunks of
  T / tp output rows, each sent to its owner while the next is computed (tp - 1 messages
  hidden behind tp - 1 GEMM chunks), then one kernel sums the tp received chunks over HBM:
  exposed = (tp - 1) max(0, c - g(T / tp)) + that sum.
- pipeline reduce-scatter: the GEMM in ``num_splits`` chunks, each reduce-scattered (a
  userbuffers kernel on ``num_sm`` SMs) while the next is computed; the last chunk's cannot
  hide: exposed = c + (n - 1) max(0, c - g(T / n)).
- bulk (the backward of qkv and fc1): the all-gather of the sequence-parallel input for the
  weight gradient beside the input-gradient GEMM, the reduce-scatter of the input gradient
  beside the weight-gradient GEMM, on ``num_sm`` SMs: the GEMM runs on the other SMs while the
  collective runs (all the time with ``set_sm_margin``), exposed = max(0, c - g').
Each fused call also adds GEMM time, counted in its exposed seconds: its chunks at their own
(smaller) shapes and on the SMs left, over the unsplit GEMM on the whole GPU, and the ring
reduce-scatter's sum. So a call's exposed seconds are what it adds to the step beyond the
plain GEMM, and may exceed its communication time where chunking costs more than it hides.
Widths: under an FP8 policy every all-gather moves FP8 (Transformer Engine's default
``fp8_buf`` for its all-gather layers, qkv / fc1 fprop and dgrad and proj / fc2 dgrad,
initialize_ub, which the published configs do not override), a reduce-scatter with ``fp8_buf``
the FP8 GEMM output; the other reduce-scatters move the activation dtype.
Not modelled (named, each optimistic): the userbuffers kernels of the pipeline and bulk
methods move their bytes at the collective model's NCCL rate whatever their ``num_sm`` (no
per-SM figure is published); the copy engine's ring-exchange traffic takes HBM bandwidth from
the GEMM beside it; the GEMM chunks run at the kernel model's efficiency for their shapes
(explorer.compute.gemm), whose FP8 ceiling holds down to 512-row chunks.
Routed-expert MLPs are not fused (userbuffers covers the dense linear layers): an MoE
block's MLP-side all-gather and reduce-scatter stay as explorer.comm.model_parallel times them.
Sources: Transformer Engine transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp
(CommOverlapP2PBase::split_overlap_ag / split_overlap_rs, CommOverlapBase::split_overlap_rs /
bulk_overlap); Wang et al. 2023 (arXiv:2105.05720), decomposition of a collective into the
dependent GEMM's chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.comm.collectives import CollectiveKind, collective_s
from explorer.comm.step import (
    Collective,
    Phase,
    StageContext,
    both_ways,
    tokens_per_rank,
)
from explorer.comm.userbuffers import UB_CONFIGS, UbGemm
from explorer.compute import PassTimes, StageWork
from explorer.compute.kernels import attention_gemms, mlp_gemms
from explorer.compute.passes import ComputeContext, linear_s


@dataclass(frozen=True, slots=True, kw_only=True)
class FusedCollective(Collective):
    """A TP collective run inside its GEMM (explorer.comm.tp_overlap): ``hidden_s`` is its time
    less what it adds to the step (``exposed_s``: the communication the chunks cannot hide and
    the GEMM time the chunking and the SMs it holds add, ``gemm_s``), which does not depend on
    the rest of the pass."""

    gemm_s: float = 0.0
    """GEMM seconds the overlap adds (chunk shapes, SMs held, the ring's final sum), in
    ``exposed_s``."""

    def exposed_for(self, passes: PassTimes) -> float:
        """The same exposed seconds under any pass times: the overlap is inside the GEMM."""
        return self.exposed_s


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused call: communication seconds, exposed communication, GEMM seconds added."""

    comm_s: float
    exposed_s: float
    gemm_s: float


def ring_all_gather(
    ctx: StageContext, comp: ComputeContext, gemm: tuple[float, float, float], u: UbGemm,
    width: float,
) -> Fused:  # fmt: skip
    """A ring-exchange all-gather fused with the GEMM (m, n, k) of the gathered rows."""
    m, n, k = gemm
    tp = ctx.layout.tp
    steps = tp // 2 if u.aggregate and tp > 2 and tp % 2 == 0 else tp
    rows = m / steps
    held = u.num_sm if u.set_sm_margin else 0
    chunk = linear_s(comp, rows, n, k, held)
    step = collective_s(
        "point-to-point", rows * ctx.model.hidden_size * width, ctx.groups["tp"],
        ctx.assumptions.links,
    )  # fmt: skip
    exposed = (steps - 1) * max(0.0, step - chunk)
    return Fused((steps - 1) * step, exposed, steps * chunk - linear_s(comp, m, n, k))


def ring_reduce_scatter(
    ctx: StageContext, comp: ComputeContext, gemm: tuple[float, float, float], u: UbGemm,
    width: float,
) -> Fused:  # fmt: skip
    """A ring-exchange reduce-scatter fused with the GEMM (m, n, k) whose output it scatters."""
    m, n, k = gemm
    tp = ctx.layout.tp
    rows = m / tp
    held = u.num_sm if u.set_sm_margin else 0
    chunk = linear_s(comp, rows, n, k, held)
    size = rows * n * width
    step = collective_s("point-to-point", size, ctx.groups["tp"], ctx.assumptions.links)
    bandwidth = comp.gpu.hbm_bytes_per_s * comp.assumptions.hbm_efficiency
    total = (tp * size + rows * n * ctx.policy.activation_bytes) / bandwidth  # reduce_bf16
    exposed = (tp - 1) * max(0.0, step - chunk)
    return Fused((tp - 1) * step, exposed, tp * chunk + total - linear_s(comp, m, n, k))


def pipeline_reduce_scatter(
    ctx: StageContext, comp: ComputeContext, gemm: tuple[float, float, float], u: UbGemm,
    width: float,
) -> Fused:  # fmt: skip
    """A pipelined reduce-scatter fused with the GEMM (m, n, k) whose output it scatters."""
    m, n, k = gemm
    splits = max(1, u.num_splits)
    rows = m / splits
    chunk = linear_s(comp, rows, n, k, u.num_sm if u.set_sm_margin else 0)
    one = collective_s("reduce-scatter", rows * n * width, ctx.groups["tp"], ctx.assumptions.links)
    exposed = one + (splits - 1) * max(0.0, one - chunk)
    return Fused(splits * one, exposed, splits * chunk - linear_s(comp, m, n, k))


def bulk(
    ctx: StageContext, comp: ComputeContext, gemm: tuple[float, float, float], u: UbGemm,
    kind: CollectiveKind, size_bytes: float,
) -> Fused:  # fmt: skip
    """A bulk collective (``kind``, all-gather or reduce-scatter of ``size_bytes``) beside the
    independent GEMM (m, n, k): the GEMM runs on the SMs it leaves while it runs."""
    m, n, k = gemm
    alone = linear_s(comp, m, n, k)
    slowed = linear_s(comp, m, n, k, u.num_sm)
    comm = collective_s(kind, size_bytes, ctx.groups["tp"], ctx.assumptions.links)
    if u.set_sm_margin or comm >= slowed:
        return Fused(comm, max(0.0, comm - slowed), slowed - alone)
    # the share comm / slowed of the GEMM's work runs beside it, the rest on every SM
    beside = comm + (1.0 - comm / slowed) * alone
    return Fused(comm, 0.0, beside - alone)


def ub_tp_collectives(work: StageWork, ctx: StageContext) -> list[Collective]:
    """The TP collectives of one micro-batch under Transformer Engine's comm-GEMM overlap
    (module docstring): per dense block forward qkv_fprop and fc1_fprop (all-gathers),
    proj_fprop and fc2_fprop (reduce-scatters); backward proj_dgrad and fc2_dgrad
    (all-gathers), qkv_dgrad and fc1_dgrad (bulk all-gathers of the inputs for the weight
    gradients), qkv_wgrad and fc1_wgrad (bulk reduce-scatters of the input gradients); the
    forward's again before the backward with full recompute. MoE blocks fuse their attention's
    and time their MLP's pair as explorer.comm.model_parallel.tp_collectives does. Without the
    stage's compute context (``StageContext.compute``: the search's bounds) every fused call
    is taken as hidden, a lower bound."""
    config = UB_CONFIGS[ctx.assumptions.tp_comm_overlap]
    model, layout, policy = ctx.model, ctx.layout, ctx.policy
    tokens = tokens_per_rank(ctx)  # T: the TP group's gathered rows
    h = model.hidden_size
    qkv, proj = ((g.m, g.n, g.k) for g in attention_gemms(model, tokens, layout.tp))
    fc1, fc2 = ((g.m, g.n, g.k) for g in mlp_gemms(model, tokens, model.intermediate_size,
                                                   layout.tp, True))  # fmt: skip
    gathered = 1.0 if policy.compute == "fp8" else policy.activation_bytes
    act = policy.activation_bytes
    moe, dense = work.num_moe_layers, work.num_layers - work.num_moe_layers
    recompute = 2 if layout.recompute == "full" else 1

    def scattered(u: UbGemm) -> float:
        return 1.0 if u.fp8_buf and policy.compute == "fp8" else act

    def rs(gemm: tuple[float, float, float], u: UbGemm, comp: ComputeContext) -> Fused:
        if u.method == "ring":
            return ring_reduce_scatter(ctx, comp, gemm, u, scattered(u))
        return pipeline_reduce_scatter(ctx, comp, gemm, u, scattered(u))

    def dgrad(g: tuple[float, float, float]) -> tuple[float, float, float]:
        return g[0], g[2], g[1]

    def wgrad(g: tuple[float, float, float]) -> tuple[float, float, float]:
        return g[1], g[2], g[0]

    comp = ctx.compute
    attention_blocks, mlp_blocks = dense + moe, dense
    specs: tuple[tuple[str, CollectiveKind, Phase, int, str, tuple[float, float, float]], ...] = (
        ("qkv_fprop", "all-gather", "forward", attention_blocks, "ag", qkv),
        ("proj_fprop", "reduce-scatter", "forward", attention_blocks, "rs", proj),
        ("fc1_fprop", "all-gather", "forward", mlp_blocks, "ag", fc1),
        ("fc2_fprop", "reduce-scatter", "forward", mlp_blocks, "rs", fc2),
        ("proj_dgrad", "all-gather", "backward", attention_blocks, "ag", dgrad(proj)),
        ("fc2_dgrad", "all-gather", "backward", mlp_blocks, "ag", dgrad(fc2)),
        ("qkv_dgrad", "all-gather", "backward", attention_blocks, "bulk", dgrad(qkv)),
        ("fc1_dgrad", "all-gather", "backward", mlp_blocks, "bulk", dgrad(fc1)),
        ("qkv_wgrad", "reduce-scatter", "backward", attention_blocks, "bulk", wgrad(qkv)),
        ("fc1_wgrad", "reduce-scatter", "backward", mlp_blocks, "bulk", wgrad(fc1)),
    )
    out: list[Collective] = []
    for name, kind, phase, blocks, how, gemm in specs:
        if not blocks:
            continue
        u: UbGemm = getattr(config, name)
        size = tokens * h * (gathered if kind == "all-gather" else act)
        if comp is None:
            alone = collective_s(kind, size, ctx.groups["tp"], ctx.assumptions.links)
            fused = Fused(alone, 0.0, 0.0)
        elif how == "ag":
            fused = ring_all_gather(ctx, comp, gemm, u, gathered)
        elif how == "rs":
            fused = rs(gemm, u, comp)
        else:
            fused = bulk(ctx, comp, gemm, u, kind, size)
        counts = [(phase, blocks)]
        if phase == "forward" and recompute == 2:  # full recompute repeats the forward's
            counts.append(("backward", blocks))
        for call_phase, count in counts:
            out.append(_fused(name, kind, call_phase, size, count, fused))
    if moe:  # the MoE blocks' MLP-side pair, unfused (explorer.comm.model_parallel)
        out += _unfused_moe_mlp(ctx, moe, size=tokens * h * act)
    return out


def _fused(
    name: str, kind: CollectiveKind, phase: Phase, size: float, count: int, f: Fused
) -> Collective:
    exposed = count * (f.exposed_s + f.gemm_s)
    time = count * f.comm_s
    return FusedCollective(
        axis="tp",
        kind=kind,
        what=f"{name} (userbuffers)",
        phase=phase,
        size_bytes=size,
        count=count,
        time_s=time,
        hidden_s=time - exposed,
        gemm_s=count * f.gemm_s,
    )


def _unfused_moe_mlp(ctx: StageContext, moe: int, size: float) -> list[Collective]:
    """An MoE block's all-gather before and reduce-scatter after its MLP (sequence parallel),
    forward and backward (again with full recompute), exposed as the default ledger."""
    backward = moe * (2 if ctx.layout.recompute == "full" else 1)
    what = ("MoE block activations", "MoE block activation gradients")
    kinds: tuple[CollectiveKind, ...] = ("all-gather", "reduce-scatter")
    return [
        c
        for kind in kinds
        for c in both_ways(
            ctx, axis="tp", kind=kind, what=what, size_bytes=size, counts=(moe, backward)
        )
    ]
