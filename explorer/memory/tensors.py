"""The vocabulary of saved activations: one saved tensor, and the slice of a micro-batch a GPU
works on. ``activations.py`` lists the tensors; this module only names them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from explorer.specs import Layout

LayerKind = Literal["dense", "moe"]
FP32_BYTES = 4.0
"""Bytes of an fp32 element (softmax statistics)."""
TILE_SCALE_BYTES = FP32_BYTES / 128
"""Per element, one fp32 scale per 1 x 128 activation tile. Source: DeepSeek-V3 report
(arXiv:2412.19437) sec. 3.3.2, Fine-Grained Quantization."""
FP8_BYTES = 1.0 + TILE_SCALE_BYTES
"""Bytes per element of an activation cached in FP8 (E4M3) with its tile scales (sec. 3.3.3)."""
E5M6_BYTES = 1.5 + TILE_SCALE_BYTES
"""Bytes per element of the attention-output projection's input in E5M6 (12 bits), with its
power-of-2 tile scales (DeepSeek-V3 report sec. 3.3.3, Low-Precision Activation (1))."""


@dataclass(frozen=True, slots=True)
class SavedTensor:
    """One tensor kept for backward, for one micro-batch on one GPU."""

    name: str
    elements: float
    """Elements on this GPU."""
    bytes_per_element: float
    saved_by: str
    """The operation whose backward needs it."""
    core: bool = False
    """Part of the attention core that selective recompute drops."""

    @property
    def bytes(self) -> float:
        return self.elements * self.bytes_per_element


@dataclass(frozen=True, slots=True)
class ActivationShape:
    """The slice of one micro-batch one GPU works on."""

    seq_len: int
    """Tokens per sequence before context parallelism."""
    micro_batch_size: int
    tp: int = 1
    sp: bool = False
    cp: int = 1
    etp: int = 1
    dtype_bytes: float = 2.0
    """Bytes per saved activation element."""

    @property
    def tokens(self) -> float:
        """Tokens of the micro-batch on this CP rank, T = s b / c."""
        return self.seq_len * self.micro_batch_size / self.cp

    @property
    def sp_tokens(self) -> float:
        """Tokens of sequence-parallel regions, T / t with SP, T without."""
        return self.tokens / self.tp if self.sp and self.tp > 1 else self.tokens


def saved(name: str, elements: float, nbytes: float, by: str, core: bool = False) -> SavedTensor:
    """A SavedTensor, positionally (keeps the tensor tables one line per tensor)."""
    return SavedTensor(name, elements, nbytes, by, core)


def linear_input_bytes(act: float, fp8_cache: bool) -> float:
    """Bytes per element of a saved FP8-linear input: E4M3 with its tile scales, or ``act``."""
    return FP8_BYTES if fp8_cache else act


def attention_output_bytes(act: float, fp8_cache: bool) -> float:
    """Bytes per element of the attention output (output projection input): E5M6, or ``act``."""
    return E5M6_BYTES if fp8_cache else act


def activation_shape(layout: Layout, seq_len: int, dtype_bytes: float) -> ActivationShape:
    """The slice of one micro-batch a GPU of ``layout`` works on."""
    return ActivationShape(
        seq_len=seq_len,
        micro_batch_size=layout.micro_batch_size,
        tp=layout.tp,
        sp=layout.sp,
        cp=layout.cp,
        etp=layout.etp,
        dtype_bytes=dtype_bytes,
    )
