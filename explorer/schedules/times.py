"""Durations the simulator needs: per-stage forward, backward and weight passes, and p2p."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.schedules.actions import Kind


def _check_times(name: str, values: tuple[float, ...], stages: int) -> None:
    """Raise ValueError unless ``values`` has one finite, non-negative entry per stage."""
    if len(values) != stages:
        raise ValueError(f"{name} has {len(values)} entries for {stages} stages")
    if any(not 0 <= v < float("inf") for v in values):
        raise ValueError(f"{name} must be finite and zero or more, got {values}")


@dataclass(frozen=True, slots=True, kw_only=True)
class StageTimes:
    """Seconds of compute per micro-batch on each pipeline stage, and the p2p transfer time.

    Entry i times model part i, the layers of stage i. Interleaved chunks take 1/V of their
    stage's time; DualPipe's reverse-direction chunk on stage s runs part P-1-s.
    """

    forward_s: tuple[float, ...]
    """Forward pass of one micro-batch through the stage's layers, s."""
    backward_s: tuple[float, ...]
    """Backward pass, s: the input gradient B alone when weight_s is given separately."""
    weight_s: tuple[float, ...]
    """Weight-gradient pass W, s; 0 means backward_s is the full backward. Schedules without
    split backward run B for backward_s + weight_s."""
    p2p_s: float = 0.0
    """Sending one activation or gradient to the adjacent stage, s; 0 means free."""

    def __post_init__(self) -> None:
        stages = len(self.forward_s)
        _check_times("forward_s", self.forward_s, stages)
        _check_times("backward_s", self.backward_s, stages)
        _check_times("weight_s", self.weight_s, stages)
        if stages < 1:
            raise ValueError("forward_s needs at least one stage")
        if not 0 <= self.p2p_s < float("inf"):
            raise ValueError(f"p2p_s must be finite and zero or more, got {self.p2p_s}")

    @classmethod
    def uniform(
        cls,
        stages: int,
        forward_s: float = 1.0,
        backward_s: float = 2.0,
        weight_s: float = 0.0,
        p2p_s: float = 0.0,
    ) -> StageTimes:
        """The same times on every one of ``stages`` stages."""
        return cls(
            forward_s=(forward_s,) * stages,
            backward_s=(backward_s,) * stages,
            weight_s=(weight_s,) * stages,
            p2p_s=p2p_s,
        )

    @property
    def stages(self) -> int:
        """Pipeline stages the times describe."""
        return len(self.forward_s)

    def duration_s(self, kind: Kind, part: int, split: bool, virtual: int) -> float:
        """Seconds of one ``kind`` pass of one chunk of model part ``part``.

        ``split`` says whether the schedule runs W separately; a chunk is 1/V of a part.
        """
        if kind == "F":
            return self.forward_s[part] / virtual
        if kind == "W":
            return self.weight_s[part] / virtual
        folded = 0.0 if split else self.weight_s[part]  # the full backward when W is not split
        return (self.backward_s[part] + folded) / virtual
