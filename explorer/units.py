"""Unit constants and dtype byte widths. No logic lives here."""

from typing import Final, Literal

GB: Final = 10**9
"""Bytes in a gigabyte (decimal, as vendors quote memory)."""
GiB: Final = 2**30
"""Bytes in a gibibyte (binary, as PyTorch and nvidia-smi report memory)."""
MB: Final = 10**6
MiB: Final = 2**20
TB: Final = 10**12
TERA: Final = 10**12
GIGA: Final = 10**9

DType = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4"]

BYTES_PER_DTYPE: Final[dict[str, float]] = {
    "fp32": 4.0,
    "tf32": 4.0,  # stored as fp32; TF32 is a tensor-core compute mode
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
"""Bytes per element of each storage dtype (scales of quantised formats are counted apart)."""
