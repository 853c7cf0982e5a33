"""Coalescing a running tool's output into few, bounded updates.

Sending one update per pipe read would flood the editor; re-sending the whole output each time is
O(n²). So output is buffered and flushed when ``max_bytes`` are buffered (or a piece of half that
comes at once), or at most ``max_delay`` after the previous flush: output that arrives after a
quiet spell (a line of a slow build) goes out at once, so the user sees it within a pipe hop
rather than a timer's delay, and a flood is batched to one update per ``max_delay``. Each flush
sends only what is new; ``feed`` waits for a size-triggered flush, which is the backpressure that
keeps memory bounded when the client reads slowly.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from dsh_acp._coalesce_policy import CoalescePolicy

__all__ = ["OutputCoalescer"]


class OutputCoalescer:
    """Buffers text and hands it to ``flush`` in order, each byte exactly once."""

    def __init__(
        self, flush: Callable[[str], Awaitable[None]], policy: CoalescePolicy, task_group: TaskGroup
    ) -> None:
        self._flush = flush
        self._policy = policy
        self._group = task_group
        self._parts: list[str] = []
        self._size = 0
        self._lock = anyio.Lock(fast_acquire=True)  # uncontended (the usual case): no yield
        self._timer: anyio.CancelScope | None = None
        self.flushed_any = False
        self._last_flush = -math.inf

    async def feed(self, data: str) -> None:
        """Add output; may wait for a flush (backpressure)."""
        if not data:
            return
        self._parts.append(data)
        self._size += len(data)
        delay = self._policy.max_delay
        # A read of half the size or more is worth an update of its own: waiting for the next one
        # would cost a timer and a copy per update, and leave no fewer updates.
        if self._size >= self._policy.max_bytes or 2 * len(data) >= self._policy.max_bytes:
            await self.flush()
        elif self._timer is None and delay is not None:
            wait = self._last_flush + delay - anyio.current_time()
            if wait <= 0:  # nothing went out for a while: no reason to make the user wait
                await self.flush()
            else:
                self._timer = anyio.CancelScope()
                self._group.start_soon(self._flush_later, self._timer, wait)

    async def _flush_later(self, scope: anyio.CancelScope, delay: float) -> None:
        with scope:
            await anyio.sleep(delay)
        if scope.cancel_called:  # a size flush or the end got there first
            return
        if self._timer is scope:
            self._timer = None  # flush() must not cancel the task it runs in
        await self.flush()

    async def flush(self) -> None:
        """Send whatever is buffered now."""
        async with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._parts:
                return
            data = "".join(self._parts)
            self._parts.clear()
            self._size = 0
            self.flushed_any = True
            self._last_flush = anyio.current_time()
            await self._flush(data)

    async def aclose(self) -> None:
        """Flush the rest and stop the timer."""
        await self.flush()
