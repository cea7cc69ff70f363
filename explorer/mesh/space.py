"""The search space, the problem being laid out, and candidates (partial or complete layouts).

Candidates are NamedTuples (cheap to build by the thousand); ``to_layout`` turns a complete one
into the core's frozen ``Layout``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

from explorer.specs import (
    RECOMPUTES,
    SCHEDULES,
    ClusterSpec,
    Layout,
    ModelSpec,
    Recompute,
    ScheduleName,
    TrainingWorkload,
    ZeroStage,
)


@cache
def divisors(n: int) -> tuple[int, ...]:
    """Positive divisors of ``n``, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return tuple(sorted({*small, *(n // d for d in small)}))


def _check_members(name: str, values: tuple[object, ...], allowed: tuple[object, ...]) -> None:
    if not values:
        raise ValueError(f"{name} must list at least one value")
    wrong = [v for v in values if v not in allowed]
    if wrong:
        raise ValueError(f"{name} has unknown value(s) {wrong}; choose from {allowed}")


MIN_CP_TOKENS = 4096
"""Fewest tokens per context-parallel rank the default search space considers. Llama 3 405B
used no CP at 8K tokens and CP 16 at 128K (Dubey et al. 2024, arXiv:2407.21783, sec. 3.3.2)."""


def default_cp_values(seq_len: int) -> tuple[int, ...]:
    """1 and the powers of two c with seq_len / c >= MIN_CP_TOKENS."""
    return tuple(2**k for k in range(12) if seq_len >= 2**k * MIN_CP_TOKENS or k == 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """Which values of each knob the search considers (the degrees come from divisors)."""

    tp_values: tuple[int, ...] | None = None
    """Tensor-parallel degrees to try; None means every divisor of the GPU count."""
    pp_values: tuple[int, ...] | None = None
    """Pipeline degrees to try; None means every divisor of the GPU count."""
    zero_stages: tuple[ZeroStage, ...] = (0, 1, 2, 3)
    """ZeRO stages to try over the data-parallel ranks."""
    micro_batch_sizes: tuple[int, ...] = (1, 2, 4)
    """Sequences per micro-batch to try."""
    recomputes: tuple[Recompute, ...] = RECOMPUTES
    """Activation recompute policies to try."""
    schedules: tuple[ScheduleName, ...] = SCHEDULES
    """Pipeline schedules to try when PP > 1."""
    max_virtual: int = 4
    """Most virtual stages per rank for the interleaved schedule; 1 turns interleaving off."""
    cp_values: tuple[int, ...] | None = None
    """Context-parallel degrees to try (those dividing the GPU count); None means 1 and the
    powers of two that leave each CP rank at least ``MIN_CP_TOKENS`` tokens (a candidate
    heuristic: shorter pieces leave too little attention to hide the ring exchange behind)."""
    ep_values: tuple[int, ...] | None = None
    """Expert-parallel degrees to try on MoE models; None means every divisor of the experts."""
    etp_values: tuple[int, ...] = (1,)
    """Expert tensor-parallel degrees; 1 (each expert whole on its rank) as in DeepSeek-V3."""
    tp_across_domain: bool = False
    """Allow TP groups that leave the scale-up domain (the estimate then warns)."""
    max_stage_idle: float = 0.10
    """Largest share of pipeline compute that uneven layer counts may leave idle."""

    def __post_init__(self) -> None:
        _check_members("zero_stages", self.zero_stages, (0, 1, 2, 3))
        _check_members("recomputes", self.recomputes, RECOMPUTES)
        _check_members("schedules", self.schedules, SCHEDULES)
        for name in ("tp_values", "pp_values", "micro_batch_sizes", "cp_values", "ep_values",
                     "etp_values"):  # fmt: skip
            values = getattr(self, name)
            if values is not None and (not values or min(values) < 1):
                raise ValueError(f"{name} must list positive values, got {values}")
        if self.max_virtual < 1:
            raise ValueError(f"max_virtual must be at least 1, got {self.max_virtual}")
        if not 0 <= self.max_stage_idle < 1:
            raise ValueError(f"max_stage_idle must be in [0, 1), got {self.max_stage_idle}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """What is laid out (model, workload), on what (cluster, GPUs used) and the space searched."""

    model: ModelSpec
    cluster: ClusterSpec
    workload: TrainingWorkload
    num_gpus: int
    """GPUs a layout must occupy exactly (at most the cluster's world size)."""
    space: SearchSpace = field(default_factory=SearchSpace)

    @property
    def cp_values(self) -> tuple[int, ...]:
        """The context-parallel degrees searched (the space's, or the default for the sequence)."""
        return self.space.cp_values or default_cp_values(self.workload.seq_len)

    def __post_init__(self) -> None:
        if not 0 < self.num_gpus <= self.cluster.world_size:
            raise ValueError(
                f"the number of GPUs must be between 1 and the cluster's "
                f"{self.cluster.world_size}, got {self.num_gpus}"
            )


class Candidate(NamedTuple):
    """A layout being built; the fields of levels not yet reached stay None ("any").

    Fields in ``Layout``'s order (dp, tp, pp, cp, ep, etp, zero, micro-batch, recompute,
    schedule, virtual stages); build one with keywords."""

    dp: int
    tp: int
    pp: int
    cp: int
    ep: int | None = None
    etp: int | None = None
    zero: ZeroStage | None = None
    mbs: int | None = None
    recompute: Recompute | None = None
    schedule: ScheduleName | None = None
    virtual: int | None = None


def to_layout(c: Candidate) -> Layout:
    """The Layout of a complete candidate (sequence parallelism on, as Megatron runs TP)."""
    return Layout(
        dp=c.dp,
        tp=c.tp,
        pp=c.pp,
        cp=c.cp,
        ep=c.ep or 1,
        etp=c.etp or 1,
        zero=c.zero or 0,
        micro_batch_size=c.mbs or 1,
        recompute=c.recompute or "none",
        schedule=c.schedule or "1f1b",
        virtual_stages=c.virtual or 1,
    )


def from_layout(layout: Layout) -> Candidate:
    """A complete candidate with the degrees and knobs of ``layout``."""
    return Candidate(
        tp=layout.tp,
        pp=layout.pp,
        cp=layout.cp,
        dp=layout.dp,
        ep=layout.ep,
        etp=layout.etp,
        mbs=layout.micro_batch_size,
        schedule=layout.schedule,
        virtual=layout.virtual_stages,
        zero=layout.zero,
        recompute=layout.recompute,
    )


def num_microbatches(problem: Problem, c: Candidate) -> int:
    """Micro-batches per step on each pipeline: global batch / (dp x micro-batch), floored."""
    return problem.workload.global_batch_size // (c.dp * (c.mbs or 1))  # MeshDims.microbatches


def expert_data_parallel(c: Candidate) -> int:
    """Ranks holding the same experts: dp x cp x tp / (ep x etp) (Megatron-Core folding)."""
    # MeshDims.edp's formula, floored (the ep-fold rule rejects what does not divide), inline:
    # the search's memory floors call it per candidate
    return c.dp * c.cp * c.tp // ((c.ep or 1) * (c.etp or 1))
