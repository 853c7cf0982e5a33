"""MCP servers a client configures for a session, connected and exposed as tools.

Editors pass their MCP servers in ``session/new`` (and ``session/load`` / ``session/resume``).
``connect_servers`` starts each one with the official MCP SDK's client, lists its tools and
registers them in the session's registry layer as raw JSON-Schema tools named
``mcp__<server>__<tool>``. A server that fails to start never fails the session: its tools are
absent and the caller gets one line saying why, to show the user.

Lifetime: an MCP ``ClientSession`` (and the http transport) are context managers whose task
groups belong to the task that entered them, so each server is owned by one long-lived task,
spawned in a task group the caller keeps for the life of the agent: it enters them, waits until
it is told to stop or the server goes away, and leaves them. Stdio servers run through our own
transport (``_stdio``), which stops the server's whole process group, so no process outlives
``McpConnections.aclose()``.

The ``mcp`` package costs about a second to import, so it is imported on first use, in a worker
thread: sessions without MCP servers pay nothing and the event loop keeps serving meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from dsh_acp._safe_text import one_line
from dsh_acp.wire._client_params import McpServerStdio
from dsh_tools import (
    DuplicateToolError,
    GenericCallView,
    ToolArgsError,
    ToolDefinition,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
)

from ._server import FAILURE_CHARS, AskUser, McpServerError, Server
from ._specs import parse_spec, server_name
from ._tool_shapes import mcp_tool_name, object_schema

if TYPE_CHECKING:
    import mcp_types

__all__ = [
    "HTTP_SUPPORTED",
    "AskUser",
    "McpConnections",
    "McpServerError",
    "connect_servers",
    "mcp_tool_name",
]

_log = logging.getLogger("dsh_acp.mcp")

HTTP_SUPPORTED = True
"""``{type: "http"}`` servers are connected (streamable HTTP): advertise ``mcpCapabilities.http``."""

_CLOSE_BOUND_S = 15.0
"""Stopping a server is bounded (stdin close, SIGTERM, SIGKILL: ~5 s at worst); this is a
backstop so that closing a session can never hang on one server."""


def _definition(server: Server, tool: mcp_types.Tool, name: str) -> ToolDefinition:
    server_name, tool_name = server.name, tool.name

    async def execute(arguments: Any, execution: ToolExecution) -> ToolOutput:
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolArgsError(['"arguments" must be an object'])
        return await server.call(tool_name, arguments)

    def present_call(arguments: Any) -> GenericCallView:
        return GenericCallView(title=f"{server_name}: {tool_name}", kind="other", raw_input=arguments)

    description = tool.description or tool.title or f'Tool "{tool_name}" of MCP server "{server_name}".'
    return ToolDefinition(
        name=name,
        description=description,
        parameters=object_schema(tool.input_schema),
        execute=execute,
        present_call=present_call,
        kind="other",
    )


class McpConnections:
    """The MCP servers of one session and the tools they registered.

    ``aclose()`` unregisters the tools and stops every server (their processes are gone when it
    returns). It has ``aclose``, so a session's ``Services`` can own it.
    """

    def __init__(self, registry: ToolRegistry) -> None:
        self._registry = registry
        self._servers: list[Server] = []
        self._disposers: list[Callable[[], None]] = []
        self._tools: dict[str, tuple[str, str]] = {}
        self._closed = False

    @property
    def tools(self) -> Mapping[str, tuple[str, str]]:
        """Registered tool name → ``(server name, the server's tool name)``."""
        return dict(self._tools)

    def running(self) -> list[str]:
        """Names of the servers that started and have not exited or been stopped."""
        return [server.name for server in self._servers if server.running]

    def _register(self, server: Server) -> None:
        for tool in server.tools:
            name = mcp_tool_name(server.name, tool.name, lambda candidate: candidate in self._registry)
            try:
                self._disposers.append(self._registry.register(_definition(server, tool, name)))
            except DuplicateToolError:  # a deeper layer holds the name: rare, and not fatal
                _log.warning(
                    'MCP server "%s": tool "%s" skipped, its name %s is taken', server.name, tool.name, name
                )
                continue
            self._tools[name] = (server.name, tool.name)

    async def aclose(self) -> None:
        """Unregister the tools and stop every server; idempotent, and never waits forever."""
        if self._closed:
            return
        self._closed = True
        for dispose in reversed(self._disposers):
            dispose()
        self._disposers.clear()
        self._tools.clear()
        for server in self._servers:
            server.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_BOUND_S) as bound:
            for server in self._servers:
                await server.done.wait()
        if bound.cancelled_caught:
            _log.warning("some MCP servers did not stop within %g s", _CLOSE_BOUND_S)


async def connect_servers(
    servers: Sequence[Mapping[str, Any] | McpServerStdio],
    registry: ToolRegistry,
    *,
    task_group: TaskGroup,
    cwd: str | None = None,
    start_timeout: float = 10.0,
    http: bool = HTTP_SUPPORTED,
    ask: AskUser | None = None,
) -> tuple[McpConnections, list[str]]:
    """Start ``servers`` (ACP ``McpServer`` objects) and register their tools in ``registry``.

    Returns the connections, to ``aclose()`` when the session ends, and one line per server that
    failed (``MCP server "x" failed to start: <why>``) for the caller to show the user. Servers
    start concurrently; each gets ``start_timeout`` seconds for ``initialize`` and ``tools/list``.
    Tools are registered in configuration order once all have answered or failed, so names are
    the same on every run.

    ``task_group`` must outlive the session (the agent's): each server is owned by a task in it.
    ``cwd`` is where stdio servers run (the session's directory). With ``http=False``, http
    servers are refused like sse ones. ``ask`` forwards the servers' questions to the user.
    """
    connections = McpConnections(registry)
    failures: dict[int, str] = {}
    started: list[tuple[int, Server]] = []
    for index, raw in enumerate(servers):
        try:
            spec = parse_spec(raw, http=http)
        except ValueError as error:
            why = one_line(str(error), FAILURE_CHARS)
            failures[index] = f'MCP server "{server_name(raw)}" failed to start: {why}'
            continue
        started.append((index, Server(spec, cwd, ask)))
    if not started:
        return connections, [failures[i] for i in sorted(failures)]
    try:
        for _, server in started:
            connections._servers.append(server)
            task_group.start_soon(server.run, start_timeout, name=f"mcp server {server.name}")
        for _, server in started:
            await server.ready.wait()
    except BaseException:
        # Cancelled (the session/new request was): nothing started may outlive it.
        with anyio.CancelScope(shield=True):
            await connections.aclose()
        raise
    for index, server in started:
        if server.failure is not None:
            failures[index] = server.failure
        else:
            connections._register(server)
    return connections, [failures[i] for i in sorted(failures)]
