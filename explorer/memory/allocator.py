"""PyTorch's CUDA caching allocator: the bytes it keeps reserved beyond a step's live tensors.

The memory estimate counts live tensors (what ``torch.cuda.memory_allocated`` reports); a run
that logs ``torch.cuda.memory_stats()["reserved_bytes.all.peak"]`` (torchtitan's
DeviceMemoryMonitor, components/metrics.py) reports what the caching allocator holds in
segments, live or cached. The allocator never returns a segment on its own (only
``empty_cache`` or an allocation retry does), so the reserve of each pool is its own peak.
Named mechanisms, each from the source it cites:

- rounding: a request is rounded to 512 B; up to 1 MiB it is carved from 2 MiB segments, up
  to 10 MiB from 20 MiB segments, above that it gets a segment of its size rounded to 2 MiB
  (c10/cuda/CUDACachingAllocator.cpp round_size, get_allocation_size: kMinBlockSize,
  kSmallSize, kSmallBuffer, kLargeBuffer, kMinLargeAlloc, kRoundLarge);
- per-stream pools: a freed block serves only requests of the stream that allocated it
  (CUDACachingAllocator.cpp get_free_block: BlockPool keyed by stream), so FSDP2's buffers
  allocated on its side streams are reserved beside the default stream's peak, not inside it.
  (pytorch/pytorch PR 129721, 2024-06: memory "in non-default-stream memory pools ... cannot be
  reused by the default stream"; it moved the reduce-scatter input to the default stream.)
  FSDP2 never calls record_stream; it keeps a reference until an event instead
  (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py AllGatherState,
  ReduceScatterState):
  - all-gather outputs on the all-gather copy-in stream (_fsdp_collectives.py
    foreach_all_gather allocates under all_gather_copy_in_stream; FSDPCommContext
    get_all_gather_streams uses the side streams in forward and pre-backward). In the forward
    a unit's output is freed only after the next unit's all-gather is issued
    (_fsdp_param_group.py wait_for_unshard: "Defer free to allow for overlap"), so two units'
    outputs are alive at once: the largest unit with a block;
  - sharded gradients on the reduce-scatter stream (_fsdp_collectives.py foreach_reduce:
    reduce_output is allocated under reduce_scatter_stream; "The RS output is allocated in the
    RS stream and used in the default stream (for optimizer)"): every sharded gradient of the
    stage, which ``optimizer.zero_grad(set_to_none=True)`` returns to that stream's pool;
- freed blocks the later requests do not fit: blocks of different segments are never merged
  (CUDACachingAllocator.cpp free_block merges neighbours within a segment only), so a freed
  segment serves only requests no larger than itself. torchtitan frees the bf16 logits before
  the backward (train.py: ``del pred`` "to avoid peaking memory"), whose cross-entropy requests
  are fp32 (twice their size): the logits' segment stays reserved, unused, at the loss backward.

Left out: fragmentation beyond these (no allocation trace is simulated), the all-gather
copy-in buffer (one shard), HSDP's all-reduce stream, FSDP2's float8 all-gather (1-byte block
outputs: the bf16 size is taken), expandable segments (PYTORCH_CUDA_ALLOC_CONF, off by default)
and Megatron-Core's own buffers (its framework gets no term here).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from explorer.memory.phases import PhaseMemory
from explorer.memory.setting import TrainingSetting
from explorer.memory.states import (
    HeldParams,
    block_params_per_gpu,
    stage_model_states,
    stage_params,
    stage_units,
)
from explorer.memory.temporaries import experts_outside_fsdp, zero3_gathers
from explorer.partition import StagePlan
from explorer.units import MiB

Parts = tuple[tuple[str, float], ...]

MIN_BLOCK_BYTES = 512
"""Every request is rounded up to a multiple of this (CUDACachingAllocator.cpp kMinBlockSize)."""
SMALL_SIZE_BYTES = 1 * MiB
"""Largest request of the small pool (kSmallSize)."""
SMALL_BUFFER_BYTES = 2 * MiB
"""Segment size of the small pool (kSmallBuffer)."""
LARGE_BUFFER_BYTES = 20 * MiB
"""Segment size for requests of 1-10 MiB (kLargeBuffer)."""
MIN_LARGE_ALLOC_BYTES = 10 * MiB
"""Requests above this get a segment of their own size (kMinLargeAlloc)..."""
ROUND_LARGE_BYTES = 2 * MiB
"""...rounded up to a multiple of this (kRoundLarge)."""


def block_bytes(request: float) -> float:
    """Bytes the allocator hands out for a request (CUDACachingAllocator.cpp round_size)."""
    return max(MIN_BLOCK_BYTES, math.ceil(request / MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)


def segment_bytes(request: float) -> float:
    """Bytes of the segment a request opens when no cached block fits it
    (CUDACachingAllocator.cpp get_allocation_size)."""
    size = block_bytes(request)
    if size <= SMALL_SIZE_BYTES:
        return SMALL_BUFFER_BYTES
    if size < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return math.ceil(size / ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


def pool_bytes(requests: Iterable[float]) -> float:
    """Segments a pool holds for requests alive together, bytes: each large request in its own
    segment, smaller ones of one size packed into the shared 2 MiB / 20 MiB segments (blocks
    split from a segment, CUDACachingAllocator.cpp should_split)."""
    total = 0.0
    for request, count in Counter(r for r in requests if r > 0).items():
        size, segment = block_bytes(request), segment_bytes(request)
        per_segment = max(1, int(segment // size)) if segment > size else 1
        total += math.ceil(count / per_segment) * segment
    return total


def is_fsdp2(s: TrainingSetting) -> bool:
    """Whether the stage's weights are FSDP2 units (framework "pytorch", ZeRO-3, gathered)."""
    return s.assumptions.framework == "pytorch" and zero3_gathers(s, s.dense_shards)


def _gathered(s: TrainingSetting, unit: HeldParams) -> HeldParams:
    """The part of a unit FSDP gathers (experts left out of FSDP are not)."""
    return HeldParams(unit.dense) if experts_outside_fsdp(s) else unit


def fsdp_units(
    s: TrainingSetting, plan: StagePlan
) -> tuple[tuple[tuple[HeldParams, int], ...], tuple[HeldParams, ...]]:
    """(each block kind's unit with its count, the stage's other units): one unit per block,
    and either torchtitan's root unit (everything else on the stage, ``fsdp_torchtitan_units``)
    or one unit each for the embedding and the head."""
    lay = s.layout
    counts = (("dense", plan.num_dense_layers), ("moe", plan.num_moe_layers))
    blocks = tuple(
        (_gathered(s, block_params_per_gpu(s.model, kind, lay.tp, lay.ep, lay.etp)), n)
        for kind, n in counts
        if n
    )
    others = tuple(_gathered(s, u) for u in stage_units(s.model, lay, plan)[len(blocks) :])
    if s.assumptions.fsdp_torchtitan_units and others:
        others = (sum(others, HeldParams()),)
    return blocks, tuple(o for o in others if o.total > 0)


def gather_pool_bytes(s: TrainingSetting, plan: StagePlan) -> float:
    """FSDP2's all-gather copy-in stream pool, bytes: the largest unit's all-gather output
    with a block's (two alive in the forward), in the compute dtype."""
    blocks, others = fsdp_units(s, plan)
    per = s.policy.param_bytes
    block = max((u.total * per for u, _ in blocks), default=0.0)
    largest = max((block, *(o.total * per for o in others)))
    count = sum(n for _, n in blocks) + len(others)
    pair = (largest, block) if count > 1 else (largest,)
    return sum(segment_bytes(b) for b in pair if b > 0)


def reduce_scatter_pool_bytes(s: TrainingSetting, plan: StagePlan) -> float:
    """FSDP2's reduce-scatter stream pool, bytes: every sharded gradient of the stage, one
    reduce-scatter output per unit, each group sharded over its own ranks."""
    blocks, others = fsdp_units(s, plan)
    grad = s.policy.grad_bytes

    def sharded(unit: HeldParams) -> float:
        return unit.dense * grad / s.dense_shards + unit.expert * grad / s.moe_shards

    requests = [sharded(u) for u, n in blocks for _ in range(n)]
    return pool_bytes([*requests, *(sharded(o) for o in others)])


def _outside_gradients(s: TrainingSetting, plan: StagePlan) -> float:
    """Gradient bytes of parameters FSDP leaves out (they build up in place, default stream)."""
    if not experts_outside_fsdp(s):
        return 0.0
    held = HeldParams(expert=stage_params(s.model, s.layout, plan).expert)
    lay, keep = s.layout, s.behaviour.keep_bf16_shard
    states = stage_model_states(held, s.policy, lay.zero, s.dense_shards, s.moe_shards,
                                keep_param_shard=keep)  # fmt: skip
    return states.gradients


def freed_logits_bytes(s: TrainingSetting, plan: StagePlan) -> float:
    """The bf16 logits' segment, freed before the loss backward and too small for its fp32
    requests, bytes: torchtitan's eager loss without pipelining (train.py ``del pred``; the
    loss upcasts, ``loss_logits_bytes`` above the activation dtype). None elsewhere: a compiled
    or fused loss saves the bf16 logits, and torch.distributed.pipelining keeps the stage's
    output for its backward."""
    upcast = s.assumptions.loss_logits_bytes > s.shape.dtype_bytes
    if not (plan.has_head and s.layout.pp == 1 and upcast):
        return 0.0
    if s.assumptions.framework != "pytorch":
        return 0.0
    logits = s.shape.tokens * s.model.vocab_size / s.layout.tp
    return segment_bytes(logits * s.shape.dtype_bytes)


def allocator_reserve(
    s: TrainingSetting, plan: StagePlan, phases: tuple[PhaseMemory, ...]
) -> Parts:
    """What the caching allocator reserves beyond the stage's peak of live tensors, by
    mechanism, bytes (none for a framework without a term here).

    Reserved = the default stream's peak + each side stream's pool. The default stream's peak
    is the largest phase without the sharded gradients (they live in the reduce-scatter pool)
    and, at the loss backward, with the freed logits' segment.
    """
    if s.assumptions.framework != "pytorch" or s.assumptions.fsdp_version != 2:
        return ()
    fsdp = is_fsdp2(s)
    gather = gather_pool_bytes(s, plan) if fsdp else 0.0
    scatter = reduce_scatter_pool_bytes(s, plan) if fsdp else 0.0
    outside = _outside_gradients(s, plan)
    logits = freed_logits_bytes(s, plan)
    live_peak = max(ph.total_bytes for ph in phases)

    def default_stream(ph: PhaseMemory) -> tuple[float, float]:
        resident = max(0.0, ph.breakdown.gradients - outside) if fsdp else 0.0
        freed = logits if ph.phase == "backward_start" else 0.0
        return ph.total_bytes - resident + freed, resident

    top, resident = max((default_stream(ph) for ph in phases), key=lambda t: t[0])
    beyond = top + resident - live_peak  # negative when a smaller phase holds the gradients
    parts = (
        ("FSDP2 all-gather stream pool (two units' outputs)", gather),
        ("FSDP2 reduce-scatter stream pool (sharded gradients)",
         scatter - resident + min(0.0, beyond)),
        ("default stream: freed blocks later requests do not fit", max(0.0, beyond)),
    )  # fmt: skip
    return tuple((name, size) for name, size in parts if size > 0)
