"""The probe's file: a versioned TOML document of measured points, validated by pydantic.

Pure (the standard library's ``tomllib`` and pydantic): reading a file never imports torch.
``load_calibration`` turns a file (path or bytes) into a ``Calibration`` or raises
``CalibrationError`` with one sentence; ``to_toml`` writes one back (a small writer for this
flat schema: top-level scalars, one ``[timing]`` table, arrays of tables of scalars).
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCHEMA = "parallelism-explorer-probe"
"""The ``schema`` value every probe file carries (tells a probe file from any other TOML)."""
SCHEMA_VERSION = 1
"""The format version this code reads and writes."""
MAX_FILE_BYTES = 2_000_000
"""Largest file accepted (a full sweep writes about 30 kB)."""
MAX_POINTS = 2000
"""Most points per kind of measurement."""

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Seconds = Annotated[float, Field(gt=0, lt=3600, allow_inf_nan=False)]
Dim = Annotated[int, Field(ge=1, le=1 << 24)]
Text = Annotated[str, Field(max_length=200)]
GemmDType = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
CollectiveName = Literal["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timing(_Strict):
    """How every point was timed."""

    method: Literal["cuda-events", "perf-counter-synchronize"]
    """CUDA events around each call, or time.perf_counter after a device synchronize."""
    warmup: Annotated[int, Field(ge=0, le=1000)]
    """Untimed calls before the timed ones."""
    repeats: Annotated[int, Field(ge=1, le=10000)]
    """Timed calls per point; each point's ``median_s`` is their median."""
    statistic: Literal["median"] = "median"


class GemmPoint(_Strict):
    """One GEMM C[m, n] = A[m, k] @ B[k, n]: 2 m n k FLOPs."""

    dtype: GemmDType
    m: Dim
    n: Dim
    k: Dim
    median_s: Seconds
    flops_per_s: Positive
    """2 m n k / median_s."""

    @property
    def gemm_size(self) -> float:
        """The core's per-GPU GEMM size x = tokens x width (explorer.compute.kernels): m x
        min(n, k), the token rows times the narrower weight side (the TP-split one)."""
        return float(self.m * min(self.n, self.k))


class AttentionPoint(_Strict):
    """One scaled_dot_product_attention call, forward and backward."""

    dtype: GemmDType
    batch: Dim
    heads: Dim
    seq_len: Dim
    head_dim: Dim
    causal: bool
    forward_s: Seconds
    backward_s: Seconds
    forward_flops_per_s: Positive
    """FlashAttention-2's count (Dao 2023, arXiv:2307.08691, sec. 4.1): 4 b h s^2 d, halved
    when causal, over forward_s."""
    backward_flops_per_s: Positive
    """The same paper's backward count, 2.5 x the forward's, over backward_s."""


class BandwidthPoint(_Strict):
    """One memory-bound kernel: bytes read plus written per call."""

    kernel: Literal["copy", "triad"]
    """copy: b = a (2 x size moved); triad: a = b + s c (3 x size), STREAM's kernels."""
    size_bytes: Positive
    """Bytes moved per call (reads plus writes)."""
    median_s: Seconds
    bytes_per_s: Positive


class CollectivePoint(_Strict):
    """One collective at one message size, nccl-tests conventions (doc/PERFORMANCE.md)."""

    kind: CollectiveName
    size_bytes: Positive
    """nccl-tests' size: the all-reduce buffer, the all-gather output, the reduce-scatter
    input, the all-to-all send buffer (of one rank)."""
    num_ranks: Annotated[int, Field(ge=2, le=1 << 20)]
    median_s: Seconds
    """Median over repeats of the slowest rank's time."""
    algbw_bytes_per_s: Positive
    """size_bytes / median_s."""
    busbw_bytes_per_s: Positive
    """algbw x the bus factor: all-reduce 2(n-1)/n, the others (n-1)/n."""


class Calibration(_Strict):
    """A probe file: where it ran, how it timed, and every measured point.

    The raw points stay here for models that read them directly (a per-(m, n, k, dtype) GEMM
    model, a bus-bandwidth-by-size comm model): ``gemm_points``, ``busbw_points`` and
    ``bandwidth_points`` return them filtered and sorted; ``explorer.probe.derive`` turns them
    into overrides of today's named assumptions.
    """

    schema_: Literal["parallelism-explorer-probe"] = Field(alias="schema")
    schema_version: Literal[1]
    kind: Literal["cuda", "cpu"]
    device_name: Text
    """torch.cuda.get_device_name(), or the CPU's name."""
    torch_version: Text
    cuda_version: Text = ""
    date: Text
    """ISO 8601, UTC."""
    quick: bool = False
    world_size: Annotated[int, Field(ge=1, le=1 << 20)] = 1
    local_world_size: Annotated[int, Field(ge=1, le=1 << 10)] = 1
    """Ranks per node (torchrun's LOCAL_WORLD_SIZE): one node when equal to world_size."""
    backend: Literal["", "nccl", "gloo"] = ""
    elapsed_s: Annotated[float, Field(ge=0, lt=86400, allow_inf_nan=False)] = 0.0
    skipped: tuple[Annotated[str, Field(max_length=300)], ...] = Field(default=(), max_length=50)
    """One sentence per measurement that was not made, and why."""
    timing: Timing
    gemm: tuple[GemmPoint, ...] = Field(default=(), max_length=MAX_POINTS)
    attention: tuple[AttentionPoint, ...] = Field(default=(), max_length=MAX_POINTS)
    memory: tuple[BandwidthPoint, ...] = Field(default=(), max_length=MAX_POINTS)
    collective: tuple[CollectivePoint, ...] = Field(default=(), max_length=MAX_POINTS)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @property
    def num_nodes(self) -> int:
        return -(-self.world_size // self.local_world_size)

    def gemm_points(self, dtype: str) -> tuple[GemmPoint, ...]:
        """GEMM points of ``dtype``, smallest GEMM size first."""
        chosen = [p for p in self.gemm if p.dtype == dtype]
        return tuple(sorted(chosen, key=lambda p: (p.gemm_size, p.m, p.n, p.k)))

    def busbw_points(self, kind: str) -> tuple[tuple[float, float], ...]:
        """(size_bytes, busbw_bytes_per_s) of collective ``kind``, smallest message first."""
        points = sorted(
            (p.size_bytes, p.busbw_bytes_per_s) for p in self.collective if p.kind == kind
        )
        return tuple(points)

    def bandwidth_points(self, kernel: str) -> tuple[tuple[float, float], ...]:
        """(size_bytes, bytes_per_s) of memory kernel ``kernel``, smallest first."""
        return tuple(
            sorted((p.size_bytes, p.bytes_per_s) for p in self.memory if p.kernel == kernel)
        )


class CalibrationError(ValueError):
    """A file that is not a usable probe file; the message is one sentence."""


def parse_calibration(data: bytes, name: str = "the calibration file") -> Calibration:
    """The Calibration in ``data`` (TOML bytes); CalibrationError (one sentence) otherwise."""
    if len(data) > MAX_FILE_BYTES:
        raise CalibrationError(
            f"{name} is {len(data):,} bytes, more than the {MAX_FILE_BYTES:,} a probe file can be"
        )
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CalibrationError(f"{name} is not TOML ({error})") from None
    if document.get("schema") != SCHEMA:
        raise CalibrationError(
            f"{name} is not a probe file (its schema is {document.get('schema')!r}, expected "
            f"{SCHEMA!r}); write one with python -m explorer probe --out FILE.toml"
        )
    if document.get("schema_version") != SCHEMA_VERSION:
        raise CalibrationError(
            f"{name} has schema_version {document.get('schema_version')!r}; this version "
            f"reads {SCHEMA_VERSION}"
        )
    try:
        return Calibration.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CalibrationError(f"{name} has an invalid {where}: {first['msg']}") from None


def load_calibration(path: str | Path) -> Calibration:
    """The Calibration in the file at ``path``; CalibrationError (one sentence) otherwise."""
    file = Path(path)
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            raise CalibrationError(
                f"{file} is larger than the {MAX_FILE_BYTES:,} bytes a probe file can be"
            )
        data = file.read_bytes()
    except OSError as error:
        raise CalibrationError(
            f"cannot read the calibration file {file} ({error.strerror})"
        ) from None
    return parse_calibration(data, str(file))


# --------------------------------------------------------------------------------- writing


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write a non-finite number ({value}) to a probe file")
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
        return f'"{escaped}"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to a probe file")


def to_toml(calibration: Calibration) -> str:
    """The probe file of ``calibration`` (loads back equal with ``parse_calibration``)."""
    data = calibration.model_dump(by_alias=True)
    tables = ("timing", "gemm", "attention", "memory", "collective")
    lines = [f"{k} = {_value(v)}" for k, v in data.items() if k not in tables]
    lines += ["", "[timing]", *(f"{k} = {_value(v)}" for k, v in data["timing"].items())]
    for name in tables[1:]:
        for point in data[name]:
            lines += ["", f"[[{name}]]", *(f"{k} = {_value(v)}" for k, v in point.items())]
    return "\n".join(lines) + "\n"
