"""Messages waiting for the one reader of a stream: an SSE response, or a WebSocket's sender.

The agent's output is put here synchronously as it is written, one JSON line per message, and
taken in batches by the stream's reader; what no reader takes yet stays queued (an HTTP client
opens a session's stream a moment after it learns the session's id, and may open it again after a
network blip). Bytes are counted by the channel that owns the mailboxes, which closes the
connection when a client leaves too much unread.
"""

from __future__ import annotations

from collections import deque

import anyio

__all__ = ["Mailbox"]


class Mailbox:
    """An ordered queue of messages (JSON text without the newline) with at most one reader."""

    __slots__ = ("_lines", "_wakeup", "closed", "reader")

    def __init__(self) -> None:
        self._lines: deque[bytes] = deque()
        self._wakeup: anyio.Event | None = None
        self.closed = False
        """No more messages will come: the reader ends once it took what is queued."""
        self.reader: object | None = None
        """Who reads this mailbox now (``None``: nobody; messages wait)."""

    def __len__(self) -> int:
        return len(self._lines)

    def put(self, line: bytes) -> None:
        """Queue one message (synchronous: called from the agent's writer)."""
        self._lines.append(line)
        wakeup = self._wakeup
        if wakeup is not None:
            self._wakeup = None
            wakeup.set()

    def close(self) -> None:
        """No more messages: wake the reader so that it ends after what is queued."""
        self.closed = True
        wakeup = self._wakeup
        if wakeup is not None:
            self._wakeup = None
            wakeup.set()

    def take_nowait(self) -> list[bytes]:
        """Every queued message, oldest first (none if nothing is queued)."""
        lines = list(self._lines)
        self._lines.clear()
        return lines

    async def take(self, keepalive: float | None = None) -> list[bytes] | None:
        """Every queued message, waiting for one if none is; ``[]`` when ``keepalive`` seconds
        passed first (time for a keep-alive), ``None`` once the mailbox is closed and empty."""
        if not self._lines:
            if self.closed:
                return None
            wakeup = self._wakeup = anyio.Event()
            with anyio.move_on_after(keepalive):
                await wakeup.wait()
            if not self._lines:
                return None if self.closed else []
        return self.take_nowait()
