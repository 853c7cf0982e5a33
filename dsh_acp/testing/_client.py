"""A scriptable ACP client for tests: drives an agent in memory or as a real subprocess, records
every line both ways, validates every agent message against the official schema, and answers the
agent's requests (permissions, files) as told."""

from __future__ import annotations

import os
import subprocess as _subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import orjson
from anyio.abc import ByteReceiveStream, ByteSendStream, Process, TaskGroup

from dsh_acp._config import AgentConfig
from dsh_acp.launch._serve import serve
from dsh_acp.rpc._connection import Connection, RequestId
from dsh_acp.rpc._errors import INVALID_PARAMS, METHOD_NOT_FOUND, RpcError
from dsh_acp.rpc._memory import memory_pipe
from dsh_acp.rpc._tap import LineTapReceive, LineTapSend

from ._checks import wire_problems
from ._child_signal import ChildSignal
from ._schema import AcpSchema
from ._terminals import TestTerminals

__all__ = ["ZED_CAPABILITIES", "AcpClient", "PermissionAnswer", "WireLine"]

ZED_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": True, "writeTextFile": True},
    "terminal": True,
    "_meta": {"terminal_output": True, "terminal-auth": True},
}
"""What Zed advertises in ``initialize`` (terminal output through ``_meta``)."""

EXIT_LIMIT_S = 10.0
"""How long a subprocess agent may take to exit once its stdin is closed (then it is killed)."""

PermissionAnswer = str | Literal["cancelled", "error"]
"""An option id to select, ``"cancelled"`` (the outcome), ``"error"`` (answer with an error), or
``"kind:allow_always"``: the option a client that lists options by kind picks for that kind
(CodeCompanion keeps the last option of each kind)."""


@dataclass(frozen=True, slots=True)
class WireLine:
    """One line on the wire: who wrote it and what it said."""

    direction: Literal["client", "agent"]
    raw: bytes
    message: Any


@dataclass(eq=False)
class AcpClient:
    """An ACP client for tests. Build it with ``in_memory`` or ``subprocess``."""

    schema: AcpSchema | None = None
    permission_answers: deque[PermissionAnswer] = field(default_factory=deque)
    elicitation_answers: deque[dict[str, Any]] = field(default_factory=deque)
    """What ``elicitation/create`` answers, in order (``{"action": "accept", "content": {...}}``)."""
    files: dict[str, str] = field(default_factory=dict)
    """The editor's unsaved buffers: what ``fs/read_text_file`` answers for these paths and
    ``fs/write_text_file`` changes; any other path is read from and saved to the disk."""
    lines: list[WireLine] = field(default_factory=list)
    agent_requests: list[dict[str, Any]] = field(default_factory=list)
    on_update: Callable[[dict[str, Any]], None] | None = None
    on_line: Callable[[WireLine], None] | None = None
    """Called with every line either side writes, as it passes (after it is recorded)."""
    on_agent_request: Callable[[str, Any], Awaitable[Any] | None] | None = None
    """A hook answering agent requests before the defaults (return ``None`` to fall through)."""
    protocol: int = 1
    """The ACP version the agent answered ``initialize`` with (its lines are validated by it)."""
    _connection: Connection | None = None
    _client_methods: dict[RequestId, str] = field(default_factory=dict)
    _changed: anyio.Event = field(default_factory=anyio.Event)
    violations: list[str] = field(default_factory=list)
    terminals: TestTerminals = field(default_factory=TestTerminals)
    """``terminal/*``, served with real subprocesses (the agent calls them only when the client
    advertised ``terminal``)."""
    _send: ByteSendStream | None = None
    _group: TaskGroup | None = None
    process: Process | None = None
    """The agent process (``subprocess`` only)."""
    _process_signal: ChildSignal | None = None
    stderr_lines: deque[str] = field(default_factory=lambda: deque(maxlen=50))
    """The agent's last lines on stderr (``subprocess`` with ``capture_stderr`` only)."""
    exit_code: int | None = None
    """The subprocess agent's exit status, once it exited."""
    hung: bool = False
    """The subprocess agent outlived its closed stdin by ``EXIT_LIMIT_S`` and was killed."""

    # -- construction -------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def in_memory(
        cls, config: AgentConfig, *, schema: AcpSchema | None = None, **kwargs: Any
    ) -> AsyncIterator[AcpClient]:
        """Run an agent in this process over memory pipes (fast; same wire bytes)."""
        client = cls(schema=schema, **kwargs)
        (agent_receive, agent_send), (client_receive, client_send) = memory_pipe()
        async with anyio.create_task_group() as group:
            group.start_soon(serve, config, agent_receive, agent_send)
            async with client._connected(client_receive, client_send):
                yield client
            # The client closed its end: the agent must now finish on its own.

    @classmethod
    @asynccontextmanager
    async def subprocess(
        cls,
        args: Sequence[str],
        *,
        schema: AcpSchema | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        capture_stderr: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[AcpClient]:
        """Launch ``python -m dsh_acp *args`` and talk to it over its real stdio.

        The block's end closes the agent's stdin, as editors end it; an agent that has not exited
        ``EXIT_LIMIT_S`` later is killed, and ``TimeoutError`` says so. The agent's stderr is
        this process's, or with ``capture_stderr`` kept in ``stderr_lines``.
        """
        client = cls(schema=schema, **kwargs)
        process = await anyio.open_process(
            [sys.executable, "-m", "dsh_acp", *args],
            env={**os.environ, **(env or {})},
            cwd=cwd,
            stderr=_subprocess.PIPE if capture_stderr else None,
        )
        client.process = process
        client._process_signal = kill = ChildSignal(process)
        assert process.stdout is not None
        assert process.stdin is not None
        try:
            async with client._connected(process.stdout, process.stdin, process.stderr):
                yield client
        finally:
            if process.returncode is None:
                # Killed already if it hung, and perhaps dead with its exit not delivered yet:
                # the kill must not take that exit from the child watcher (see ChildSignal).
                kill.kill()
                with anyio.CancelScope(shield=True):
                    await process.wait()
            kill.close()
        client.exit_code = process.returncode
        if client.hung:
            raise TimeoutError(f"the agent did not exit within {EXIT_LIMIT_S:g} s of its stdin closing")

    @asynccontextmanager
    async def _connected(
        self, receive: ByteReceiveStream, send: ByteSendStream, stderr: ByteReceiveStream | None = None
    ) -> AsyncIterator[None]:
        self._send = LineTapSend(send, self._client_line)
        connection = Connection(LineTapReceive(receive, self._agent_line), self._send, self)
        self._connection = connection
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(connection.serve)
            if stderr is not None:
                group.start_soon(self._read_stderr, stderr)
            try:
                yield
            finally:
                self.terminals.close()
                await send.aclose()  # the client ends the agent by closing its stdin
                if self.process is not None:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(EXIT_LIMIT_S):
                        await self.process.wait()
                    if self.process.returncode is None:
                        self.hung = True
                        assert self._process_signal is not None
                        self._process_signal.kill()  # its pipes close, and the tasks reading them end

    async def _read_stderr(self, stderr: ByteReceiveStream) -> None:
        buffer = b""
        async for chunk in stderr:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            self.stderr_lines.extend(line.decode(errors="replace") for line in lines if line.strip())
        if buffer.strip():
            self.stderr_lines.append(buffer.decode(errors="replace"))

    # -- recording and validation -------------------------------------------------------------

    def _client_line(self, raw: bytes) -> None:
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            message = None  # deliberately malformed input
        if isinstance(message, dict) and "method" in message and "id" in message:
            self._client_methods[message["id"]] = message["method"]
        self._record(WireLine("client", raw, message))

    def _agent_line(self, raw: bytes) -> None:
        message = orjson.loads(raw)
        answered = None
        if isinstance(message, dict) and "method" not in message:
            answered = self._client_methods.get(message.get("id"))  # type: ignore[arg-type]
            result = message.get("result")
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if answered == "initialize" and version in (1, 2):
                self.protocol = version  # the answer itself is of that version
        self.violations.extend(wire_problems(message))
        if self.schema is not None:
            try:
                self.schema.for_protocol(self.protocol).validate_agent_message(message, answered)
            except AssertionError as error:
                self.violations.append(str(error))
            except FileNotFoundError as error:  # SchemaNotFound: no v2 schema beside the v1 one
                self.violations.append(str(error))
        self._record(WireLine("agent", raw, message))

    def _record(self, line: WireLine) -> None:
        self.lines.append(line)
        if self.on_line is not None:
            self.on_line(line)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    @property
    def agent_messages(self) -> list[Any]:
        """Every message the agent wrote, in order."""
        return [line.message for line in self.lines if line.direction == "agent"]

    def updates(
        self, session_id: str | None = None, kinds: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        """The ``update`` objects of every ``session/update`` so far (of one session; of some
        ``sessionUpdate`` kinds)."""
        return [
            m["params"]["update"]
            for m in self.agent_messages
            if m.get("method") == "session/update"
            and (session_id is None or m["params"]["sessionId"] == session_id)
            and (kinds is None or m["params"]["update"].get("sessionUpdate") in kinds)
        ]

    def assert_valid(self) -> None:
        """Fail if any agent message did not validate against its schema definition, or breaks
        a rule real clients depend on (``wire_problems``)."""
        assert not self.violations, "\n".join(self.violations)

    async def wait_for(self, predicate: Callable[[list[Any]], bool], limit: float = 10) -> None:
        """Wait (at most ``limit`` seconds) until ``predicate(agent_messages)`` holds."""
        await self.wait_until(lambda: predicate(self.agent_messages), limit)

    async def wait_until(self, condition: Callable[[], bool], limit: float = 10) -> None:
        """Wait (at most ``limit`` seconds) until ``condition()`` holds, checked after every line
        either side writes."""
        with anyio.fail_after(limit):
            while not condition():
                await self._changed.wait()

    # -- talking ------------------------------------------------------------------------------

    @property
    def connection(self) -> Connection:
        assert self._connection is not None
        return self._connection

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and return its result (``RpcError`` for an error answer)."""
        return await self.connection.request(method, params)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        await self.connection.notify(method, params)

    async def send_raw(self, data: bytes) -> None:
        """Write bytes to the agent as they are (malformed input, say)."""
        assert self._send is not None
        await self._send.send(data)

    async def initialize(
        self,
        capabilities: Mapping[str, Any] | None = None,
        version: int = 1,
        client_info: Mapping[str, Any] | None = None,
    ) -> Any:
        """``initialize`` with the given client capabilities (and ``clientInfo``: the agent
        knows some clients by name, e.g. ``{"name": "zed"}`` shows permission option names),
        asking for ACP ``version`` (2: the v2 draft, whose params name them ``capabilities``
        and ``info``)."""
        info = dict(client_info or {"name": "dsh-acp-test-client", "version": "1"})
        if version >= 2:
            params = {"protocolVersion": version, "info": info, "capabilities": dict(capabilities or {})}
        else:
            params = {
                "protocolVersion": version,
                "clientCapabilities": dict(capabilities or {}),
                "clientInfo": info,
            }
        return await self.request("initialize", params)

    async def new_session(self, cwd: str, **extra: Any) -> str:
        """``session/new``; returns the session id."""
        result = await self.request("session/new", {"cwd": cwd, "mcpServers": [], **extra})
        session_id: str = result["sessionId"]
        return session_id

    async def prompt(self, session_id: str, *blocks: Any) -> Any:
        """``session/prompt`` with text (``str``) or raw ACP content blocks."""
        prompt = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
        return await self.request("session/prompt", {"sessionId": session_id, "prompt": prompt})

    def turn_end(self, session_id: str, answer: Any) -> dict[str, Any] | None:
        """On a v2 connection, the idle ``state_update`` of ``session_id`` that ended the turn of
        the prompt answered ``answer`` (the first after that answer on the wire), if it came."""
        lines = self.lines
        start = next(
            (
                index
                for index, line in enumerate(lines)
                if line.direction == "agent"
                and isinstance(line.message, dict)
                and line.message.get("result") == answer
            ),
            len(lines),
        )
        for line in lines[start:]:
            message = line.message
            if line.direction != "agent" or not isinstance(message, dict):
                continue
            if message.get("method") != "session/update" or message["params"]["sessionId"] != session_id:
                continue
            update = message["params"]["update"]
            if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                return dict(update)
        return None

    async def turn(self, session_id: str, *blocks: Any, limit: float = 30) -> Any:
        """A prompt and its whole turn: v1's prompt answer, or on a v2 connection (where the
        prompt is answered once accepted) the idle ``state_update`` that ended the turn."""
        answer = await self.prompt(session_id, *blocks)
        if self.protocol < 2:
            return answer
        await self.wait_until(lambda: self.turn_end(session_id, answer) is not None, limit)
        return self.turn_end(session_id, answer)

    async def cancel(self, session_id: str) -> None:
        """``session/cancel``."""
        await self.notify("session/cancel", {"sessionId": session_id})

    # -- the agent's requests (Dispatcher) --------------------------------------------------------

    def on_request(self, method: str, params: Any, request_id: RequestId) -> Awaitable[Any]:
        self.agent_requests.append({"method": method, "params": params})
        return self._answer(method, params)

    def on_notification(self, method: str, params: Any) -> None:
        if method == "session/update" and self.on_update is not None:
            self.on_update(params["update"])

    async def _answer(self, method: str, params: Any) -> Any:
        if self.on_agent_request is not None:
            answer = self.on_agent_request(method, params)
            if answer is not None:
                return await answer
        if method == "session/request_permission":
            return self._permission_answer(params)
        if method == "elicitation/create":
            if not self.elicitation_answers:
                raise RpcError(INVALID_PARAMS, "the test client has no elicitation answer left")
            return self.elicitation_answers.popleft()
        if method == "fs/read_text_file":
            return {"content": await self._read_text(params)}
        if method == "fs/write_text_file":
            await self._write_text(params["path"], params["content"])
            return {}
        if method.startswith("terminal/") and self._group is not None:
            return await self.terminals.answer(method, params, self._group)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _permission_answer(self, params: Any) -> dict[str, Any]:
        """The next of ``permission_answers``: an option id, ``kind:KIND`` (the last option of
        that kind, as a client that lists options by kind picks), ``cancelled`` or ``error``."""
        if not self.permission_answers:
            raise RpcError(INVALID_PARAMS, "the test client has no permission answer left")
        choice = self.permission_answers.popleft()
        if choice == "error":
            raise RpcError(-32603, "permission prompt failed")
        if choice == "cancelled":
            return {"outcome": {"outcome": "cancelled"}}
        if choice.startswith("kind:"):
            kind = choice.removeprefix("kind:")
            of_kind = [o["optionId"] for o in params.get("options", ()) if o.get("kind") == kind]
            if not of_kind:
                raise RpcError(INVALID_PARAMS, f"the test client was offered no {kind} option")
            choice = of_kind[-1]
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    async def _read_text(self, params: Any) -> str:
        """``fs/read_text_file`` as an editor answers it: its buffer, else what is on disk."""
        path = params["path"]
        if path in self.files:
            text = self.files[path]
        else:
            try:
                text = await anyio.Path(path).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise RpcError(-32002, f"Resource not found: {path}") from None
        line, limit = params.get("line"), params.get("limit")
        if line or limit:
            rows = text.splitlines(keepends=True)
            start = (line or 1) - 1
            text = "".join(rows[start : start + limit if limit else None])
        return text

    async def _write_text(self, path: str, content: str) -> None:
        """``fs/write_text_file``: into the buffer if the editor has one, else the editor saves it."""
        if path in self.files:
            self.files[path] = content
            return
        target = anyio.Path(path)
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_text(content, encoding="utf-8")
