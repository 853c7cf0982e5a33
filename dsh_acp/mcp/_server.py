"""One MCP server the session uses: the task that owns its connection, its start, its calls and
the one-line reasons it failed."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Literal

import anyio
import httpx2
import mcp_types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    ElicitRequestFormParams,
    ElicitResult,
    Implementation,
    PaginatedRequestParams,
)

from dsh_acp._safe_text import brief, one_line
from dsh_acp._version import VERSION
from dsh_tools import HarnessError, ToolOutput, without_secrets

from ._client_session import FormOnlyClientSession
from ._specs import HttpSpec, StdioSpec
from ._stdio import StdioServerProcess
from ._tool_shapes import mcp_blocks

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

__all__ = ["FAILURE_CHARS", "AskUser", "McpServerError", "Server"]

_log = logging.getLogger("dsh_acp.mcp")

_MAX_TOOL_PAGES = 100
"""A server whose ``tools/list`` never stops paginating cannot hang the session."""


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


FAILURE_CHARS = 300
"""Characters of the reason a server failed to start, in the line shown to the user."""
_ERROR_CHARS = 200
"""Characters of an exception's own words inside such a line or a failed call's error."""


class Server:
    """One configured server: its owner task, its session and the calls made through it."""

    def __init__(self, spec: StdioSpec | HttpSpec, cwd: str | None, ask: AskUser | None = None) -> None:
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

        read, write = await self._open_transport(stack)
        session = await stack.enter_async_context(
            FormOnlyClientSession(
                read,
                write,
                client_info=Implementation(name="dsh-acp", version=VERSION),
                logging_callback=self._on_log,
                # Declares elicitation (form mode only) to the server only when the editor can ask.
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
        if isinstance(spec, HttpSpec):
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
        is not the flat object MCP allows, or a URL-mode one (only form mode is declared, but a
        server may ask anyway; the editor is only asked forms), is declined without asking."""

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

        error = _unwrap(error)
        phase = self._phase
        if isinstance(error, TimeoutError):
            why = f"no answer to {phase} within {start_timeout:g} s"
        elif self._ended:
            why = f"{self._gone or 'it exited'} before answering {phase}" + await self._exit_detail()
        elif isinstance(self.spec, StdioSpec) and phase == "start" and isinstance(error, OSError):
            why = f'cannot run "{self.spec.command}": {error.strerror or error}'
            if error.filename is not None and os.fsdecode(error.filename) != self.spec.command:
                why += f" ({os.fsdecode(error.filename)})"  # the working directory, say
        elif isinstance(self.spec, HttpSpec) and _is_http_transport_error(error):
            why = f"cannot reach {self.spec.url}: {_describe(error)}"
        elif _is_connection_closed(error):
            why = f"the connection closed before it answered {phase}"
        elif isinstance(error, MCPError):
            why = f"{phase} failed: {error.message} (code {error.code})"
        else:
            why = f"{phase} failed: {_describe(error)}"
        return f'MCP server "{self.name}" failed to start: {one_line(why, FAILURE_CHARS)}'

    # -- calls -----------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """``tools/call`` on this server. Cancelling the awaiting task cancels the request (the
        SDK sends ``notifications/cancelled`` when its request is abandoned)."""

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
            what = "exited" if isinstance(self.spec, StdioSpec) else "disconnected"
            detail = await self._exit_detail()
            self._gone = f"it {what} during an earlier call{detail}"
            raise McpServerError(
                f'MCP server "{self.name}" {what} during the call{detail}', "MCP_SERVER_EXITED"
            ) from None
        except Exception as error:
            raise McpServerError(
                f'MCP server "{self.name}": the call failed: {_describe(error)}', "MCP_CALL_FAILED"
            ) from None
        return ToolOutput(mcp_blocks(result), is_error=result.is_error)


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

    return (
        isinstance(error, MCPError)
        and error.code == CONNECTION_CLOSED
        and error.message == "Connection closed"
    )


def _is_http_transport_error(error: BaseException) -> bool:

    return isinstance(error, httpx2.TransportError)


def _unwrap(error: BaseException) -> BaseException:
    """The one exception inside (nested) single-exception groups: what actually went wrong."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _describe(error: BaseException) -> str:
    error = _unwrap(error)
    detail = one_line(str(error), _ERROR_CHARS)
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__
