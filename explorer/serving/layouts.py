"""Serving layouts: every factorisation of N GPUs, the rules that reject one (with a reason
in words) and the warnings for those that run at a cost."""

from __future__ import annotations

from dataclasses import replace

from explorer.divisibility import (
    kv_heads_split,
    uneven_expert_width,
    uneven_ffn_widths,
    uneven_heads,
)
from explorer.memory.serving import ServingLayout
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.experts import expert_slots, fewest_redundant_experts
from explorer.specs import ClusterSpec, ModelSpec


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


def _divides_heads(model: ModelSpec, layout: ServingLayout) -> str:
    # vLLM shards whole heads: it asserts num_attention_heads % tp == 0
    if not uneven_heads(model, layout.tp):
        return ""
    return f"TP {layout.tp} does not divide the {model.num_attention_heads} attention heads"


def _divides_kv_heads(model: ModelSpec, layout: ServingLayout) -> str:
    # vLLM needs kv_heads % tp == 0 (split) or tp % kv_heads == 0 (replicated): rejected, not
    # warned, because no engine runs an uneven split. MLA has one latent, so no rule.
    if kv_heads_split(model, layout.tp) != "uneven":
        return ""
    return f"TP {layout.tp} neither divides nor is a multiple of the {model.kv_heads} KV heads"


def _ep_splits_experts(model: ModelSpec, layout: ServingLayout) -> str:
    # expert parallelism places whole routed experts (and EPLB's redundant copies) evenly;
    # a dense model has none to place
    ep, experts, extra = layout.ep, model.n_routed_experts, layout.redundant_experts
    if ep > 1 and not model.is_moe:
        return f"EP {ep} needs an MoE model; {model.name} is dense"
    if not model.is_moe or expert_slots(model, extra) % ep == 0:
        return ""
    if extra:
        return f"EP {ep} does not divide the {experts} routed + {extra} redundant experts"
    return f"EP {ep} does not divide the {experts} routed experts"


def with_redundant_experts(
    model: ModelSpec, layout: ServingLayout, a: ServingAssumptions
) -> ServingLayout:
    """``layout`` with the fewest redundant experts (at least ``a.redundant_experts``) that let
    its EP degree place the experts evenly, as EPLB does (256 + 32 = 288 over EP 72 in
    SGLang's large-scale EP blog); unchanged without EP or for a dense model."""
    extra = fewest_redundant_experts(model, layout.ep, a.redundant_experts)
    return replace(layout, redundant_experts=extra) if extra else layout


def _pp_fits_layers(model: ModelSpec, layout: ServingLayout) -> str:
    layers = model.num_hidden_layers
    return f"PP {layout.pp} exceeds the {layers} blocks" if layout.pp > layers else ""


def _tp_divides_ffn(model: ModelSpec, layout: ServingLayout) -> str:
    # column-parallel MLP matrices are split evenly across TP ranks, the experts' too
    bad = uneven_ffn_widths(model, layout.tp)
    if uneven_expert_width(model, layout.tp):
        bad = (model.moe_intermediate_size, *bad)
    return f"TP {layout.tp} does not divide the FFN width {bad[0]}" if bad else ""


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


def _crossings(cluster: ClusterSpec, layout: ServingLayout) -> tuple[bool, bool, bool]:
    """Whether the TP, EP and PP groups leave the scale-up domain (TP innermost, then EP, PP)."""
    domain, tp, ep = cluster.domain_size, layout.tp, layout.ep
    return tp > domain, tp * ep > domain, tp * ep * layout.pp > domain


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
        (
            layout.redundant_experts > 0,
            f"{layout.redundant_experts} redundant experts over EP {ep} (EPLB): their weights "
            "take memory, the balanced load saves time",
        ),
    )
    return tuple(text for hit, text in checks if hit)
