"""A connection's output side: one queue, drained by one writer task, in production order.

Messages leave in exactly the order they were queued, a burst of notifications becomes a few large
writes, and producers wait (backpressure) only when the peer stops reading. When the send stream
also offers ``write_nowait(data) -> int`` (write what fits now, without waiting; see
``FdSendStream``) and the loop is asyncio, each loop turn's output is written from a loop callback in
one system call (a notification more than ``burst_gap`` seconds after the previous write, the
trickle of a model's tokens, is written at once instead: no output of that turn can be ahead of
it); otherwise, and whenever the peer falls behind, the writer task does the writing. At shutdown
the line already started on the wire is finished, never half a message, and nothing after it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from time import monotonic_ns
from typing import Final

import anyio
from anyio.abc import ByteSendStream

__all__ = ["Output"]

logger = logging.getLogger("dsh_acp.connection")

_NEWLINE: Final = 10  # b"\n"[0]
# The unit of progress when finishing a line at shutdown (see Output.finish_line).
_FINISH_PIECE: Final = 64 * 1024


class Output:
    """The queue and the writer of one connection; ``run()`` is the writer task.

    ``on_failure`` is called once the peer stopped reading (the output is shut by then), so that
    the connection ends as well.
    """

    def __init__(
        self,
        send_stream: ByteSendStream,
        on_failure: Callable[[], None],
        *,
        high_water: int,
        finish_line_timeout: float,
        burst_gap: float,
    ) -> None:
        self._send_stream = send_stream
        self._on_failure = on_failure
        self.high_water = high_water
        """Queued bytes above which producers wait for the writer (``wait_drained``)."""
        self._finish_line_timeout = finish_line_timeout
        self.closed = False
        """No new output is accepted once set."""

        # Output not yet handed to the stream, in production order.
        self._pending: list[bytes] = []
        self.pending_bytes = 0
        # Set while the writer task is idle (nothing in flight); setting it wakes the writer.
        self._writer_wakeup: anyio.Event | None = None
        self._drained: anyio.Event | None = None  # wakes producers held by backpressure
        # The fast path (see write): a synchronous write from a loop callback, when available.
        self._write_nowait: Callable[[bytes], int] | None = None
        self._call_soon: Callable[[Callable[[], None]], object] | None = None
        self._flush_scheduled = False
        self._burst_gap_ns = burst_gap_ns = int(burst_gap * 1e9)
        self._flushed_at = -burst_gap_ns  # when output last left by the fast path
        # What the writer task is sending, and whether the bytes written so far end mid-line: on
        # shutdown the line being written is finished (never half a message), nothing after it.
        self._sending: bytes | None = None
        self._line_open = False

    def use_fast_path(self) -> None:
        """Write from loop callbacks where the stream and the loop allow it (called in the loop)."""
        self._write_nowait = getattr(self._send_stream, "write_nowait", None)
        if self._write_nowait is not None:
            self._call_soon = _loop_call_soon()

    def write(self, data: bytes, at_once: bool = False) -> None:
        """Queue one encoded message; ``at_once`` for a notification (see the module docstring)."""
        pending = self._pending
        if (
            at_once
            and not pending
            and self._writer_wakeup is not None
            and not self._flush_scheduled
            and self._call_soon is not None
            and (now := monotonic_ns()) - self._flushed_at >= self._burst_gap_ns
        ):
            # A notification after a quiet spell (a model's next token from the network) is
            # written now: a flush scheduled for it alone would cost a loop turn of its own.
            # Answers keep the end of the turn, so the notifications that follow one (a session's
            # commands) leave in the same write. Nothing is queued and the writer is idle, so it
            # goes straight to the descriptor.
            self._flushed_at = now
            self._write_out(data)
            return
        pending.append(data)
        self.pending_bytes += len(data)
        if self._writer_wakeup is None or self._flush_scheduled:
            return  # the writer is busy and takes the queue next, or a flush is already due
        if self._call_soon is None:
            self.wake_writer()
        else:
            # Inside a burst: write from a plain callback at the end of this loop turn, so all that
            # is queued by then goes out in one system call, without switching to the writer task
            # (that switch costs as much as the rest of a notification).
            self._flush_scheduled = True
            self._call_soon(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_scheduled = False
        self._flushed_at = monotonic_ns()
        if self._writer_wakeup is None or not self._pending:
            return  # the writer has data in flight: writing here would reorder
        self._write_out(self._take_pending())

    def _write_out(self, data: bytes) -> None:
        """Write from the loop (the writer task is idle); what the pipe does not take now, the
        writer waits to write, ahead of anything queued since."""
        assert self._write_nowait is not None
        try:
            written = self._write_nowait(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._failed(exc)
            return
        if written == len(data):
            return
        if written:
            self._line_open = data[written - 1] != _NEWLINE
        self._pending.insert(0, data[written:])
        self.pending_bytes += len(data) - written
        self.wake_writer()

    def _take_pending(self) -> bytes:
        pending = self._pending
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        self.pending_bytes = 0
        if self._drained is not None:
            self._release_producers()
        return data

    async def wait_drained(self) -> None:
        """Wait while more than ``high_water`` bytes are queued (the peer is not reading)."""
        while self.pending_bytes > self.high_water and not self.closed:
            if self._drained is None:
                self._drained = anyio.Event()
            await self._drained.wait()

    def _release_producers(self) -> None:
        drained = self._drained
        if drained is not None:
            self._drained = None
            drained.set()

    async def run(self) -> None:
        """The writer task: returns once everything queued before the close has been written."""
        send = self._send_stream.send
        # The backend's own event class, looked up once: anyio.Event() looks it up at every call,
        # and the writer makes one per wake-up.
        new_event = type(anyio.Event())
        try:
            while True:
                if not self._pending:
                    if self.closed:
                        return  # everything queued before the close has been written
                    wakeup = self._writer_wakeup = new_event()
                    await wakeup.wait()
                    continue
                self._sending = data = self._take_pending()
                try:
                    await send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._failed(exc)
                    return
                self._sending = None
                self._line_open = False  # every message ends with its newline
        finally:
            self._writer_wakeup = None  # no writer: nothing may be written from a callback either

    def _failed(self, exc: BaseException) -> None:
        logger.info("peer stopped reading (%r): closing the connection", exc.__cause__ or exc)
        self._sending = None
        self._line_open = False  # nobody to finish it for
        self.shut()
        self._on_failure()

    def wake_writer(self) -> None:
        wakeup = self._writer_wakeup
        if wakeup is not None:
            self._writer_wakeup = None
            wakeup.set()

    def shut(self) -> None:
        """Accept no more output and drop what is queued; producers held by backpressure go on."""
        self.closed = True
        self._pending.clear()
        self.pending_bytes = 0
        self._release_producers()

    def unfinished_line(self) -> bytes:
        """The rest of the message whose start is already on the wire (``b""`` if none)."""
        data, unsent = self._sending, getattr(self._send_stream, "unsent", None)
        if data is not None and unsent is not None:  # the writer was stopped inside send()
            written = len(data) - len(unsent)
            # Nothing of ``data`` written yet: the line is open only if a write from a loop callback
            # (``_flush_now``) left part of it on the wire before ``data`` was queued.
            line_open = data[written - 1] != _NEWLINE if written else self._line_open
            if not line_open:
                return b""
            rest = bytes(unsent)
        elif self._line_open and self._pending:
            rest = b"".join(self._pending)
        else:
            return b""
        end = rest.find(b"\n")
        return rest if end < 0 else rest[: end + 1]

    async def finish_line(self, rest: bytes) -> None:
        """Write the rest of a started line, giving up only on a reader that stopped reading.

        The limit is on time without progress, not on the whole write: a slow but live reader (a busy
        editor, a loaded machine) gets the line whole, while a reader that never reads again costs at
        most ``finish_line_timeout`` seconds of shutdown.
        """
        try:
            for start in range(0, len(rest), _FINISH_PIECE):
                with anyio.move_on_after(self._finish_line_timeout) as stalled:
                    await self._send_stream.send(rest[start : start + _FINISH_PIECE])
                if stalled.cancelled_caught:
                    return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the reader is gone: nobody will see the half line either


def _loop_call_soon() -> Callable[[Callable[[], None]], object] | None:
    """``call_soon`` of the running asyncio loop; None on other backends (they use the writer task)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        call_soon: Callable[[Callable[[], None]], object] = asyncio.get_running_loop().call_soon
    except RuntimeError:
        return None
    return call_soon
