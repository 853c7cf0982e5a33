"""The ACP client's terminals as a ``TerminalHost``: ``terminal/create`` and the methods on it.

Used only when the client advertised ``clientCapabilities.terminal`` (see ``_client_profile``).
A request that fails becomes ``TerminalHostError``, so ``bash`` can fall back or report it. The
session closes this host, which releases any terminal a tool left unreleased.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from dsh_acp._safe_text import brief
from dsh_acp.rpc._errors import RpcError
from dsh_acp.wire._client_requests import (
    CreateTerminalParams,
    TerminalParams,
    create_terminal_params,
    terminal_params,
)
from dsh_tools.terminals import (
    ExitStatus,
    HostTerminal,
    TerminalHost,
    TerminalHostError,
    TerminalSnapshot,
)

__all__ = ["ClientTerminals"]

_log = logging.getLogger("dsh_acp.terminals")
_RELEASE_TIMEOUT_S = 5.0
"""How long closing a session waits for the client to release a terminal."""

Request = Callable[[str, Any], Awaitable[Any]]


_SIGNAL = re.compile(r"SIG[A-Z0-9+-]{1,12}")
"""A signal's name as a client reports it (``SIGKILL``, ``SIGRTMIN+3``)."""


def _exit_status(value: Any) -> ExitStatus:
    if not isinstance(value, Mapping):
        return ExitStatus()
    code, signal = value.get("exitCode"), value.get("signal")
    if isinstance(signal, str) and not _SIGNAL.fullmatch(signal):
        # The model and the card read it: a NUL, a newline or a forged "[exit code 0]" is not a name.
        signal = "an unknown signal"
    return ExitStatus(
        exit_code=code if type(code) is int else None, signal=signal if isinstance(signal, str) else None
    )


class _ClientTerminal(HostTerminal):
    def __init__(self, host: ClientTerminals, terminal_id: str) -> None:
        self._host = host
        self.terminal_id = terminal_id
        self.released = False

    async def _call(self, method: str) -> Any:
        if self.released:
            raise TerminalHostError(f"{method} on terminal {self.terminal_id} after its release")
        return await self._host.call(method, self._host.terminal(self.terminal_id))

    async def output(self) -> TerminalSnapshot:
        answer = await self._call("terminal/output")
        text = answer.get("output") if isinstance(answer, Mapping) else None
        if not isinstance(text, str):
            raise TerminalHostError(f"terminal/output answered without output: {brief(answer)}")
        status = answer.get("exitStatus")
        return TerminalSnapshot(
            output=text,
            truncated=answer.get("truncated") is True,
            exit_status=_exit_status(status) if status is not None else None,
        )

    async def wait_for_exit(self) -> ExitStatus:
        return _exit_status(await self._call("terminal/wait_for_exit"))

    async def kill(self) -> None:
        await self._call("terminal/kill")

    async def release(self) -> None:
        if self.released:
            return
        self.released = True  # exactly once, even if the client fails to answer
        self._host.forget(self)
        await self._host.call("terminal/release", self._host.terminal(self.terminal_id))


class ClientTerminals(TerminalHost):
    """A session's terminals in its ACP client."""

    def __init__(self, request: Request, session_id: str) -> None:
        self._request = request
        self._session_id = session_id
        self._open: dict[str, _ClientTerminal] = {}

    def terminal(self, terminal_id: str) -> TerminalParams:
        """The params that name one of this session's terminals."""
        return terminal_params(self._session_id, terminal_id)

    async def call(self, method: str, params: TerminalParams | CreateTerminalParams) -> Any:
        """One request to the client; its failure is a ``TerminalHostError``."""
        try:
            return await self._request(method, params)
        except RpcError as error:
            raise TerminalHostError(f"{method} failed: {brief(error.message)}") from None

    async def create(
        self,
        command: str,
        args: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        output_byte_limit: int,
    ) -> HostTerminal:
        params = create_terminal_params(
            self._session_id, command, args, cwd=cwd, env=env, output_byte_limit=output_byte_limit
        )
        answer = await self.call("terminal/create", params)
        terminal_id = answer.get("terminalId") if isinstance(answer, Mapping) else None
        if not isinstance(terminal_id, str) or not terminal_id:
            raise TerminalHostError(f"terminal/create answered without a terminalId: {brief(answer)}")
        terminal = _ClientTerminal(self, terminal_id)
        self._open[terminal_id] = terminal
        return terminal

    def forget(self, terminal: _ClientTerminal) -> None:
        self._open.pop(terminal.terminal_id, None)

    async def aclose(self) -> None:
        """Release what a tool left open (a turn cut short while it ran)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(_RELEASE_TIMEOUT_S):
            for terminal in list(self._open.values()):
                try:
                    await terminal.release()
                except Exception as error:  # the client went away: nothing more to release
                    _log.debug("releasing terminal %s: %s", brief(terminal.terminal_id), brief(error))
