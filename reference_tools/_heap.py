"""How much freed memory the C allocator keeps for the next flood of output (glibc's ``mallopt``).

Relaying a command that prints without pause allocates a few large buffers per read: the read,
its text, and orjson's output buffer, which orjson sizes at 16 times the text before shrinking it
(4 MiB for a 256 KiB read). glibc's thresholds follow the largest block it has freed (here 4 MiB
served from the heap, 8 MiB of free heap top before it is handed back), and a flood's heap swings
just past that: the top was handed back and taken again every few reads, and every page taken
again was faulted in and zeroed anew (bench/README.md has the figures). Fixed thresholds a
little above that swing keep those pages.
"""

from __future__ import annotations

__all__ = ["keep_freed_heap"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the heap (orjson's buffer for a 256 KiB read is 4 MiB)...
_MMAP_THRESHOLD = 8 << 20
# ...and up to this much free heap top is kept: a flood's swing is about 8.5 MiB.
_TRIM_THRESHOLD = 16 << 20

_done = False


def keep_freed_heap() -> None:
    """Fix the allocator's thresholds (once per process; a no-op where there is no ``mallopt``).

    Called when a command's output first comes as a flood, not at start: ctypes costs 2.5 ms to
    import, and a session that never relays a flood has no use for it.
    """
    global _done
    if _done:
        return
    _done = True
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (or musl's no-op): nothing to tune
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
