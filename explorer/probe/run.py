"""One probe run: pick the device, join torchrun's process group when there is one, measure.

torch is imported inside ``probe``. Under ``torchrun`` with more than one rank every rank
measures its own GPU's kernels at the same time (a node under load, as in training) and then
the collectives together; rank 0's kernels and the slowest rank's collective times are kept.
"""

from __future__ import annotations

import os
import platform
import time
from datetime import UTC, datetime
from typing import Any

from explorer.probe.schema import SCHEMA, SCHEMA_VERSION, Calibration, Timing
from explorer.probe.sweep import sweep_for


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return "CPU " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU " + (platform.processor() or platform.machine() or "unknown")


def _device() -> tuple[Any, str]:
    import torch

    if torch.cuda.is_available():
        index = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(index)
        return torch.device("cuda", index), torch.cuda.get_device_name(index)
    return torch.device("cpu"), _cpu_name()


def _join_group(device: Any) -> tuple[int, str]:
    """(world size, backend) after joining torchrun's group; (1, "") when run alone."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 1, ""
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return dist.get_world_size(), backend


def rank() -> int:
    """This process's rank under torchrun (0 when run alone)."""
    return int(os.environ.get("RANK", "0"))


def probe(quick: bool = False) -> Calibration:
    """Measure this machine (GEMMs, attention, memory bandwidth, collectives under torchrun)."""
    import torch

    from explorer.probe.collectives import measure_collectives
    from explorer.probe.kernels import Timer, measure_attention, measure_bandwidth, measure_gemms

    began = time.perf_counter()
    device, name = _device()
    kind = device.type
    sweep = sweep_for(kind, quick)
    world, backend = _join_group(device)
    timer = Timer(device, sweep.warmup, sweep.repeats)
    skipped: list[str] = []
    if kind == "cpu":
        skipped.append("fp8: not measured on the CPU (torch._scaled_mm needs FP8 tensor cores)")
    gemm = measure_gemms(sweep, timer, skipped)
    attention = measure_attention(sweep, timer)
    memory = measure_bandwidth(sweep, timer)
    if world > 1:
        import torch.distributed as dist

        collective = measure_collectives(sweep, device, skipped)
        dist.barrier()
        dist.destroy_process_group()
    else:
        collective = []
        skipped.append("collectives: run alone; run under torchrun with 2 or more ranks")
    return Calibration.model_validate(
        {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "kind": kind,
            "device_name": name,
            "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda or "",
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "quick": quick,
            "world_size": world,
            "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", world)),
            "backend": backend,
            "elapsed_s": time.perf_counter() - began,
            "skipped": skipped,
            "timing": Timing(method=timer.method, warmup=sweep.warmup, repeats=sweep.repeats),  # type: ignore[arg-type]
            "gemm": gemm,
            "attention": attention,
            "memory": memory,
            "collective": collective,
        }
    )
