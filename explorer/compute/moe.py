"""MoE work besides the expert GEMMs that the dense ledgers do not hold.

Megatron-Core's all-to-all dispatcher (``MoEAlltoAllTokenDispatcher``) receives a GPU's tokens
ordered by the rank that sent them; with more than one local expert it sorts them by local
expert after the dispatch (``dispatch_postprocess``: "Permutation 2", ``sort_chunks_by_idxs``)
and restores the rank order before the combine (``combine_preprocess``: "Unpermutation 2").
Each is one read and one write of every received token; the backward runs the mirror pair on
the gradients. The flex dispatcher (DeepEP, HybridEP) hands the tokens over grouped by expert
and skips both. Source: Megatron-Core megatron/core/transformer/moe/token_dispatcher.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from explorer.compute.gemm import traffic_bytes
from explorer.specs import Layout, ModelSpec


def chunk_sort_elements(model: ModelSpec, layout: Layout) -> float:
    """Elements per token (of the GPU's b s / cp) that the dispatcher's sort by local expert
    and its inverse move in one pass of one MoE block, per GPU, even routing.

    Ledger: the GPU receives top-k copies of each of its T / tp sequence-parallel tokens
    (ep etp / E experts' share of T x top-k over the EP group); the sort reads and writes
    them (2 k h / tp per token) and so does the unsort: 4 k h / tp. None (0) with at most
    one local expert. Source: module docstring.
    """
    if model.n_routed_experts // layout.ep <= 1:
        return 0.0
    return 4 * model.num_experts_per_tok * model.hidden_size / layout.tp


GROUPED_GEMM_BANDWIDTH_RATIO: Final = 2064 / 2668
"""HBM bandwidth a single-launch grouped GEMM reaches where its weights' reads bound it, over
what a plain GEMM reaches (``ComputeAssumptions.hbm_efficiency``'s figure). Source:
deepseek-ai/DeepGEMM README at commit 78cacf7 (H800): the masked-layout grouped GEMMs of 256
tokens per expert peak at 2064 GB/s (4 groups x 256 x 4096 x 7168, 932 TFLOPS) where the
normal GEMMs of 64-128 rows peak at 2668 GB/s (64 x 7168 x 16384); taken as a ratio on every
GPU (an assumption: no other grouped kernel publishes its memory-bound rows)."""


def grouped_gemm_bandwidth(
    m: float, n: float, k: float, groups: int, dtype: str, bandwidth: float, single_launch: bool
) -> float:
    """The bandwidth to time ``groups`` x (m x n x k) as one m x (n groups) x k GEMM with
    (explorer.compute.kernels): that GEMM's roofline then equals the grouped one's.

    Ledger: each group reads its own m x k rows and k x n weights and writes its m x n output
    (``groups`` x traffic_bytes(m, n, k)), where the one-GEMM form reads the m x k rows once;
    a single-launch grouped kernel (DeepGEMM, CUTLASS, torch._grouped_mm) moves them at
    ``GROUPED_GEMM_BANDWIDTH_RATIO`` of the plain GEMMs' bandwidth, Transformer Engine's
    per-expert cuBLAS GEMMs (``single_launch`` False) at the plain GEMMs' own. Source:
    explorer.compute.gemm.traffic_bytes; GROUPED_GEMM_BANDWIDTH_RATIO.
    """
    if groups <= 1 and not single_launch:
        return bandwidth
    one = traffic_bytes(m, n * groups, k, dtype)
    grouped = groups * traffic_bytes(m, n, k, dtype)
    ratio = GROUPED_GEMM_BANDWIDTH_RATIO if single_launch else 1.0
    return bandwidth * ratio * one / grouped


@dataclass(frozen=True, slots=True)
class DropAndPad:
    """The fixed sizes of one MoE block's dispatch on one GPU under token drop padded to
    capacity (Megatron-Core --moe-expert-capacity-factor with
    --moe-pad-expert-input-to-capacity)."""

    capacity: int
    """Token copies each expert takes from this GPU's tokens (kept or padded)."""
    dispatched: int
    """Token copies this GPU sends through the dispatch all-to-all: capacity x experts."""
    per_local_expert: int
    """Rows of each local expert's grouped-GEMM group: capacity x ep x etp senders."""
    load: float
    """``dispatched`` over the dropless top-k copies (T x k): the expert load the estimate
    runs at (``TrainingAssumptions.moe_capacity_factor``)."""


def drop_and_pad(model: ModelSpec, layout: Layout, seq_len: int, factor: float) -> DropAndPad:
    """One MoE block's dispatch sizes per GPU and micro-batch when tokens beyond ``factor``
    times the mean per expert are dropped and every expert is padded to that capacity.

    Ledger: the router of each TP rank sees its sequence-parallel T = b s / (cp tp) tokens;
    capacity = ceil(T k / E x factor); the rank sends capacity tokens to each of the E experts
    (num_out_tokens), and each local expert receives capacity from each of the ep x etp ranks
    that route to it. Source: Megatron-Core megatron/core/transformer/moe/token_dispatcher.py
    (MoEAlltoAllTokenDispatcher.preprocess, drop_and_pad branch) and moe_utils.get_capacity,
    core_v0.14.0 and core_v0.15.0 alike.
    """
    tokens = layout.micro_batch_size * seq_len // (layout.cp * layout.tp)
    experts, k = model.n_routed_experts, model.num_experts_per_tok
    capacity = math.ceil(tokens * k / experts * factor)
    dispatched = capacity * experts
    return DropAndPad(
        capacity=capacity,
        dispatched=dispatched,
        per_local_expert=capacity * layout.ep * layout.etp,
        load=dispatched / (tokens * k),
    )
