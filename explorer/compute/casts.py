"""FP8 cast and scaling traffic: extra HBM bytes per element of a GEMM input an FP8 recipe moves.

Every FP8 GEMM input (activations forward, output gradients backward) is written in FP8 twice,
row- and column-wise (the weight-gradient GEMM needs the transpose): 1 + 1 bytes per element.
The BF16 read is fused into the kernel that produced the tensor (Transformer Engine's
LayerNormLinear, fused activation-cast and cast-transpose kernels), whose traffic
explorer.compute.elementwise already counts. What the recipes add:
- per-tensor delayed scaling: the scale comes from the amax history and this tensor's amax is
  reduced inside the cast: nothing more (Transformer Engine, "Using FP8 with Transformer
  Engine": DelayedScaling);
- per-tensor current scaling: the amax must be known before the cast, so the BF16 tensor is
  read once more (+2 bytes);
- blockwise (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.3.2: 1 x 128 tiles for activations
  and gradients, 128 x 128 blocks for weights): one FP32 scale per 128 elements for each copy;
- MXFP8 (OCP Microscaling Formats spec v1.0: 32-element blocks, E8M0 scales): one byte per 32
  elements for each copy.
Weights are cast once per step and their FP8 copies reused across micro-batches (TE's
``is_first_microbatch``): left out here.
"""

from __future__ import annotations

from explorer.specs import Fp8Recipe

CAST_BYTES_PER_ELEMENT: dict[Fp8Recipe, float] = {
    "delayed": 2.0,
    "current": 4.0,
    "blockwise": 2.0 + 2 * 4 / 128,
    "mxfp8": 2.0 + 2 * 1 / 32,
}
"""HBM bytes per cast element by recipe (ledger: module docstring)."""


def cast_bytes(elements: float, recipe: Fp8Recipe) -> float:
    """HBM bytes the FP8 casts of ``elements`` GEMM-input elements move. Source: module
    docstring."""
    return elements * CAST_BYTES_PER_ELEMENT[recipe]
