"""Every named assumption behind a result, with its value and its source, as table rows.

The words are the field docstrings written in the core's source (read once with ``ast``), so the
report says what the code documents. A docstring's ``Source:`` sentence becomes the source
column; one that calls itself an assumption is marked so; nested assumption groups (the
estimate's ``memory``, ``compute``, ``comm``) are flattened to ``group.field`` names, the same
keys the scenario's overrides use.
"""

from __future__ import annotations

import ast
import difflib
import inspect
from collections.abc import Iterator, Mapping
from dataclasses import fields, is_dataclass, replace
from functools import cache
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar, get_type_hints

from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")

SERVING_PREFIX = "serving."
"""How the scenario (and the app, the report, the command line) names serving assumptions."""


class AssumptionRow(NamedTuple):
    """One assumption: its override key, value, what it means and where it comes from."""

    name: str
    value: object
    meaning: str
    source: str


@cache
def field_docs(cls: type) -> Mapping[str, str]:
    """Field name -> the docstring written under it in ``cls``'s source ('' when none)."""
    try:
        tree = ast.parse(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = ""
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                text = " ".join(str(after.value.value).replace("``", "").split())
            docs[node.target.id] = text
    return MappingProxyType(docs)


def split_source(doc: str) -> tuple[str, str]:
    """(meaning, source) of a field docstring: the text from ``Source:`` on is the source."""
    head, marker, tail = doc.partition("Source:")
    if marker:
        return head.strip().rstrip("."), tail.strip()
    if "assumption" in doc.lower():
        return doc, "an assumption of this tool (reasoning in the meaning)"
    return doc, "a modelling choice of this tool (references in the meaning)"


def assumption_rows(values: object, prefix: str = "") -> list[AssumptionRow]:
    """Rows for every field of the dataclass ``values``; nested dataclasses are flattened."""
    if not is_dataclass(values) or isinstance(values, type):
        raise TypeError(f"expected a dataclass instance, got {type(values).__name__}")
    docs = field_docs(type(values))
    rows: list[AssumptionRow] = []
    for f in fields(values):
        value = getattr(values, f.name)
        name = f"{prefix}{f.name}"
        if is_dataclass(value) and not isinstance(value, type):
            rows += assumption_rows(value, f"{name}.")
            continue
        meaning, source = split_source(docs.get(f.name, ""))
        rows.append(AssumptionRow(name, value, meaning, source))
    return rows


def with_overrides(base: T, overrides: Mapping[str, Any], prefix: str = "") -> T:
    """``base`` with every ``group.field`` override that names one of its (nested) fields.

    Keys that name no field are ignored (the scenario may carry overrides for another model).
    """
    changes: dict[str, Any] = {}
    for f in fields(base):  # type: ignore[arg-type]
        name, value = f"{prefix}{f.name}", getattr(base, f.name)
        if is_dataclass(value) and not isinstance(value, type):
            nested = with_overrides(value, overrides, f"{name}.")
            if nested is not value:
                changes[f.name] = nested
        elif name in overrides:
            changes[f.name] = overrides[name]
    return replace(base, **changes) if changes else base  # type: ignore[type-var]


def _leaves(values: object, prefix: str = "") -> Iterator[tuple[str, type, str]]:
    """(override key, owning class, field name) of every leaf field of a dataclass."""
    for f in fields(values):  # type: ignore[arg-type]
        value = getattr(values, f.name)
        if is_dataclass(value) and not isinstance(value, type):
            yield from _leaves(value, f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", type(values), f.name


def parse_override(base: object, text: str, prefix: str = "") -> tuple[str, Any]:
    """``KEY=VALUE`` as an override of ``base``'s (nested) field KEY (named with ``prefix``,
    as the scenario names serving assumptions), the value typed as the field is
    (``true``/``false``, numbers, a choice's name, ``none`` where allowed).

    Raises ValueError (one sentence) for a malformed pair, an unknown key or a bad value.
    """
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key:
        raise ValueError(f"an assumption is KEY=VALUE (e.g. comm.tp_overlap=0.5), got {text!r}")
    owners = {prefix + name: (owner, field) for name, owner, field in _leaves(base)}
    if key not in owners:
        near = difflib.get_close_matches(key, owners, n=3)
        hint = f" (close: {', '.join(near)})" if near else ""
        raise ValueError(f"no assumption named {key!r}{hint}")
    owner, field = owners[key]
    adapter = TypeAdapter(get_type_hints(owner)[field])
    try:
        if raw.lower() in ("none", "null"):
            return key, adapter.validate_python(None)
        return key, adapter.validate_python(raw)
    except ValidationError as error:
        reason = error.errors()[0]["msg"]
        raise ValueError(f"{key}={raw!r}: {reason[0].lower()}{reason[1:]}") from None
