"""explorer.frozen.fast_init: the same objects as the dataclass's own __init__, built faster."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from explorer.comm.step import Collective
from explorer.frozen import fast_init
from explorer.memory.states import HeldParams


def _pair(**options):
    """Two copies of one class: the dataclass's own __init__, and fast_init's."""

    def make():
        @dataclass(frozen=True, slots=True, **options)
        class Spec:
            a: float
            b: tuple[int, ...] = (1, 2)
            c: str = field(default="x", kw_only=True)
            d: int = field(default=0, kw_only=True)

        return Spec

    return make(), fast_init(make())


@pytest.mark.parametrize("kw_only", [False, True])
def test_the_fast_init_binds_fields_and_defaults_as_the_dataclass_init(kw_only):
    plain, fast = _pair(kw_only=kw_only)
    calls = [dict(a=1.5), dict(a=2.0, b=(3,), c="y", d=4)]
    for kwargs in calls:
        made, want = fast(**kwargs), plain(**kwargs)
        assert dataclasses.astuple(made) == dataclasses.astuple(want)
        assert repr(made).split("(", 1)[1] == repr(want).split("(", 1)[1]
    if not kw_only:  # a and b bind by position, c and d only by keyword, as the dataclass's
        assert dataclasses.astuple(fast(1.0, (5,), d=2)) == dataclasses.astuple(
            plain(1.0, (5,), d=2)
        )
        with pytest.raises(TypeError):
            fast(1.0, (5,), "z")
    with pytest.raises(TypeError):
        fast()  # a has no default
    with pytest.raises(TypeError):
        fast(a=1.0, e=2)  # no such field


def test_objects_built_fast_stay_frozen_equal_and_hash_by_value():
    a = HeldParams(2.0, 3.0)
    b = HeldParams(dense=2.0, expert=3.0)
    assert a == b and hash(a) == hash(b) and a != HeldParams(2.0, 4.0) and a.total == 5.0
    assert HeldParams().total == 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.dense = 1.0  # type: ignore[misc]
    c = Collective(axis="tp", kind="all-reduce", what="x", phase="forward", size_bytes=8.0,
                   count=2.0, time_s=1.0, hidden_s=0.25)  # fmt: skip
    assert (c.share, c.floor_share, c.contention, c.exposed_s) == (0.0, 0.0, 0.0, 0.75)
    assert dataclasses.replace(c, hidden_s=0.5).exposed_s == 0.5


def test_classes_it_cannot_build_the_same_way_are_refused():
    @dataclass(frozen=True, slots=True)
    class Checked:
        a: float

        def __post_init__(self) -> None:  # would be skipped: refused
            pass

    @dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = field(default_factory=list)

    @dataclass(frozen=True)
    class NoSlots:
        a: float

    @dataclass(slots=True)
    class Mutable:
        a: float

    for cls in (Checked, Factory, NoSlots, Mutable):
        with pytest.raises(TypeError):
            fast_init(cls)
