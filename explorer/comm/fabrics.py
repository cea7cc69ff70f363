"""Link models: what NCCL reaches on a kind of link, by message size, from published figures.

A fabric (``presets/fabrics/<id>.toml``) gives, for one kind of link (NVLink generation,
Infinity Fabric, InfiniBand, RoCE):
- ``large_message_share``: the bus bandwidth NCCL reaches on large messages as a share of the
  line rate per GPU (nccl-tests busbw, NVIDIA/nccl-tests doc/PERFORMANCE.md);
- NCCL's protocols (LL, LL128, Simple) for rings and, across nodes, trees: a base latency, a
  latency per step and a share of that bus bandwidth, the cost model NCCL itself picks its
  algorithm and protocol with (NVIDIA/nccl src/graph/tuning.cc);
- where published, bus bandwidth by message size (``ramp_*``): all-reduce busbw of one
  nccl-tests sweep, read as the share of the large-message figure reached at each size;
- NVLink SHARP (``nvls_share``: NVLS all-reduce algorithm bandwidth over line rate) and
  InfiniBand SHARP (``sharp_latency_s``) where the fabric has them.
Figures are carried in the TOML files with their sources; nothing here is fitted.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from bisect import bisect_right
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

FABRICS_DIR: Final = Path(__file__).resolve().parents[2] / "presets" / "fabrics"
"""The repository's ``presets/fabrics/`` folder."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Protocol:
    """One NCCL protocol on one kind of link: latency and share of the bus bandwidth."""

    name: str
    """LL, LL128 or Simple."""
    base_latency_s: float
    """Latency of one call, s (NCCL baseLat)."""
    step_latency_s: float
    """Latency of each ring step or tree level, s (NCCL hwLat)."""
    bandwidth_share: float
    """Share of the fabric's large-message bus bandwidth the protocol reaches (LL 1/4)."""

    def __post_init__(self) -> None:
        if self.base_latency_s < 0 or self.step_latency_s < 0:
            raise ValueError(f"protocol {self.name}: latencies must be zero or more")
        if not 0 < self.bandwidth_share <= 1:
            raise ValueError(f"protocol {self.name}: bandwidth_share must be in (0, 1]")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Fabric:
    """A kind of link as NCCL sees it (see the module docstring). Compared by identity: the
    loader returns one object per preset, so hashing stays cheap inside the search."""

    id: str = "custom"
    """Preset id (file name)."""
    name: str
    """Display name."""
    source: str = ""
    """Where the figures come from."""
    large_message_share: float
    """Bus bandwidth on large messages over the line rate per GPU, one direction."""
    ring: tuple[Protocol, ...]
    """NCCL's ring protocols on this link, LL first."""
    tree: tuple[Protocol, ...] = ()
    """NCCL's tree protocols (across nodes); empty where rings are used."""
    nvls_share: float = 0.0
    """NVLS all-reduce algorithm bandwidth over the line rate; 0 means no NVLink SHARP."""
    sharp_latency_s: float | None = None
    """Latency of an InfiniBand SHARP all-reduce, s; None means the fabric has no SHARP."""
    ramp_group_size: int = 0
    """Ranks of the published sweep (all-reduce); 0 without one."""
    ramp_sizes_bytes: tuple[float, ...] = ()
    """Message sizes of the published sweep, bytes, increasing."""
    ramp_busbw_GBps: tuple[float, ...] = ()
    """Published all-reduce bus bandwidth at each size, GB/s."""
    ramp_efficiency: tuple[float, ...] = ()
    """The sweep as a share of its largest figure, made monotone (set by ``make_fabric``)."""

    def __post_init__(self) -> None:
        if not 0 < self.large_message_share <= 1:
            raise ValueError(f"fabric {self.id}: large_message_share must be in (0, 1]")
        if not self.ring:
            raise ValueError(f"fabric {self.id}: needs at least one ring protocol")
        if len(self.ramp_sizes_bytes) != len(self.ramp_busbw_GBps):
            raise ValueError(f"fabric {self.id}: ramp sizes and bandwidths differ in length")

    @property
    def ramp_steps(self) -> int:
        """Latency steps of the published sweep: 2(n-1) for an all-reduce ring."""
        return 2 * (self.ramp_group_size - 1) if self.ramp_group_size else 0


def monotone_busbw(sizes: tuple[float, ...], busbw: tuple[float, ...]) -> tuple[float, ...]:
    """A measured busbw sweep made never to fall with size and never to rise faster than size
    (so that time never falls as messages grow; noise in a sweep does both)."""
    out: list[float] = []
    for i, value in enumerate(busbw):
        if out:
            value = min(max(value, out[-1]), out[-1] * sizes[i] / sizes[i - 1])
        out.append(value)
    return tuple(out)


def monotone_efficiency(sizes: tuple[float, ...], busbw: tuple[float, ...]) -> tuple[float, ...]:
    """``monotone_busbw`` as shares of its largest-size figure."""
    values = monotone_busbw(sizes, busbw)
    return tuple(v / values[-1] for v in values)


def make_fabric(**fields: Any) -> Fabric:
    """A Fabric with its ramp efficiency derived from its published sweep."""
    sizes, busbw = (
        tuple(fields.get("ramp_sizes_bytes", ())),
        tuple(fields.get("ramp_busbw_GBps", ())),
    )
    efficiency = monotone_efficiency(sizes, busbw) if sizes else ()
    return Fabric(**fields, ramp_efficiency=efficiency)


def fabric_ids() -> tuple[str, ...]:
    """Fabric preset ids, sorted."""
    return tuple(sorted(path.stem for path in FABRICS_DIR.glob("*.toml")))


@cache
def load_fabric(fabric_id: str) -> Fabric:
    """A fabric preset by id (cached: one object per id)."""
    if fabric_id not in fabric_ids():
        raise ValueError(f"unknown fabric {fabric_id!r}; choose one of {', '.join(fabric_ids())}")
    path = FABRICS_DIR / f"{fabric_id}.toml"
    with path.open("rb") as file:
        data = tomllib.load(file)
    allowed = {f.name for f in dataclasses.fields(Fabric)} - {"id", "ramp_efficiency"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"fabrics/{fabric_id}.toml has unknown key(s) {', '.join(unknown)}")
    try:
        raw = TypeAdapter(Fabric).validate_python({"id": fabric_id, **data})
    except ValidationError as error:
        raise ValueError(f"fabrics/{fabric_id}.toml: {error.errors()[0]['msg']}") from None
    fields = {f.name: getattr(raw, f.name) for f in dataclasses.fields(Fabric)}
    del fields["ramp_efficiency"]
    return make_fabric(**fields)


@lru_cache(maxsize=1 << 14)
def ramp(fabric: Fabric, size_bytes: float) -> float:
    """Share of the large-message bus bandwidth reached at ``size_bytes`` (1 without a sweep;
    cached: a search asks for the same sizes many times).

    Source: the fabric's published sweep (``ramp_*``), read by ``interpolated_share``.
    """
    if not fabric.ramp_sizes_bytes:
        return 1.0
    return interpolated_share(fabric.ramp_sizes_bytes, fabric.ramp_efficiency, size_bytes)


def interpolated_share(
    sizes: tuple[float, ...], shares: tuple[float, ...], size_bytes: float
) -> float:
    """A sweep's share at ``size_bytes``: log-log interpolation between its sizes; below the
    smallest the time stays that of the smallest (latency bound), above the largest the
    largest's share."""
    if size_bytes <= sizes[0]:
        return shares[0] * size_bytes / sizes[0]
    if size_bytes >= sizes[-1]:
        return shares[-1]
    i = bisect_right(sizes, size_bytes)
    x0, x1, y0, y1 = sizes[i - 1], sizes[i], shares[i - 1], shares[i]
    return y0 * (y1 / y0) ** (math.log(size_bytes / x0) / math.log(x1 / x0))


def protocol_s(
    protocols: tuple[Protocol, ...], wire_bytes: float, steps: int, busbw_bytes_per_s: float
) -> float:
    """Seconds of one collective under NCCL's fastest protocol: base + steps x step latency +
    bus bytes / (bus bandwidth x the protocol's share). Source: NVIDIA/nccl tuning.cc
    (ncclTopoGetAlgoTime: latency + bytes / bandwidth, the minimum chosen)."""
    best = math.inf
    for p in protocols:
        t = p.base_latency_s + steps * p.step_latency_s
        t += wire_bytes / (busbw_bytes_per_s * p.bandwidth_share)
        if t < best:
            best = t
    return best
