"""Serving memory per GPU, by category: weights, kv_cache, activations, communication, runtime,
headroom (docs/ARCHITECTURE.md). A layout fits when the sum is at most the GPU's memory.

The layout, the engine's memory assumptions and what each GPU of a stage holds (weights, KV
bytes per token, sharding conventions) are in explorer.memory.serving_layout, re-exported here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from explorer.memory.serving_layout import (
    MemoryAssumptions,
    ServingLayout,
    StageShape,
    attention_params_per_gpu,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
    kv_cache_bytes_per_sequence,
    kv_fraction_per_gpu,
    kv_heads_per_gpu,
    paged_tokens,
    stage_layers,
    stage_shapes,
    weight_bytes_per_param,
)
from explorer.specs import GpuSpec, ModelSpec, ServingWorkload

__all__ = [
    "ACTIVATION_BYTES",
    "LOGIT_BYTES",
    "MemoryAssumptions",
    "ServingLayout",
    "ServingMemory",
    "StageShape",
    "attention_params_per_gpu",
    "communication_bytes",
    "headroom_bytes",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "kv_capacity_tokens",
    "kv_fraction_per_gpu",
    "kv_heads_per_gpu",
    "logits_bytes",
    "max_concurrency",
    "paged_tokens",
    "prefill_workspace_bytes",
    "runtime_bytes",
    "serving_memory",
    "stage_layers",
    "stage_shapes",
    "weight_bytes_per_param",
]

ACTIVATION_BYTES = 2.0
"""Bytes per activation element during serving (bf16)."""
LOGIT_BYTES = 4.0
"""Bytes per logit: vLLM's sampler works on fp32 logits over the full vocabulary."""


@dataclass(frozen=True, slots=True)
class ServingMemory:
    """Bytes per GPU by serving category (heaviest pipeline stage); ``total`` is their sum."""

    weights: float
    kv_cache: float
    activations: float
    communication: float
    runtime: float
    headroom: float

    @property
    def total(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def prefill_workspace_bytes(model: ModelSpec, tp: int, chunk_tokens: int) -> float:
    """Peak activation bytes per GPU while one block runs a prefill chunk of ``chunk_tokens``.

    Tensors alive at once (bf16, FlashAttention so no s x s scores): the residual stream and
    the normed input (2 x h), plus the larger of the attention phase (q, k, v and the attention
    output, per TP rank) and the MLP phase (gate and up outputs and the activated product,
    3 x ffn / tp for SwiGLU; MoE: top-k routed and shared widths plus the permuted token copies).
    """
    h, n = model.hidden_size, chunk_tokens
    if model.is_mla:
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        attention = model.num_attention_heads * (2 * qk + 2 * model.v_head_dim) / tp
    else:
        d, kv_width = model.head_size, 2 * kv_heads_per_gpu(model, tp) * model.head_size
        attention = 2 * model.num_attention_heads * d / tp + kv_width
    per_width = 3 if model.ffn_kind == "swiglu" else 2
    mlp = per_width * model.intermediate_size / tp
    if model.is_moe:
        routed = model.num_experts_per_tok * model.moe_intermediate_size + model.shared_ffn_size
        mlp = max(mlp, per_width * routed / tp + model.num_experts_per_tok * h)
    return n * (2 * h + max(attention, mlp)) * ACTIVATION_BYTES


def logits_bytes(model: ModelSpec, num_seqs: int) -> float:
    """Logits of one step: one fp32 row over the full vocabulary per scheduled sequence (vLLM
    computes logits for each sequence's last token only and gathers the vocabulary to sample)."""
    return num_seqs * model.vocab_size * LOGIT_BYTES


def communication_bytes(
    model: ModelSpec, layout: ServingLayout, assumptions: MemoryAssumptions
) -> float:
    """Collective buffers per GPU: NCCL buffers per group, plus EP all-to-all staging.

    Source: NCCL buffers see ``nccl_bytes_per_group``; the all-to-all send and receive buffers
    hold a chunk's top-k token copies of h bf16 values each (DeepEP-style staging).
    """
    groups = sum(degree > 1 for degree in (layout.tp, layout.pp, layout.ep))
    buffers = groups * assumptions.nccl_bytes_per_group
    if layout.ep > 1:
        copies = assumptions.prefill_chunk_tokens * model.num_experts_per_tok
        buffers += 2 * copies * model.hidden_size * ACTIVATION_BYTES / layout.tp
    return buffers


def runtime_bytes(assumptions: MemoryAssumptions) -> float:
    """CUDA context, library workspaces and captured CUDA graphs per GPU."""
    return assumptions.cuda_context_bytes + assumptions.cuda_graph_bytes


def headroom_bytes(gpu: GpuSpec, assumptions: MemoryAssumptions, fixed: float = 0.0) -> float:
    """Memory the engine leaves free: (1 - gpu_memory_utilization) x capacity (vLLM: 10%),
    or with ``kv_free_memory_fraction`` f (TensorRT-LLM) (1 - f) x what the ``fixed`` bytes
    (everything but the KV cache and the headroom) leave of the capacity."""
    if assumptions.kv_free_memory_fraction is not None:
        free = max(0.0, gpu.memory_bytes - fixed)
        return (1 - assumptions.kv_free_memory_fraction) * free
    return gpu.memory_bytes - assumptions.gpu_memory_utilization * gpu.memory_bytes


def kv_bytes_per_sequence(
    model: ModelSpec, shape: StageShape, workload: ServingWorkload, block: int
) -> float:
    """KV bytes per GPU for one sequence at its final length (prompt + output), paged; blocks
    with a sliding window or chunked attention keep only their window (explorer.memory.
    serving_layout.kv_cache_bytes_per_sequence; Mistral 7B, arXiv:2310.06825, sec. 2)."""
    tokens = paged_tokens(workload.prompt_len + workload.output_len, block)
    kv = tokens * shape.kv_bytes_per_token * window_share(model, shape, workload, tokens)
    return kv + shape.state_bytes_per_sequence  # Nemotron-H's Mamba2 states (0 otherwise)


def window_share(
    model: ModelSpec, shape: StageShape, workload: ServingWorkload, tokens: int
) -> float:
    """Share of a stage's full-context KV cache its blocks keep at ``tokens`` of context: 1
    without windows; Gated DeltaNet stages (fixed state, not KV) are left at 1."""
    layers = shape.layers
    if not layers or model.linear_attention_layers or model.mamba_layers or model.ffn_only_layers:
        return 1.0  # Nemotron-H: no windows; its non-KV blocks are out of kv_bytes_per_token
    full = kv_bytes_per_token_per_layer(model, workload.kv_dtype) * tokens * len(layers)
    if full <= 0:
        return 1.0
    return min(1.0, kv_cache_bytes_per_sequence(model, workload.kv_dtype, tokens, layers) / full)


def _stage_memory(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: ServingLayout,
    shape: StageShape,
    workload: ServingWorkload,
    assumptions: MemoryAssumptions,
) -> ServingMemory:
    seqs = -(-workload.concurrency // layout.ep)  # sequences per attention data-parallel group
    kv = seqs * kv_bytes_per_sequence(model, shape, workload, assumptions.kv_block_tokens)
    workspace = prefill_workspace_bytes(model, layout.tp, assumptions.prefill_chunk_tokens)
    logits = logits_bytes(model, seqs) if shape.has_lm_head else 0.0
    comm, runtime = communication_bytes(model, layout, assumptions), runtime_bytes(assumptions)
    fixed = shape.weights_bytes + workspace + comm + runtime  # TensorRT-LLM: before the KV pool
    return ServingMemory(
        weights=shape.weights_bytes,
        kv_cache=kv,
        activations=workspace + logits,
        communication=comm,
        runtime=runtime,
        headroom=headroom_bytes(gpu, assumptions, fixed),
    )


def serving_memory(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: MemoryAssumptions | None = None,
) -> ServingMemory:
    """Bytes per GPU by category on the heaviest stage, at the workload's concurrency per
    replica, every sequence at its final length (the admission check with no preemption)."""
    a = assumptions or MemoryAssumptions()
    shapes = stage_shapes(model, layout, workload.weights_dtype, workload.kv_dtype, a)
    stages = [_stage_memory(model, gpu, layout, s, workload, a) for s in shapes]
    return max(stages, key=lambda m: m.total)


def max_concurrency(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: MemoryAssumptions | None = None,
) -> int:
    """Most sequences one replica can hold at prompt + output tokens each (0 if none fit).

    Each attention data-parallel group holds floor(free / per-sequence bytes) sequences, where
    free is capacity less everything but the KV cache and logits; the tightest stage decides.
    """
    per_group = []
    for shape, with_one, kv in _with_one_sequence(model, gpu, layout, workload, assumptions):
        per_seq = kv + (logits_bytes(model, 1) if shape.has_lm_head else 0.0)
        free = gpu.memory_bytes - (with_one - per_seq)  # everything that is not per sequence
        if per_seq > 0:  # a Nemotron-H stage of MLP blocks alone holds nothing per sequence
            per_group.append(max(0, math.floor(free / per_seq)))
        elif free < 0:
            per_group.append(0)
    return min(per_group, default=0) * layout.ep


def _with_one_sequence(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: MemoryAssumptions | None,
) -> list[tuple[StageShape, float, float]]:
    """Per stage: its shape, its memory holding one sequence, and that sequence's KV bytes."""
    a = assumptions or MemoryAssumptions()
    one = replace(workload, concurrency=1)
    return [
        (
            shape,
            _stage_memory(model, gpu, layout, shape, one, a).total,
            kv_bytes_per_sequence(model, shape, workload, a.kv_block_tokens),
        )
        for shape in stage_shapes(model, layout, workload.weights_dtype, workload.kv_dtype, a)
    ]


def kv_capacity_tokens(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: MemoryAssumptions | None = None,
) -> int:
    """Tokens of KV cache one replica can hold, whole blocks, pooled over its attention groups.

    The free memory of ``max_concurrency`` (capacity less everything that is not per
    sequence), over the KV bytes per token on the tightest stage, rounded down to whole paged
    blocks (vLLM's block pool), times the ep attention groups.
    """
    block = (assumptions or MemoryAssumptions()).kv_block_tokens
    per_group = []
    for shape, with_one, kv in _with_one_sequence(model, gpu, layout, workload, assumptions):
        free = gpu.memory_bytes - (with_one - kv)
        if shape.kv_bytes_per_token <= 0:  # Nemotron-H: a stage without attention blocks
            if free < 0:
                per_group.append(0)
            continue
        blocks = max(0, math.floor(free / (shape.kv_bytes_per_token * block)))
        per_group.append(blocks * block)
    return min(per_group, default=0) * layout.ep
