"""The ``TerminalHost`` seam: running a command in a terminal the user watches in their client.

A host whose client offers terminals (ACP's ``terminal/*`` methods) registers a ``TerminalHost``
in the session's ``Services``; ``bash`` then runs foreground commands there, so the client shows
the live output in its own terminal widget, and falls back to running them itself (with one log
line) when the host cannot create a terminal. The tool keeps every guarantee of its local path:
the permission gate runs first, the output the model sees is bounded by ``output_byte_limit``,
timeouts and cancellation kill the command and keep what it printed, and each terminal is
released exactly once.

The seam exists so that ``reference_tools`` never depends on the protocol that carries it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ExitStatus", "HostTerminal", "TerminalHost", "TerminalHostError", "TerminalSnapshot"]


class TerminalHostError(Exception):
    """The host could not do what was asked (its client answered with an error or nonsense)."""


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How a command ended: its exit code, or the signal that killed it (``"SIGTERM"``)."""

    exit_code: int | None = None
    signal: str | None = None


@dataclass(frozen=True, slots=True)
class TerminalSnapshot:
    """A terminal's output so far (at most the byte limit it was created with, the latest bytes
    kept), whether older output was dropped for that, and the exit status once it ended."""

    output: str
    truncated: bool = False
    exit_status: ExitStatus | None = None


class HostTerminal(ABC):
    """One command running in the host's terminal ``terminal_id``.

    Every method raises ``TerminalHostError`` when the host fails. ``release`` must be called
    exactly once, whatever happened; after it the terminal's id is no longer valid.
    """

    terminal_id: str

    @abstractmethod
    async def output(self) -> TerminalSnapshot:
        """The output so far, without waiting for the command to end."""

    @abstractmethod
    async def wait_for_exit(self) -> ExitStatus:
        """Wait until the command ends."""

    @abstractmethod
    async def kill(self) -> None:
        """Stop the command (the terminal and its output stay until ``release``)."""

    @abstractmethod
    async def release(self) -> None:
        """Kill the command if it still runs and free the terminal (the client may keep showing
        its output)."""


class TerminalHost(ABC):
    """Creates terminals in the user's client."""

    @abstractmethod
    async def create(
        self,
        command: str,
        args: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        output_byte_limit: int,
    ) -> HostTerminal:
        """Start ``command`` with ``args`` in a new terminal of the client, in ``cwd``, with
        ``env`` added to the client's environment; the client keeps at most
        ``output_byte_limit`` bytes of output. ``TerminalHostError`` when it cannot."""
