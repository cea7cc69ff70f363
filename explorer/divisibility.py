"""Which of a model's widths a parallel degree splits evenly: the arithmetic shared by the
training mesh rules (``explorer.mesh.rules``, which reject), the training warnings
(``explorer.memory.checks``, which warn) and the serving rules (``explorer.serving.layouts``);
each words its own message and decides what an uneven split means for it.
"""

from __future__ import annotations

from typing import Literal

from explorer.specs import ModelSpec

KvSplit = Literal["split", "replicated", "uneven", "latent"]


def uneven_heads(model: ModelSpec, tp: int) -> bool:
    """Whether TP cannot give every rank whole query heads (column-parallel attention).

    Source: Shoeybi et al. 2019 (arXiv:1909.08053) sec. 3; Megatron-LM and vLLM assert it.
    """
    return model.num_attention_heads % tp != 0


def kv_heads_split(model: ModelSpec, tp: int) -> KvSplit:
    """How TP ranks hold the key/value heads: split evenly, replicated (TP a multiple of the
    KV heads: each rank keeps one), unevenly (neither), or MLA's shared latent (no heads).

    Source: Megatron-Core TransformerConfig (num_query_groups % TP); vLLM's KV-head
    replication when TP exceeds the KV heads.
    """
    if model.is_mla:
        return "latent"
    kv = model.kv_heads
    if kv % tp == 0:
        return "split"
    return "replicated" if tp % kv == 0 else "uneven"


def uneven_ffn_widths(model: ModelSpec, tp: int) -> tuple[int, ...]:
    """The dense MLP width (when some layer is dense) and the shared experts' width that TP
    does not divide (their up/gate columns and down rows split over TP).

    Source: Shoeybi et al. 2019 (arXiv:1909.08053) sec. 3 (MLP column/row parallel).
    """
    has_dense = model.num_moe_layers < model.num_hidden_layers
    widths = ([model.intermediate_size] if has_dense else []) + [
        w for w in [model.shared_ffn_size] if w
    ]
    return tuple(w for w in widths if w % tp)


def uneven_expert_width(model: ModelSpec, degree: int) -> bool:
    """Whether a degree (expert TP in training, TP in serving) fails to split each routed
    expert's FFN width evenly."""
    return model.is_moe and model.moe_intermediate_size % degree != 0


def uneven_experts(model: ModelSpec, ep: int) -> bool:
    """Whether EP ranks cannot each hold the same number of whole routed experts."""
    return model.is_moe and model.n_routed_experts % ep != 0


def uneven_cp_sequence(seq_len: int, cp: int) -> bool:
    """Whether load-balanced causal CP cannot cut the sequence into 2 x CP equal pieces.

    Source: Megatron-Core / Transformer Engine context parallelism (each rank takes a pair).
    """
    return cp > 1 and seq_len % (2 * cp) != 0
