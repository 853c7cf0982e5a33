"""The protocol's stdin/stdout, guarded at the file-descriptor level.

stdout belongs to the protocol, and a stray ``print()``, a C extension writing to fd 1, or a child
process that inherited fd 1 would corrupt the wire. So the protocol writes to a private duplicate of
fd 1 and fd 1 itself is pointed at stderr. Likewise the protocol reads a private duplicate of fd 0
and fd 0 is pointed at /dev/null, so no child can steal the client's messages.

The streams use ``os.read``/``os.write`` on the file descriptors directly, waiting for readiness only
when a pipe is empty or full: no thread hop, one system call per read or write.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.lowlevel import checkpoint

__all__ = ["FdReceiveStream", "FdSendStream", "protocol_stdio"]

# How a file descriptor is waited on.
_NONBLOCKING: Final = "nonblocking"  # pipes and sockets: O_NONBLOCK, wait only on EAGAIN
_POLL: Final = "poll"  # terminals: wait for readiness, then a blocking call that will not block
_DIRECT: Final = "direct"  # regular files, /dev/null: never block for long and cannot be polled


class _Fd:
    """A file descriptor with the waiting strategy its type allows; restores O_NONBLOCK on close."""

    def __init__(self, fd: int, *, close_fd: bool) -> None:
        self.fd = fd
        self.close_fd = close_fd
        self.closed = False
        self.was_blocking = os.get_blocking(fd)
        mode = os.fstat(fd).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            # O_NONBLOCK belongs to the open file description, which a parent may share; it is
            # restored on close.
            os.set_blocking(fd, False)
            self.mode = _NONBLOCKING
        elif stat.S_ISCHR(mode):
            self.mode = _POLL
        else:
            self.mode = _DIRECT

    def check_open(self) -> None:
        if self.closed:
            raise anyio.ClosedResourceError

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            anyio.notify_closing(self.fd)  # wakes a task waiting on it with ClosedResourceError
        except RuntimeError:
            pass  # outside an event loop nobody can be waiting
        try:
            if self.mode == _NONBLOCKING:
                os.set_blocking(self.fd, self.was_blocking)
        except OSError:
            pass
        if self.close_fd:
            os.close(self.fd)


class FdReceiveStream(ByteReceiveStream):
    """Read bytes from a file descriptor (pipe, socket, terminal, regular file or /dev/null)."""

    def __init__(self, fd: int, *, close_fd: bool = False) -> None:
        self._fd = _Fd(fd, close_fd=close_fd)

    @property
    def fileno(self) -> int:
        """The file descriptor read from."""
        return self._fd.fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Return what is available (at least one byte); raise ``anyio.EndOfStream`` at end of file."""
        fd = self._fd
        fd.check_open()
        waited = False
        while True:
            if fd.mode == _POLL:
                try:
                    await anyio.wait_readable(fd.fd)
                    waited = True
                except OSError:  # e.g. epoll refuses /dev/null
                    fd.mode = _DIRECT
            try:
                data = os.read(fd.fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(fd.fd)
                waited = True
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            break
        if not waited:
            # Data was already there: still yield once, or a reader of an endless regular file would
            # starve every other task.
            await checkpoint()
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        """Stop reading; closes the descriptor only if the stream owns it."""
        self._fd.close()
        await checkpoint()


class FdSendStream(ByteSendStream):
    """Write bytes to a file descriptor, waiting only when a pipe is full.

    ``send()`` does not yield when the write completes at once: that is the common case and each
    yield costs a trip through the event loop.
    """

    def __init__(self, fd: int, *, close_fd: bool = False) -> None:
        self._fd = _Fd(fd, close_fd=close_fd)
        self.unsent: bytes | memoryview | None = None
        """What a ``send()`` that was cancelled midway had not written yet (``Connection`` uses it
        to finish the line it was writing)."""

    @property
    def fileno(self) -> int:
        """The file descriptor written to."""
        return self._fd.fd

    async def send(self, item: bytes) -> None:
        """Write all of ``item``; raise ``anyio.BrokenResourceError`` if the reader is gone."""
        fd = self._fd
        fd.check_open()
        data: bytes | memoryview = item
        self.unsent = None
        while data:
            self.unsent = data
            if fd.mode == _POLL:
                try:
                    await anyio.wait_writable(fd.fd)
                except OSError:
                    fd.mode = _DIRECT
            try:
                written = os.write(fd.fd, data)
            except BlockingIOError:
                await anyio.wait_writable(fd.fd)
                continue
            except OSError as exc:  # BrokenPipeError above all
                raise anyio.BrokenResourceError from exc
            if written == len(data):
                self.unsent = None
                return
            data = memoryview(data)[written:]

    def write_nowait(self, data: bytes) -> int:
        """Write what the descriptor takes right now, without waiting; return the bytes written.

        ``Connection`` uses this to write from a loop callback instead of switching to its writer task.
        """
        fd = self._fd
        fd.check_open()
        if fd.mode == _POLL:
            return 0  # a terminal's fd is blocking: only send() may wait for it
        try:
            return os.write(fd.fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        """Stop writing; closes the descriptor only if the stream owns it."""
        self._fd.close()
        await checkpoint()


def _widen_pipe(fd: int) -> None:
    """Let the pipe to the editor hold 1 MiB (Linux; 64 KiB by default), when it is one: a burst of
    output leaves in whole messages, not a page at a time as the editor reads. (What
    ``dsh_tools.widen_pipe`` does: not imported, as this runs before ``initialize``, which must not
    wait for dsh_tools and pydantic.)"""
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        try:
            fcntl.fcntl(fd, set_size, 1 << 20)
        except OSError:  # not a pipe (a terminal, a file), or above the user's pipe quota
            pass


@contextmanager
def protocol_stdio() -> Iterator[tuple[FdReceiveStream, FdSendStream]]:
    """Take over stdin/stdout for the protocol and yield ``(receive_stream, send_stream)``.

    While inside: fd 1 and ``sys.stdout`` write to stderr, fd 0 and ``sys.stdin`` read /dev/null, and
    the protocol uses private, close-on-exec duplicates of the original fds 0 and 1. Everything is
    restored on exit.
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
    receive = FdReceiveStream(protocol_in, close_fd=True)
    send = FdSendStream(protocol_out, close_fd=True)
    try:
        yield receive, send
    finally:
        try:
            our_stdout.close()  # flushes what handlers printed, to stderr
        except OSError:
            pass
        our_stdin.close()
        sys.stdout, sys.stdin = old_stdout, old_stdin
        receive._fd.close()
        send._fd.close()
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
