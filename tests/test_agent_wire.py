"""The real ``dsh-acp`` process over its real stdio: garbage in, clear answers out, still serving.

Also the public conformance kit's mandatory v1 requirements that need the true wire: every stdout
line one JSON-RPC message in valid UTF-8, ids echoed, notifications never answered, exit on stdin
close.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import Process

from dsh_acp.session._events import AssistantReply, TurnStopped, UserPrompt
from dsh_acp.testing import AcpSchema
from dsh_tools import TextBlock

pytestmark = pytest.mark.anyio

INIT = {"jsonrpc": "2.0", "id": "probe", "method": "initialize", "params": {"protocolVersion": 1}}


class Wire:
    """Raw lines to and from a real agent process."""

    def __init__(self, process: Process, schema: AcpSchema) -> None:
        self.process = process
        self.schema = schema
        self.buffer = b""
        self.methods: dict[Any, str] = {}

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def send(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" in message:
            self.methods[message["id"]] = message["method"]
        await self.send_raw(orjson.dumps(message) + b"\n")

    async def request(self, request_id: int | str, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    async def new_session_and_prompt(self, cwd: Path, text: str) -> str:
        """Open a session (id 1), send it a prompt (id 2); the session id."""
        await self.request(1, "session/new", {"cwd": str(cwd), "mcpServers": []})
        sid: str = (await self.line())["result"]["sessionId"]
        await self.request(
            2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        )
        return sid

    async def close_stdin_and_wait(self) -> tuple[int, float]:
        """End the agent's input; its exit code and how long it took to exit."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        started = time.monotonic()
        with anyio.fail_after(5):
            code = await self.process.wait()
        return code, time.monotonic() - started

    async def line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        with anyio.fail_after(10):
            while b"\n" not in self.buffer:
                self.buffer += await self.process.stdout.receive()
        raw, self.buffer = self.buffer.split(b"\n", 1)
        raw.decode("utf-8")  # valid UTF-8, or this raises
        message: dict[str, Any] = json.loads(raw)
        answered = self.methods.get(message.get("id")) if "method" not in message else None
        self.schema.validate_agent_message(message, answered)
        return message


@pytest.fixture
async def wire(acp_schema: AcpSchema, tmp_path: Path) -> Any:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"text": "hi"}]] * 5}))
    process = await anyio.open_process(
        [sys.executable, "-m", "dsh_acp", "--model", f"script:{script}", "--max-message-bytes", "4096"],
        stderr=None,
    )
    async with process:
        yield Wire(process, acp_schema)
        if process.returncode is None:
            process.kill()


BIG = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"' + b"x" * 10_000 + b'"}}\n'

# (raw input, expected answer: (id, code) or None for no answer)
MALFORMED: list[tuple[str, bytes, tuple[Any, int] | None]] = [
    ("not json", b"this is not json\n", (None, -32700)),
    ("truncated json", b'{"jsonrpc":"2.0","id":1,\n', (None, -32700)),
    ("invalid utf-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}\n', (1, -32700)),
    ("a number", b"42\n", (None, -32600)),
    ("a string", b'"hello"\n', (None, -32600)),
    ("null", b"null\n", (None, -32600)),
    ("empty batch", b"[]\n", (None, -32600)),
    (
        "batch",
        b'[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}]\n',
        (None, -32600),
    ),
    ("missing jsonrpc", b'{"id":7,"method":"initialize","params":{"protocolVersion":1}}\n', (7, -32600)),
    ("wrong jsonrpc", b'{"jsonrpc":"1.0","id":8,"method":"initialize"}\n', (8, -32600)),
    ("float id", b'{"jsonrpc":"2.0","id":1.5,"method":"initialize"}\n', (None, -32600)),
    ("bool id", b'{"jsonrpc":"2.0","id":true,"method":"initialize"}\n', (None, -32600)),
    ("object id", b'{"jsonrpc":"2.0","id":{},"method":"initialize"}\n', (None, -32600)),
    ("method not a string", b'{"jsonrpc":"2.0","id":9,"method":5}\n', (9, -32600)),
    ("params a string", b'{"jsonrpc":"2.0","id":10,"method":"initialize","params":"x"}\n', (10, -32600)),
    ("neither request nor response", b'{"jsonrpc":"2.0","id":11}\n', (11, -32600)),
    ("unknown method", b'{"jsonrpc":"2.0","id":12,"method":"nope/nope"}\n', (12, -32601)),
    ("unknown extension request", b'{"jsonrpc":"2.0","id":13,"method":"_x/y","params":{}}\n', (13, -32601)),
    ("unknown notification", b'{"jsonrpc":"2.0","method":"nope/nope"}\n', None),
    ("unknown extension notification", b'{"jsonrpc":"2.0","method":"_x/y","params":{}}\n', None),
    ("response to unknown id", b'{"jsonrpc":"2.0","id":99,"result":{}}\n', None),
    ("error response to unknown id", b'{"jsonrpc":"2.0","id":98,"error":{"code":1,"message":"x"}}\n', None),
    (
        "initialize without version",
        b'{"jsonrpc":"2.0","id":14,"method":"initialize","params":{}}\n',
        (14, -32602),
    ),
    (
        "initialize with a float version",
        b'{"jsonrpc":"2.0","id":15,"method":"initialize","params":{"protocolVersion":1.5}}\n',
        (15, -32602),
    ),
    (
        "session/new without cwd",
        b'{"jsonrpc":"2.0","id":16,"method":"session/new","params":{"mcpServers":[]}}\n',
        (16, -32602),
    ),
    (
        "session/new relative cwd",
        b'{"jsonrpc":"2.0","id":17,"method":"session/new","params":{"cwd":"x","mcpServers":[]}}\n',
        (17, -32602),
    ),
    (
        "prompt unknown session",
        b'{"jsonrpc":"2.0","id":18,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}\n',
        (18, -32002),
    ),
    ("prompt missing params", b'{"jsonrpc":"2.0","id":19,"method":"session/prompt"}\n', (19, -32602)),
    (
        "cancel unknown session (notification)",
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}\n',
        None,
    ),
    ("cancel with garbage params", b'{"jsonrpc":"2.0","method":"session/cancel","params":[1,2]}\n', None),
    (
        "$/cancel_request for nothing",
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}\n',
        None,
    ),
    ("oversize line", BIG, (1, -32600)),  # its id is in what is read of it
    ("blank lines", b"\n\r\n   \n", None),
    ("CRLF request", b'{"jsonrpc":"2.0","id":20,"method":"nope"}\r\n', (20, -32601)),
]


async def test_malformed_input_table(wire: Wire) -> None:
    assert len(MALFORMED) >= 25
    for label, raw, expected in MALFORMED:
        await wire.send_raw(raw)
        await wire.send(INIT)
        first = await wire.line()
        if expected is None:
            assert first.get("id") == "probe", f"{label}: unexpected answer {first}"
            assert "result" in first, label
            continue
        expected_id, code = expected
        assert first.get("id") == expected_id, f"{label}: {first}"
        assert first["error"]["code"] == code, f"{label}: {first}"
        assert "\n" not in first["error"]["message"], label
        probe = await wire.line()
        assert probe.get("id") == "probe", f"{label}: agent stopped serving: {probe}"
        assert "result" in probe, f"{label}: agent stopped serving: {probe}"


async def test_initialize_with_a_string_version_is_answered_with_ours(wire: Wire) -> None:
    await wire.request(15, "initialize", {"protocolVersion": "1", "clientCapabilities": {}})
    answer = await wire.line()
    assert answer["id"] == 15
    assert answer["result"]["protocolVersion"] == 1


_PROMPTLY = 10.0
"""Seconds an exit on end of input may take: it is immediate here, but a loaded shared machine
can hold a process that long; a hang never ends (the speed is a bench's, not a test's)."""


async def test_ids_are_echoed_and_the_agent_exits_on_eof(wire: Wire, tmp_path: Path) -> None:
    await wire.request(0, "initialize", {"protocolVersion": 1})
    assert (await wire.line())["id"] == 0
    await wire.request("str-id", "initialize", {"protocolVersion": 1})
    assert (await wire.line())["id"] == "str-id"
    sid = await wire.new_session_and_prompt(tmp_path, "hi")
    updates = []
    while "method" in (line := await wire.line()):
        updates.append(line)
    assert line == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}
    assert all(u["method"] == "session/update" and u["params"]["sessionId"] == sid for u in updates)
    kinds = [u["params"]["update"]["sessionUpdate"] for u in updates]
    assert kinds == ["available_commands_update", "agent_message_chunk", "session_info_update"]
    code, seconds = await wire.close_stdin_and_wait()
    assert code == 0
    assert seconds < _PROMPTLY


async def test_eof_during_a_running_turn_exits_promptly(acp_schema: AcpSchema, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"hang": True}]]}))
    process = await anyio.open_process(
        [sys.executable, "-m", "dsh_acp", "--model", f"script:{script}"], stderr=None
    )
    async with process:
        wire = Wire(process, acp_schema)
        await wire.new_session_and_prompt(tmp_path, "x")
        code, seconds = await wire.close_stdin_and_wait()
        assert code == 0
        assert seconds < _PROMPTLY  # the turn hangs for ever: only the end of input stops it


def test_cli_version_and_bad_script(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("dsh-acp ")
    bad = tmp_path / "bad.json"
    bad.write_text('{"turns": [[{"text": 3}]]}')
    run = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "--model", f"script:{bad}"],
        capture_output=True,
        text=True,
        env=os.environ,
    )
    assert run.returncode == 2
    assert "turns[0][0].text must be a string or a list of strings" in run.stderr
    assert run.stdout == ""


def _nested(depth: int, leaf: bytes = b"1") -> bytes:
    return b"[" * depth + leaf + b"]" * depth


def _deep_object(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def _null_id_error(data: bytes, message: bytes = b"x") -> bytes:
    error = b'{"code":1,"message":"' + message + b'","data":' + data + b"}"
    return b'{"jsonrpc":"2.0","id":null,"error":' + error + b"}\n"


def _cancel_request(request_id: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":' + request_id + b"}}\n"


HUGE = b'"' + b"i" * (4 << 20) + b'"'

# Frames whose values reach the agent's log (stderr): deep nesting and huge values in every spot a
# peer value is logged. Each must leave one bounded stderr line at most, and the agent serving.
LOGGED: list[tuple[str, bytes]] = [
    ("error with null id, data nested 972 deep", _null_id_error(_nested(972))),
    ("error with null id, data object nested 1000 deep", _null_id_error(_deep_object(1000))),
    ("error with null id, 4 MiB message", _null_id_error(b"1", b"m" * (4 << 20))),
    ("response to a 4 MiB id", b'{"jsonrpc":"2.0","id":' + HUGE + b',"result":{}}\n'),
    (
        "error response to a 4 MiB id",
        b'{"jsonrpc":"2.0","id":' + HUGE + b',"error":{"code":1,"message":"x","data":' + _nested(900) + b"}}"
        b"\n",
    ),
    ("$/cancel_request with deep params", _cancel_request(_nested(1000))),
    ("$/cancel_request with a 4 MiB id", _cancel_request(HUGE)),
    ("unknown notification, 4 MiB method", b'{"jsonrpc":"2.0","method":' + HUGE + b"}\n"),
    ("unknown request, 4 MiB method", b'{"jsonrpc":"2.0","id":3,"method":' + HUGE + b"}\n"),
    (
        "session/cancel, deep params",
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":' + _nested(1000) + b"}}\n",
    ),
]


@pytest.mark.parametrize("level", ["warning", "debug"])
async def test_peer_values_are_logged_bounded(acp_schema: AcpSchema, tmp_path: Path, level: str) -> None:
    process = await anyio.open_process(
        [sys.executable, "-m", "dsh_acp", "--log-level", level], stderr=subprocess.PIPE
    )
    stderr = bytearray()

    async def drain() -> None:
        assert process.stderr is not None
        async for chunk in process.stderr:
            stderr.extend(chunk)

    async with process, anyio.create_task_group() as group:
        group.start_soon(drain)
        wire = Wire(process, acp_schema)
        sent = 0
        for label, raw in LOGGED:
            await wire.send_raw(raw)
            sent += len(raw)
            await wire.send(INIT)
            probe = await wire.line()
            if probe.get("id") == 3:  # the unknown request is answered (-32601) before the probe
                probe = await wire.line()
            assert probe.get("id") == "probe", f"{label}: agent stopped serving: {probe}"
            assert "result" in probe, label
        code, _ = await wire.close_stdin_and_wait()
        assert code == 0
    lines = bytes(stderr).splitlines()
    assert max((len(line) for line in lines), default=0) <= 1024, max(lines, key=len)[:300]
    assert len(stderr) <= 64 * 1024, f"{len(stderr)} bytes of stderr for {sent} bytes of input"


def _big_session(state: Path, cwd: Path, events: int, text_bytes: int) -> str:
    from dsh_acp.session._store import SessionStore

    store = SessionStore(state, clock=lambda: "2026-01-01T00:00:00Z")
    log = store.create("big", str(cwd), [])
    for i in range(events):
        log.append(UserPrompt((TextBlock(text=f"q{i}"),), f"u{i}"))
        log.append(AssistantReply("é" * text_bytes, text_id=f"a{i}"))
        log.append(TurnStopped("end_turn"))
    log.close()
    store.close()
    return "big"


async def _hang_up_mid_replay(acp_schema: AcpSchema, tmp_path: Path, process: Process) -> Wire:
    """Load a long session in ``process`` and close its stdin once the replay is under way."""
    sid = _big_session(tmp_path / "state", tmp_path, events=200, text_bytes=20_000)
    wire = Wire(process, acp_schema)
    await wire.send(INIT)
    assert (await wire.line())["id"] == "probe"
    await wire.request(1, "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
    assert process.stdout is not None
    assert process.stdin is not None
    while wire.buffer.count(b"\n") < 20:
        wire.buffer += await process.stdout.receive()
    await process.stdin.aclose()
    return wire


async def _agent_on(state: Path) -> Process:
    return await anyio.open_process([sys.executable, "-m", "dsh_acp", "--state-dir", str(state)], stderr=None)


# 1.0 s: slower than the old whole-line limit (0.5 s), which cut the line on a loaded machine.
@pytest.mark.parametrize("reader_delay", [0.0, 0.4, 1.0])
async def test_eof_during_a_large_replay_never_cuts_a_line(
    acp_schema: AcpSchema, tmp_path: Path, reader_delay: float
) -> None:
    """The editor closes stdin while the agent is replaying a long session: it may get less than
    the whole replay, but every line it gets is whole (and the agent exits promptly)."""
    process = await _agent_on(tmp_path / "state")
    async with process:
        wire = await _hang_up_mid_replay(acp_schema, tmp_path, process)
        assert process.stdout is not None
        await anyio.sleep(reader_delay)  # a slow reader: the pipe is full when the agent stops
        started = time.monotonic()
        rest = bytearray(wire.buffer)
        with anyio.fail_after(10):
            async for chunk in process.stdout:
                rest += chunk
            assert await process.wait() == 0
        assert time.monotonic() - started < 2.0
    assert rest.endswith(b"\n"), f"the last line was cut: ...{bytes(rest[-80:])!r}"
    for line in bytes(rest).splitlines():
        message = orjson.loads(line)
        acp_schema.validate_agent_message(message, None if "method" in message else "session/load")


async def test_eof_with_a_reader_that_never_reads_again_still_exits(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    """The editor hangs up mid-replay and stops reading: finishing the line must not hang shutdown."""
    process = await _agent_on(tmp_path / "state")
    async with process:
        await _hang_up_mid_replay(acp_schema, tmp_path, process)
        started = time.monotonic()
        with anyio.fail_after(15):
            assert await process.wait() == 0
        # The drain limit plus one no-progress limit, with room for a loaded machine.
        assert time.monotonic() - started < 8.0
