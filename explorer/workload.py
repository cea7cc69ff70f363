"""A training workload resolved once, at the estimate's boundary, for one layout.

The estimate (explorer.estimate.core.estimate) looks the precision policy up by its name and
works out the micro-batch count here, once per layout, and passes the record down to the
memory model, the stage context, the compute context and the host copies; below the estimate
only the memory model's input checks (explorer.memory.checks, which quote the input as given)
read the ``TrainingWorkload`` itself (tests/test_estimate_resolved.py watches the readers).
Callers without the record (the search's bounds, the mixed-cluster step) get one resolved where
the context is built. docs/ARCHITECTURE.md, "The boundary".
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.frozen import fast_init
from explorer.precision import precision_policy
from explorer.specs import Layout, PrecisionPolicy, TrainingWorkload


@fast_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedWorkload:
    """What one layout's estimate reads of a ``TrainingWorkload``, worked out once."""

    seq_len: int
    """Tokens per sequence (before context parallelism)."""
    policy: PrecisionPolicy
    """The workload's named precision policy with its gradient dtype (explorer.precision)."""
    microbatches: int
    """Micro-batches per step on one pipeline, M = global batch / (DP x micro-batch)."""
    microbatch_tokens: float
    """Tokens of one micro-batch on one CP rank, b s / cp (what a GEMM's rows and the memory-
    bound traffic scale with)."""
    tokens_per_step: int
    """Tokens per optimizer step the layout runs: M x DP x micro-batch x sequence."""
    bf16_ends: tuple[int, int]
    """Blocks kept in BF16 at the start and at the end (``TrainingWorkload.bf16_layers_at_start``
    / ``_at_end``)."""


def microbatch_count(layout: Layout, workload: TrainingWorkload) -> int:
    """Micro-batches per step on one pipeline, M = global batch / (DP x micro-batch)."""
    per_step = layout.dp * layout.micro_batch_size
    count = workload.global_batch_size // per_step
    if count < 1:
        raise ValueError(
            f"global batch of {workload.global_batch_size} sequences is smaller than "
            f"DP x micro-batch = {per_step}"
        )
    return count


def resolve_workload(
    layout: Layout,
    workload: TrainingWorkload,
    *,
    policy: PrecisionPolicy | None = None,
    microbatches: int | None = None,
    check: bool = True,
) -> ResolvedWorkload:
    """``workload`` as a GPU of ``layout`` runs it: the precision policy looked up by its name
    (unless ``policy`` is given), then the micro-batch count unless ``microbatches`` is given:
    ``microbatch_count`` (ValueError when the global batch is smaller than DP x micro-batch),
    or with ``check`` False the floor alone, 0 included (contexts built for bounds, which
    check no layout)."""
    if policy is None:
        policy = precision_policy(workload.precision, workload.grad_dtype)
    if microbatches is None and check:
        microbatches = microbatch_count(layout, workload)
    elif microbatches is None:
        microbatches = workload.global_batch_size // max(1, layout.dp * layout.micro_batch_size)
    seq, mbs = workload.seq_len, layout.micro_batch_size
    return ResolvedWorkload(
        seq_len=seq,
        policy=policy,
        microbatches=microbatches,
        microbatch_tokens=mbs * seq / layout.cp,
        tokens_per_step=microbatches * layout.dp * mbs * seq,
        bf16_ends=(workload.bf16_layers_at_start, workload.bf16_layers_at_end),
    )
