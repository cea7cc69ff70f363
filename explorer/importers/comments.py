"""The exporter's ``# explorer: key=value`` comments, read back.

Where a framework has no setting for part of a layout (Megatron-LM has no ZB-H1 or DualPipe
flag, torchtitan no ZeRO-1), ``explorer.launch`` writes a comment naming the tool's value, so
that the settings it writes read back to the same scenario. The comment wins over what the
framework's own settings imply; a note says so.
"""

from __future__ import annotations

from collections.abc import Callable

from explorer.importers.scenario import Draft
from explorer.specs import PRECISIONS, SCHEDULES


def _choice(*values: object) -> Callable[[str], object | None]:
    return lambda text: next((v for v in values if str(v) == text), None)


def _counts(text: str) -> tuple[int, ...] | None:
    words = text.split(",")
    return tuple(int(w) for w in words) if all(w.isdigit() for w in words) else None


_LAYOUT: dict[str, tuple[str, Callable[[str], object | None]]] = {
    "schedule": ("schedule", _choice(*SCHEDULES)),
    "zero": ("zero", _choice(0, 1, 2, 3)),
    "sequence_parallel": ("sequence_parallel", lambda t: {"on": True, "off": False}.get(t)),
    "virtual": ("virtual_stages", lambda t: int(t) if t.isdigit() and int(t) > 0 else None),
    "stage_layers": ("stage_layers", _counts),
}
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
