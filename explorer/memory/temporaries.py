"""Temporary buffers of a training step, by the phase that holds them (``phases.py``).

ZeRO-3 gathers (one gathered unit at the loss backward, the computing and prefetched blocks
with an unsharded gradient in a block's backward), the cross-entropy temporaries, the
optimizer step's temporaries and the DDP gradient bucket. Sizes follow the framework
(``frameworks.py``).
"""

from __future__ import annotations

from explorer.memory.buffers import cuda_graph_bytes
from explorer.memory.frameworks import loss_temporary_bytes_per_logit
from explorer.memory.ring_attention import ring_backward_parts
from explorer.memory.setting import TrainingSetting
from explorer.memory.states import (
    ModelStates,
    block_params_per_gpu,
    embedding_params_per_gpu,
    head_params_per_gpu,
    stage_params,
    stage_units,
)
from explorer.partition import StagePlan

Parts = tuple[tuple[str, float], ...]


def zero3_gathers(s: TrainingSetting, shards: int) -> bool:
    """Whether ZeRO-3 gathers weights into separate buffers over a group of ``shards`` ranks.

    One shard with a persistent 16-bit copy computes on that copy (DeepSpeed); FSDP2 gathers
    and casts from its fp32 shard even on one rank (measured: validation/results.json
    small-fsdp1-bf16-mixed-s2048-b1).
    """
    return s.layout.zero == 3 and (shards > 1 or not s.behaviour.keep_bf16_shard)


def experts_outside_fsdp(s: TrainingSetting) -> bool:
    """Whether FSDP leaves the routed experts out (``fsdp_ignores_unsharded_experts``: a
    one-rank expert-data-parallel group under EP): they are then never gathered."""
    ignored = s.assumptions.fsdp_ignores_unsharded_experts and s.layout.zero == 3
    return ignored and s.model.is_moe and s.layout.ep > 1 and s.moe_shards == 1


PIPELINED_UNSHARDED_GRADIENTS = "ZeRO-3 unsharded gradients under pipelining"
"""The temporary part of ``kept_gathered_weights``: the unsharded gradients FSDP accumulates
over the micro-batches under pipelining (scaled per phase by ``explorer.memory.accumulation``
on interleaved stages)."""


def fsdp_accumulates_unsharded(s: TrainingSetting) -> bool:
    """Whether ZeRO-3 keeps weights gathered and gradients unsharded over the micro-batches
    (``pipeline_keeps_unsharded`` under pipelining, more than one micro-batch)."""
    pipelined = s.behaviour.pipeline_keeps_unsharded and s.layout.pp > 1
    return pipelined and s.layout.zero == 3 and s.microbatches > 1


def _gathered_groups(s: TrainingSetting) -> tuple[bool, bool]:
    """(dense, expert): whether ZeRO-3 gathers each group's weights into separate buffers."""
    expert_on = zero3_gathers(s, s.moe_shards) and not experts_outside_fsdp(s)
    return zero3_gathers(s, s.dense_shards), expert_on


def zero3_block_temporaries(s: TrainingSetting, plan: StagePlan) -> Parts:
    """Unsharded parameters of the gathered units and one unit's unsharded gradients, bytes.

    Source: PyTorch FSDP (Zhao et al. 2023, arXiv:2304.11277): the unit computing plus
    ``zero3_prefetch_layers`` prefetched ones; a unit's gradients whole until reduce-scatter.
    """
    dense_on, expert_on = _gathered_groups(s)
    if not (dense_on or expert_on):
        return ()
    units = stage_units(s.model, s.layout, plan)
    gathered = max((u.dense * dense_on + u.expert * expert_on for u in units), default=0.0)
    copies = 1 + s.assumptions.zero3_prefetch_layers
    return (
        ("ZeRO-3 gathered parameters", copies * gathered * s.policy.param_bytes),
        ("ZeRO-3 unsharded gradients", gathered * s.policy.grad_bytes),
    )


def block_backward_temporaries(s: TrainingSetting, plan: StagePlan) -> Parts:
    """ZeRO-3 buffers during one block's backward, bytes: the computing and prefetched units
    with one unit's unsharded gradient; or, when weights stay gathered from the forward
    (``kept_gathered_weights``), all of those (the computing unit among them) with that unit's
    gradient, or every unsharded gradient where FSDP accumulates them (under pipelining).

    Source: ``zero3_block_temporaries``; PyTorch FSDP2 reshard_after_forward=False and
    torch.distributed.pipelining (``kept_gathered_weights``): nothing is resharded before
    the last backward, so the kept weights outlive every block's backward but the last.
    """
    kept = kept_gathered_weights(s, plan)
    outputs = pipeline_kept_outputs(s, plan) + pipeline_stage_outputs(s, plan)
    outputs += ring_backward_parts(s, plan)  # PyTorch CP: explorer.memory.ring_attention
    if not kept:
        return zero3_block_temporaries(s, plan) + outputs
    if fsdp_accumulates_unsharded(s):
        return kept + outputs
    grads = tuple(p for p in zero3_block_temporaries(s, plan) if "gradients" in p[0])
    return kept + grads + outputs


def backward_start_temporaries(s: TrainingSetting, plan: StagePlan) -> Parts:
    """The cross-entropy backward's temporaries on the last stage, one micro-batch, bytes (CR-4).

    With ZeRO-3 the [final norm, LM head] unit is still gathered from the forward (CR-9;
    measured: validation/results.json llama8b-fsdp8-bf16-mixed-s4096-b1).
    """
    if not plan.has_head:
        return kept_gathered_weights(s, plan) + pipeline_stage_outputs(s, plan)
    outputs = pipeline_kept_outputs(s, plan) + pipeline_stage_outputs(s, plan)
    a, tp = s.assumptions, s.layout.tp
    per_logit = loss_temporary_bytes_per_logit(
        s.behaviour, s.shape.dtype_bytes, a.loss_logits_bytes, tp
    )
    logits = s.shape.tokens * s.model.vocab_size / tp
    parts: list[tuple[str, float]] = [("cross-entropy temporaries", logits * per_logit)]
    if zero3_gathers(s, s.dense_shards) and not kept_gathered_weights(s, plan):
        head = head_params_per_gpu(s.model, tp, has_embedding=False)  # tied: the same weight
        parts.append(("ZeRO-3 gathered LM head", head * s.policy.param_bytes))
        parts += torchtitan_unit_parts(s, plan)
    return (*(p for p in parts if p[1]), *kept_gathered_weights(s, plan), *outputs)


def torchtitan_unit_parts(s: TrainingSetting, plan: StagePlan) -> Parts:
    """What torchtitan's FSDP units hold gathered at the loss backward beyond the LM head
    (``fsdp_torchtitan_units``), bytes: the untied embedding of the root unit and the last
    block, kept after its forward."""
    if not (s.assumptions.fsdp_torchtitan_units and s.layout.pp == 1):
        return ()
    lay, per = s.layout, s.policy.param_bytes
    parts: list[tuple[str, float]] = []
    if plan.has_embedding and not s.model.tie_word_embeddings:
        embedding = embedding_params_per_gpu(s.model, lay.tp)
        parts.append(("ZeRO-3 root unit's embedding", embedding * per))
    kind = "moe" if s.model.is_moe_layer(s.model.num_hidden_layers - 1) else "dense"
    last = block_params_per_gpu(s.model, kind, lay.tp, lay.ep, lay.etp)
    last_bytes = last.dense * per + last.expert * per * zero3_gathers(s, s.moe_shards)
    parts.append(("ZeRO-3 last block kept gathered", last_bytes))
    return tuple(parts)


def kept_gathered_weights(s: TrainingSetting, plan: StagePlan) -> Parts:
    """ZeRO-3 without resharding after the forward: every unit's gathered weights, bytes,
    held from its forward until its backward (so all of them at the backward start); under
    pipelining (PyTorch) also the unsharded gradients of the earlier micro-batches.

    Source: PyTorch FSDP2 fully_shard(reshard_after_forward=False) (Zhao et al. 2023,
    arXiv:2304.11277, sec. 3.2.3: weights stay unsharded between forward and backward);
    torch.distributed.pipelining stage.py backward_maybe_with_nosync (no reshard and no
    reduce-scatter before the last backward).
    """
    pipelined = s.behaviour.pipeline_keeps_unsharded and s.layout.pp > 1
    if s.layout.reshard_after_forward and not pipelined:
        return ()
    dense_on, expert_on = _gathered_groups(s)
    held = stage_params(s.model, s.layout, plan)
    kept = held.dense * dense_on + held.expert * expert_on
    if not kept:
        return ()
    parts = [("ZeRO-3 weights kept gathered after the forward", kept * s.policy.param_bytes)]
    if fsdp_accumulates_unsharded(s):  # earlier micro-batches' unsharded gradients
        grad_bytes = s.assumptions.fsdp_accumulated_grad_bytes
        per = s.policy.grad_bytes if grad_bytes is None else grad_bytes
        parts.append((PIPELINED_UNSHARDED_GRADIENTS, kept * per))
    return tuple(parts)


def pipeline_kept_outputs(s: TrainingSetting, plan: StagePlan) -> Parts:
    """The last pipeline stage's outputs of every micro-batch of the schedule, bytes: the
    logits (vocabulary-parallel under TP, in the activation dtype), kept from each forward
    to the next step (``pipeline_keeps_outputs``), so all of them at the last micro-batch's
    backward (the current one held for its backward either way) and in the optimizer step.

    Source: torch/distributed/pipelining/stage.py forward_one_chunk (``output_chunks.append``;
    ``clear_runtime_states`` empties it when the next ``step`` begins) and schedules.py
    ``step`` (merges ``output_chunks`` on the last stage); pytorch/pytorch PR 165822 added
    ``step(return_outputs=False)``, which torchtitan PR 1922 (2025-10-22, "Update PP to
    release memory earlier") passes.
    """
    if not (s.behaviour.pipeline_keeps_outputs and s.layout.pp > 1 and plan.has_head):
        return ()
    per_schedule = s.assumptions.pipeline_schedule_microbatches
    count = s.microbatches if per_schedule is None else min(per_schedule, s.microbatches)
    logits = s.shape.tokens * s.model.vocab_size / s.layout.tp
    return (("pipeline last stage's outputs (every micro-batch's logits)",
             count * logits * s.shape.dtype_bytes),)  # fmt: skip


def pipeline_stage_outputs(s: TrainingSetting, plan: StagePlan) -> Parts:
    """Every micro-batch's output of the rank's model chunks but the model's last, bytes: the
    stage-boundary (sequence-parallel) activation each forward sends on, kept to the end of
    the schedule's step (``pipeline_keeps_stage_outputs``), so all of them by the last forward,
    where 1F1B-style schedules still hold their warm-up's micro-batches in flight. No block
    saves it (the next rank's first block saves its own copy). Counted at the backward
    phases; the optimizer step is left out (the sends are waited before it since PR 153383).

    Source: torch/distributed/pipelining/stage.py forward_one_chunk (``output_chunks.append``
    on every stage before pytorch/pytorch PR 153383, 2025-05-13; ``fwd_cache`` to the chunk's
    backward) and PR 193903 (2026-08: stages keep "microbatches * stages_per_rank
    activations" through fwd_cache and the pending send Work objects to the step's end).
    """
    if not (s.behaviour.pipeline_keeps_stage_outputs and s.layout.pp > 1):
        return ()
    chunks = (len(plan.chunk_blocks) or s.layout.virtual_stages) - plan.has_head
    per_schedule = s.assumptions.pipeline_schedule_microbatches
    count = s.microbatches if per_schedule is None else min(per_schedule, s.microbatches)
    boundary = s.shape.sp_tokens * s.model.hidden_size * s.shape.dtype_bytes
    size = count * chunks * boundary
    name = "pipeline stage outputs (every micro-batch's, to the step's end)"
    return ((name, size),) if size else ()


def optimizer_temporaries(s: TrainingSetting, states: ModelStates) -> Parts:
    """Tensors the optimizer step allocates: Adam-state-sized copies of local states (CR-8).

    Source: measured: validation/results.json small-fp32-s1024-b1 (torch.optim.AdamW foreach).
    """
    count = s.behaviour.optimizer_step_temporaries
    if not count:
        return ()
    return (("optimizer step temporaries", count * states.optimizer_states / 2),)  # 2 Adam states


def persistent_buffers(s: TrainingSetting, plan: StagePlan | None = None) -> Parts:
    """Buffers alive through the whole step: ZeRO 0-2's gradient bucket and Transformer
    Engine's cached FP8 weight copies of the stage's blocks, bytes.

    Source: PyTorch DistributedDataParallel bucket_cap_mb (see ``grad_bucket_bytes``);
    ``fp8_weight_copy_bytes`` (ZeRO-3 gathers each block's weights, so a gathered block's
    copies are cast per use and not kept: none then).
    """
    parts: list[tuple[str, float]] = []
    if s.layout.zero != 3 and (s.dense_shards > 1 or s.moe_shards > 1):
        parts.append(("gradient bucket", s.assumptions.grad_bucket_bytes))
    if plan is not None and s.assumptions.fp8_weight_copy_bytes and s.layout.zero != 3:
        blocks = block_params_on(s, plan)
        parts.append(("FP8 weight copies (Transformer Engine)",
                      blocks * s.assumptions.fp8_weight_copy_bytes))  # fmt: skip
    if plan is not None and (recv := pipeline_recv_bytes(s, plan)):
        parts.append(("pipeline receive buffers (one per micro-batch)", recv))
    return tuple(parts)


def graph_buffer_parts(s: TrainingSetting, plan: StagePlan, inflight: float) -> Parts:
    """Per-layer CUDA graphs' static edge tensors on a stage's GPU, bytes (``cuda_graph_bytes``):
    one set per layer for each micro-batch in flight under pipelining, one set without it.

    Transformer Engine captures a graph per layer and micro-batch of the schedule (``_order``)
    but lets graphs whose lifetimes do not overlap share their edge buffers (Megatron-Core
    TECudaGraphHelper passes _reuse_graph_input_output_buffers=True from TE 2.7): the live
    sets are taken as the stage's micro-batches in flight (an assumption; stage-equivalent).
    """
    modules = s.assumptions.cuda_graph_modules
    if not modules:
        return ()
    boundary = s.shape.sp_tokens * s.model.hidden_size * s.shape.dtype_bytes
    live = inflight if s.layout.pp > 1 else 1.0
    size = cuda_graph_bytes(modules, plan.num_dense_layers, plan.num_moe_layers, boundary, live)
    return (("CUDA graph static buffers", size),) if size else ()


def pipeline_recv_bytes(s: TrainingSetting, plan: StagePlan) -> float:
    """Receive buffers torch.distributed.pipelining keeps on a rank, bytes: per micro-batch,
    one stage input (but on the model's first chunk) and one output gradient (but on the
    last) per model chunk, each the stage boundary's (sequence-parallel) activation.

    Source: torch/distributed/pipelining/stage.py _prepare_forward_infra (args_recv_info per
    micro-batch) and _prepare_backward_infra (grad_recv_info per micro-batch). Left in: the
    in-flight micro-batches' stage inputs, which a checkpointed chunk also saves.
    """
    if not (s.behaviour.pipeline_recv_buffers and s.layout.pp > 1):
        return 0.0
    chunks = len(plan.chunk_blocks) or s.layout.virtual_stages
    buffers = 2 * chunks - plan.has_embedding - plan.has_head
    boundary = s.shape.sp_tokens * s.model.hidden_size * s.shape.dtype_bytes
    per_schedule = s.assumptions.pipeline_schedule_microbatches
    count = s.microbatches if per_schedule is None else min(per_schedule, s.microbatches)
    return count * buffers * boundary


def block_params_on(s: TrainingSetting, plan: StagePlan) -> float:
    """Parameters of the stage's blocks on one GPU (the GEMM weights, with their few norms)."""
    lay = s.layout
    dense = block_params_per_gpu(s.model, "dense", lay.tp, lay.ep, lay.etp).total
    moe = block_params_per_gpu(s.model, "moe", lay.tp, lay.ep, lay.etp).total
    return plan.num_dense_layers * dense + plan.num_moe_layers * moe
