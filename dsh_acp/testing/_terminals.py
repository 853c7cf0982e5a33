"""The test client's terminals: ``terminal/*`` served with real subprocesses, as an editor would.

Each ``terminal/create`` starts the command (stdout and stderr into one stream, like a terminal)
and keeps at most ``outputByteLimit`` bytes of its output, dropping the oldest at character
boundaries. ``terminal/kill`` and ``terminal/release`` kill only the process the client started,
as real clients do (Toad, acpx): what that process started is the agent's business. Terminal
ids count up per client (``term-1``…), so goldens stay deterministic.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup

from dsh_acp.rpc._errors import INVALID_PARAMS, RpcError

from ._child_signal import ChildSignal

__all__ = ["TestTerminals"]


@dataclass(eq=False)
class _Terminal:
    process: Process
    kill: ChildSignal
    limit: int | None
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)

    def status(self) -> dict[str, Any]:
        code = self.process.returncode
        if code is not None and code < 0:
            return {"exitCode": None, "signal": signal.Signals(-code).name}
        return {"exitCode": code, "signal": None}

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


class TestTerminals:
    """``terminal/*`` for the test client. ``calls`` lists each request's method, in order."""

    def __init__(self) -> None:
        self._terminals: dict[str, _Terminal] = {}
        self._count = 0
        self.released: list[str] = []
        self.killed: list[str] = []

    def output_of(self, terminal_id: str) -> bytes:
        """What terminal ``terminal_id`` kept of its output so far (empty if there is none)."""
        terminal = self._terminals.get(terminal_id)
        return bytes(terminal.output) if terminal is not None else b""

    def _get(self, params: Mapping[str, Any]) -> _Terminal:
        terminal = self._terminals.get(params.get("terminalId"))  # type: ignore[arg-type]
        if terminal is None:
            raise RpcError(INVALID_PARAMS, f"no terminal {params.get('terminalId')!r}")
        return terminal

    async def answer(self, method: str, params: Mapping[str, Any], group: TaskGroup) -> Any:
        if method == "terminal/create":
            return await self._create(params, group)
        terminal = self._get(params)
        if method == "terminal/output":
            answer: dict[str, Any] = {"output": terminal.text(), "truncated": terminal.truncated}
            if terminal.done.is_set():
                answer["exitStatus"] = terminal.status()
            return answer
        if method == "terminal/wait_for_exit":
            await terminal.done.wait()
            return terminal.status()
        if method == "terminal/kill":
            self.killed.append(params["terminalId"])
            self._kill(terminal)
            return {}
        if method == "terminal/release":
            self.released.append(params["terminalId"])
            self._kill(terminal)
            del self._terminals[params["terminalId"]]
            return {}
        raise RpcError(INVALID_PARAMS, f"unknown terminal method {method}")

    async def _create(self, params: Mapping[str, Any], group: TaskGroup) -> dict[str, Any]:
        env = dict(os.environ)
        for variable in params.get("env") or ():
            env[variable["name"]] = variable["value"]
        try:
            process = await anyio.open_process(
                [params["command"], *params.get("args", ())],
                cwd=params.get("cwd"),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        except OSError as error:
            raise RpcError(INVALID_PARAMS, f"cannot run {params['command']}: {error}") from None
        self._count += 1
        terminal_id = f"term-{self._count}"
        terminal = _Terminal(process, ChildSignal(process), params.get("outputByteLimit"))
        self._terminals[terminal_id] = terminal
        group.start_soon(self._pump, terminal)
        return {"terminalId": terminal_id}

    async def _pump(self, terminal: _Terminal) -> None:
        assert terminal.process.stdout is not None
        try:
            async for chunk in terminal.process.stdout:
                terminal.output += chunk
                limit = terminal.limit
                if limit is not None and len(terminal.output) > limit:
                    cut = len(terminal.output) - limit
                    while cut < len(terminal.output) and terminal.output[cut] & 0xC0 == 0x80:
                        cut += 1  # never start inside a character
                    del terminal.output[:cut]
                    terminal.truncated = True
        except anyio.EndOfStream:
            pass
        finally:
            with anyio.CancelScope(shield=True):
                await terminal.process.wait()
            terminal.kill.close()
            terminal.done.set()

    @staticmethod
    def _kill(terminal: _Terminal) -> None:
        # Not Process.kill(): a command that has just exited would lose its status (see ChildSignal).
        terminal.kill.kill()

    def close(self) -> None:
        """Kill whatever still runs (the client is going away)."""
        for terminal in self._terminals.values():
            self._kill(terminal)
