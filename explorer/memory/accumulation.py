"""Gradients accumulated unsharded over the micro-batches: ZeRO-2 reduced once a step, and
FSDP2 under an interleaved torch pipeline (``pipelined_gradient_shares``).

Llama 3's FSDP (arXiv:2407.21783 sec. 3.3.2: optimizer states and gradients sharded, weights
not resharded after the forward; Numerical stability: FP32 gradient accumulation over the
micro-batches in the backward, then an FP32 reduce-scatter across the data-parallel workers)
holds, in every backward of the step, each local parameter's unsharded gradient in FP32 and no
sharded one yet; the reduce-scatter after the last backward makes the sharded gradients the
optimizer reads. The communication model reduces them once a step as well
(``CommAssumptions.zero2_grad_sync_per_step``).

An accumulated gradient exists from its chunk's first backward of the step (PyTorch autograd
creates ``.grad`` there; FSDP2's ``FSDPParam.to_accumulated_grad_if_needed`` upcasts it to the
reduce dtype and keeps it until the post-backward reduce-scatter). Under an interleaved
schedule a rank's activations peak during its steady 1F1B phase, which can end before every
chunk has begun its backward: the chunks whose gradients exist at that peak are counted
(``grad_chunks_at_peak``), each an equal share of the rank's parameters (the end ranks' lighter
embedding-only or head-only chunks are not told apart).

FSDP2 under torch.distributed.pipelining holds its unsharded gradients from each unit's first
backward to the stage's last (ZeRO-3, ``pipeline_keeps_unsharded``); on an interleaved rank the
same count gives each phase its chunks, the last rank's loss backward only those reached by
its head chunk's last backward.
"""

from __future__ import annotations

from functools import lru_cache

from explorer.memory.setting import TrainingSetting
from explorer.memory.states import HeldParams
from explorer.memory.temporaries import fsdp_accumulates_unsharded
from explorer.partition import StagePlan
from explorer.schedules import group_size
from explorer.schedules.builders import interleaved_table


def zero2_accumulates(s: TrainingSetting) -> bool:
    """Whether ZeRO-2 holds unsharded accumulated gradients in the backward phases
    (``zero2_accumulates_unsharded``, more than one micro-batch a step)."""
    flag = s.assumptions.zero2_accumulates_unsharded
    return flag and s.layout.zero == 2 and s.microbatches > 1


@lru_cache(maxsize=256)
def first_backwards(pp: int, microbatches: int, virtual: int) -> tuple[int, ...]:
    """1-based positions, in a rank's backward order, of each chunk's first backward under
    Megatron-style interleaving (``interleaved_table``: groups of N micro-batches, backwards
    with the chunks reversed; the same order on every rank). Source: Narayanan et al. 2021
    (arXiv:2104.04473) sec. 2.2.2; Megatron-Core get_schedule_table."""
    table = interleaved_table(microbatches, virtual, group_size(pp, microbatches))
    first: dict[int, int] = {}
    for k, (_, chunk) in enumerate(table, start=1):
        first.setdefault(chunk, k)
    return tuple(sorted(first.values()))


def accumulation_peak(
    pp: int,
    microbatches: int,
    virtual: int,
    inflight_sets: int,
    set_bytes: float,
    chunk_bytes: float,
) -> tuple[int, int]:
    """(chunk sets freed, chunks holding gradients) where one rank's saved activations plus
    its accumulated gradients are largest under interleaving.

    ``inflight_sets`` is the rank's activation peak in chunk sets (``inflight_microbatches``
    x V): the warm-up forwards plus one, or every forward of the step. It lasts through the
    steady 1F1B phase, S = M V + 1 - inflight_sets backwards (at least the first, which runs
    on the peak); the chunks first reached among them hold gradients. In the cool-down each
    backward frees one chunk set (``set_bytes``) and a chunk reached for the first time adds
    its gradients (``chunk_bytes``): each such backward is a candidate too. Source:
    ``first_backwards``; explorer.schedules.builders.interleaved_order (2 (P - i - 1) +
    (V - 1) N warm-up forwards, then 1F1B).
    """
    total = microbatches * virtual
    steady = max(1, min(total, total + 1 - inflight_sets))
    firsts = first_backwards(pp, microbatches, virtual)
    best = (sum(k <= steady for k in firsts) * chunk_bytes, 0, sum(k <= steady for k in firsts))
    for k in (k for k in firsts if k > steady):
        chunks, freed = sum(f <= k for f in firsts), k - steady
        value = chunks * chunk_bytes - freed * set_bytes
        if value > best[0]:
            best = (value, freed, chunks)
    return best[1], best[2]


def zero2_backward_gradients(
    s: TrainingSetting, held: HeldParams, inflight: float, set_bytes: float
) -> tuple[float, int]:
    """(bytes of the unsharded accumulated gradients, chunk sets of activations freed) on
    the stage's GPU where its activations and those gradients peak together
    (``zero2_accumulates``): every local parameter's gradient in
    ``fsdp_accumulated_grad_bytes`` (else the gradient bytes), times the share of its chunks
    that have begun their backward (``accumulation_peak``, ``set_bytes`` one chunk's
    activations of one micro-batch); without interleaving all of them with nothing freed (the
    one chunk's backward begins at the peak; later micro-batches accumulate into it).

    Worked: Llama 3 405B, TP 8, one-layer chunks, rank 1 (8 blocks of 398,491,648 parameters
    per GPU): 3,187,933,184 x 4 B = 12,751,732,736 B with 32 micro-batches (141 chunk sets in
    flight, 116 steady backwards: all 8 chunks), 1,593,966,592 B with 16 (every forward first:
    1 chunk). tests/test_memory_accumulation.py.
    """
    lay = s.layout
    per = s.assumptions.fsdp_accumulated_grad_bytes
    per = s.policy.grad_bytes if per is None else per
    full = held.total * per
    v = lay.virtual_stages
    if lay.pp == 1 or v <= 1 or lay.schedule != "interleaved":
        return full, 0
    sets = round(inflight * v)
    freed, chunks = accumulation_peak(lay.pp, s.microbatches, v, sets, set_bytes, full / v)
    return full * chunks / v, freed


@lru_cache(maxsize=256)
def head_chunk_reach(pp: int, microbatches: int, virtual: int) -> int:
    """Chunks of the last rank whose first backward comes no later than the head chunk's last
    backward of the step: the most that hold gradients at any of its loss backwards (the head
    is the rank's last chunk, the first in backward order). Source: ``first_backwards``'
    order (Megatron-Core get_schedule_table; torch ScheduleInterleaved1F1B
    backward_stage_index: groups of N backwards per chunk, chunks in reverse)."""
    table = interleaved_table(microbatches, virtual, group_size(pp, microbatches))
    last = max(k for k, (_, chunk) in enumerate(table, start=1) if chunk == 0)
    return sum(k <= last for k in first_backwards(pp, microbatches, virtual))


def pipelined_gradient_shares(
    s: TrainingSetting, plan: StagePlan, inflight: float, set_bytes: float, grad_bytes: float
) -> tuple[float, float, int] | None:
    """(share of the stage's unsharded accumulated gradients alive at one block's backward,
    the share at the loss backward, chunk sets of activations freed) where FSDP accumulates
    unsharded gradients under an interleaved pipeline (``fsdp_accumulates_unsharded``); None
    elsewhere (every chunk's gradients counted in both phases).

    FSDP2 makes a unit's unsharded gradient at its first backward of the step and keeps it to
    the stage's last backward (torch/distributed/pipelining/stage.py
    backward_maybe_with_nosync: set_requires_gradient_sync(False) before the last backward;
    FSDPParam.to_accumulated_grad_if_needed), so a chunk's gradients exist from its first
    backward, as for ZeRO-2 once a step: ``accumulation_peak`` over the rank's chunk sets
    (``grad_bytes`` the stage's unsharded gradients, an equal share per chunk). The last rank's
    loss backward runs in its head chunk alone: there only the chunks reached by the head
    chunk's last backward hold gradients (``head_chunk_reach``); its activations are taken
    unfreed in both phases (at most the peak, so neither phase is understated).

    Worked: torchtitan's Llama 3.1 405B, PP 8, two chunks, 8 micro-batches (N = 8): rank 7
    runs stage 15's eight backwards before stage 7's first, so its loss backward holds one
    chunk's share, 24,960,237,568 / 2 = 12,480,118,784 B; tests/test_memory_fsdp_interleaved.py.
    """
    lay = s.layout
    v = lay.virtual_stages
    if not fsdp_accumulates_unsharded(s) or lay.schedule != "interleaved" or v <= 1:
        return None
    sets = round(inflight * v)
    freed, chunks = accumulation_peak(lay.pp, s.microbatches, v, sets, set_bytes, grad_bytes / v)
    if not plan.has_head:
        return chunks / v, chunks / v, freed
    return chunks / v, head_chunk_reach(lay.pp, s.microbatches, v) / v, 0
