"""anyio byte streams on file descriptors: the protocol's stdin/stdout (guarded by
``protocol_fds``), an MCP server's pipes.

The streams use ``os.read``/``os.write`` on the file descriptors directly, waiting for readiness only
when a pipe is empty or full: no thread hop, one system call per read or write.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.lowlevel import checkpoint

from ._protocol_fds import protocol_fds

__all__ = ["FdReceiveStream", "FdSendStream", "protocol_stdio", "protocol_streams"]

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
    """Read bytes from a file descriptor (pipe, socket, terminal, regular file or /dev/null).

    ``already_read``: bytes someone read from the descriptor before this stream was made (they are
    received first); ``ended``: that reader saw the end of input (a terminal reports it only once).
    """

    def __init__(
        self, fd: int, *, close_fd: bool = False, already_read: bytes = b"", ended: bool = False
    ) -> None:
        self._fd = _Fd(fd, close_fd=close_fd)
        self._already_read = already_read
        self._ended = ended

    @property
    def fileno(self) -> int:
        """The file descriptor read from."""
        return self._fd.fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Return what is available (at least one byte); raise ``anyio.EndOfStream`` at end of file."""
        fd = self._fd
        fd.check_open()
        if self._already_read or self._ended:
            return await self._receive_already_read(max_bytes)
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

    async def _receive_already_read(self, max_bytes: int) -> bytes:
        await checkpoint()
        data = self._already_read[:max_bytes]
        self._already_read = self._already_read[max_bytes:]
        if not data:
            raise anyio.EndOfStream  # only ``ended`` is left
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
        if fd.closed:  # fd.check_open(), inline: this is the write of every trickled notification
            raise anyio.ClosedResourceError
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


@contextmanager
def protocol_stdio() -> Iterator[tuple[FdReceiveStream, FdSendStream]]:
    """Take over stdin/stdout for the protocol (``protocol_fds``) and yield
    ``(receive_stream, send_stream)`` on the protocol's private descriptors."""
    with protocol_fds() as (read_fd, write_fd), protocol_streams(read_fd, write_fd) as streams:
        yield streams


@contextmanager
def protocol_streams(
    read_fd: int, write_fd: int, *, already_read: bytes = b"", ended: bool = False
) -> Iterator[tuple[FdReceiveStream, FdSendStream]]:
    """Streams that own ``read_fd`` and ``write_fd``, closed on exit if the connection did not
    close them first. ``already_read`` and ``ended``: see ``FdReceiveStream``."""
    receive = FdReceiveStream(read_fd, close_fd=True, already_read=already_read, ended=ended)
    send = FdSendStream(write_fd, close_fd=True)
    try:
        yield receive, send
    finally:
        receive._fd.close()
        send._fd.close()
