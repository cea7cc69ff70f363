"""ZB-V's action order: two chunks per rank in a V, F, B and W passes interleaved.

Rank r holds chunk 0 (stage r of 2P) and chunk 1 (stage 2P-1-r); every micro-batch runs chunk
0 over ranks 0..P-1, then chunk 1 back over P-1..0, so rank 0 holds the embedding and the head.
With T_F = T_B = T_W the steady state has no bubble and each rank holds at most 2P chunk
activations, P stage-equivalents: 1F1B's peak (Qi et al. 2024, arXiv:2401.10241, sec. 6).
DualPipeV's order, on the same placement, is in ``dualpipe.py``.
"""

from __future__ import annotations

from explorer.schedules.actions import Kind

_Order = list[tuple[Kind, int, int]]


def _warmup(stages: int, stage: int, counts: dict[str, int]) -> _Order:
    """2(P-r)-1 F0; r pairs F1 F0; P-r groups F1 B1 W1 (``counts`` advanced in place)."""
    order: _Order = []

    def add(kind: Kind, chunk: int) -> None:
        key = f"{kind}{chunk}"
        order.append((kind, counts[key], chunk))
        counts[key] += 1

    for _ in range(2 * (stages - stage) - 1):
        add("F", 0)
    for _ in range(stage):
        add("F", 1)
        add("F", 0)
    for _ in range(stages - stage):
        add("F", 1)
        add("B", 1)
        add("W", 1)
    return order


def zbv_order(stages: int, stage: int, microbatches: int) -> _Order:
    """ZB-V's (kind, micro-batch, chunk) order on ``stage``: warm-up, F0 B0 W0 F1 B1 W1 while
    forwards remain, then r pairs B0 B1, P-r pairs B0 W0, the deferred W1 and W0.

    Written for max(M, 2P-1) micro-batches, passes of the extra ones dropped, as the reference
    does for short steps.
    Source: torch.distributed.pipelining ScheduleZBVZeroBubble._calculate_single_rank_operations;
    Qi et al. 2024 (arXiv:2401.10241) sec. 6 fig. 8.
    """
    n = max(microbatches, 2 * stages - 1)
    counts = dict.fromkeys(("F0", "B0", "W0", "F1", "B1", "W1"), 0)
    order = _warmup(stages, stage, counts)
    f0, f1, b0, b1 = counts["F0"], counts["F1"], counts["B0"], counts["B1"]
    while f1 < f0 or f0 < n:
        if f0 < n:
            order.append(("F", f0, 0))
            f0 += 1
        order += [("B", b0, 0), ("W", b0, 0), ("F", f1, 1), ("B", b1, 1), ("W", b1, 1)]
        b0, b1, f1 = b0 + 1, b1 + 1, f1 + 1
    w0, w1 = b0, b1
    for _ in range(stage):
        order += [("B", b0, 0), ("B", b1, 1)]
        b0, b1 = b0 + 1, b1 + 1
    for _ in range(stages - stage):
        order += [("B", b0, 0), ("W", w0, 0)]
        b0, w0 = b0 + 1, w0 + 1
    order += [("W", mb, 1) for mb in range(w1, b1)]
    order += [("W", mb, 0) for mb in range(w0, b0)]
    return [action for action in order if action[1] < microbatches]
