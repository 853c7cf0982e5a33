"""Memory around a large load: the collector paused while it runs, the freed pages given back after.

Loading a long session reads its log whole, builds an event per line and a ``session/update`` per
card, and frees nearly all of it once the editor has the replay: what stays is the conversation,
as much as the live session held.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "release_freed_memory"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a log is read, applied and replayed: that builds
    an object or more per event and frees none, and the collector would scan the growing heap
    over and over for nothing (most of the time of a large load)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:  # nothing frozen by anyone else, to be thawed with ours
            # What the load made moves to the oldest generation unscanned (frozen, then thawed into
            # it): otherwise the first collection after the pause scans all of it while the editor
            # waits for the answer. A cycle among it is still collected, by the next full collection.
            gc.freeze()
            gc.unfreeze()
        if collecting:
            gc.enable()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None

    try:
        trim: Callable[[int], int] = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def release_freed_memory() -> None:
    """Give the pages of what a load freed back to the system. CPython returns freed objects to
    the C allocator, and glibc's keeps their pages mapped for later (it gives back only the top of
    its heap, and the conversation's objects sit between the freed ones): ``malloc_trim`` unmaps
    every free page, wherever it lies. Without glibc (macOS, musl) this does nothing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
