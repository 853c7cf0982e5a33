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
transport (``_mcp_stdio``), which stops the server's whole process group, so no process outlives
``McpConnections.aclose()``.

The ``mcp`` package costs about a second to import, so it is imported on first use, in a worker
thread: sessions without MCP servers pay nothing and the event loop keeps serving meanwhile.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup

from dsh_acp._brief import brief
from dsh_acp._version import VERSION
from dsh_acp.acp._wire import McpServerStdio
from dsh_tools import (
    Annotations,
    AudioBlock,
    BlobResource,
    ContentBlock,
    DuplicateToolError,
    EmbeddedResourceBlock,
    GenericCallView,
    HarnessError,
    ImageBlock,
    ResourceLinkBlock,
    TextBlock,
    TextResource,
    ToolArgsError,
    ToolDefinition,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    without_secrets,
)

from ._stdio import StdioServerProcess

if TYPE_CHECKING:
    import mcp_types
    from mcp.client.session import ClientSession

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

_MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_TOOL_PAGES = 100
"""A server whose ``tools/list`` never stops paginating cannot hang the session."""
_CLOSE_BOUND_S = 15.0
"""Stopping a server is bounded (stdin close, SIGTERM, SIGKILL: ~5 s at worst); this is a
backstop so that closing a session can never hang on one server."""


class McpServerError(HarnessError):
    """An MCP tool call that failed for a reason of the server's, not of the tool's.

    ``code``: ``MCP_SERVER_EXITED`` (it died during the call), ``MCP_SERVER_UNAVAILABLE`` (it is
    not running), ``MCP_ERROR`` (it answered with a JSON-RPC error) or ``MCP_CALL_FAILED``
    (the transport failed, or the result was malformed).
    """

    default_code = "MCP_ERROR"


AskUser = Callable[
    [str, str, dict[str, Any]], Awaitable[tuple[Literal["accept", "decline", "cancel"], dict[str, Any]]]
]
"""How a server's form question reaches the user: ``(server name, message, requested schema)`` →
``(action, content)``. Given only when the editor can ask; without it the servers are not told
they may ask (MCP's capability), and a question sent anyway is refused at once."""


# -- configuration -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _StdioSpec:
    name: str
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class _HttpSpec:
    name: str
    url: str
    headers: Mapping[str, str]


def _server_name(raw: object) -> str:
    name = raw.get("name") if isinstance(raw, Mapping) else getattr(raw, "name", None)
    return name if isinstance(name, str) and name else "?"


def _pairs(raw: object, what: str) -> dict[str, str]:
    """``[{name, value}, …]`` (ACP's shape for env and headers) as a dict."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ValueError(f"{what} must be a list of {{name, value}}")
    out: dict[str, str] = {}
    for item in raw:
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise ValueError(f"{what} must be a list of {{name, value}} strings")
        out[item["name"]] = item["value"]
    return out


def _parse_spec(raw: Mapping[str, Any] | McpServerStdio, *, http: bool) -> _StdioSpec | _HttpSpec:
    """One server's configuration, or ``ValueError`` saying what is wrong with it."""
    if isinstance(raw, McpServerStdio):
        return _StdioSpec(raw.name, raw.command, tuple(raw.args), {e.name: e.value for e in raw.env})
    if not isinstance(raw, Mapping):
        raise ValueError("the configuration is not an object")
    kind = raw.get("type", "stdio")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError('"name" must be a non-empty string')
    if kind == "stdio":
        command = raw.get("command")
        args = raw.get("args") or []
        if not isinstance(command, str) or not command:
            raise ValueError('"command" must be a non-empty string')
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise ValueError('"args" must be a list of strings')
        return _StdioSpec(name, command, tuple(args), _pairs(raw.get("env"), '"env"'))
    if kind == "http" and http:
        url = raw.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError('"url" must be an http(s) URL')
        return _HttpSpec(name, url, _pairs(raw.get("headers"), '"headers"'))
    if kind in ("http", "sse"):
        raise ValueError(
            f"{kind} MCP servers are not supported by this agent (use stdio" + (" or http)" if http else ")")
        )
    raise ValueError(f"unknown transport type {kind!r}")


# -- names and schemas ---------------------------------------------------------------------------


def mcp_tool_name(server: str, tool: str, taken: Callable[[str], bool] = lambda name: False) -> str:
    """The registry name of ``tool`` of MCP server ``server``: ``mcp__<server>__<tool>``.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``. A name longer than 64 characters, or one
    that ``taken`` says is in use (two tools that sanitize alike, a name another tool has), is
    cut and given a suffix hashed from the original pair, so it is the same on every run.
    """
    base = f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
    if len(base) <= _MAX_NAME and not taken(base):
        return base
    for attempt in itertools.count():
        digest = hashlib.sha256(f"{server}\0{tool}\0{attempt}".encode()).hexdigest()[:8]
        candidate = f"{base[: _MAX_NAME - 9]}_{digest}"
        if not taken(candidate):
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


def _object_schema(schema: object) -> dict[str, Any]:
    """The server's input schema as-is when it describes an object (the server validates its
    own input); tool arguments are always an object, so anything else becomes the empty one."""
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            return schema
        if "type" not in schema and isinstance(schema.get("properties"), dict):
            return {**schema, "type": "object"}
    return {"type": "object"}


# -- results -------------------------------------------------------------------------------------


def _annotations(value: mcp_types.Annotations | None) -> Annotations | None:
    if value is None:
        return None
    return Annotations(
        audience=None if value.audience is None else tuple(value.audience),
        priority=value.priority,
        last_modified=value.last_modified,
    )


def _blocks(result: mcp_types.CallToolResult) -> list[ContentBlock]:
    """MCP content as our content blocks (the two vocabularies are ACP's and MCP's: the same)."""
    import mcp_types as types

    blocks: list[ContentBlock] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            blocks.append(TextBlock(text=item.text, annotations=_annotations(item.annotations)))
        elif isinstance(item, types.ImageContent):
            blocks.append(
                ImageBlock(
                    data=item.data, mime_type=item.mime_type, annotations=_annotations(item.annotations)
                )
            )
        elif isinstance(item, types.AudioContent):
            blocks.append(
                AudioBlock(
                    data=item.data, mime_type=item.mime_type, annotations=_annotations(item.annotations)
                )
            )
        elif isinstance(item, types.EmbeddedResource):
            contents = item.resource
            resource: TextResource | BlobResource
            if isinstance(contents, types.TextResourceContents):
                resource = TextResource(uri=contents.uri, text=contents.text, mime_type=contents.mime_type)
            else:
                resource = BlobResource(uri=contents.uri, blob=contents.blob, mime_type=contents.mime_type)
            blocks.append(
                EmbeddedResourceBlock(resource=resource, annotations=_annotations(item.annotations))
            )
        elif isinstance(item, types.ResourceLink):
            blocks.append(
                ResourceLinkBlock(
                    uri=item.uri,
                    name=item.name,
                    title=item.title,
                    description=item.description,
                    mime_type=item.mime_type,
                    size=item.size,
                    annotations=_annotations(item.annotations),
                )
            )
    if not blocks and result.structured_content is not None:
        # The spec asks servers to mirror structured results as text; not all do, and the
        # model must see something.
        blocks.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    return blocks


# -- one server ----------------------------------------------------------------------------------


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _import_mcp() -> None:
    """Runs in a worker thread: the SDK's first import costs about a second of CPU."""
    import mcp.client.session
    import mcp.client.streamable_http
    import mcp.shared.message  # noqa: F401


class _Server:
    """One configured server: its owner task, its session and the calls made through it."""

    def __init__(self, spec: _StdioSpec | _HttpSpec, cwd: str | None, ask: AskUser | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.cwd = cwd
        self._ask = ask
        self.tools: list[mcp_types.Tool] = []
        self.failure: str | None = None
        """Why it did not start (one line for the user), once ``ready`` is set."""
        self.ready = anyio.Event()
        self.done = anyio.Event()
        self.process: StdioServerProcess | None = None
        self._session: ClientSession | None = None
        self._phase = "start"
        """What the server was doing when it failed to start: start, initialize or tools/list."""
        self._scope = anyio.CancelScope()
        self._wake = anyio.Event()
        self._closing = False
        self._ended = False
        self._gone: str | None = None
        """Why calls can no longer be made (it exited, it was stopped), once they cannot."""

    @property
    def running(self) -> bool:
        return self._session is not None and self._gone is None

    # -- lifetime --------------------------------------------------------------------------------

    async def run(self, start_timeout: float) -> None:
        """The owner task: start, wait until closed or gone, stop. Never raises (it lives in the
        caller's long-lived task group, which one failing server must not take down)."""
        try:
            with self._scope:
                async with AsyncExitStack() as stack:
                    try:
                        await self._start(stack, start_timeout)
                    except Exception as error:
                        self.failure = await self._start_failure(error, start_timeout)
                        self.ready.set()  # before unwinding: the caller need not wait for the stop
                        return
                    self.ready.set()
                    await self._wake.wait()
        except Exception as error:
            # A transport's own task failed (an http connection refused, say): the SDK raises it
            # out of the transport's context, cancelling whatever this task was doing.
            if not self.ready.is_set():
                self.failure = await self._start_failure(error, start_timeout)
            else:
                _log.warning('MCP server "%s" failed: %s', self.name, _describe(error))
                if self._gone is None and not self._closing:
                    self._gone = f"its connection failed ({_describe(error)})"
        finally:
            if self._gone is None:
                self._gone = "it was stopped"
            self._session = None
            self.ready.set()
            self.done.set()

    def close(self) -> None:
        """Stop the server (idempotent); ``done`` is set once its process is gone."""
        self._closing = True
        self._scope.cancel()

    async def _start(self, stack: AsyncExitStack, start_timeout: float) -> None:
        from mcp.client.session import ClientSession
        from mcp_types import Implementation

        read, write = await self._open_transport(stack)
        session = await stack.enter_async_context(
            ClientSession(
                read,
                write,
                client_info=Implementation(name="dsh-acp", version=VERSION),
                logging_callback=self._on_log,
                # Declares elicitation to the server only when the editor can ask.
                elicitation_callback=None if self._ask is None else self._on_elicit,
            )
        )
        # Only the awaits are bounded: the contexts above must be left by the stack, not by
        # this scope (their task groups belong to this task's scope stack).
        with anyio.fail_after(start_timeout):
            self._phase = "initialize"
            await session.initialize()
            self._phase = "tools/list"
            self.tools = await self._list_tools(session)
        self._session = session

    async def _open_transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        spec = self.spec
        if isinstance(spec, _HttpSpec):
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            # The SDK's default timeouts (a long read: a response may stream for a while).
            client = await stack.enter_async_context(
                httpx2.AsyncClient(headers=dict(spec.headers), timeout=httpx2.Timeout(30.0, read=300.0))
            )
            streams: tuple[Any, Any] = await stack.enter_async_context(
                streamable_http_client(spec.url, http_client=client)
            )
            return streams
        # The server gets the agent's environment (the editor started us with the user's; servers
        # launched through npx or uvx need more than PATH) minus its secrets, plus its own: a secret
        # a server needs is given to it by name in its configuration.
        self.process = StdioServerProcess(
            spec.name,
            spec.command,
            spec.args,
            env={**without_secrets(os.environ), **spec.env},
            cwd=self.cwd,
            on_end=self._on_end,
        )
        return await stack.enter_async_context(self.process.open())

    async def _list_tools(self, session: ClientSession) -> list[mcp_types.Tool]:
        from mcp_types import PaginatedRequestParams

        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            page = await session.list_tools(
                params=None if cursor is None else PaginatedRequestParams(cursor=cursor)
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    def _on_end(self, reason: str) -> None:
        """The stdio server can no longer answer (called before its session sees the end)."""
        self._ended = True
        if not self._closing and self._gone is None:
            self._gone = reason
        self._wake.set()

    async def _on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        _log.info('MCP server "%s" (%s): %s', self.name, brief(params.level), brief(params.data))

    async def _on_elicit(
        self, context: Any, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        """A server's question to the user, asked through the editor. A form question whose schema
        is not the flat object MCP allows, or a URL-mode one (the SDK declares both modes; the
        editor is only asked forms), is declined without asking."""
        from mcp_types import ElicitRequestFormParams, ElicitResult

        assert self._ask is not None
        if not isinstance(params, ElicitRequestFormParams) or not _form_schema(params.requested_schema):
            _log.info('MCP server "%s": a question it cannot be asked here was declined', self.name)
            return ElicitResult(action="decline")
        action, content = await self._ask(self.name, params.message, params.requested_schema)
        return ElicitResult(action=action, content=content if action == "accept" else None)

    async def _exit_detail(self) -> str:
        return "" if self.process is None else await self.process.exit_detail()

    # -- failures --------------------------------------------------------------------------------

    async def _start_failure(self, error: BaseException, start_timeout: float) -> str:
        from mcp.shared.exceptions import MCPError

        error = _unwrap(error)
        phase = self._phase
        if isinstance(error, TimeoutError):
            why = f"no answer to {phase} within {start_timeout:g} s"
        elif self._ended:
            why = f"{self._gone or 'it exited'} before answering {phase}" + await self._exit_detail()
        elif isinstance(self.spec, _StdioSpec) and phase == "start" and isinstance(error, OSError):
            why = f'cannot run "{self.spec.command}": {error.strerror or error}'
            if error.filename is not None and os.fsdecode(error.filename) != self.spec.command:
                why += f" ({os.fsdecode(error.filename)})"  # the working directory, say
        elif isinstance(self.spec, _HttpSpec) and _is_http_transport_error(error):
            why = f"cannot reach {self.spec.url}: {_describe(error)}"
        elif _is_connection_closed(error):
            why = f"the connection closed before it answered {phase}"
        elif isinstance(error, MCPError):
            why = f"{phase} failed: {error.message} (code {error.code})"
        else:
            why = f"{phase} failed: {_describe(error)}"
        return f'MCP server "{self.name}" failed to start: {_one_line(why)}'

    # -- calls -----------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """``tools/call`` on this server. Cancelling the awaiting task cancels the request (the
        SDK sends ``notifications/cancelled`` when its request is abandoned)."""
        from mcp.shared.exceptions import MCPError

        session = self._session
        if session is None or self._gone is not None:
            reason = self._gone or "it has not started"
            raise McpServerError(
                f'MCP server "{self.name}" is not running: {reason}', "MCP_SERVER_UNAVAILABLE"
            )
        try:
            result = await session.call_tool(tool, arguments)
        except MCPError as error:
            if not _is_connection_closed(error):
                raise McpServerError(
                    f'MCP server "{self.name}" answered with an error: {error.message} (code {error.code})'
                ) from None
            if self._closing:
                raise McpServerError(
                    f'MCP server "{self.name}" was stopped during the call', "MCP_SERVER_UNAVAILABLE"
                ) from None
            what = "exited" if isinstance(self.spec, _StdioSpec) else "disconnected"
            detail = await self._exit_detail()
            self._gone = f"it {what} during an earlier call{detail}"
            raise McpServerError(
                f'MCP server "{self.name}" {what} during the call{detail}', "MCP_SERVER_EXITED"
            ) from None
        except Exception as error:
            raise McpServerError(
                f'MCP server "{self.name}": the call failed: {_describe(error)}', "MCP_CALL_FAILED"
            ) from None
        return ToolOutput(_blocks(result), is_error=result.is_error)


def _form_schema(schema: object) -> bool:
    """Whether a requested schema is an object of named fields, each with a ``type`` (MCP's
    restricted form schema, which is also the editor's)."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return False
    properties = schema.get("properties", {})
    return isinstance(properties, dict) and all(
        isinstance(name, str) and isinstance(field, dict) and isinstance(field.get("type"), str)
        for name, field in properties.items()
    )


def _is_connection_closed(error: BaseException) -> bool:
    """The SDK's own error for a request whose connection ended (not a server's -32000)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return (
        isinstance(error, MCPError)
        and error.code == CONNECTION_CLOSED
        and error.message == "Connection closed"
    )


def _is_http_transport_error(error: BaseException) -> bool:
    import httpx2

    return isinstance(error, httpx2.TransportError)


def _unwrap(error: BaseException) -> BaseException:
    """The one exception inside (nested) single-exception groups: what actually went wrong."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _describe(error: BaseException) -> str:
    error = _unwrap(error)
    detail = _one_line(str(error), 200)
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


# -- the session's servers -----------------------------------------------------------------------


def _definition(server: _Server, tool: mcp_types.Tool, name: str) -> ToolDefinition:
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
        parameters=_object_schema(tool.input_schema),
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
        self._servers: list[_Server] = []
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

    def _register(self, server: _Server) -> None:
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
    started: list[tuple[int, _Server]] = []
    for index, raw in enumerate(servers):
        try:
            spec = _parse_spec(raw, http=http)
        except ValueError as error:
            failures[index] = f'MCP server "{_server_name(raw)}" failed to start: {_one_line(str(error))}'
            continue
        started.append((index, _Server(spec, cwd, ask)))
    if not started:
        return connections, [failures[i] for i in sorted(failures)]
    try:
        await anyio.to_thread.run_sync(_import_mcp)
    except ImportError as error:  # a broken install must not fail the session either
        for index, server in started:
            failures[index] = f'MCP server "{server.name}" failed to start: the MCP SDK is unusable ({error})'
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
