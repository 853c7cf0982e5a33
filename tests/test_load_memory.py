"""The collector around a load (``collector_paused``): paused while the log is read, and what the
load made goes to the oldest generation unscanned, its cycles still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from dsh_acp.session._memory import collector_paused


class _Node:
    me: _Node | None = None


@pytest.fixture
def collecting() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    if not enabled:
        gc.disable()


def test_what_a_load_made_is_not_left_for_the_next_young_collection(collecting: None) -> None:
    with collector_paused():
        assert not gc.isenabled()
        made = [[n] for n in range(20_000)]
    assert gc.isenabled()
    # In the oldest generation: no young collection scans them (one would, 20,000 objects, at the
    # first allocation after the pause, with the editor waiting for the load's answer).
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert id(made[0]) in oldest
    assert id(made[-1]) in oldest
    assert gc.get_freeze_count() == 0  # moved, not frozen


def test_a_cycle_made_during_a_load_is_still_collected(collecting: None) -> None:
    with collector_paused():
        node = _Node()
        node.me = node
        gone = weakref.ref(node)
        del node
    assert gone() is not None
    gc.collect()
    assert gone() is None


def test_objects_someone_else_froze_stay_frozen(collecting: None) -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            _ = [[n] for n in range(100)]
        assert gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()
