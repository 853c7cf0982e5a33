"""The protocol's stdin/stdout, taken over at the file-descriptor level.

stdout belongs to the protocol, and a stray ``print()``, a C extension writing to fd 1, or a child
process that inherited fd 1 would corrupt the wire. So the protocol writes to a private duplicate of
fd 1 and fd 1 itself is pointed at stderr. Likewise the protocol reads a private duplicate of fd 0
and fd 0 is pointed at /dev/null, so no child can steal the client's messages.

Plain descriptors, no streams: the first answer is written before anyio is imported (see
``_prelude``); ``_stdio.protocol_stdio`` wraps them in streams.
"""

from __future__ import annotations

import fcntl
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["protocol_fds"]


def _widen_pipe(fd: int) -> None:
    """Let the pipe to the editor hold 1 MiB (Linux; 64 KiB by default), when it is one: a burst of
    output leaves in whole messages, not a page at a time as the editor reads. (What
    ``dsh_tools.widen_pipe`` does: not imported, as this runs before ``initialize``, which must not
    wait for dsh_tools and pydantic.)"""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        try:
            fcntl.fcntl(fd, set_size, 1 << 20)
        except OSError:  # not a pipe (a terminal, a file), or above the user's pipe quota
            pass


@contextmanager
def protocol_fds() -> Iterator[tuple[int, int]]:
    """Take over stdin/stdout for the protocol and yield ``(read_fd, write_fd)``.

    While inside: fd 1 and ``sys.stdout`` write to stderr, fd 0 and ``sys.stdin`` read /dev/null, and
    the protocol uses private, close-on-exec duplicates of the original fds 0 and 1 (closed on exit,
    unless the caller closed them already). Everything is restored on exit.
    """
    # os.dup makes the copies non-inheritable, so children never see the protocol's pipes.
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    _widen_pipe(protocol_out)
    saved_in = os.dup(0)
    saved_out = os.dup(1)
    old_stdout, old_stdin = sys.stdout, sys.stdin
    _point_at(1, 2, os.O_WRONLY)
    _point_at(0, None, os.O_RDONLY)
    if old_stdout is not None:
        try:
            old_stdout.flush()  # anything buffered before now goes to stderr, not the wire
        except (OSError, ValueError):
            pass
    sys.stdout = our_stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
    sys.stdin = our_stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    try:
        yield protocol_in, protocol_out
    finally:
        try:
            our_stdout.close()  # flushes what handlers printed, to stderr
        except OSError:
            pass
        our_stdin.close()
        sys.stdout, sys.stdin = old_stdout, old_stdin
        os.dup2(saved_out, 1)
        os.dup2(saved_in, 0)
        os.close(saved_out)
        os.close(saved_in)


def _point_at(target: int, source: int | None, flags: int) -> None:
    """Make ``target`` refer to what ``source`` refers to, or to /dev/null."""
    if source is not None:
        try:
            os.dup2(source, target)
            return
        except OSError:
            pass  # source not open (a daemon without stderr): fall back to /dev/null
    null = os.open(os.devnull, flags)
    try:
        os.dup2(null, target)
    finally:
        os.close(null)
