"""MCP servers become tools: real servers (``tests/mcp_servers``) through a real ``ToolRegistry``."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_acp.mcp._servers import McpConnections, connect_servers, mcp_tool_name
from dsh_acp.mcp._tool_shapes import object_schema
from dsh_acp.wire._client_params import EnvVariable, McpServerStdio
from dsh_tools import (
    Annotations,
    AudioBlock,
    BlobResource,
    EmbeddedResourceBlock,
    GenericCallView,
    ImageBlock,
    ResourceLinkBlock,
    TextBlock,
    TextResource,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
)

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).parent / "mcp_servers"
TOOLBOX = str(SERVERS / "toolbox.py")
# Generous: the toolbox imports the MCP SDK (about a second, more on a loaded machine).
START = 60.0


def stdio(name: str, script: str, *args: str) -> dict[str, Any]:
    """An ACP stdio ``McpServer`` running one of the test servers with this interpreter."""
    return {"name": name, "command": sys.executable, "args": [str(SERVERS / script), *args], "env": []}


@asynccontextmanager
async def connected(
    servers: Sequence[dict[str, Any] | McpServerStdio],
    *,
    start_timeout: float = START,
    cwd: str | None = None,
) -> AsyncIterator[tuple[ToolRegistry, McpConnections, list[str]]]:
    """A session layer with ``servers`` connected; closed (servers stopped) on the way out."""
    registry = ToolRegistry().layer()
    async with anyio.create_task_group() as agent_tasks:
        connections, failures = await connect_servers(
            servers, registry, task_group=agent_tasks, start_timeout=start_timeout, cwd=cwd
        )
        try:
            yield registry, connections, failures
        finally:
            with anyio.CancelScope(shield=True):
                await connections.aclose()


async def call(registry: ToolRegistry, name: str, arguments: Any = None) -> ToolExecutionResult:
    execution = ToolExecution(call_id="call-1", name=name, arguments={} if arguments is None else arguments)
    with anyio.fail_after(30):
        return await registry.execute(execution)


def only_text(result: ToolExecutionResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return block.text


async def assert_gone(pid: int) -> None:
    """The process ``pid`` has exited (or exits within a few seconds of a SIGKILL already sent).

    A zombie counts as gone: the server's own children are reparented to an init that, in a
    container, may never reap them.
    """
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        try:
            with anyio.fail_after(5):
                await anyio.wait_readable(pidfd)  # readable once the process has exited
        finally:
            os.close(pidfd)
    else:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# -- names and schemas ---------------------------------------------------------------------------


def test_names_are_sanitized_bounded_and_deterministic() -> None:
    assert mcp_tool_name("files", "read") == "mcp__files__read"
    assert mcp_tool_name("my server", "get.page") == "mcp__my_server__get_page"
    long = mcp_tool_name("server", "x" * 80)
    assert len(long) == 64
    assert re.fullmatch(r"mcp__server__x+_[0-9a-f]{8}", long)
    assert mcp_tool_name("server", "x" * 80) == long
    # Two tools that sanitize alike: the second one gets a stable hashed suffix.
    taken = {"mcp__a__b_c"}
    second = mcp_tool_name("a", "b.c", taken.__contains__)
    assert re.fullmatch(r"mcp__a__b_c_[0-9a-f]{8}", second)
    assert second == mcp_tool_name("a", "b.c", taken.__contains__)
    assert mcp_tool_name("a", "b-c", taken.__contains__) == "mcp__a__b-c"


def test_input_schemas_are_kept_unless_they_are_not_object_schemas() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert object_schema(schema) is schema
    assert object_schema({"properties": {"q": {}}}) == {"properties": {"q": {}}, "type": "object"}
    assert object_schema({"type": "string"}) == {"type": "object"}
    assert object_schema(None) == {"type": "object"}


async def test_bad_configurations_fail_alone_and_clearly() -> None:
    servers: list[dict[str, Any]] = [
        {"name": "nocmd", "args": []},
        {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []},
        {"type": "carrier-pigeon", "name": "bird"},
        {"name": "badenv", "command": "x", "env": {"A": "1"}},
    ]
    registry = ToolRegistry().layer()
    async with anyio.create_task_group() as tasks:
        connections, failures = await connect_servers(servers, registry, task_group=tasks)
        await connections.aclose()
    assert failures == [
        'MCP server "nocmd" failed to start: "command" must be a non-empty string',
        'MCP server "old" failed to start: '
        "sse MCP servers are not supported by this agent (use stdio or http)",
        "MCP server \"bird\" failed to start: unknown transport type 'carrier-pigeon'",
        'MCP server "badenv" failed to start: "env" must be a list of {name, value}',
    ]
    assert len(registry) == 0


async def test_http_servers_are_refused_when_http_is_off() -> None:
    registry = ToolRegistry().layer()
    async with anyio.create_task_group() as tasks:
        server = {"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp", "headers": []}
        connections, failures = await connect_servers([server], registry, task_group=tasks, http=False)
        await connections.aclose()
    assert failures == [
        'MCP server "web" failed to start: http MCP servers are not supported by this agent (use stdio)'
    ]


# -- a working server ----------------------------------------------------------------------------


async def test_tools_are_registered_in_the_session_layer(tmp_path: Path) -> None:
    base = ToolRegistry()
    async with connected([stdio("toolbox", "toolbox.py")], cwd=str(tmp_path)) as (
        registry,
        connections,
        failures,
    ):
        assert failures == []
        assert connections.running() == ["toolbox"]
        names = [definition.name for definition in registry.definitions()]
        assert names[:3] == ["mcp__toolbox__echo", "mcp__toolbox__image", "mcp__toolbox__audio"]
        assert "mcp__toolbox__weird_name" in names  # "weird.name", listed first, keeps the plain name
        (collided,) = [n for n in names if re.fullmatch(r"mcp__toolbox__weird_name_[0-9a-f]{8}", n)]
        assert connections.tools[collided] == ("toolbox", "weird_name")
        (long,) = [n for n in names if n.startswith("mcp__toolbox__a_tool_whose_name")]
        assert len(long) == 64
        assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in names)
        assert len(base) == 0  # only the session's layer holds them

        echo = registry.get("mcp__toolbox__echo")
        assert echo is not None
        assert echo.description == "Echo the text back."
        assert echo.parameters == {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        assert echo.kind == "other"
        assert echo.call_view({"text": "hi"}) == GenericCallView(
            title="toolbox: echo", kind="other", raw_input={"text": "hi"}
        )
        assert {s.name for s in registry.schemas()} == set(names)

        pid = int(only_text(await call(registry, "mcp__toolbox__pid")))
        if sys.platform == "linux":
            assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path)  # the session's directory
        # A helper the server starts in its process group does not outlive it either.
        helper = int(only_text(await call(registry, "mcp__toolbox__helper")))

    assert len(registry) == 0  # closing unregisters the tools…
    await assert_gone(pid)  # …and stops the server…
    await assert_gone(helper)  # …and what it started


async def test_results_map_to_content_blocks() -> None:
    async with connected([stdio("toolbox", "toolbox.py")]) as (registry, _, _):
        echo = await call(registry, "mcp__toolbox__echo", {"text": "hi"})
        assert echo.content == (TextBlock(text="hi", annotations=Annotations(priority=0.5)),)
        assert not echo.is_error

        image = await call(registry, "mcp__toolbox__image")
        assert len(image.content) == 1
        assert isinstance(image.content[0], ImageBlock)
        assert image.content[0].mime_type == "image/png"

        audio = await call(registry, "mcp__toolbox__audio")
        assert audio.content == (AudioBlock(data="UklGRg==", mime_type="audio/wav"),)

        resources = await call(registry, "mcp__toolbox__resources")
        assert resources.content == (
            EmbeddedResourceBlock(
                resource=TextResource(uri="file:///notes.md", text="# Notes", mime_type="text/markdown")
            ),
            EmbeddedResourceBlock(
                resource=BlobResource(
                    uri="file:///data.bin", blob="AAEC", mime_type="application/octet-stream"
                )
            ),
            ResourceLinkBlock(uri="file:///big.log", name="big.log", mime_type="text/plain", size=123456),
        )

        structured = await call(registry, "mcp__toolbox__structured")
        assert only_text(structured) == '{"answer": 42}'

        failed = await call(registry, "mcp__toolbox__fail")
        assert failed.is_error
        assert only_text(failed) == "the widget is broken"
        assert failed.error is None  # the tool's own failure, not the harness's

        rejected = await call(registry, "mcp__toolbox__reject")
        assert only_text(rejected) == (
            'Error: MCP server "toolbox" answered with an error: no widgets today (code -32602)'
        )
        assert rejected.error is not None
        assert rejected.error.code == "MCP_ERROR"

        # The server validates its own input; arguments that are not an object never reach it.
        bad = await call(registry, "mcp__toolbox__echo", "not json")
        assert bad.is_error
        assert bad.error is not None
        assert bad.error.code == "INVALID_ARGS"


async def test_a_server_that_crashes_mid_call() -> None:
    server = McpServerStdio(name="toolbox", command=sys.executable, args=[TOOLBOX])
    async with connected([server]) as (registry, connections, _):
        crashed = await call(registry, "mcp__toolbox__crash")
        assert crashed.is_error
        assert only_text(crashed) == (
            'Error: MCP server "toolbox" exited during the call '
            '(exit code 7; stderr: "toolbox: crashing on purpose")'
        )
        assert crashed.error is not None
        assert crashed.error.code == "MCP_SERVER_EXITED"

        later = await call(registry, "mcp__toolbox__echo", {"text": "anyone?"})
        assert later.is_error
        assert only_text(later) == (
            'Error: MCP server "toolbox" is not running: it exited during an earlier call '
            '(exit code 7; stderr: "toolbox: crashing on purpose")'
        )
        assert later.error is not None
        assert later.error.code == "MCP_SERVER_UNAVAILABLE"
        assert connections.running() == []
        # The tools stay registered: the model reads why they fail rather than finding them gone.
        assert "mcp__toolbox__echo" in registry


async def test_cancelling_a_call_cancels_the_request() -> None:
    async with connected([stdio("toolbox", "toolbox.py")]) as (registry, _, _):
        outcome: list[ToolExecutionResult] = []

        async def slow() -> None:
            outcome.append(await call(registry, "mcp__toolbox__slow"))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(slow)
            # Returns once the server is inside the slow call (the server bounds the wait).
            await call(registry, "mcp__toolbox__slow_calls", {"started": 1})
            tasks.cancel_scope.cancel()
        assert outcome == []  # the awaiting task was cancelled, not given a result

        # The server saw `notifications/cancelled` and its handler was cancelled.
        seen = await call(registry, "mcp__toolbox__slow_calls", {"cancelled": 1})
        assert only_text(seen) == "started=1 cancelled=1"
        assert only_text(await call(registry, "mcp__toolbox__echo", {"text": "still here"})) == "still here"


# -- servers that fail to start ------------------------------------------------------------------


@pytest.mark.slow
async def test_failing_servers_leave_the_others_connected(tmp_path: Path) -> None:
    pid_file = tmp_path / "hang.pid"
    servers = [
        stdio("toolbox", "toolbox.py"),
        stdio("sleepy", "hang.py", str(pid_file)),
        stdio("broken", "exits.py"),
        {"name": "ghost", "command": "/nonexistent/mcp-server", "args": [], "env": []},
    ]
    # The bound must let the toolbox start on a loaded machine, yet fail the hanging server.
    async with connected(servers, start_timeout=5.0) as (registry, connections, failures):
        assert failures == [
            'MCP server "sleepy" failed to start: no answer to initialize within 5 s',
            'MCP server "broken" failed to start: it exited before answering initialize '
            '(exit code 3; stderr: "RuntimeError: TOOLBOX_API_KEY is not set")',
            'MCP server "ghost" failed to start: '
            'cannot run "/nonexistent/mcp-server": No such file or directory',
        ]
        assert connections.running() == ["toolbox"]
        assert {server for server, _ in connections.tools.values()} == {"toolbox"}
        assert only_text(await call(registry, "mcp__toolbox__echo", {"text": "ok"})) == "ok"
        toolbox_pid = int(only_text(await call(registry, "mcp__toolbox__pid")))
        hang_pid = int(pid_file.read_text())
    await assert_gone(toolbox_pid)
    await assert_gone(hang_pid)


async def test_cancelling_the_connect_stops_what_it_started(tmp_path: Path) -> None:
    import mcp.client.session  # noqa: F401  (imported now, so the 2 s below are all the server's)

    pid_file = tmp_path / "hang.pid"
    registry = ToolRegistry().layer()
    async with anyio.create_task_group() as agent_tasks:
        # The session/new request is cancelled (the client gave up) while a server starts.
        with anyio.move_on_after(2) as waited:
            await connect_servers(
                [stdio("sleepy", "hang.py", str(pid_file))], registry, task_group=agent_tasks
            )
        assert waited.cancelled_caught
    assert len(registry) == 0
    await assert_gone(int(pid_file.read_text()))


async def test_a_missing_working_directory_is_named() -> None:
    async with connected([stdio("toolbox", "toolbox.py")], cwd="/nonexistent-session-dir") as (
        _,
        _,
        failures,
    ):
        assert failures == [
            f'MCP server "toolbox" failed to start: cannot run "{sys.executable}": '
            "No such file or directory (/nonexistent-session-dir)"
        ]


async def test_the_server_gets_its_environment() -> None:
    env_probe = {
        "name": "envprobe",
        "command": sys.executable,
        "args": ["-c", "import os, sys; sys.stderr.write(os.environ['PROBE'] + '\\n'); sys.exit(1)"],
        "env": [{"name": "PROBE", "value": "from-the-editor"}],
    }
    async with connected([env_probe]) as (_, _, failures):
        assert failures == [
            'MCP server "envprobe" failed to start: it exited before answering initialize '
            '(exit code 1; stderr: "from-the-editor")'
        ]


@pytest.mark.slow
async def test_a_server_that_ignores_sigterm_is_killed() -> None:
    server = McpServerStdio(
        name="stubborn",
        command=sys.executable,
        args=[TOOLBOX, "--stubborn"],
        env=[EnvVariable(name="PYTHONUNBUFFERED", value="1")],
    )
    async with connected([server]) as (registry, _, failures):
        assert failures == []
        pid = int(only_text(await call(registry, "mcp__stubborn__pid")))
    await assert_gone(pid)


# -- http ----------------------------------------------------------------------------------------


@asynccontextmanager
async def http_toolbox() -> AsyncIterator[str]:
    """The toolbox served over streamable HTTP on 127.0.0.1; yields its URL."""
    process = await anyio.open_process([sys.executable, TOOLBOX, "--http"], stdin=None)
    try:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(60):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive()
        yield line.decode().strip()
    finally:
        with anyio.CancelScope(shield=True):
            process.kill()
            await process.wait()
            await process.aclose()


async def test_http_servers_connect() -> None:
    async with http_toolbox() as url:
        server = {"type": "http", "name": "web", "url": url, "headers": [{"name": "X-Trace", "value": "1"}]}
        async with connected([server]) as (registry, connections, failures):
            assert failures == []
            assert connections.running() == ["web"]
            assert only_text(await call(registry, "mcp__web__echo", {"text": "over http"})) == "over http"
            assert only_text(await call(registry, "mcp__web__header", {"name": "x-trace"})) == "1"
            failed = await call(registry, "mcp__web__fail")
            assert failed.is_error

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, registry, "mcp__web__slow")
                await call(registry, "mcp__web__slow_calls", {"started": 1})
                tasks.cancel_scope.cancel()
            seen = await call(registry, "mcp__web__slow_calls", {"cancelled": 1})
            assert only_text(seen) == "started=1 cancelled=1"


async def test_an_http_server_that_is_not_there() -> None:
    server = {"type": "http", "name": "nobody", "url": "http://127.0.0.1:9/mcp", "headers": []}
    async with connected([server], start_timeout=20) as (registry, _, failures):
        assert len(failures) == 1
        assert failures[0].startswith('MCP server "nobody" failed to start: ')
        assert len(registry) == 0
