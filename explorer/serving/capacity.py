"""Which layouts fit a model on N GPUs, how many concurrent users each holds at which context,
and why, in sentences and a table, every number from the plan and the memory model.

A user holds one sequence of ``context`` tokens (prompt + output) in the paged KV cache;
a layout holds ``max_concurrency`` of them per replica (explorer.memory.serving) times its
replicas. The seeds' case, DeepSeek-R1 671B on 2 x 8 H100, runs on the deepseek-v3 preset:
R1 has DeepSeek-V3's architecture (same config.json shapes; it differs in its weights).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.memory.serving import kv_bytes_per_token, max_concurrency, serving_memory
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.estimate import ServingEstimate
from explorer.serving.planner import ServingPlan
from explorer.specs import ClusterSpec, ModelSpec, ServingWorkload
from explorer.units import GiB

CONTEXTS: tuple[int, ...] = (4096, 32_768, 131_072)
"""Tokens a user holds (prompt + output) at which the table counts users: a chat turn, a long
document, DeepSeek-V3's and Llama 3.1's 128K window."""


@dataclass(frozen=True, slots=True)
class CapacityRow:
    """One layout: its memory per GPU and the users it holds at each context."""

    estimate: ServingEstimate
    weights_bytes: float
    """Weights per GPU (heaviest stage)."""
    kv_free_bytes: float
    """Memory per GPU left for the KV cache with one sequence's logits and nothing cached:
    capacity less weights, workspace, buffers, runtime and headroom."""
    kv_bytes_per_token_per_gpu: float
    users: tuple[tuple[int, int], ...]
    """(context tokens, users all replicas hold at that context)."""

    @property
    def label(self) -> str:
        return self.estimate.layout.label

    def users_at(self, context: int) -> int:
        return dict(self.users)[context]


def _at_context(workload: ServingWorkload, context: int) -> ServingWorkload:
    """The workload with ``context`` tokens a user: its output length kept when shorter."""
    output = min(workload.output_len, context - 1)
    return replace(workload, prompt_len=context - output, output_len=output, concurrency=1)


def capacity_rows(
    model: ModelSpec,
    cluster: ClusterSpec,
    plan: ServingPlan,
    workload: ServingWorkload,
    assumptions: ServingAssumptions | None = None,
    contexts: tuple[int, ...] = CONTEXTS,
) -> tuple[CapacityRow, ...]:
    """Every valid layout of ``plan`` with its users at each context, most users first (at
    the longest context, then the first)."""
    a = assumptions or ServingAssumptions()
    rows = []
    for e in plan.layouts:
        lay = e.layout
        one = replace(workload, concurrency=1)
        mem = serving_memory(model, cluster.gpu, lay, one, a.memory)
        users = tuple(
            (
                c,
                max_concurrency(model, cluster.gpu, lay, _at_context(workload, c), a.memory)
                * lay.replicas,
            )
            for c in contexts
        )
        rows.append(
            CapacityRow(
                estimate=e,
                weights_bytes=mem.weights,
                kv_free_bytes=cluster.gpu.memory_bytes - (mem.total - mem.kv_cache),
                kv_bytes_per_token_per_gpu=e.kv_bytes_per_token_per_gpu,
                users=users,
            )
        )
    rows.sort(key=lambda r: tuple(-n for _, n in reversed(r.users)))
    return tuple(rows)


def _users_phrase(row: CapacityRow) -> str:
    return ", ".join(f"{n:,} at {c // 1024}K tokens" for c, n in row.users)


def capacity_sentences(
    model: ModelSpec,
    cluster: ClusterSpec,
    rows: tuple[CapacityRow, ...],
    workload: ServingWorkload,
) -> tuple[str, ...]:
    """Which layouts fit, how many users the best hold at each context, and why (numbers
    from ``rows``, themselves from the plan and the memory model)."""
    gpu = cluster.gpu
    capacity = gpu.memory_bytes / GiB
    if not rows:
        return ("No layout is valid on these GPUs.",)
    holding = [r for r in rows if r.users[0][1] > 0]
    none = [r for r in rows if r.users[0][1] == 0]
    first = rows[0].users[0][0]
    out = [
        f"{len(holding)} of {len(rows)} valid layouts hold a user at {first // 1024}K tokens "
        f"on {rows[0].estimate.layout.world_size} x {gpu.name} ({capacity:.1f} GiB each), "
        f"{model.name} weights in {workload.weights_dtype}, KV cache in {workload.kv_dtype}."
    ]
    if none:
        near = max(none, key=lambda r: r.kv_free_bytes)  # the closest to fitting
        need = gpu.memory_bytes - near.kv_free_bytes
        out.append(
            f"The {len(none)} others do not fit: the closest, {near.label}, needs "
            f"{need / GiB:.1f} GiB a GPU before any KV cache (weights "
            f"{near.weights_bytes / GiB:.1f} GiB) of the {capacity:.1f} GiB."
        )
    if not holding:
        return tuple(out)
    best = holding[0]
    out.append(
        f"Most users: {best.label}, {_users_phrase(best)}; each GPU keeps "
        f"{best.kv_free_bytes / GiB:.1f} GiB for the KV cache after {best.weights_bytes / GiB:.1f}"
        f" GiB of weights, at {best.kv_bytes_per_token_per_gpu:,.0f} bytes a token a GPU."
    )
    whole = kv_bytes_per_token(model, workload.kv_dtype)
    split = (
        "one latent a token shared by all heads, kept whole on every TP rank"
        if model.is_mla
        else f"{model.kv_heads} K/V heads split over TP (copied past {model.kv_heads})"
    )
    most_tp = max(holding, key=lambda r: (r.estimate.layout.tp, -r.users[0][1]))
    if most_tp is not best:
        out.append(
            f"Why: a token's KV cache is {whole:,.0f} bytes over all {model.num_hidden_layers} "
            f"blocks ({split}); pipeline stages split it by blocks and attention data-parallel "
            f"groups (EP) by users, so {most_tp.label} keeps "
            f"{most_tp.kv_bytes_per_token_per_gpu:,.0f} bytes a token a GPU and holds "
            f"{_users_phrase(most_tp)}."
        )
    fitting = [r for r in rows if r.estimate.tokens_per_s is not None]
    if fitting:
        fast = max(fitting, key=lambda r: r.estimate.tokens_per_s or 0.0)
        e = fast.estimate
        out.append(
            f"Most output tokens/s at {e.concurrency} users a replica: {fast.label} "
            f"({e.tokens_per_s:,.0f} tokens/s, {e.tokens_per_s_per_gpu or 0.0:,.1f} a GPU), "
            f"which holds {_users_phrase(fast)}."
        )
    return tuple(out)
