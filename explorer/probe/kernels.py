"""Timing GEMMs, attention and memory copies on this machine's device with PyTorch.

torch is imported inside the functions, so ``import explorer.probe`` never loads it. Each
point is timed the same way (``Timer``): ``warmup`` untimed calls, then ``repeats`` timed calls,
and the median. On CUDA each call sits between two CUDA events (``elapsed_time`` after the end
event synchronizes); on the CPU ``time.perf_counter`` brackets the call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from explorer.probe.schema import AttentionPoint, BandwidthPoint, GemmPoint
from explorer.probe.sweep import (
    Sweep,
    attention_backward_flops,
    attention_forward_flops,
    gemm_flops,
)

TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True, slots=True)
class Timer:
    """Median seconds of ``fn()`` over ``repeats`` calls after ``warmup`` calls."""

    device: Any
    """A torch.device."""
    warmup: int
    repeats: int

    @property
    def method(self) -> str:
        return "cuda-events" if self.device.type == "cuda" else "perf-counter-synchronize"

    def median_s(
        self, fn: Callable[[], object], setup: Callable[[], object] | None = None
    ) -> float:
        """Median time of ``fn`` (``setup`` runs untimed before each call)."""
        for _ in range(self.warmup):
            if setup:
                setup()
            fn()
        times = []
        for _ in range(self.repeats):
            if setup:
                setup()
            times.append(self._once(fn))
        return statistics.median(times)

    def _once(self, fn: Callable[[], object]) -> float:
        import torch

        if self.device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds
        began = time.perf_counter()
        fn()
        return time.perf_counter() - began


def _gemm_call(dtype: str, m: int, n: int, k: int, device: Any) -> Callable[[], object]:
    import torch

    if dtype == "fp8":
        a = torch.randn(m, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()  # column-major B
        one = torch.ones((), device=device)
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # may raise
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    kind = getattr(torch, TORCH_DTYPES[dtype])
    a = torch.randn(m, k, device=device, dtype=kind)
    b = torch.randn(k, n, device=device, dtype=kind)
    return lambda: torch.matmul(a, b)


def measure_gemms(sweep: Sweep, timer: Timer, skipped: list[str]) -> list[GemmPoint]:
    """Every (dtype, m, width) GEMM of ``sweep``; dtypes the device cannot run go to ``skipped``."""
    import torch

    points: list[GemmPoint] = []
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    for dtype in sweep.gemm_dtypes:
        if dtype == "tf32" and timer.device.type != "cuda":
            skipped.append("tf32: the CPU has no TF32 tensor cores (fp32 measured instead)")
            continue
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        try:
            for width in sweep.gemm_widths:
                for m in sweep.gemm_tokens:
                    call = _gemm_call(dtype, m, width, width, timer.device)
                    seconds = timer.median_s(call)
                    flops_per_s = gemm_flops(m, width, width) / seconds
                    point = GemmPoint(
                        dtype=dtype,  # type: ignore[arg-type]
                        m=m,
                        n=width,
                        k=width,
                        median_s=seconds,
                        flops_per_s=flops_per_s,
                    )
                    points.append(point)
        except (RuntimeError, TypeError, AttributeError, NotImplementedError) as error:
            reason = " ".join(str(error).split())[:160]
            points = [p for p in points if p.dtype != dtype]
            skipped.append(f"{dtype}: GEMMs did not run on this device ({reason})")
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32_before
    return points


def _attention_point(sweep: Sweep, timer: Timer, seq_len: int, head_dim: int) -> AttentionPoint:
    import torch
    import torch.nn.functional as F

    kind = getattr(torch, TORCH_DTYPES[sweep.attention_dtype])
    batch, heads = max(1, sweep.attention_tokens // seq_len), sweep.attention_heads
    shape = (batch, heads, seq_len, head_dim)
    q, k, v = (
        torch.randn(shape, device=timer.device, dtype=kind, requires_grad=True) for _ in range(3)
    )
    grad = torch.randn(shape, device=timer.device, dtype=kind)
    state: dict[str, Any] = {}

    def forward() -> None:
        state["out"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def backward() -> None:
        state["out"].backward(grad)

    forward_s = timer.median_s(forward)
    backward_s = timer.median_s(backward, setup=forward)  # a fresh graph before each backward
    fwd = attention_forward_flops(batch, heads, seq_len, head_dim, causal=True)
    return AttentionPoint(
        dtype=sweep.attention_dtype,  # type: ignore[arg-type]
        batch=batch,
        heads=heads,
        seq_len=seq_len,
        head_dim=head_dim,
        causal=True,
        forward_s=forward_s,
        backward_s=backward_s,
        forward_flops_per_s=fwd / forward_s,
        backward_flops_per_s=attention_backward_flops(fwd) / backward_s,
    )


def measure_attention(sweep: Sweep, timer: Timer) -> list[AttentionPoint]:
    """Causal scaled_dot_product_attention, forward and backward, at each (seq_len, head_dim)."""
    return [
        _attention_point(sweep, timer, seq_len, head_dim)
        for seq_len in sweep.attention_seq_lens
        for head_dim in sweep.attention_head_dims
    ]


def _stream_points(size_bytes: int, timer: Timer) -> list[BandwidthPoint]:
    import torch

    numel = size_bytes // 4
    a, b, c = (torch.rand(numel, device=timer.device) for _ in range(3))
    kernels = {
        "copy": (lambda: b.copy_(a), 2 * numel * 4),
        "triad": (lambda: torch.add(b, c, alpha=3.0, out=a), 3 * numel * 4),
    }
    points = []
    for name, (call, moved) in kernels.items():
        seconds = timer.median_s(call)
        points.append(
            BandwidthPoint(
                kernel=name,  # type: ignore[arg-type]
                size_bytes=moved,
                median_s=seconds,
                bytes_per_s=moved / seconds,
            )
        )
    return points


def measure_bandwidth(sweep: Sweep, timer: Timer) -> list[BandwidthPoint]:
    """STREAM's copy (b = a) and triad (a = b + s c) on fp32 buffers of each size.

    Source for the kernels and their byte counts: McCalpin, STREAM benchmark (copy moves 2
    words per element, triad 3).
    """
    return [point for size in sweep.memory_bytes for point in _stream_points(size, timer)]
