"""Named validity rules: each takes (problem, candidate) and returns a reason in words or None.

A rule reads only the candidate fields of its level and above (``explorer.mesh.tree`` says
which level runs it); ``check`` runs all of them on a complete candidate. The comment in each
rule says why it exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache

from explorer.divisibility import (
    kv_heads_split,
    uneven_cp_sequence,
    uneven_expert_width,
    uneven_experts,
    uneven_ffn_widths,
    uneven_heads,
)
from explorer.mesh.dims import MeshDims
from explorer.mesh.space import Candidate, Problem, expert_data_parallel, num_microbatches
from explorer.partition import balanced_chunk_sizes
from explorer.schedules.builders import require_valid
from explorer.specs import V_SHAPED

Rule = Callable[[Problem, Candidate], str | None]


def world_size(p: Problem, c: Candidate) -> str | None:
    # Every GPU runs one rank of the mesh; EP and ETP fold into dp x cp x tp and add none.
    used = c.dp * c.tp * c.pp * c.cp
    if used != p.num_gpus:
        return f"dp x tp x pp x cp = {used}, not the {p.num_gpus} GPUs"
    return None


def tp_domain(p: Problem, c: Candidate) -> str | None:
    # TP exchanges activations in every layer (4 collectives per block); off the scale-up
    # links it is many times slower, and a TP size that does not divide the domain straddles it.
    domain = p.cluster.domain_size
    if p.space.tp_across_domain or domain % c.tp == 0:
        return None
    return f"TP {c.tp} does not fit in (divide) the scale-up domain of {domain} GPUs"


def tp_heads(p: Problem, c: Candidate) -> str | None:
    # Column-parallel attention gives each TP rank whole query heads.
    if not uneven_heads(p.model, c.tp):
        return None
    return f"{p.model.num_attention_heads} attention heads do not split over TP {c.tp}"


def tp_kv_heads(p: Problem, c: Candidate) -> str | None:
    # Megatron-Core requires num_query_groups to be a multiple of the TP size
    # (TransformerConfig); we do not replicate K/V heads in training. MLA shares one latent,
    # so it has no K/V heads to split.
    if kv_heads_split(p.model, c.tp) in ("split", "latent"):
        return None
    kv = p.model.kv_heads
    return f"{kv} key/value heads do not split over TP {c.tp} (no replication in training)"


def tp_hidden(p: Problem, c: Candidate) -> str | None:
    # Row- and column-parallel linears split the hidden dimension into TP equal slices.
    h = p.model.hidden_size
    return None if h % c.tp == 0 else f"hidden size {h} does not split over TP {c.tp}"


def tp_ffn(p: Problem, c: Candidate) -> str | None:
    # The MLP's up/gate columns and down rows split over TP; shared experts run under TP too.
    bad = uneven_ffn_widths(p.model, c.tp)
    return f"FFN width {bad[0]} does not split over TP {c.tp}" if bad else None


def pp_layers(p: Problem, c: Candidate) -> str | None:
    # Each model chunk needs at least one block; uneven chunks idle the lighter stages.
    chunks = c.pp * (2 if c.schedule in V_SHAPED else c.virtual or 1)  # a V: 2 per rank
    layers = p.model.num_hidden_layers
    if chunks > layers:
        return f"{chunks} pipeline chunks (pp x virtual) exceed the {layers} layers"
    idle = 1 - layers / (chunks * _largest_chunk(layers, chunks))
    if idle > p.space.max_stage_idle:
        return (
            f"{layers} layers on {chunks} chunks leave {idle:.0%} of the pipeline idle "
            f"(more than {p.space.max_stage_idle:.0%})"
        )
    return None


@cache
def _largest_chunk(layers: int, chunks: int) -> int:
    """Blocks on the fullest chunk of the balanced split (explorer.partition)."""
    return max(balanced_chunk_sizes(layers, chunks))


def cp_sequence(p: Problem, c: Candidate) -> str | None:
    # Load-balanced causal CP cuts the sequence into 2 x cp pieces (each rank takes a pair);
    # sequence parallelism then splits each rank's tokens over TP.
    s = p.workload.seq_len
    if uneven_cp_sequence(s, c.cp):
        return f"sequence {s} does not split into 2 x CP = {2 * c.cp} pieces"
    if c.tp > 1 and (s // c.cp) % c.tp:
        return f"{s // c.cp} tokens per CP rank do not split over TP {c.tp} (sequence parallel)"
    return None


def ep_dense(p: Problem, c: Candidate) -> str | None:
    # Only routed experts can be split EP ways.
    if p.model.is_moe or ((c.ep or 1) == 1 and (c.etp or 1) == 1):
        return None
    return "a dense model has no experts to split (EP and ETP must be 1)"


def ep_experts(p: Problem, c: Candidate) -> str | None:
    # Each EP rank holds the same number of whole routed experts.
    ep = c.ep or 1
    if not uneven_experts(p.model, ep):
        return None
    return f"{p.model.n_routed_experts} routed experts do not split over EP {ep}"


def ep_fold(p: Problem, c: Candidate) -> str | None:
    # Megatron-Core folds the expert groups into the same ranks: EP x ETP divides dp x cp x tp.
    dims = MeshDims.of(c)
    group, ranks = dims.expert_group, dims.folded
    if dims.experts_fold:
        return None
    return f"EP x ETP = {group} does not divide dp x cp x tp = {ranks}"


def etp_ffn(p: Problem, c: Candidate) -> str | None:
    # Expert tensor parallelism splits each expert's FFN width.
    etp = c.etp or 1
    if not uneven_expert_width(p.model, etp):
        return None
    return f"expert FFN width {p.model.moe_intermediate_size} does not split over ETP {etp}"


def batch(p: Problem, c: Candidate) -> str | None:
    # Every data-parallel rank runs whole micro-batches, the same number on each.
    gbs, mbs = p.workload.global_batch_size, c.mbs or 1
    if gbs % (c.dp * mbs) == 0:
        return None
    return f"global batch {gbs} is not a multiple of dp x micro-batch = {c.dp * mbs}"


def schedule(p: Problem, c: Candidate) -> str | None:
    # What the schedule builder needs of P, M and V (interleaved: M >= P with V > 1;
    # DualPipe: P even, M even and M >= 2P), asked of explorer.schedules itself.
    try:
        require_valid(c.schedule or "1f1b", c.pp, num_microbatches(p, c), c.virtual or 1)
    except ValueError as error:
        return str(error)
    return None


def zero_without_dp(p: Problem, c: Candidate) -> str | None:
    # ZeRO shards over the data-parallel ranks; with none (dense and expert), it is ZeRO 0.
    if not c.zero or c.dp * c.cp > 1 or (p.model.is_moe and expert_data_parallel(c) > 1):
        return None
    return f"ZeRO {c.zero} has no data-parallel ranks to shard over (the same as ZeRO 0)"


RULES: Mapping[str, Rule] = {
    "world-size": world_size,
    "tp-domain": tp_domain,
    "heads": tp_heads,
    "kv-heads": tp_kv_heads,
    "hidden": tp_hidden,
    "ffn": tp_ffn,
    "layers": pp_layers,
    "sequence": cp_sequence,
    "ep-dense": ep_dense,
    "experts": ep_experts,
    "ep-fold": ep_fold,
    "expert-ffn": etp_ffn,
    "batch": batch,
    "schedule": schedule,
    "zero-dp": zero_without_dp,
}
"""Every structural rule by kind (the ``kind`` column of rejected layouts)."""


def check(problem: Problem, candidate: Candidate) -> list[tuple[str, str]]:
    """Every (kind, reason) a complete candidate breaks, in rule order; empty when valid."""
    broken = ((kind, rule(problem, candidate)) for kind, rule in RULES.items())
    return [(kind, reason) for kind, reason in broken if reason is not None]
