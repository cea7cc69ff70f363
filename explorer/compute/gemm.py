"""GEMM efficiency by shape and format: achieved share of the format's dense tensor-core peak.

C (m x n) = A (m x k) B (k x n) runs as output tiles of tile_m x tile_n spread over the SMs in
waves; each tile loops over k. The time of one GEMM (NVIDIA, "Matrix Multiplication
Background" user's guide, ch. 3: tile and wave quantisation):
- main loop: the FLOPs over the busy tile slots, at the rate the format's measured GEMM shows;
  tile quantisation pads m and n up to whole tiles, wave quantisation leaves SMs idle in the
  last wave (tiles / (waves x SMs));
- HBM: the main loop cannot beat its traffic over achievable bandwidth (the roofline, Williams
  et al. 2009, CACM 52(4)); the two overlap (the loads are pipelined under the MMAs);
- fixed time per wave: every wave of tiles spends ``k_overhead`` k-elements' worth of the
  reference tile's (tile_m x tile_n) main loop outside it (pipeline fill, epilogue), which
  neither overlaps the main loop nor the HBM traffic. A shallow k (TP-split FFN width, MLA's
  low-rank projections) and a memory-bound small-m GEMM pay it alike;
- fixed time per kernel (BF16 / TF32, ``KernelFigures.kernel_fixed_s``): seconds every GEMM
  kernel spends beside its waves, whatever its shape. On H100 it is what OpenXLA's measured
  table of 375 shapes (b x m x n x k, 256-4096 each; validation/gemm_shapes_h100.csv) needs
  beyond the wave model: without it the model is 1.20x too fast at the median where the
  smallest dimension is 1,024 and 1.9-2.9x at 512-256 (tests/test_gemm_shapes.py).
The kernel picks the tile that makes the GEMM fastest: the preset's tile, its transpose, 128 x
128, or a narrow tile for small m (DeepGEMM's choices, deep_gemm/jit_kernels/gemm.py
get_best_configs at commit 78cacf7: block_m 64 for m <= 64 else 128, block_n 16 to 128 in
steps of 8), which spreads a few rows over all SMs.
Anchor and ceiling: the main-loop rate comes from the format's measured GEMM (the GPU preset's
maximum-achievable-matmul figure, or a user's calibration points; the nearest in log-shape),
whose time is reproduced exactly, on the same tiles the model picks from (not by the cap
alone). The preset figures are the best shape of a search over shapes (ml-engineering's MAMF
finder), so no shape of that format runs faster than the best measured
one: its share caps every shape (the ceiling; where the model's losses at the anchor are larger
than at another shape, the search would have found that shape faster). Clocks: the measured
figures ran at whatever clock the GPU held under that load (power-limited, not the boost
clock), so the anchor carries the sustained clock.
FP4 (NVFP4) GEMMs run at the FP4 dense peak. No B200 or GB200 NVFP4 GEMM measurement is
published beside the BF16 and FP8 ones (the MAMF table has no FP4 column), so where no FP4 point
is given (a calibration file's) they take the FP8 anchors' shares of their own peak: an
assumption (``FP4_SHARE_FROM_FP8``). Its fixed work per wave is the FP8 one in k-elements.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache

from explorer.precision import NVFP4_BYTES_PER_ELEMENT
from explorer.specs import GemmDType, GemmPoint, GpuSpec, KernelFigures

GENERIC_KERNELS = KernelFigures(num_sms=132, source="H100-like defaults")
"""Kernel figures of a GPU without any (a custom GPU): H100 SXM's SM count and tile."""
GENERIC_CEILING = 0.8
"""Large-GEMM share of peak where no measurement exists. Source: ml-engineering MAMF table,
BF16 across NVIDIA A100-B200: 73-87% (H100 SXM 80.3%)."""
FP4_SHARE_FROM_FP8 = True
"""Assumption: an FP4 GEMM without an FP4 anchor reaches the share of the FP4 peak that the FP8
anchors reach of the FP8 peak (2x the FP8 rate where the peaks are 2x apart, B200 / GB200).
For scale: Transformer Engine's published B300 run (docs/examples/gemm_profiling, a 5B model's
12 GEMMs, pre-quantized inputs) had NVFP4 1.90x faster than MXFP8 where B300's FP4 peak is 3x
its FP8 one; no such figure is published for B200 or GB200."""
BLOCK_SCALED_GEMM_SHARE: dict[str, float] = {"mxfp8": 6.812 / 7.161, "nvfp4": 6.812 / 7.161}
"""Block-scaled GEMMs (a scale per 32 or 16 elements applied in the MMA) against the per-tensor
scaled FP8 GEMMs the Blackwell anchors measured (MAMF: torch._scaled_mm, one scale per tensor),
by recipe. Source: Transformer Engine's published B300 benchmark (docs/examples/gemm_profiling/
gemm_profiling.rst, a 5B model's 12 GEMMs per layer at M = 15,872, pre-quantized inputs: the
kernels alone): MXFP8 7.161 ms against FP8 current scaling 6.812 ms per layer, 0.951; B300's
FP8 tensor cores are B200's. NVFP4 (an E4M3 scale per 16 elements) is taken at MXFP8's share:
an assumption. Recipes not named (per-tensor; blockwise, whose H800 anchor is DeepGEMM's own
blockwise kernel): 1."""
SMALL_M_TILE_NS = tuple(range(16, 129, 8))
"""Narrow tile widths kernels choose for small m. Source: DeepGEMM (deepseek-ai/DeepGEMM,
deep_gemm/jit_kernels/gemm.py get_best_configs, commit 78cacf7): block_n in range(16, 129, 8),
block_m 64 for m <= 64 else 128."""


def kernel_figures(gpu: GpuSpec) -> KernelFigures:
    """The GPU's kernel figures, or the generic ones."""
    return gpu.kernels or GENERIC_KERNELS


def with_measured_gemms(gpu: GpuSpec, points: Iterable[GemmPoint]) -> GpuSpec:
    """``gpu`` with measured GEMMs (a calibration file's, ``probe``'s) added to its anchors; a
    point of the same shape and format replaces the preset's, and the preset's points of a
    measured format tagged with a recipe (H100's DeepGEMM blockwise ones) are dropped. Every
    GEMM then follows the nearest measured point of its format (``gemm_efficiency``)."""
    figures = kernel_figures(gpu)
    new = tuple(points)
    shapes = {(p.m, p.n, p.k, p.dtype) for p in new}
    formats = {p.dtype for p in new}
    kept = tuple(
        p
        for p in figures.gemms
        if (p.m, p.n, p.k, p.dtype) not in shapes and not (p.recipe and p.dtype in formats)
    )
    # measured points describe the user's own shapes: no training-shape multiplier over them;
    # a measured BF16 / TF32 kernel shorter than the preset's fixed time per kernel says that
    # figure is not this stack's: 0 then (the per-wave work alone, as without a shape sweep)
    fixed = figures.kernel_fixed_s
    if any(_kernel_s(p, gpu) <= fixed for p in new if p.dtype in ("bf16", "tf32")):
        fixed = 0.0
    figures = replace(
        figures, training_shape_share=1.0, fp8_training_shape_share=1.0,
        fp4_training_shape_share=None, kernel_fixed_s=fixed,
    )  # fmt: skip
    return replace(gpu, kernels=replace(figures, gemms=kept + new))


def _kernel_s(point: GemmPoint, gpu: GpuSpec) -> float:
    """Seconds of a measured GEMM point's kernel on ``gpu``."""
    return (
        2.0 * point.m * point.n * point.k / (point.efficiency * peak_flops_per_s(gpu, point.dtype))
    )


def _waves_share(tiles: int, sms: int) -> float:
    """Busy share of SM-slots over all waves: tiles / (ceil(tiles / sms) x sms)."""
    return tiles / (math.ceil(tiles / sms) * sms)


def _large_tiles(figures: KernelFigures) -> tuple[tuple[int, int], ...]:
    tm, tn = figures.tile_m, figures.tile_n
    return ((tm, tn), (tn, tm), (tm, tm))


def _tiles(m: float, figures: KernelFigures) -> tuple[tuple[int, int], ...]:
    """Tile choices for a GEMM of m rows: the large tiles and the narrow small-m ones."""
    rows = 64 if m <= 64 else 128
    return _large_tiles(figures) + tuple((rows, cols) for cols in SMALL_M_TILE_NS)


def _slots(m: float, n: float, rows: int, cols: int, sms: int) -> tuple[float, int]:
    """(useful share of the tile slots, waves) of m x n in rows x cols tiles."""
    tiles_m, tiles_n = math.ceil(m / rows), math.ceil(n / cols)
    tiles = tiles_m * tiles_n
    padded = m * n / (tiles * rows * cols)
    return padded * _waves_share(tiles, sms), math.ceil(tiles / sms)


def quantisation_share(m: float, n: float, figures: KernelFigures) -> float:
    """Share of the tile slots that do useful work, best over the large tiles (the preset's,
    its transpose, 128 x 128): (m n / padded area) x wave share. Source: module docstring."""
    return max(_slots(m, n, r, c, figures.num_sms)[0] for r, c in _large_tiles(figures))


def wave_overhead(dtype: str, figures: KernelFigures) -> float:
    """Fixed work per wave outside the main loop, in FLOPs at the main-loop rate (the whole
    GPU's): ``k_overhead`` k-elements of one reference tile on each SM."""
    overhead = figures.fp8_k_overhead if dtype in ("fp8", "fp4") else figures.k_overhead
    return overhead * 2 * figures.tile_m * figures.tile_n * figures.num_sms


def _anchor(
    m: float, n: float, k: float, dtype: str, points: tuple[GemmPoint, ...], recipe: str = ""
) -> tuple[GemmPoint, float] | None:
    """The measured point of the same format (else, for FP4, FP8's: ``FP4_SHARE_FROM_FP8``;
    else BF16's) closest in log-shape, and the highest share measured in that format (the
    ceiling). Points measured under ``recipe`` (GemmPoint.recipe) stand alone where the GPU has
    any; otherwise the format's default points (recipe empty) are used."""
    tagged = [p for p in points if p.dtype == dtype and recipe and p.recipe == recipe]
    same = tagged or [p for p in points if p.dtype == dtype and not p.recipe]
    if not same and dtype == "fp4" and FP4_SHARE_FROM_FP8:
        same = [p for p in points if p.dtype == "fp8" and not p.recipe]
    same = same or [p for p in points if p.dtype == "bf16"]
    if not same:
        return None

    def distance(p: GemmPoint) -> float:
        return sum(math.log(a / b) ** 2 for a, b in ((m, p.m), (n, p.n), (k, p.k)))

    return min(same, key=distance), max(p.efficiency for p in same)


def kernel_fixed_x_peak(dtype: str, gpu: GpuSpec) -> float:
    """``KernelFigures.kernel_fixed_s`` of a ``dtype`` GEMM as seconds x the format's peak
    (FP8 and FP4 kernels: 0, their per-wave ``fp8_k_overhead`` measured with DeepGEMM carries
    their fixed work)."""
    if dtype not in ("bf16", "tf32"):
        return 0.0
    return kernel_figures(gpu).kernel_fixed_s * peak_flops_per_s(gpu, dtype)


@lru_cache(maxsize=256)
def _main_loop_rate(
    point: GemmPoint, dtype: str, figures: KernelFigures, fixed_x_peak: float = 0.0
) -> float:
    """Share of peak the busy tile slots reach in the main loop, from a measured GEMM: its
    main loop and fixed per-wave work over its measured time, on the tile that suits it best
    among every tile ``_seconds_x_peak`` may pick for it (the large ones and the narrow small-m
    ones: the lowest rate that explains the measurement). The same tile set on both sides makes
    the model reproduce its anchor without the ceiling: with the large tiles alone here, H100
    SXM's FP8 anchor (MAMF 1024 x 9216 x 14336, 0.70878, whose 128 x 128 tiles fill 87.3% of
    the slots) came out at 0.7678 on a 128 x 96 tile (97.0%), and the ceiling hid the 8.3% by
    which H100 FP8 shapes below it were too fast (tests/test_kernels.py). ``fixed_x_peak``:
    the kernel's fixed time (``kernel_fixed_x_peak``), taken out of the measured time first."""
    flops = 2.0 * point.m * point.n * point.k
    measured = flops / point.efficiency - fixed_x_peak  # seconds x peak
    if measured <= 0:
        raise ValueError(
            f"the measured {point.m} x {point.n} x {point.k} {dtype} GEMM is faster than the "
            "GPU's fixed time per GEMM kernel alone"
        )
    fixed = wave_overhead(dtype, figures)
    rates = []
    for rows, cols in _tiles(point.m, figures):
        busy, waves = _slots(point.m, point.n, rows, cols, figures.num_sms)
        rates.append((flops / busy + waves * fixed) / measured)
    return min(rates)


def _seconds_x_peak(
    m: float, n: float, k: float, rate: float, fixed: float, memory: float, figures: KernelFigures
) -> float:
    """The GEMM's time (seconds x peak) on the fastest tile: max(main loop, HBM) + waves x
    fixed work, both at the main-loop ``rate`` (``memory``: HBM time x peak, 0 without a
    roofline)."""
    flops = 2.0 * m * n * k
    best = math.inf
    for rows, cols in _tiles(m, figures):
        busy, waves = _slots(m, n, rows, cols, figures.num_sms)
        best = min(best, max(flops / (busy * rate), memory) + waves * fixed / rate)
    return best


@lru_cache(maxsize=65536)
def gemm_efficiency(
    m: float,
    n: float,
    k: float,
    dtype: GemmDType,
    gpu: GpuSpec,
    bandwidth_bytes_per_s: float | None = None,
    recipe: str = "",
) -> float:
    """Achieved share of ``dtype``'s dense peak for one m x n x k GEMM on ``gpu``.

    The time model anchored on the nearest measured GEMM of the format (the GPU preset's
    figures plus any calibration points in ``gpu.kernels.gemms``), capped at the best measured
    share of the format, with the roofline at ``bandwidth_bytes_per_s`` (achievable HBM
    bandwidth; None: no roofline). ``recipe`` (an FP8 recipe name): the points measured under
    it where the GPU has any (H100's DeepGEMM blockwise points), else the format's default
    ones. Source: module docstring.
    """
    if min(m, n, k) <= 0:
        raise ValueError(f"GEMM dimensions must be positive, got {m} x {n} x {k}")
    figures = kernel_figures(gpu)
    found = _anchor(m, n, k, dtype, figures.gemms, recipe)
    if found is None:
        point, ceiling = (
            GemmPoint(m=8192, n=8192, k=8192, dtype=dtype, efficiency=GENERIC_CEILING),
            GENERIC_CEILING,
        )
    else:
        point, ceiling = found
    fixed_x_peak = kernel_fixed_x_peak(dtype, gpu)
    rate = _main_loop_rate(point, dtype, figures, fixed_x_peak)
    memory = 0.0
    if bandwidth_bytes_per_s is not None:
        memory = (
            traffic_bytes(m, n, k, dtype) / bandwidth_bytes_per_s * peak_flops_per_s(gpu, dtype)
        )
    seconds = _seconds_x_peak(m, n, k, rate, wave_overhead(dtype, figures), memory, figures)
    return min(ceiling, 2.0 * m * n * k / (seconds + fixed_x_peak))


def traffic_bytes(m: float, n: float, k: float, dtype: str) -> float:
    """HBM bytes of one GEMM: read A (m k) and B (k n) in the input format (1 byte FP8, 2
    BF16, 4 TF32, NVFP4's 0.5 and an E4M3 scale per 16 elements), write C (m n) in BF16."""
    width = {"fp8": 1, "tf32": 4, "fp4": NVFP4_BYTES_PER_ELEMENT}.get(dtype, 2)
    return width * (m * k + k * n) + 2 * m * n


def roofline_share(
    m: float, n: float, k: float, dtype: str, gpu: GpuSpec, bandwidth_bytes_per_s: float
) -> float:
    """Largest share of peak the GEMM's HBM traffic allows: FLOPs / (bytes / bandwidth) / peak.

    Ledger: ``traffic_bytes``. Source: the roofline model (Williams et al. 2009).
    """
    seconds = traffic_bytes(m, n, k, dtype) / bandwidth_bytes_per_s
    return 2 * m * n * k / seconds / peak_flops_per_s(gpu, dtype)


def peak_flops_per_s(gpu: GpuSpec, compute: str) -> float:
    """Dense tensor-core peak of ``gpu`` for a GEMM format (tf32, bf16, fp8, fp4), FLOP/s.

    The rate MFU and HFU are defined on. Source: vendor data sheets via GpuSpec; TF32 defaults
    to half of BF16 and FP8 without tensor cores falls back to BF16. FP4 without FP4 tensor
    cores is a ValueError (one sentence): NVFP4 training needs them.
    """
    if compute == "fp4":
        if not gpu.fp4_flops_per_s:
            raise ValueError(
                f"the {gpu.name} has no FP4 tensor cores: NVFP4 training (nvfp4-mixed) needs a "
                "Blackwell GPU (B200, GB200); use fp8-mixed or bf16-mixed"
            )
        return gpu.fp4_flops_per_s
    if compute == "fp8" and gpu.fp8_flops_per_s:
        return gpu.fp8_flops_per_s
    if compute == "tf32":
        return gpu.tf32_flops_per_s or gpu.bf16_flops_per_s / 2
    return gpu.bf16_flops_per_s


def with_sms(gpu: GpuSpec, held: int) -> GpuSpec:
    """``gpu`` with ``held`` of its SMs taken by another kernel (a communication kernel beside a
    GEMM: Transformer Engine's userbuffers ``num_sm`` under ``set_sm_margin``, which launches the
    GEMM on the rest): the tiles spread over the SMs left, each at the same rate, so every
    tensor-core peak scales by the share left and the GEMM's tile and wave quantisation are
    those of the SMs left (``gemm_efficiency``). Source: Transformer Engine
    comm_gemm_overlap.cpp (``_math_sms`` = SM count - num_comm_sm when set_sm_margin)."""
    figures = kernel_figures(gpu)
    left = figures.num_sms - held
    if held <= 0:
        return gpu
    if left < 1:
        raise ValueError(f"{held} SMs held leave none of the {gpu.name}'s {figures.num_sms}")
    share = left / figures.num_sms
    return replace(
        gpu,
        bf16_flops_per_s=gpu.bf16_flops_per_s * share,
        fp8_flops_per_s=gpu.fp8_flops_per_s * share if gpu.fp8_flops_per_s else None,
        tf32_flops_per_s=gpu.tf32_flops_per_s * share if gpu.tf32_flops_per_s else None,
        fp4_flops_per_s=gpu.fp4_flops_per_s * share if gpu.fp4_flops_per_s else None,
        kernels=replace(figures, num_sms=left),
    )
