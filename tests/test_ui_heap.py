"""explorer.ui.heap: the server's live objects frozen once, after a collection, never garbage."""

from __future__ import annotations

import gc
import weakref

import pytest

from explorer.ui import heap


class _Node:
    """An object that can sit in a reference cycle and be watched through a weak reference."""

    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def fresh(monkeypatch):
    """The module as in a new process (not frozen yet); the test process unfrozen after."""
    monkeypatch.setattr(heap, "_frozen", False)
    yield
    gc.unfreeze()


def test_cyclic_garbage_is_collected_before_the_freeze_not_frozen_with_the_live_objects(fresh):
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a cycle: reference counting alone cannot free it
    dead = weakref.ref(a)
    del a, b
    assert dead() is not None  # still there: only the cyclic collector frees it
    assert heap.freeze_long_lived() is True
    assert dead() is None  # collected, so a frozen generation cannot keep it forever
    assert gc.get_freeze_count() > 0


def test_only_the_first_call_freezes(fresh):
    assert heap.freeze_long_lived() is True
    before = gc.get_freeze_count()
    _Node()  # objects made after the first run stay with the collector: nothing more frozen
    assert heap.freeze_long_lived() is False
    # nothing more frozen; a frozen object freed meanwhile (another thread's) only lowers it
    assert gc.get_freeze_count() <= before
