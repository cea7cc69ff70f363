"""A training layout in words: warnings (each rule a small function returning a sentence) and
what each parallel axis splits and replicates.

A warning never stops the estimate; layouts that cannot run at all raise ValueError elsewhere
(EP x ETP not dividing DP x CP x TP, more pipeline chunks than layers, schedules whose
micro-batch rules fail).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from explorer.divisibility import (
    kv_heads_split,
    uneven_cp_sequence,
    uneven_expert_width,
    uneven_experts,
    uneven_ffn_widths,
    uneven_heads,
)
from explorer.memory.assumptions import TrainingAssumptions
from explorer.memory.frameworks import activation_storage
from explorer.specs import V_SHAPED, GpuSpec, Layout, ModelSpec, TrainingWorkload
from explorer.units import GiB

Rule = Callable[[ModelSpec, Layout, TrainingWorkload, int, int], "str | None"]


def tp_crosses_domain(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    # TP all-gathers / reduce-scatters every layer: it needs the scale-up links.
    if layout.tp <= domain:
        return None
    return (
        f"TP group of {layout.tp} GPUs is larger than the scale-up domain of {domain}: "
        "tensor-parallel traffic crosses the slower inter-node fabric"
    )


def heads_not_divisible(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    # Megatron-LM asserts heads % TP == 0; the estimate assumes an even split.
    heads, kv, tp = model.num_attention_heads, model.kv_heads, layout.tp
    if uneven_heads(model, tp):
        return f"{heads} attention heads are not divisible by TP = {tp}; an even split is assumed"
    split = kv_heads_split(model, tp)
    if split == "replicated" or (split == "uneven" and kv < tp):
        return f"{kv} KV heads are fewer than TP = {tp}; each rank keeps a replica of one KV head"
    if split == "uneven":
        return f"{kv} KV heads are not divisible by TP = {tp}; an even split is assumed"
    return None


def ffn_not_divisible(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    # Column-parallel FFN matrices need the width to divide by TP (ETP for experts).
    bad = uneven_ffn_widths(model, layout.tp)
    if bad:
        return f"FFN width {bad[0]} is not divisible by TP = {layout.tp}"
    if uneven_expert_width(model, layout.etp):
        return f"expert FFN width {model.moe_intermediate_size} is not divisible by ETP"
    return None


def experts_not_divisible(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    experts = model.n_routed_experts
    if not model.is_moe and layout.ep > 1:
        return f"EP = {layout.ep} has no effect: the model has no routed experts"
    if not uneven_experts(model, layout.ep):
        return None
    return (
        f"{experts} routed experts are not divisible by EP = {layout.ep}; the busiest GPU "
        f"holds {-(-experts // layout.ep)}"
    )


def layers_not_divisible(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    chunks = layout.pp * (2 if layout.schedule in V_SHAPED else layout.virtual_stages)
    layers = model.num_hidden_layers
    explicit = (layout.stage_layers, layout.pipeline_layout, layout.first_stage_layers,
                layout.last_stage_layers)  # fmt: skip
    if any(e is not None for e in explicit) or layers % chunks == 0:
        return None  # the user placed the blocks (or they divide)
    return (
        f"{layers} layers do not divide into {chunks} pipeline chunks: the first and last "
        "chunks get one layer fewer (as Llama 3 405B's 126 layers on 16 stages)"
    )


def sequence_not_divisible(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    # Load-balanced causal CP cuts the sequence into 2 x CP chunks (Megatron-Core / TE).
    if not uneven_cp_sequence(workload.seq_len, layout.cp):
        return None
    return (
        f"sequence of {workload.seq_len} tokens is not divisible by 2 x CP = {2 * layout.cp} "
        "(load-balanced causal context parallelism)"
    )


def too_few_microbatches(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    if layout.pp == 1 or m >= layout.pp:
        return None
    bubble = (layout.pp - 1) / (m + layout.pp - 1)
    return (
        f"{m} micro-batches for {layout.pp} pipeline stages: the pipeline never fills "
        f"(bubble {bubble:.0%} of the step)"
    )


def batch_not_divisible(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    per_step = layout.dp * layout.micro_batch_size
    if workload.global_batch_size % per_step == 0:
        return None
    return (
        f"global batch of {workload.global_batch_size} is not divisible by DP x micro-batch "
        f"= {per_step}; {m} micro-batches assumed"
    )


def longer_than_trained(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, m: int, domain: int
) -> str | None:
    if workload.seq_len <= model.max_position_embeddings:
        return None
    return (
        f"sequence of {workload.seq_len} tokens is longer than the model's "
        f"{model.max_position_embeddings}-token context"
    )


RULES: tuple[Rule, ...] = (
    tp_crosses_domain,
    heads_not_divisible,
    ffn_not_divisible,
    experts_not_divisible,
    layers_not_divisible,
    sequence_not_divisible,
    too_few_microbatches,
    batch_not_divisible,
    longer_than_trained,
)


def layout_warnings(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload, microbatches: int, domain: int
) -> tuple[str, ...]:
    """Warnings about the layout itself, one sentence each."""
    found = (rule(model, layout, workload, microbatches, domain) for rule in RULES)
    return tuple(w for w in found if w)


def assumption_warnings(layout: Layout, a: TrainingAssumptions) -> tuple[str, ...]:
    """Warnings about assumptions that do not fit the layout."""
    out = []
    # Ring attention (Megatron-Core / Transformer Engine CP) runs only as fused attention.
    if layout.cp > 1 and not a.flash_attention:
        out.append(
            "context parallelism with classic attention: scores of the local queries against "
            "all keys assumed; real CP implementations use fused (flash) attention"
        )
    # validation/results.json measured PyTorch with DP/FSDP2 and TP only (validation/README.md).
    unmeasured = [
        name
        for name, used in (
            ("pipeline", layout.pp > 1),
            ("context", layout.cp > 1),
            ("expert", layout.ep > 1),
            ("selective recompute", layout.recompute == "selective" and not layout.recompute_ops),
            ("DDP and ZeRO-1/2", layout.zero < 3 and layout.dp * layout.cp > 1),
        )
        if used
    ]
    if a.framework == "pytorch" and unmeasured:
        out.append(
            f"framework pytorch: {', '.join(unmeasured)} not measured; Megatron-style "
            "bookkeeping assumed for them"
        )
    if layout.recompute_ops:
        out.append(
            "recompute_ops: torchtitan's op-level SAC counted from its save list for GQA "
            "blocks (not measured here); MLA attention and MoE MLPs kept as without recompute"
        )
    return tuple(out)


def storage_warnings(a: TrainingAssumptions, compute: str) -> tuple[str, ...]:
    """Warnings about the activation recipe against the precision's GEMM dtype."""
    # DeepSeek-V3 sec. 3.3.3 caches the inputs its FP8 GEMMs read anyway; with wider GEMMs the
    # FP8 cache is a lossy round trip (Transformer Engine offers one; not what the report did).
    if compute == "fp8" or not activation_storage(a).fp8_activation_cache:
        return ()
    return (
        f"activations cached in FP8 while GEMMs run in {compute}: the backward dequantizes "
        "them; DeepSeek-V3 pairs the FP8 cache with FP8 GEMMs (precision fp8-mixed)",
    )


def result_warnings(stage_totals: list[float], gpu: GpuSpec, heavy_ratio: float) -> tuple[str, ...]:
    """Warnings about the estimate: a heavy stage, a layout that does not fit."""
    out = []
    mean = sum(stage_totals) / len(stage_totals)
    peak = max(range(len(stage_totals)), key=stage_totals.__getitem__)
    if len(stage_totals) > 1 and stage_totals[peak] > heavy_ratio * mean:
        excess = stage_totals[peak] / mean - 1
        out.append(f"stage {peak} needs {excess:.0%} more memory than the mean stage")
    if stage_totals[peak] > gpu.memory_bytes:
        out.append(
            f"does not fit: stage {peak} needs {stage_totals[peak] / GiB:.1f} GiB, more than "
            f"the {gpu.memory_bytes / GiB:.1f} GiB of the {gpu.name}"
        )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class AxisRole:
    """What one parallel axis splits and what it replicates, in words."""

    axis: str
    degree: int
    splits: str
    replicates: str

    @property
    def line(self) -> str:
        return f"{self.axis} {self.degree}: splits {self.splits}; replicates {self.replicates}"


def _tp_role(model: ModelSpec, layout: Layout) -> AxisRole:
    t, heads = layout.tp, model.num_attention_heads
    kv = f", KV heads {model.kv_heads} -> {max(model.kv_heads / t, 1):g}"
    activations = "every activation (sequence parallel)" if layout.sp else "inner activations"
    splits = (
        f"attention heads ({heads} -> {heads / t:g} per GPU{'' if model.is_mla else kv}), "
        f"FFN width, shared experts, the vocabulary of embedding and LM head, {activations}"
    )
    replicated = "norms and router"
    if model.is_mla:
        replicated += ", MLA down-projections and latents"
    return AxisRole("TP", t, splits, replicated)


def _pp_role(model: ModelSpec, layout: Layout) -> AxisRole:
    head = "final norm, LM head"
    if model.num_nextn_predict_layers:
        head += " and MTP modules"
    splits = (
        f"the {model.num_hidden_layers} layers into {layout.pp} x {layout.virtual_stages} "
        f"chunks; embedding on the first stage, {head} on the last"
    )
    tied = "the tied embedding (first and last stage)" if model.tie_word_embeddings else "nothing"
    return AxisRole("PP", layout.pp, splits, tied)


_ZERO_SHARDS = (
    "nothing",
    "optimizer states and master weights (ZeRO-1)",
    "optimizer states, master weights and gradients (ZeRO-2)",
    "optimizer states, master weights, gradients and weights (ZeRO-3)",
)


def _dp_role(layout: Layout) -> AxisRole:
    ranks = layout.dp * layout.cp
    shards = f"the batch; shards {_ZERO_SHARDS[layout.zero]} over DP x CP = {ranks} ranks"
    return AxisRole("DP", layout.dp, shards, "dense weights and what ZeRO does not shard")


def _cp_role(layout: Layout, workload: TrainingWorkload | None) -> AxisRole:
    tokens = "the sequence"
    if workload is not None:
        tokens += f" ({workload.seq_len} -> {workload.seq_len / layout.cp:g} tokens per GPU)"
    return AxisRole("CP", layout.cp, f"{tokens} and its activations", "the weights")


def _ep_role(model: ModelSpec, layout: Layout) -> AxisRole:
    experts, group = model.n_routed_experts, layout.dp * layout.cp * layout.tp
    splits = f"the {experts} routed experts ({experts / layout.ep:g} per GPU)"
    if layout.etp > 1:
        splits += f" and each expert's FFN width over ETP {layout.etp}"
    replicated = (
        f"each expert over {group // (layout.ep * layout.etp)} expert-data-parallel ranks "
        "(ZeRO shards it there); attention and shared experts follow TP"
    )
    return AxisRole("EP", layout.ep, splits, replicated)


def axis_roles(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload | None = None
) -> tuple[AxisRole, ...]:
    """Each parallel axis: what it splits and what it replicates (Megatron-Core placement)."""
    roles = [_tp_role(model, layout), _pp_role(model, layout), _dp_role(layout)]
    roles.append(_cp_role(layout, workload))
    if model.is_moe:
        roles.append(_ep_role(model, layout))
    return tuple(roles)


def parallel_axes_in_words(
    model: ModelSpec, layout: Layout, workload: TrainingWorkload | None = None
) -> tuple[str, ...]:
    """One line per parallel axis: what it splits and what it replicates."""
    return tuple(role.line for role in axis_roles(model, layout, workload))
