"""Killing a child the kit started, without ever reaping it.

On asyncio a child's exit status belongs to the loop's child watcher: a thread blocked in
``waitpid(pid, 0)`` that hands the status to the loop. ``Process.kill()`` goes through
``subprocess.Popen.send_signal``, which polls first, and that poll reaps a child that has just
died: the watcher then finds no child and reports 255 ("Unknown child process"), so the status a
test or an agent reads is made up. On a loaded machine the watcher thread often runs late, so a
kill landing between a child's death and the watcher's turn is common: ``ChildSignal`` sends the
signal with no wait of any kind, through a pidfd opened at spawn (it names that one process even
after its pid is free for reuse; ``os.kill`` on the pid where pidfds are not available).
"""

from __future__ import annotations

import os
import signal

from anyio.abc import Process

__all__ = ["ChildSignal"]


class ChildSignal:
    """Kills one child of ``anyio.open_process`` (build it right after the spawn); ``close()`` it
    once the child's exit is known."""

    def __init__(self, process: Process) -> None:
        self._process = process
        self._pidfd: int | None = None
        self._gone = False
        """The child had exited and been reaped before the pidfd could be opened: its pid may
        already be another process's."""
        if hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(process.pid)
            except ProcessLookupError:
                self._gone = True
            except OSError:
                pass  # a kernel without pidfds: the pid it is

    def kill(self) -> None:
        """SIGKILL the child unless its exit is already known or it is gone; never waits for it."""
        if self._process.returncode is not None or self._gone:
            return
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it exited: its status is on its way to the watcher

    def close(self) -> None:
        """Release the pidfd; the child is signalled no more."""
        self._gone = True
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            os.close(pidfd)
