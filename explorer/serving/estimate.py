"""One serving layout at one concurrency per replica: memory fit, latency and throughput."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from explorer.memory.serving import (
    MemoryAssumptions,
    ServingLayout,
    ServingMemory,
    kv_bytes_per_token,
    max_concurrency,
    serving_memory,
    stage_shapes,
)
from explorer.serving.assumptions import ServingAssumptions
from explorer.serving.drafts import Speculation, extra_bytes
from explorer.serving.latency import Roofline, memory_bound_tokens_per_s, replica_latency
from explorer.serving.layouts import layout_warnings
from explorer.specs import ClusterSpec, GpuSpec, ModelSpec, ServingWorkload
from explorer.units import GiB


@dataclass(frozen=True, slots=True)
class ServingEstimate:
    """One serving layout at one concurrency per replica: memory, latency and throughput."""

    layout: ServingLayout
    concurrency: int
    fits: bool
    reason: str
    """Why it does not fit ('' when it does)."""
    warnings: tuple[str, ...]
    memory: ServingMemory
    max_concurrency: int
    """Most sequences per replica the memory holds at prompt + output tokens each."""
    kv_bytes_per_token: float
    """Whole-model KV bytes per token (one copy, before TP)."""
    kv_bytes_per_token_per_gpu: float
    """KV bytes per token one GPU holds (its stage's blocks, its share or copy of the heads)."""
    prefill: Roofline
    """One prefill chunk on the slowest stage."""
    decode: Roofline
    """One decode micro-batch on the slowest stage."""
    ttft_s: float | None
    """Time to first token; None when the layout does not fit (as are the next three)."""
    decode_step_s: float | None
    """Time between a sequence's tokens without prefill interference."""
    itl_s: float | None
    """Mean inter-token latency with the prompts of new requests mixed into decode steps."""
    tokens_per_s: float | None
    """Output tokens per second, all replicas."""
    memory_bound_tokens_per_s: float
    """Upper bound on output tokens/s from HBM bandwidth alone (whole-model bytes read)."""

    @property
    def tokens_per_s_per_gpu(self) -> float | None:
        if self.tokens_per_s is None:
            return None
        return self.tokens_per_s / self.layout.world_size


def fitted(value: float | None) -> float:
    """A latency or throughput of a layout known to fit (they are None only when it does not)."""
    if value is None:
        raise ValueError("latency and throughput exist only for a layout that fits")
    return value


def _fit_reason(memory: ServingMemory, capacity: float, most: int, wanted: int) -> str:
    """Why the memory does not fit ('' when it does), in words and GiB."""
    fixed = memory.total - memory.kv_cache
    if fixed > capacity:
        return (
            f"weights ({memory.weights / GiB:.1f} GiB) with workspace, runtime and headroom "
            f"need {fixed / GiB:.1f} GiB of the GPU's {capacity / GiB:.1f} GiB"
        )
    if most < wanted:
        return f"the KV cache holds {most} sequences per replica, fewer than the {wanted} requested"
    return ""


@lru_cache(maxsize=4096)
def _max_concurrency(
    model: ModelSpec,
    gpu: GpuSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    memory: MemoryAssumptions,
) -> int:
    """``max_concurrency``, kept per layout and lengths (it does not depend on the workload's
    concurrency, which a frontier sweeps)."""
    return max_concurrency(model, gpu, layout, workload, memory)


def estimate_serving(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: ServingLayout,
    workload: ServingWorkload,
    assumptions: ServingAssumptions | None = None,
    speculation: Speculation | None = None,
) -> ServingEstimate:
    """Memory, TTFT, ITL and output tokens/s of one valid layout at the workload's concurrency
    per replica. Source: the model in explorer.serving.latency's docstring. With
    ``speculation`` the decode verifies drafted tokens (explorer.serving.speculative) and the
    draft's weights and KV cache must fit beside the workload's sequences."""
    a = assumptions or ServingAssumptions()
    memory = serving_memory(model, cluster.gpu, layout, workload, a.memory)
    most = _max_concurrency(model, cluster.gpu, layout, replace(workload, concurrency=1), a.memory)
    t = replica_latency(model, cluster, layout, workload, a, speculation)
    shapes = stage_shapes(model, layout, workload.weights_dtype, workload.kv_dtype, a.memory)
    reason = _fit_reason(memory, cluster.gpu.memory_bytes, most, workload.concurrency)
    if not reason and speculation is not None and speculation.draft_tokens > 0:
        extra = extra_bytes(model, layout, workload, speculation, a)
        if memory.total + extra > cluster.gpu.memory_bytes:
            reason = (
                f"the draft's weights and KV cache ({extra / GiB:.1f} GiB a GPU) do not fit "
                f"beside {workload.concurrency} sequences per replica"
            )
    fits = not reason  # latency and throughput only for a layout that runs

    def shown(value: float) -> float | None:
        return value if fits else None

    return ServingEstimate(
        layout=layout,
        concurrency=workload.concurrency,
        fits=fits,
        reason=reason,
        warnings=layout_warnings(model, cluster, layout),
        memory=memory,
        max_concurrency=most,
        kv_bytes_per_token=kv_bytes_per_token(model, workload.kv_dtype),
        kv_bytes_per_token_per_gpu=max(s.kv_bytes_per_token for s in shapes),
        prefill=t.prefill,
        decode=t.decode,
        ttft_s=shown(t.ttft_s),
        decode_step_s=shown(t.decode_step_s),
        itl_s=shown(t.itl_s),
        tokens_per_s=shown(layout.replicas * t.decoding / t.itl_s),
        memory_bound_tokens_per_s=memory_bound_tokens_per_s(
            model, cluster, layout, workload, a.memory
        ),
    )
