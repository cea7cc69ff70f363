"""The exporter's ``# explorer: key=value`` comments, read back.

Where a framework has no setting for part of a layout (Megatron-LM has no ZB-H1 or DualPipe
flag, torchtitan no ZeRO-1), ``explorer.launch`` writes a comment naming the tool's value, so
that the settings it writes read back to the same scenario. The comment wins over what the
framework's own settings imply; a note says so.
"""

from __future__ import annotations

from collections.abc import Callable

from explorer.importers.scenario import Draft
from explorer.specs import OFFLOAD_MODULES, PRECISIONS, RECOMPUTE_MODULES, SCHEDULES


def _choice(*values: object) -> Callable[[str], object | None]:
    return lambda text: next((v for v in values if str(v) == text), None)


def _counts(text: str) -> tuple[int, ...] | None:
    words = text.split(",")
    return tuple(int(w) for w in words) if all(w.isdigit() for w in words) else None


def _names(allowed: tuple[str, ...]) -> Callable[[str], tuple[str, ...] | None]:
    def parse(text: str) -> tuple[str, ...] | None:
        words = tuple(w for w in text.split(",") if w)
        return words if words and set(words) <= set(allowed) else None

    return parse


def _count(least: int) -> Callable[[str], int | None]:
    return lambda text: int(text) if text.isdigit() and int(text) >= least else None


def _fraction(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 <= value <= 1 else None


def _on_off(text: str) -> bool | None:
    return {"on": True, "off": False}.get(text)


def _layout_string(text: str) -> str | None:
    return text if text and set(text) <= set("EtmL|()*,0123456789") else None


_LAYOUT: dict[str, tuple[str, Callable[[str], object | None]]] = {
    "schedule": ("schedule", _choice(*SCHEDULES)),
    "zero": ("zero", _choice(0, 1, 2, 3)),
    "sequence_parallel": ("sequence_parallel", lambda t: {"on": True, "off": False}.get(t)),
    "virtual": ("virtual_stages", lambda t: int(t) if t.isdigit() and int(t) > 0 else None),
    "stage_layers": ("stage_layers", _counts),
    "recompute_modules": ("recompute_modules", _names(RECOMPUTE_MODULES)),
    "recompute_ops": ("recompute_ops", _on_off),
    "recompute_method": ("recompute_method", _choice("uniform", "block")),
    "recompute_num_layers": ("recompute_num_layers", _count(1)),
    "recompute_every": ("recompute_every", _count(1)),
    "first_stage_layers": ("first_stage_layers", _count(0)),
    "last_stage_layers": ("last_stage_layers", _count(0)),
    "pipeline_layout": ("pipeline_layout", _layout_string),
    "activation_offload": ("activation_offload", _names(OFFLOAD_MODULES)),
    "offload_layers": ("offload_layers", _count(0)),
    "optimizer_offload_fraction": ("optimizer_offload_fraction", _fraction),
    "reshard_after_forward": ("reshard_after_forward", _on_off),
    "dp_shard": ("dp_shard", _count(1)),
}
_REPLACES: dict[str, tuple[str, ...]] = {
    "stage_layers": ("pipeline_layout", "first_stage_layers", "last_stage_layers"),
    "pipeline_layout": ("stage_layers", "first_stage_layers", "last_stage_layers"),
    "first_stage_layers": ("stage_layers", "pipeline_layout"),
    "last_stage_layers": ("stage_layers", "pipeline_layout"),
    "recompute_modules": ("recompute_ops",),
    "recompute_ops": ("recompute_modules",),
    "zero": ("dp_shard",),  # what the framework's own sharding implied
}
"""Fields a comment's field excludes: the framework's settings set them, the comment wins."""
_WORKLOAD: dict[str, tuple[str, Callable[[str], object | None]]] = {
    "precision": ("precision", _choice(*PRECISIONS)),
    "grad_dtype": ("grad_dtype", _choice("bf16", "fp32")),
}


def apply_explorer_comments(draft: Draft, lines: list[str], framework: str) -> None:
    """Set the fields the comments name (unknown keys and values are left alone)."""
    for line in lines:
        key, _, rest = line.partition("=")
        words = rest.split()
        value = words[0].rstrip(":;,.") if words else ""
        for table, target in ((_LAYOUT, draft.layout), (_WORKLOAD, draft.workload)):
            entry = table.get(key.strip())
            parsed = entry[1](value) if entry is not None else None
            if entry is not None and parsed is not None:
                for other in _REPLACES.get(entry[0], ()):
                    target.pop(other, None)
                if entry[0] == "zero":
                    draft.replicas = None
                target[entry[0]] = parsed
                draft.notes.append(
                    f"{key.strip()} {value} read from the exporter's comment ({framework} has "
                    f"no setting for it)."
                )


def comment_lines(text: str) -> list[str]:
    """The ``# explorer:`` comments of a text, without the prefix."""
    prefix = "# explorer:"
    out = []
    for line in text.splitlines():
        at = line.find(prefix)
        if at >= 0:
            out.append(line[at + len(prefix) :].strip())
    return out
