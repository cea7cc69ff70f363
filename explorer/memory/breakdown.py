"""The training memory categories (docs/ARCHITECTURE.md) and a breakdown of bytes over them."""

from __future__ import annotations

from dataclasses import dataclass, fields

from explorer.frozen import fast_init

CATEGORIES = (
    "parameters",
    "gradients",
    "master_weights",
    "optimizer_states",
    "activations",
    "temporary",
    "communication",
    "runtime",
    "headroom",
)
"""Training memory categories, in the order charts stack them."""


@fast_init
@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes on one GPU by category; ``total_bytes`` is their sum."""

    parameters: float = 0.0
    gradients: float = 0.0
    master_weights: float = 0.0
    optimizer_states: float = 0.0
    activations: float = 0.0
    temporary: float = 0.0
    communication: float = 0.0
    runtime: float = 0.0
    headroom: float = 0.0

    @property
    def total_bytes(self) -> float:
        states = self.parameters + self.gradients + self.master_weights + self.optimizer_states
        other = self.activations + self.temporary + self.communication + self.runtime
        return states + other + self.headroom

    @property
    def model_states_bytes(self) -> float:
        """Parameters, gradients, master weights and optimizer states."""
        return self.parameters + self.gradients + self.master_weights + self.optimizer_states

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
