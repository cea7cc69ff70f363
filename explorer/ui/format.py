"""Numbers as people read them, with the unit always named (GiB = 2^30 bytes, GB = 10^9)."""

from __future__ import annotations

from typing import Protocol

from explorer.units import GB, GiB


def gib(num_bytes: float, digits: int = 1) -> str:
    """Bytes as GiB (2^30), e.g. ``"71.3 GiB"``."""
    return f"{num_bytes / GiB:,.{digits}f} GiB"


def gb(num_bytes: float, digits: int = 0) -> str:
    """Bytes as GB (10^9), e.g. ``"80 GB"``."""
    return f"{num_bytes / GB:,.{digits}f} GB"


def count(value: float) -> str:
    """A large count with a suffix: 70.55 B, 1.2 T, 512 M."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {suffix}"
    return f"{value:,.0f}"


def tokens(value: int) -> str:
    """A token count as a power-of-two label: 512, 4K, 128K, 1M."""
    if value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{value >> 20}M"
    if value >= 1 << 10 and value % (1 << 10) == 0:
        return f"{value >> 10}K"
    return f"{value:,}"


def seconds(value: float) -> str:
    """A duration in the unit that keeps it readable: µs, ms or s."""
    if value < 1e-3:
        return f"{value * 1e6:,.1f} µs"
    if value < 1:
        return f"{value * 1e3:,.1f} ms"
    return f"{value:,.2f} s"


def percent(fraction: float, digits: int = 1) -> str:
    return f"{fraction * 100:.{digits}f}%"


def billions(value: float) -> str:
    """A parameter count in billions: ``"70.6B"`` (below 1B as ``"0.124B"``)."""
    return f"{value / 1e9:,.1f}B" if value >= 1e9 else f"{value / 1e9:.3f}B"


def sentence(error: BaseException) -> str:
    """An exception's message as one sentence for a person."""
    text = " ".join(str(error).split()) or type(error).__name__
    first = text.split(" ", 1)[0]
    identifier = "_" in first or "." in first or len(first) <= 3  # headroom_fraction, dp, fp8
    if not identifier:
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "."


class Degrees(Protocol):
    """Anything with the layout's degrees (a Layout, the scenario's LayoutInputs)."""

    @property
    def dp(self) -> int: ...
    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def zero(self) -> int: ...


def layout_label(layout: Degrees) -> str:
    """A layout's degrees in one line: ``TP 8 · PP 4 · DP 2 · ZeRO-1`` (axes at 1 left out)."""
    degrees = (("TP", layout.tp), ("PP", layout.pp), ("CP", layout.cp), ("EP", layout.ep))
    parts = [f"{name} {value}" for name, value in (*degrees, ("DP", layout.dp)) if value > 1]
    return " · ".join([*(parts or ["1 GPU"]), f"ZeRO-{layout.zero}"])


def flop(value: float) -> str:
    """A FLOP count with its SI prefix: ``449.2 GFLOP``, ``2.10 TFLOP``."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= scale:
            return f"{value / scale:,.1f} {prefix}FLOP"
    return f"{value:,.0f} FLOP"
