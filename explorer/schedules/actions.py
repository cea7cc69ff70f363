"""Pipeline schedules as data: actions (stage, kind, micro-batch, chunk) in each stage's order.

A micro-batch's *route* is the sequence of (stage, chunk) positions its forward pass visits.
Unidirectional schedules run chunk 0 over stages 0..P-1, then chunk 1 over stages 0..P-1, and
so on (Megatron-LM's virtual pipeline). DualPipe is bidirectional: chunk 0 carries the first
half of the micro-batches over stages 0..P-1, chunk 1 the second half over stages P-1..0.
V-shaped schedules (ZB-V, DualPipeV) route every micro-batch over chunk 0 of stages 0..P-1,
then chunk 1 of stages P-1..0 (Qi et al. 2024, arXiv:2401.10241, sec. 6: the "V" placement).
Backward passes walk the route in reverse; a W (weight gradient) follows its own B.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from explorer.specs import ScheduleName

Kind = Literal["F", "B", "W"]
KINDS: tuple[Kind, ...] = ("F", "B", "W")
"""F forward, B backward (the input gradient when W is split off), W weight gradient."""


@dataclass(frozen=True, slots=True)
class Action:
    """One pass of one micro-batch through one model chunk on one pipeline stage."""

    stage: int
    """Pipeline rank that runs the pass (0 is the first)."""
    kind: Kind
    """F, B or W."""
    microbatch: int
    """Micro-batch index, 0-based."""
    chunk: int = 0
    """Model chunk on this stage (virtual stage for interleaved, direction for DualPipe)."""

    @property
    def label(self) -> str:
        """Kind and micro-batch ("F3"), with ".chunk" when the chunk is not 0 ("F3.1")."""
        suffix = f".{self.chunk}" if self.chunk else ""
        return f"{self.kind}{self.microbatch}{suffix}"

    def __str__(self) -> str:
        return f"{self.stage}{self.label}"


@dataclass(frozen=True, slots=True)
class Route:
    """Where a micro-batch's passes run: (stage, chunk) positions along its forward route."""

    stages: int
    """Pipeline stages P (ranks)."""
    virtual: int = 1
    """Model chunks per stage V for interleaved 1F1B; 1 otherwise."""
    bidirectional: bool = False
    """DualPipe's mirrored routes: chunk 0 runs stages 0..P-1, chunk 1 runs P-1..0."""
    vshape: bool = False
    """V placement (ZB-V, DualPipeV): position r on stage r chunk 0, 2P-1-r on stage r
    chunk 1; ``virtual`` is then 2 (a chunk is half a rank's layers)."""

    @property
    def num_chunks(self) -> int:
        """Distinct chunk indices on a stage: V, or 2 for DualPipe."""
        return 2 if self.bidirectional else self.virtual

    @property
    def route_length(self) -> int:
        """Positions on a micro-batch's route: P for DualPipe, V*P otherwise."""
        return self.stages if self.bidirectional else self.virtual * self.stages

    def position(self, stage: int, chunk: int) -> int:
        """Index of (stage, chunk) along the forward route of the micro-batches that use it."""
        if self.bidirectional:
            return stage if chunk == 0 else self.stages - 1 - stage
        if self.vshape:
            return stage if chunk == 0 else 2 * self.stages - 1 - stage
        return chunk * self.stages + stage

    def at_position(self, position: int, chunk: int) -> tuple[int, int]:
        """(stage, chunk) at ``position`` of the route that passes through ``chunk``."""
        if self.bidirectional:
            return (position, 0) if chunk == 0 else (self.stages - 1 - position, 1)
        if self.vshape:
            turned = position >= self.stages
            return (2 * self.stages - 1 - position, 1) if turned else (position, 0)
        return position % self.stages, position // self.stages

    def part(self, stage: int, chunk: int) -> int:
        """Entry of StageTimes a pass on (stage, chunk) runs: the rank's own (V placement,
        interleaved), or the model stage P-1-s for DualPipe's reverse chunk."""
        return stage if self.vshape else self.position(stage, chunk) % self.stages

    def neighbour(self, stage: int, chunk: int, step: int) -> tuple[int, int] | None:
        """(stage, chunk) ``step`` positions further along the route; None past either end."""
        position = self.position(stage, chunk) + step
        if not 0 <= position < self.route_length:
            return None
        return self.at_position(position, chunk)


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """The ordered actions of every pipeline stage for one training step."""

    name: ScheduleName
    """Which schedule built the actions."""
    stages: int
    """Pipeline stages P (ranks)."""
    microbatches: int
    """Micro-batches M per step (DualPipe: M/2 from each end)."""
    virtual: int
    """Model chunks per stage V for interleaved 1F1B, 2 for ZB-V and DualPipeV; 1 otherwise
    (a chunk is a whole stage)."""
    actions: tuple[tuple[Action, ...], ...]
    """Per stage, the actions in the order the stage runs them."""
    parameter_copies: tuple[int, ...]
    """Copies of one stage's parameters each stage holds (DualPipe: 2)."""
    bidirectional: bool = False
    """DualPipe's mirrored routes: chunk 0 runs stages 0..P-1, chunk 1 runs P-1..0."""
    pairs: tuple[tuple[int, ...], ...] = ()
    """Per stage, indices i where actions i (an F) and i + 1 (a B) form an F&B pair that starts
    once both their inputs have arrived (DualPipe, DualPipeV); empty means no pairs."""
    vshape: bool = False
    """V placement (ZB-V, DualPipeV): ``virtual`` is 2, chunk 1 of stage r at position 2P-1-r."""

    @property
    def route(self) -> Route:
        """The stage and chunk geometry of the micro-batches' routes."""
        return Route(self.stages, self.virtual, self.bidirectional, self.vshape)

    @property
    def num_chunks(self) -> int:
        """Distinct chunk indices on a stage: V, or 2 for DualPipe."""
        return self.route.num_chunks

    @property
    def split_backward(self) -> bool:
        """Whether the weight gradient runs as separate W actions."""
        return any(a.kind == "W" for a in self.actions[0])

    @property
    def route_length(self) -> int:
        """Positions on a micro-batch's route: P for DualPipe, V*P otherwise."""
        return self.route.route_length

    def position(self, stage: int, chunk: int) -> int:
        """Index of (stage, chunk) along the forward route of the micro-batches that use it."""
        return self.route.position(stage, chunk)

    def at_position(self, position: int, chunk: int) -> tuple[int, int]:
        """(stage, chunk) at ``position`` of the route that passes through ``chunk``."""
        return self.route.at_position(position, chunk)

    def neighbour(self, stage: int, chunk: int, step: int) -> tuple[int, int] | None:
        """(stage, chunk) ``step`` positions further along the route; None past either end."""
        return self.route.neighbour(stage, chunk, step)

    def chunks_of(self, microbatch: int) -> tuple[int, ...]:
        """Chunks a micro-batch passes through on every stage."""
        if self.bidirectional:
            return (0,) if microbatch < self.microbatches // 2 else (1,)
        return tuple(range(self.virtual))

    def text(self, width: int | None = None) -> str:
        """One line per stage of compact action labels ("F0 F1 B0 ..."), cut at ``width``."""
        lines = []
        for stage, actions in enumerate(self.actions):
            line = f"stage {stage:>2}: " + " ".join(a.label for a in actions)
            if width is not None and len(line) > width:
                line = line[: width - 1] + "…"
            lines.append(line)
        return "\n".join(lines)
