"""Pipes that hold more than the default 64 KiB, for processes that stream a lot through them."""

from __future__ import annotations

__all__ = ["widen_pipe"]


def widen_pipe(fd: int, size: int = 1 << 20) -> bool:
    """Let the pipe ``fd`` belongs to hold ``size`` bytes (Linux ``F_SETPIPE_SZ``; 1 MiB by
    default, the unprivileged maximum). Bursts then move in few large steps instead of a page at a
    time as the reader catches up, and both ends wake up less often. ``False`` where it cannot: not
    a pipe (a terminal, a file), another system, or above the user's pipe quota."""
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return False
    try:
        fcntl.fcntl(fd, set_size, size)
    except OSError:
        return False
    return True
