"""GEMM efficiency by shape and format: achieved share of the format's dense tensor-core peak.

C (m x n) = A (m x k) B (k x n) runs as output tiles of tile_m x tile_n spread over the SMs in
waves; each tile loops over k. Three named losses (NVIDIA, "Matrix Multiplication Background"
user's guide, ch. 3: tile and wave quantisation):
- tile quantisation: m and n are padded up to whole tiles;
- wave quantisation: the last wave of tiles leaves SMs idle (tiles / (waves x SMs));
- depth: every tile spends ``k_overhead`` k-elements' worth of time outside its main loop, so a
  shallow k (TP-split FFN width, MLA's low-rank projections) runs at k / (k + k_overhead).
The kernel may choose a tile of tile_m x tile_n, its transpose or half of it (128 x 128); the
best is taken. The product is a shape factor; a measured GEMM of the same format (the GPU
preset's maximum-achievable-matmul figure, or a user's calibration points) anchors it:
efficiency = measured x factor(shape) / factor(measured shape), at most 1. The measured point is
reproduced exactly; where the shape differs only the model's losses move it. Clocks: the
measured figures ran at whatever clock the GPU held under that load (power-limited, not the
boost clock), so the anchor carries the sustained clock. Finally the roofline (Williams et al.
2009, CACM 52(4)): a GEMM cannot beat its HBM traffic over achievable bandwidth (decode,
one-token micro-batches).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache

from explorer.specs import GemmDType, GemmPoint, GpuSpec, KernelFigures

GENERIC_KERNELS = KernelFigures(num_sms=132, source="H100-like defaults")
"""Kernel figures of a GPU without any (a custom GPU): H100 SXM's SM count and tile."""
GENERIC_CEILING = 0.8
"""Large-GEMM share of peak where no measurement exists. Source: ml-engineering MAMF table,
BF16 across NVIDIA A100-B200: 73-87% (H100 SXM 80.3%)."""


def kernel_figures(gpu: GpuSpec) -> KernelFigures:
    """The GPU's kernel figures, or the generic ones."""
    return gpu.kernels or GENERIC_KERNELS


def with_measured_gemms(gpu: GpuSpec, points: Iterable[GemmPoint]) -> GpuSpec:
    """``gpu`` with measured GEMMs (a calibration file's, ``probe``'s) added to its anchors; a
    point of the same shape and format replaces the preset's. Every GEMM then follows the
    nearest measured point of its format (``gemm_efficiency``)."""
    figures = kernel_figures(gpu)
    new = tuple(points)
    shapes = {(p.m, p.n, p.k, p.dtype) for p in new}
    kept = tuple(p for p in figures.gemms if (p.m, p.n, p.k, p.dtype) not in shapes)
    return replace(gpu, kernels=replace(figures, gemms=kept + new))


def _waves_share(tiles: int, sms: int) -> float:
    """Busy share of SM-slots over all waves: tiles / (ceil(tiles / sms) x sms)."""
    return tiles / (math.ceil(tiles / sms) * sms)


def quantisation_share(m: float, n: float, figures: KernelFigures) -> float:
    """Share of the tile slots that do useful work, best over the kernel's tile choices:
    (m n / padded area) x wave share. Source: module docstring (tile and wave quantisation)."""
    tm, tn = figures.tile_m, figures.tile_n
    best = 0.0
    for rows, cols in ((tm, tn), (tn, tm), (tm, tm)):
        tiles_m, tiles_n = math.ceil(m / rows), math.ceil(n / cols)
        padded = m * n / (tiles_m * rows * tiles_n * cols)
        best = max(best, padded * _waves_share(tiles_m * tiles_n, figures.num_sms))
    return best


def shape_factor(m: float, n: float, k: float, dtype: str, figures: KernelFigures) -> float:
    """Tile, wave and depth losses of one GEMM shape, a share in (0, 1]."""
    overhead = figures.fp8_k_overhead if dtype == "fp8" else figures.k_overhead
    return quantisation_share(m, n, figures) * k / (k + overhead)


def _anchor(
    m: float, n: float, k: float, dtype: str, points: tuple[GemmPoint, ...]
) -> GemmPoint | None:
    """The measured point of the same format (else BF16's) closest in log-shape."""
    same = [p for p in points if p.dtype == dtype] or [p for p in points if p.dtype == "bf16"]
    if not same:
        return None

    def distance(p: GemmPoint) -> float:
        return sum(math.log(a / b) ** 2 for a, b in ((m, p.m), (n, p.n), (k, p.k)))

    return min(same, key=distance)


@lru_cache(maxsize=65536)
def gemm_efficiency(
    m: float,
    n: float,
    k: float,
    dtype: GemmDType,
    gpu: GpuSpec,
    bandwidth_bytes_per_s: float | None = None,
) -> float:
    """Achieved share of ``dtype``'s dense peak for one m x n x k GEMM on ``gpu``.

    The shape model anchored on the nearest measured GEMM (the GPU preset's figures plus any
    calibration points in ``gpu.kernels.gemms``), then the roofline at
    ``bandwidth_bytes_per_s`` (achievable HBM bandwidth; None: no roofline). Source: module
    docstring.
    """
    if min(m, n, k) <= 0:
        raise ValueError(f"GEMM dimensions must be positive, got {m} x {n} x {k}")
    figures = kernel_figures(gpu)
    factor = shape_factor(m, n, k, dtype, figures)
    anchor = _anchor(m, n, k, dtype, figures.gemms)
    if anchor is None:
        base = GENERIC_CEILING * factor
    else:
        at_anchor = shape_factor(anchor.m, anchor.n, anchor.k, dtype, figures)
        base = min(1.0, anchor.efficiency * factor / at_anchor)
    if bandwidth_bytes_per_s is None:
        return base
    return min(base, roofline_share(m, n, k, dtype, gpu, bandwidth_bytes_per_s))


def roofline_share(
    m: float, n: float, k: float, dtype: str, gpu: GpuSpec, bandwidth_bytes_per_s: float
) -> float:
    """Largest share of peak the GEMM's HBM traffic allows: FLOPs / (bytes / bandwidth) / peak.

    Ledger: read A (m k) and B (k n) in the input format (1 byte FP8, 2 BF16, 4 TF32), write C
    (m n) in BF16. Source: the roofline model (Williams et al. 2009).
    """
    width = {"fp8": 1, "tf32": 4}.get(dtype, 2)
    moved = width * (m * k + k * n) + 2 * m * n
    seconds = moved / bandwidth_bytes_per_s
    return 2 * m * n * k / seconds / peak_flops_per_s(gpu, dtype)


def peak_flops_per_s(gpu: GpuSpec, compute: str) -> float:
    """Dense tensor-core peak of ``gpu`` for a GEMM format (tf32, bf16, fp8), FLOP/s.

    The rate MFU and HFU are defined on. Source: vendor data sheets via GpuSpec; TF32 defaults
    to half of BF16 and FP8 without tensor cores falls back to BF16.
    """
    if compute == "fp8" and gpu.fp8_flops_per_s:
        return gpu.fp8_flops_per_s
    if compute == "tf32":
        return gpu.tf32_flops_per_s or gpu.bf16_flops_per_s / 2
    return gpu.bf16_flops_per_s
