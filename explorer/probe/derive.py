"""From measured points to overrides of the estimate's named assumptions. Pure.

``training_figures`` and ``serving_figures`` are the single place where a probe file becomes
assumption values; each ``CalibratedFigure`` names its override key (as ``--assume`` names it),
its value and the measurement it came from. Methods:

- GEMM efficiency: the median, over the measured shapes, of the measured share of the preset's
  dense peak over the kernel model's share at the same shape (explorer.compute.gemm), as
  ``compute.gemm_efficiency_scale``: a scale of the user's own GPUs, not a fit to a published
  run. ``fit_saturating`` (a saturating curve by least squares) stays for curve summaries.
- attention efficiency: the largest measured sequence, forward plus backward, FLOPs counted as
  the core counts them (causal half, backward = 2.5 x forward) over the measured time and peak.
- HBM efficiency: the best copy / triad bandwidth at the largest buffer over the preset's HBM.
- link efficiency: the all-reduce bus bandwidth at the largest message over the link peak: the
  fast links when the probe ran on one node, the fabric (NIC per GPU) when on several.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from explorer.compute.assumptions import DEFAULT_COMPUTE_ASSUMPTIONS
from explorer.compute.attention import BACKWARD_FLOPS_RATIO
from explorer.compute.gemm import gemm_efficiency, peak_flops_per_s
from explorer.probe.schema import Calibration, CalibrationError, GemmPoint
from explorer.specs import ClusterSpec

HALF_SIZE_GRID = tuple(10 ** (2 + i / 40) for i in range(401))
"""x_half candidates of the fit: 1e2 to 1e12 elements, 40 per decade."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibratedFigure:
    """One assumption set from a probe file."""

    key: str
    """The override key, as ``--assume`` and the report name it (``compute.max_efficiency``)."""
    value: float
    measurement: str
    """One sentence: what was measured and how the value follows from it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibratedFigures:
    """Every figure a probe file sets, and what it could not set."""

    device_name: str
    figures: tuple[CalibratedFigure, ...]
    notes: tuple[str, ...] = ()
    """One sentence per assumption left at its default, or value clamped, and why."""

    def overrides(self) -> dict[str, float]:
        return {f.key: f.value for f in self.figures}

    def provenance(self) -> tuple[tuple[str, str], ...]:
        """(key, measurement) pairs, as the scenario carries them."""
        return tuple((f.key, f.measurement) for f in self.figures)


# ------------------------------------------------------------------------- device check


def device_matches(device_name: str, gpu_id: str) -> bool:
    """Whether a probe's device name names the preset's GPU: the preset id's model token
    (h100-sxm -> H100, gb200 -> GB200) is one of the name's words (NVIDIA H100 80GB HBM3)."""
    token = gpu_id.split("-")[0].upper()
    return token in re.split(r"[^A-Z0-9]+", device_name.upper())


def check_device(calibration: Calibration, gpu_id: str, gpu_name: str, force: bool) -> None:
    """CalibrationError (one sentence) when the file was measured on another device."""
    if force or device_matches(calibration.device_name, gpu_id):
        return
    raise CalibrationError(
        f"the calibration file was measured on {calibration.device_name!r}, not on the chosen "
        f"GPU {gpu_id} ({gpu_name}); pick that GPU, or pass --calibration-force to use it anyway"
    )


# ---------------------------------------------------------------------------- GEMM fit


def fit_saturating(sizes: Sequence[float], shares: Sequence[float]) -> tuple[float, float, float]:
    """(e_max, x_half, rms residual) of e = e_max x / (x + x_half) fitted to the points.

    Least squares with e_max <= 1: for each x_half of ``HALF_SIZE_GRID`` the best e_max is
    min(1, sum(e g) / sum(g^2)) with g = x / (x + x_half) (the residual is quadratic in e_max,
    so the clamp is the constrained optimum); the pair with the smallest residual is kept.
    """
    best = (math.inf, 0.0, 0.0)
    for half in HALF_SIZE_GRID:
        g = [x / (x + half) for x in sizes]
        e_max = min(
            1.0, sum(e * gi for e, gi in zip(shares, g, strict=True)) / sum(gi * gi for gi in g)
        )
        sse = sum((e - e_max * gi) ** 2 for e, gi in zip(shares, g, strict=True))
        if sse < best[0]:
            best = (sse, e_max, half)
    sse, e_max, half = best
    return e_max, half, math.sqrt(sse / len(sizes))


def _gemm_points(calibration: Calibration, compute: str) -> tuple[str, tuple[GemmPoint, ...]]:
    """The measured dtype that stands for the core's GEMM format, and its points."""
    choices = {"bf16": ("bf16", "fp16"), "fp8": ("fp8",), "tf32": ("tf32", "fp32")}.get(
        compute, (compute,)
    )  # fp4: a file's fp4 points, when a probe measures them
    for dtype in choices:
        points = calibration.gemm_points(dtype)
        if points:
            return dtype, points
    return "", ()


def _clamped(key: str, value: float, notes: list[str]) -> float:
    if value > 1:
        notes.append(
            f"{key}: measured {value:.3f} of the preset's peak, above 1; set to 1 "
            "(the preset's peak is lower than this device reaches)"
        )
        return 1.0
    return value


def gemm_figures(
    calibration: Calibration, cluster: ClusterSpec, compute: str, notes: list[str]
) -> list[CalibratedFigure]:
    """compute.gemm_efficiency_scale from the GEMM points: the median over the measured shapes
    of the measured share of the preset's dense peak over the kernel model's share at that
    shape (explorer.compute.gemm, the preset's anchors, roofline at the default achievable
    HBM bandwidth). 1 means the device runs as the preset's published figures say."""
    dtype, points = _gemm_points(calibration, compute)
    if not points:
        notes.append(
            f"compute.gemm_efficiency_scale: no {compute} GEMMs in the file; left at default"
        )
        return []
    gpu = cluster.gpu
    peak = peak_flops_per_s(gpu, compute)
    bandwidth = gpu.hbm_bytes_per_s * DEFAULT_COMPUTE_ASSUMPTIONS.hbm_efficiency
    shares = [p.flops_per_s / peak for p in points]
    modelled = [gemm_efficiency(p.m, p.n, p.k, compute, gpu, bandwidth) for p in points]
    ratios = sorted(s / e for s, e in zip(shares, modelled, strict=True))
    scale = statistics.median(ratios)
    source = (
        f"{len(points)} {dtype} GEMMs reached {min(shares):.1%} to {max(shares):.1%} of the "
        f"{peak / 1e12:,.1f} TFLOP/s dense {compute} peak, {ratios[0]:.3f} to {ratios[-1]:.3f} "
        "of the kernel model's share at the same shapes"
    )
    return [
        CalibratedFigure(
            key="compute.gemm_efficiency_scale",
            value=scale,
            measurement=f"median of measured / modelled GEMM efficiency: {source}",
        )
    ]


def gemm_ceiling(
    calibration: Calibration, cluster: ClusterSpec, compute: str
) -> CalibratedFigure | None:
    """The best measured share of the dense peak (the serving model's prefill ceiling)."""
    dtype, points = _gemm_points(calibration, compute)
    if not points:
        return None
    peak = peak_flops_per_s(cluster.gpu, compute)
    best = max(points, key=lambda p: p.flops_per_s)
    return CalibratedFigure(
        key="serving.prefill_compute_efficiency",
        value=min(1.0, best.flops_per_s / peak),
        measurement=f"the best of {len(points)} {dtype} GEMMs ({best.m} x {best.n} x {best.k}): "
        f"{best.flops_per_s / 1e12:,.1f} of the {peak / 1e12:,.1f} TFLOP/s dense {compute} peak",
    )


# ------------------------------------------------------------------ attention, HBM, links


def attention_figure(
    calibration: Calibration, cluster: ClusterSpec, notes: list[str]
) -> CalibratedFigure | None:
    """compute.attention_efficiency from the longest measured sequence, forward + backward."""
    if not calibration.attention:
        return None
    longest = max(p.seq_len for p in calibration.attention)
    points = [p for p in calibration.attention if p.seq_len == longest]
    compute = "bf16" if points[0].dtype in ("bf16", "fp16") else "tf32"
    peak = peak_flops_per_s(cluster.gpu, compute)
    # the core's count: forward as measured (causal half), backward 2.5 x forward (it
    # recomputes the scores: explorer.compute.attention) -> 3.5 x forward
    ratio = 1 + BACKWARD_FLOPS_RATIO
    flops = sum(ratio * p.forward_flops_per_s * p.forward_s for p in points)
    seconds = sum(p.forward_s + p.backward_s for p in points)
    share = flops / seconds / peak
    dims = ", ".join(str(p.head_dim) for p in points)
    return CalibratedFigure(
        key="compute.attention_efficiency",
        value=_clamped("compute.attention_efficiency", share, notes),
        measurement=f"causal scaled_dot_product_attention, sequence {longest:,}, head dims "
        f"{dims}, forward + backward: {flops / seconds / 1e12:,.1f} TFLOP/s (forward FLOPs x 3.5, "
        f"as the core counts) of the {peak / 1e12:,.1f} TFLOP/s {compute} peak",
    )


def hbm_figure(
    calibration: Calibration, cluster: ClusterSpec, key: str, notes: list[str]
) -> CalibratedFigure | None:
    """``key`` (an hbm_efficiency) from the best copy / triad at the largest buffer."""
    if not calibration.memory:
        return None
    largest = max(p.size_bytes for p in calibration.memory)
    best = max(
        (p for p in calibration.memory if p.size_bytes == largest), key=lambda p: p.bytes_per_s
    )
    share = best.bytes_per_s / cluster.gpu.hbm_bytes_per_s
    return CalibratedFigure(
        key=key,
        value=_clamped(key, share, notes),
        measurement=f"{best.kernel} of {largest / 1e9:,.3f} GB moved: "
        f"{best.bytes_per_s / 1e9:,.1f} GB/s of the preset's "
        f"{cluster.gpu.hbm_bytes_per_s / 1e9:,.0f} GB/s HBM",
    )


def link_figure(
    calibration: Calibration, cluster: ClusterSpec, prefix: str, notes: list[str]
) -> CalibratedFigure | None:
    """``{prefix}links.scale_up`` (one node) or ``.scale_out`` (several) from the all-reduce
    bus bandwidth at the largest message (another collective when all-reduce is absent)."""
    for kind in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all"):
        points = calibration.busbw_points(kind)
        if points:
            break
    else:
        return None
    size, busbw = points[-1]
    one_node = calibration.num_nodes == 1
    link = "scale_up" if one_node else "scale_out"
    peak = cluster.fast_bytes_per_s if one_node else cluster.scale_out_bytes_per_s
    where = "the fast links" if one_node else "the fabric (per GPU)"
    return CalibratedFigure(
        key=f"{prefix}links.{link}",
        value=_clamped(f"{prefix}links.{link}", busbw / peak, notes),
        measurement=f"{kind} of {size / 2**20:,.0f} MiB on {calibration.world_size} ranks "
        f"({calibration.num_nodes} node(s)): busbw {busbw / 1e9:,.1f} GB/s of {where}' "
        f"{peak / 1e9:,.0f} GB/s",
    )


def training_figures(
    calibration: Calibration, cluster: ClusterSpec, compute: str
) -> CalibratedFigures:
    """Overrides of the training estimate's assumptions (``compute.*``, ``comm.links.*``)
    that ``calibration`` measured, for GEMMs in the ``compute`` format (bf16, fp8, tf32)."""
    notes: list[str] = []
    figures = gemm_figures(calibration, cluster, compute, notes)
    for figure in (
        attention_figure(calibration, cluster, notes),
        hbm_figure(calibration, cluster, "compute.hbm_efficiency", notes),
        link_figure(calibration, cluster, "comm.", notes),
    ):
        if figure is not None:
            figures.append(figure)
    if not calibration.collective:
        notes.append("comm.links: no collectives in the file (run the probe under torchrun)")
    return CalibratedFigures(
        device_name=calibration.device_name, figures=tuple(figures), notes=tuple(notes)
    )


def serving_figures(calibration: Calibration, cluster: ClusterSpec) -> CalibratedFigures:
    """Overrides of the serving model's assumptions (``serving.*``): prefill efficiency from
    the GEMM fit's ceiling, HBM and link efficiency as for training. The decode efficiency is
    left: decode is bound by HBM, and its GEMM shape depends on the batch being served."""
    notes: list[str] = []
    figures = []
    ceiling = gemm_ceiling(calibration, cluster, "bf16")
    if ceiling is not None:
        figures.append(ceiling)
    for figure in (
        hbm_figure(calibration, cluster, "serving.hbm_efficiency", notes),
        link_figure(calibration, cluster, "serving.", notes),
    ):
        if figure is not None:
            figures.append(figure)
    return CalibratedFigures(
        device_name=calibration.device_name, figures=tuple(figures), notes=tuple(notes)
    )
