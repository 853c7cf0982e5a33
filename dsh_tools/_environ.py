"""Keep the agent's own environment from its children: they run as the same user, and
``/proc/<agent pid>/environ`` would otherwise hand them every secret the agent was started with.

Two measures, taken once before the first child starts (Linux; elsewhere nothing is done):

- ``prctl(PR_SET_DUMPABLE, 0)``: the agent's ``/proc/<pid>/environ``, ``mem`` and ``ptrace`` are
  then refused to every process without ``CAP_SYS_PTRACE`` (any same-user process that is not
  root). Side effects: no core dumps; ``py-spy``/``gdb`` need root to attach; the agent still reads
  its own ``/proc/self``.
- The values of secret variables (``dsh_tools.is_secret_variable``) are overwritten with NUL bytes
  in the block the kernel shows as ``/proc/<pid>/environ``, so even root reading that file sees
  the names only. Python took its own copy (``os.environ``) at start-up, which is what the agent
  uses; only C code calling ``getenv`` for those names would now see an empty value. Root can
  still read the copy in the agent's memory (``/proc/<pid>/mem``, ``ptrace``): only another user,
  or a sandbox, keeps a root process out.
"""

from __future__ import annotations

import functools
import logging
import sys

from ._secrets import is_secret_variable

__all__ = ["protect_environment"]

_log = logging.getLogger("dsh_tools.processes")

_PR_SET_DUMPABLE = 4
_ENV_START_FIELD = 50  # /proc/PID/stat fields, 1-based (proc(5))
_ENV_END_FIELD = 51


@functools.cache
def protect_environment() -> bool:
    """Make the agent's environment unreadable to other processes as far as this kernel allows;
    ``True`` if both measures were taken. Idempotent; cheap after the first call."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here, not at import: the idle agent never pays for ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    dumpable = libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    if not dumpable:
        _log.warning("could not make the agent undumpable: children may read its environment")
    return dumpable and _blank_secret_values()


def _blank_secret_values() -> bool:
    import ctypes as c

    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        start, end = int(fields[_ENV_START_FIELD - 3]), int(fields[_ENV_END_FIELD - 3])
    except (OSError, IndexError, ValueError):
        return False
    if not 0 < start < end or end - start > 1 << 24:
        return False
    block = c.string_at(start, end - start)
    offset = 0
    for entry in block.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        decoded = name.decode("utf-8", "replace"), value.decode("utf-8", "replace")
        if equals and value and is_secret_variable(*decoded):
            c.memset(start + offset + len(name) + 1, 0, len(value))
        offset += len(entry) + 1
    return True
