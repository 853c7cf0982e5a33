"""``SessionTasks``: where a tool starts work that outlives its call (a background command).

A tool call is structured: its body ends before the call's result is given. Work that must go
on after it (pumping a background command's output) needs somewhere to run that lives as long
as the session, and that the session's end stops. The host registers one ``SessionTasks`` per
session in its ``Services`` (over a task group of its own that outlives the session); a tool
reaches it as ``execution.tasks``. Closing the session's services closes it last-added-first,
so a tool's own service (added later) stops its work first, and this then cancels what is left
and waits for it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the pipeline itself is framework-free: anyio loads with the first task
    import anyio
    from anyio.abc import TaskGroup

__all__ = ["SessionTasks"]

_log = logging.getLogger("dsh_tools")


class SessionTasks:
    """A session's tasks, run in the host's task group ``group`` and cancelled together.

    A task that raises is logged and ends alone: it never takes the session or the host down.
    Starting one after ``aclose`` raises ``RuntimeError``.
    """

    __slots__ = ("_closed", "_group", "_idle", "_scopes")

    def __init__(self, group: TaskGroup) -> None:
        self._group = group
        self._scopes: set[anyio.CancelScope] = set()  # an idle session's stays empty
        self._idle: anyio.Event | None = None
        self._closed = False

    def __len__(self) -> int:
        """How many tasks still run."""
        return len(self._scopes)

    def start_soon(self, func: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None) -> None:
        """Run ``func(*args)`` until it returns or the session closes."""
        if self._closed:
            raise RuntimeError("the session is closed: it runs no new tasks")
        import anyio

        scope = anyio.CancelScope()
        self._scopes.add(scope)
        self._group.start_soon(self._run, scope, func, args, name=name)

    async def _run(self, scope: anyio.CancelScope, func: Callable[..., Awaitable[Any]], args: Any) -> None:
        try:
            with scope:
                await func(*args)
        except Exception:
            _log.exception("a session task failed: %r", func)
        finally:
            self._scopes.discard(scope)
            if not self._scopes and self._idle is not None:
                self._idle.set()

    async def aclose(self) -> None:
        """Cancel every task the session still runs and wait until all have ended."""
        self._closed = True
        if not self._scopes:
            return
        import anyio

        self._idle = anyio.Event()
        for scope in self._scopes:
            scope.cancel()
        with anyio.CancelScope(shield=True):
            await self._idle.wait()
