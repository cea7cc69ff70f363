"""The core's named assumptions as sidebar widgets, and the scenario's overrides of them.

Overrides are keyed as ``explorer.report.assumptions`` flattens ``EstimateAssumptions``
(``memory.headroom_fraction``, ``comm.links.scale_out``, ``pipeline_model``), so the sidebar, the
URL, the estimate and the report name each assumption the same way. Help texts are the field
docstrings of the core's source.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin, get_type_hints

from explorer.units import MiB

if TYPE_CHECKING:
    from explorer.estimate import EstimateAssumptions
    from explorer.serving import ServingAssumptions

GROUP_TITLES = {
    "compute": "Compute",
    "comm": "Communication",
    "memory": "Memory",
    "pipeline_model": "Pipeline",
    "serving": "Serving",
}
"""Tabs of the assumption widgets, by the first part of the override key."""


_WORDS = {
    "cuda": "CUDA",
    "nccl": "NCCL",
    "moe": "MoE",
    "zero3": "ZeRO-3",
    "p2p": "point-to-point",
    "hbm": "HBM",
    "fp8": "FP8",
    "bf16": "BF16",
    "gpu": "GPU",
    "kv": "KV",
    "sp": "SP",
    "swiglu": "SwiGLU",
    "flops": "FLOPs",
    **{axis: axis.upper() for axis in ("dp", "tp", "cp", "ep", "pp")},
}
"""Words of field names written as people write them."""
Kind = Literal["flag", "choice", "int", "float"]


@dataclass(frozen=True, slots=True)
class Knob:
    """One assumption as a widget: its override key, default, help and display scale."""

    key: str
    """Override key (``memory.headroom_fraction``)."""
    default: bool | float | str | None
    help: str
    kind: Kind = "float"
    """flag (bool), choice (a Literal), int or float: which widget shows it."""
    optional: bool = False
    """None is allowed and means the model's own default (a flag then offers three choices)."""
    options: tuple[str, ...] = ()
    """Choices of a text assumption (a Literal), else empty."""
    scale: float = 1.0
    """Shown value = stored value / scale (large byte sizes are shown in MiB)."""

    @property
    def group(self) -> str:
        return self.key.split(".", 1)[0]

    @property
    def label(self) -> str:
        name = self.key.rsplit(".", 1)[-1].replace("_bytes", "")
        words = " ".join(_WORDS.get(word, word) for word in name.split("_"))
        if ".links." in self.key:
            words += " link efficiency"
        unit = " (MiB)" if self.scale == MiB else " (bytes)" if "_bytes" in self.key else ""
        return words[0].upper() + words[1:] + unit

    def shown(self, value: Any) -> Any:
        """The widget's value for a stored value."""
        if self.scale == 1 or value is None:
            return value
        return value / self.scale

    def stored(self, shown: Any) -> Any:
        if self.scale == 1 or shown is None:
            return shown
        return shown * self.scale


def _walk(instance: object, prefix: str = "") -> Iterator[tuple[str, Any, type, str]]:
    """(override key, value, owning class, field name) of every leaf field."""
    for f in fields(instance):  # type: ignore[arg-type]
        value = getattr(instance, f.name)
        if is_dataclass(value) and not isinstance(value, type):
            yield from _walk(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", value, type(instance), f.name


def _shape(owner: type, name: str) -> tuple[Kind, bool, tuple[str, ...]]:
    """(widget kind, None allowed, Literal choices) of a field, from its type hint."""
    hint = get_type_hints(owner).get(name)
    args = get_args(hint)
    optional = type(None) in args
    core = [a for a in args if a is not type(None)] if optional else [hint]
    inner = core[0] if len(core) == 1 else float
    if get_origin(inner) is Literal:
        return "choice", optional, tuple(str(a) for a in get_args(inner))
    if inner is bool:
        return "flag", optional, ()
    return ("int" if inner is int else "float"), optional, ()


def knobs(workload: str = "training") -> tuple[Knob, ...]:
    """Every adjustable assumption of a training estimate or a serving plan, in field order.

    Serving keys carry a ``serving.`` prefix. Empty while the core part is not importable (its
    authors may be rewriting it); that is not cached, so the knobs appear once it imports.
    """
    try:
        return _knobs(workload)
    except ImportError:
        return ()


@cache
def _knobs(workload: str) -> tuple[Knob, ...]:
    from explorer.report.assumptions import field_docs

    root, prefix = _defaults(workload)
    out = []
    for key, value, owner, name in _walk(root, prefix):
        if isinstance(value, tuple):  # a list of names (CUDA-graph scopes): --assume only
            continue
        doc = field_docs(owner).get(name, "")
        big = "_bytes" in name and isinstance(value, int | float) and value >= MiB
        kind, optional, options = _shape(owner, name)
        out.append(Knob(key, value, doc, kind, optional, options, MiB if big else 1.0))
    return tuple(out)


def _defaults(workload: str) -> tuple[object, str]:
    if workload == "serving":
        from explorer.serving import ServingAssumptions

        return ServingAssumptions(), "serving."
    from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS

    return DEFAULT_ESTIMATE_ASSUMPTIONS, ""


def overrides_from(values: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The (key, value) pairs of ``values`` that differ from the defaults, sorted."""
    out = []
    for knob in (*knobs("training"), *knobs("serving")):
        value = values.get(knob.key, knob.default)
        if value != knob.default:
            out.append((knob.key, value))
    return tuple(sorted(out))


def estimate_assumptions(overrides: Mapping[str, Any]) -> EstimateAssumptions:
    """The estimate's assumptions with the scenario's overrides (unknown keys ignored)."""
    from explorer.estimate import DEFAULT_ESTIMATE_ASSUMPTIONS
    from explorer.report.assumptions import with_overrides

    return with_overrides(DEFAULT_ESTIMATE_ASSUMPTIONS, overrides)


def serving_assumptions(overrides: Mapping[str, Any]) -> ServingAssumptions:
    """The serving model's assumptions with the scenario's ``serving.`` overrides."""
    from explorer.report.assumptions import with_overrides
    from explorer.serving import ServingAssumptions

    return with_overrides(ServingAssumptions(), overrides, "serving.")
