"""Helix against plain TP and KV parallelism alone, read as the paper reads its figures.

Helix (Bhatia et al., NVIDIA, arXiv:2507.07120, abstract and sec. 4) reports for DeepSeek-R1 at
multi-million-token contexts on GB200 NVL72: up to 1.5x lower token-to-token latency (TTL) at a
fixed batch, and up to 32x more concurrent users under the same latency budget, against the
best prior layout. This module reduces ``explorer.serving.helix.helix_points`` (every TPA x KVP
split of the GPUs at every concurrency) to those two figures:
- TTL at a fixed batch: the fastest fitting Helix split (KVP > 1) over the fastest fitting
  plain-TP split (KVP = 1), at the batch the user names (the smallest by default);
- users under a budget: the budget is plain TP's TTL at the most users it fits; the ratio is
  the most users a Helix split serves within that TTL over the users TP fits.
And the throughput-latency Pareto frontier of all fitting points (tokens/s per GPU against
tokens/s per user, as the paper's Fig. 1 draws it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from explorer.serving.helix import HelixStep

PAPER_TTL_SPEEDUP = 1.5
"""Helix abstract: "reduces TTL by up to 1.5x at fixed batch sizes" (DeepSeek-R1)."""
PAPER_USERS_RATIO = 32.0
"""Helix abstract: "supports up to 32x larger batches under the same latency budget"."""


@dataclass(frozen=True, slots=True)
class HelixSummary:
    """The paper's two headline figures, as this model computes them."""

    batch: int
    tp_ttl_s: float
    helix_ttl_s: float
    helix_split: tuple[int, int]
    """(TPA, KVP) of the fastest Helix split at ``batch``."""
    budget_s: float
    tp_users: int
    helix_users: int
    helix_users_split: tuple[int, int]

    @property
    def ttl_speedup(self) -> float:
        return self.tp_ttl_s / self.helix_ttl_s

    @property
    def users_ratio(self) -> float:
        return self.helix_users / self.tp_users


def summarize(points: Sequence[HelixStep], batch: int | None = None) -> HelixSummary:
    """Both figures from ``points`` (one sentence when plain TP or Helix fits nothing)."""
    fit = [p for p in points if p.fits]
    tp = [p for p in fit if p.kvp == 1]
    helix = [p for p in fit if p.kvp > 1]
    if not tp:
        raise ValueError("plain TP fits no batch at this context: nothing to compare with")
    if not helix:
        raise ValueError("no Helix split (KV parallel > 1) fits at this context")
    chosen = min(int(p.decode_seqs) for p in tp) if batch is None else batch
    at_tp = [p for p in tp if int(p.decode_seqs) == chosen]
    at_helix = [p for p in helix if int(p.decode_seqs) == chosen]
    if not at_tp or not at_helix:
        raise ValueError(f"plain TP or Helix does not fit a batch of {chosen}")
    best_tp = min(at_tp, key=lambda p: p.token_latency_s)
    best_helix = min(at_helix, key=lambda p: p.token_latency_s)
    most = max(tp, key=lambda p: (p.decode_seqs, -p.token_latency_s))
    within = [p for p in helix if p.token_latency_s <= most.token_latency_s]
    users = max(within, key=lambda p: p.decode_seqs) if within else best_helix
    return HelixSummary(
        batch=chosen,
        tp_ttl_s=best_tp.token_latency_s,
        helix_ttl_s=best_helix.token_latency_s,
        helix_split=(best_helix.tpa, best_helix.kvp),
        budget_s=most.token_latency_s,
        tp_users=int(most.decode_seqs),
        helix_users=int(users.decode_seqs) if within else 0,
        helix_users_split=(users.tpa, users.kvp),
    )


def pareto(points: Sequence[HelixStep]) -> list[HelixStep]:
    """Fitting points no other fitting point beats on both tokens/s per GPU and per user,
    fastest per user first."""
    fit = sorted((p for p in points if p.fits), key=lambda p: p.token_latency_s)
    front: list[HelixStep] = []
    for p in fit:
        if not front or p.tokens_per_s_per_gpu > front[-1].tokens_per_s_per_gpu:
            front.append(p)
    return front
