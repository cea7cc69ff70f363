"""Bus bandwidth of NCCL (or gloo) collectives by message size, under torchrun.

torch is imported inside the functions. Each (collective, size) point: ``warmup`` untimed calls,
then ``repeats`` calls each timed on every rank with ``time.perf_counter`` around the call and
a device synchronize (a barrier first, so the ranks start together); a rank's median, then the
slowest rank's (an all-reduce MAX), as nccl-tests reports the slowest rank. busbw follows
nccl-tests (doc/PERFORMANCE.md): algbw = size / time, busbw = algbw x ``bus_factor``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from explorer.probe.schema import CollectiveName, CollectivePoint
from explorer.probe.sweep import Sweep, bus_factor

KINDS: tuple[CollectiveName, ...] = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


def _call(kind: str, size_bytes: int, world: int, device: Any) -> Callable[[], object]:
    """One collective of nccl-tests' ``size_bytes`` (fp32 elements) on the default group."""
    import torch
    import torch.distributed as dist

    numel = max(world, size_bytes // 4 // world * world)  # a multiple of the ranks
    full = torch.ones(numel, device=device)
    shard = torch.ones(numel // world, device=device)
    if kind == "all-reduce":
        return lambda: dist.all_reduce(full)
    # torch 2.13 renames the *_into_tensor / *_tensor calls *_single (same arguments)
    gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
    scatter = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
    if kind == "all-gather":
        return lambda: gather(full, shard)
    if kind == "reduce-scatter":
        return lambda: scatter(shard, full)
    out = torch.empty_like(full)
    return lambda: dist.all_to_all_single(out, full)


def _synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _slowest_median_s(call: Callable[[], object], sweep: Sweep, device: Any) -> float:
    import torch
    import torch.distributed as dist

    for _ in range(sweep.warmup):
        call()
    _synchronize(device)
    times = []
    for _ in range(sweep.repeats):
        dist.barrier()
        began = time.perf_counter()
        call()
        _synchronize(device)
        times.append(time.perf_counter() - began)
    slowest = torch.tensor([statistics.median(times)], device=device, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return float(slowest.item())


def measure_collectives(sweep: Sweep, device: Any, skipped: list[str]) -> list[CollectivePoint]:
    """Every collective at every size of ``sweep`` on the default process group (all ranks
    call this together); a collective the backend lacks is left out and named in ``skipped``."""
    import torch.distributed as dist

    world = dist.get_world_size()
    points: list[CollectivePoint] = []
    for kind in KINDS:
        try:
            for size in sweep.collective_bytes:
                call = _call(kind, size, world, device)
                size_bytes = float(max(world, size // 4 // world * world) * 4)
                seconds = _slowest_median_s(call, sweep, device)
                algbw = size_bytes / seconds
                points.append(
                    CollectivePoint(
                        kind=kind,
                        size_bytes=size_bytes,
                        num_ranks=world,
                        median_s=seconds,
                        algbw_bytes_per_s=algbw,
                        busbw_bytes_per_s=algbw * bus_factor(kind, world),
                    )
                )
        except (RuntimeError, NotImplementedError) as error:  # e.g. gloo without reduce-scatter
            points = [p for p in points if p.kind != kind]
            reason = " ".join(str(error).split())[:160]
            skipped.append(f"{kind}: not measured on backend {dist.get_backend()} ({reason})")
    return points
