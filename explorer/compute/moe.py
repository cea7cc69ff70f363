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
