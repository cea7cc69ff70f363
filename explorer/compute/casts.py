"""Low-precision cast and scaling traffic: extra HBM bytes per element of a GEMM input a recipe
moves.

Every FP8 GEMM input (activations forward, output gradients backward) is written in FP8 twice,
row- and column-wise (the weight-gradient GEMM reads the other direction): 1 + 1 bytes per
element. Reading the BF16 tensor is fused into the kernel that produced it only where that kernel
is a Transformer Engine norm fused into the linear (LayerNormLinear, Megatron-Core's
TELayerNormColumnParallelLinear) under delayed scaling, whose norm writes FP8 directly, or under
current scaling, whose norm computes the amax as it writes BF16 and leaves one read to the cast
(TE transformer_engine/pytorch/csrc/extensions/normalization.cpp, layernorm_fwd / rmsnorm_fwd:
force_unfused_kernel is false for Float8Quantizer only; create_hp_tensor_with_amax, then
quantize_with_amax, for current scaling; every other recipe's norm writes BF16 and quantizes it
after). Every other cast reads its BF16 input once more (``UNFUSED_READ_BYTES``): the attention
output and the activation output that TE's Linear quantizes (Megatron-Core runs the activation
between TE's fc1 and fc2: megatron/core/transformer/mlp.py bias_gelu_impl / bias_swiglu_impl),
and every output gradient (TE's grad_output cast-transpose). The norms' own traffic is
explorer.compute.elementwise's. What the recipes add:
- per-tensor delayed scaling: the scale comes from the amax history and this tensor's amax is
  reduced inside the cast: nothing more (Transformer Engine, "Using FP8 with Transformer
  Engine": DelayedScaling);
- per-tensor current scaling: the amax must be known before the cast, so the BF16 tensor is
  read once more (+2 bytes);
- blockwise (DeepSeek-V3 report, arXiv:2412.19437, sec. 3.3.2: 1 x 128 tiles for activations
  and gradients, 128 x 128 blocks for weights; Transformer Engine Float8BlockScaling, the same
  blocks, FP32 scales): one FP32 scale per 128 elements for each copy; the row-wise and the
  column-wise (128 x 1, sec. 3.3.2 "converted from 1x128 to 128x1 tiles in the backward")
  copies are both quantized from BF16, each block's amax inside the cast;
- MXFP8 (OCP Microscaling Formats spec v1.0: 32-element blocks, E8M0 scales; Transformer Engine
  MXFP8BlockScaling: 1 x 32 row-wise and 32 x 1 column-wise blocks, both quantized from BF16,
  no transpose on Blackwell): one byte per 32 elements for each copy;
- NVFP4 (Transformer Engine NVFP4BlockScaling, transformer_engine/common/recipe/__init__.py;
  NVIDIA, arXiv:2509.25149): two NVFP4 copies of 0.5 bytes plus an E4M3 scale per 16 elements
  (row-wise for Fprop / Dgrad, column-wise after a 16 x 16 random Hadamard transform for Wgrad),
  1.125 bytes; the FP32 tensor scale is current scaling: one more BF16 read (+2 bytes) by the
  amax kernel, which takes the plain and the Hadamard-transformed amax in one pass
  (pytorch/csrc/quantizer.cpp NVFP4Quantizer::quantize_impl, nvte_hadamard_transform_amax).
  The transform itself and the gradients' stochastic rounding run inside the fused cast
  (nvte_quantize_with_hadamard_transform: the 16 x 16 product on the tensor cores, 32 FLOPs per
  element against the GEMM's 2 n): no HBM bytes.
Weights are cast once per step and their copies reused across micro-batches (TE's
``is_first_microbatch``): left out here. So are the scale-swizzle kernels of MXFP8 and NVFP4
(scales only: 1/32 or 1/16 byte per element).
"""

from __future__ import annotations

from typing import Literal

from explorer.precision import NVFP4_BYTES_PER_ELEMENT
from explorer.specs import Fp8Recipe

CastRecipe = Fp8Recipe | Literal["nvfp4"]
"""A low-precision recipe whose casts are timed: an FP8 one, or NVFP4 (the only FP4 one)."""

CAST_BYTES_PER_ELEMENT: dict[CastRecipe, float] = {
    "delayed": 2.0,
    "current": 4.0,
    "blockwise": 2.0 + 2 * 4 / 128,
    "mxfp8": 2.0 + 2 * 1 / 32,
    "nvfp4": 2.0 + 2 * NVFP4_BYTES_PER_ELEMENT,
}
"""HBM bytes per cast element by recipe (ledger: module docstring)."""


def cast_bytes(elements: float, recipe: CastRecipe) -> float:
    """HBM bytes the low-precision casts of ``elements`` GEMM-input elements move. Source:
    module docstring."""
    return elements * CAST_BYTES_PER_ELEMENT[recipe]


UNFUSED_READ_BYTES = 2.0
"""The BF16 read of a GEMM input by its own cast kernel, bytes per element, where no fused norm
produced it (module docstring)."""

NORM_FUSED_RECIPES: tuple[str, ...] = ("delayed", "current")
"""Recipes whose casts of a TE norm's output need no read beyond CAST_BYTES_PER_ELEMENT
(module docstring: delayed scaling's fused norm-cast; current scaling's amax in the norm)."""


def cast_weight(recipe: str, norm_input: bool) -> float:
    """Cast elements, in ``cast_bytes``' units, per GEMM-input element: 1 where the recipe's
    ledger covers the whole cast (a fused norm's output under NORM_FUSED_RECIPES), else 1 +
    UNFUSED_READ_BYTES / the recipe's bytes per element (the cast reads the BF16 input too);
    1 for a recipe not named (``""``: no cast ledger chosen). Source: module docstring."""
    per_element = CAST_BYTES_PER_ELEMENT.get(recipe)  # type: ignore[call-overload]
    if per_element is None or (norm_input and recipe in NORM_FUSED_RECIPES):
        return 1.0
    return 1.0 + UNFUSED_READ_BYTES / per_element
