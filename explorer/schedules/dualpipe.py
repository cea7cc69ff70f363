"""DualPipe's action order: bidirectional, two model chunks per rank, eight steps.

Chunk (direction) 0 carries micro-batches 0..M/2-1 from stage 0 to stage P-1; chunk 1 carries
micro-batches M/2..M-1 from stage P-1 to stage 0. Each rank holds a stage of both directions, so
its parameters are doubled. A *local phase* 0 is the direction fed from the rank's own end of
the pipeline (direction = phase XOR "rank in the second half").

Backward passes with zero-bubble enabled defer their weight gradient to a FIFO queue that the
W steps pop; other backward passes compute the weight gradient at once (emitted here as B
immediately followed by its W). An overlapped forward-and-backward pair (F&B) is emitted as F
then B and starts once both inputs have arrived, as the reference code waits for both
receives; its time is F + B (the overlap of one pass's compute with the other's all-to-all
communication is not modelled).
Source: DeepSeek-V3 report (arXiv:2412.19437) sec. 3.2.1 fig. 5; deepseek-ai/DualPipe
dualpipe/dualpipe.py DualPipe.step (steps 1-8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer.schedules.actions import Kind

_Order = list[tuple[Kind, int, int]]


def require_dualpipe(stages: int, microbatches: int, virtual: int) -> None:
    """Raise ValueError unless P is even, V is 1 and M is even and at least 2P.

    Source: deepseek-ai/DualPipe DualPipe.step asserts (num_ranks % 2 == 0,
    num_chunks % 2 == 0 and num_chunks >= 2 * num_ranks).
    """
    if stages % 2:
        raise ValueError(f"dualpipe needs an even number of stages, got {stages}")
    if virtual != 1:
        raise ValueError(
            f"dualpipe holds two chunks per stage by design; virtual must be 1, got {virtual}"
        )
    if microbatches % 2 or microbatches < 2 * stages:
        raise ValueError(
            f"dualpipe needs an even number of microbatches, at least twice the stages "
            f"({2 * stages}), got {microbatches}"
        )


@dataclass(slots=True)
class _Rank:
    """Counters of one rank while its DualPipe order is written out."""

    second_half: bool
    half_microbatches: int
    order: _Order = field(default_factory=list)
    forwards: list[int] = field(default_factory=lambda: [0, 0])
    backwards: list[int] = field(default_factory=lambda: [0, 0])
    pending: list[tuple[int, int]] = field(default_factory=list)
    pairs: list[int] = field(default_factory=list)

    def _microbatch(self, direction: int, index: int) -> int:
        return index + direction * self.half_microbatches

    def forward(self, phase: int) -> None:
        direction = phase ^ self.second_half
        mb = self._microbatch(direction, self.forwards[direction])
        self.forwards[direction] += 1
        self.order.append(("F", mb, direction))

    def backward(self, phase: int, zero_bubble: bool = False) -> None:
        direction = phase ^ self.second_half
        mb = self._microbatch(direction, self.backwards[direction])
        self.backwards[direction] += 1
        self.order.append(("B", mb, direction))
        if zero_bubble:
            self.pending.append((mb, direction))  # WeightGradStore queue, FIFO
        else:
            self.order.append(("W", mb, direction))

    def forward_backward(self, forward_phase: int, backward_phase: int) -> None:
        """An F&B pair: F then full B, started once both inputs have arrived."""
        self.pairs.append(len(self.order))
        self.forward(forward_phase)
        self.backward(backward_phase)

    def weight(self) -> None:
        mb, direction = self.pending.pop(0)
        self.order.append(("W", mb, direction))


def _warmup(rank: _Rank, half_ranks: int, half_rank: int) -> None:
    """Steps 1-3: nF0, then nF0F1, then nB1W1F1 (zero bubble)."""
    for _ in range((half_ranks - half_rank - 1) * 2):
        rank.forward(0)
    for _ in range(half_rank + 1):
        rank.forward(0)
        rank.forward(1)
    for _ in range(half_ranks - half_rank - 1):
        rank.backward(1, zero_bubble=True)
        rank.weight()
        rank.forward(1)


def _steady(rank: _Rank, stages: int, half_rank: int, microbatches: int | None = None) -> None:
    """Step 4 (main): nF0B1F1B0 as F&B pairs; the middle ranks do not pair the first F0B1.

    Written out in bulk: iteration i is F0 B1 W1 F1 B0 W0, each direction's counters one
    further than in iteration i - 1 (the backward passes here compute W at once).
    """
    per_direction = rank.half_microbatches if microbatches is None else microbatches
    count = per_direction - stages + half_rank + 1
    if count <= 0:
        return
    first = len(rank.order)
    d0, d1 = int(rank.second_half), 1 - int(rank.second_half)  # directions of phases 0, 1
    f0, f1 = (rank._microbatch(d, rank.forwards[d]) for d in (d0, d1))
    b0, b1 = (rank._microbatch(d, rank.backwards[d]) for d in (d0, d1))
    rank.order += [
        action
        for i in range(count)
        for action in (
            ("F", f0 + i, d0), ("B", b1 + i, d1), ("W", b1 + i, d1),
            ("F", f1 + i, d1), ("B", b0 + i, d0), ("W", b0 + i, d0),
        )
    ]  # fmt: skip
    skip = 1 if half_rank == stages // 2 - 1 else 0  # the middle ranks' first F0B1
    rank.pairs += [first + 6 * i + 3 * j for i in range(count) for j in (0, 1)][skip:]
    for d in (d0, d1):
        rank.forwards[d] += count
        rank.backwards[d] += count


def _cooldown(rank: _Rank, half_ranks: int, half_rank: int) -> None:
    """Steps 5-8: nB1F1B0, nB1B0 (zero bubble from the middle), nWB0, nW."""
    for _ in range(half_ranks - half_rank - 1):
        rank.backward(1)
        rank.forward_backward(1, 0)
    zero_bubble, steps = False, half_rank + 1
    for i in range(steps):
        if i == steps // 2 and half_rank % 2 == 1:
            zero_bubble = True
        rank.backward(1, zero_bubble)
        if i == steps // 2 and half_rank % 2 == 0:
            zero_bubble = True
        rank.backward(0, zero_bubble)
    for _ in range(half_ranks - half_rank - 1):
        rank.weight()
        rank.backward(0, zero_bubble=True)
    for _ in range(half_rank + 1):
        rank.weight()


def dualpipe_actions(stages: int, stage: int, microbatches: int) -> tuple[_Order, tuple[int, ...]]:
    """DualPipe's (kind, micro-batch, chunk) order on ``stage``, steps 1 to 8, and the F&B pairs.

    The pairs are the indices of the F that starts each F&B pair.

    Source: deepseek-ai/DualPipe dualpipe/dualpipe.py DualPipe.step.
    """
    half_ranks = stages // 2
    half_rank = min(stage, stages - 1 - stage)
    rank = _Rank(second_half=stage >= half_ranks, half_microbatches=microbatches // 2)
    _warmup(rank, half_ranks, half_rank)
    _steady(rank, stages, half_rank)
    _cooldown(rank, half_ranks, half_rank)
    return rank.order, tuple(rank.pairs)


def require_dualpipev(stages: int, microbatches: int, virtual: int) -> None:
    """Raise ValueError unless V is 1 (two chunks per rank by design) and M >= 2P.

    Source: deepseek-ai/DualPipe dualpipe/dualpipev.py (num_chunks >= num_ranks * 2);
    torch.distributed.pipelining ScheduleDualPipeV (n_microbatches >= the 2P stages).
    """
    if virtual != 1:
        raise ValueError(
            f"dualpipev holds two chunks per stage by design; virtual must be 1, got {virtual}"
        )
    if microbatches < 2 * stages:
        raise ValueError(
            f"dualpipev needs at least twice the stages ({2 * stages}) microbatches, "
            f"got {microbatches}"
        )


def dualpipev_actions(stages: int, stage: int, microbatches: int) -> tuple[_Order, tuple[int, ...]]:
    """DualPipeV's (kind, micro-batch, chunk) order on ``stage`` and its F&B pairs.

    DualPipe "cut in half": P ranks run the 2P stages of one direction in a V (chunk 0 is stage
    r, chunk 1 stage 2P-1-r), every micro-batch through both chunks. Its steps are DualPipe's
    with the half-pipeline's counters: P ranks for P/2, rank r for the half-rank, M for M/2,
    phase 0 always chunk 0.
    Source: deepseek-ai/DualPipe dualpipe/dualpipev.py DualPipeV.step; torch.distributed.
    pipelining ScheduleDualPipeV._calculate_single_rank_operations (steps 1-8).
    """
    rank = _Rank(second_half=False, half_microbatches=0)  # micro-batch index = counter
    _warmup(rank, stages, stage)
    _steady(rank, 2 * stages, stage, microbatches)
    _cooldown(rank, stages, stage)
    return rank.order, tuple(rank.pairs)
