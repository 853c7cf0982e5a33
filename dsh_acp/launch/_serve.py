"""Running the agent on a pair of byte streams: memory pipes in tests, a network connection, and
stdio once the prelude answered ``initialize`` there (``_stdio``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from dsh_acp._config import AgentConfig
from dsh_acp.acp._agent import Agent
from dsh_acp.acp._initialize import Handshake
from dsh_acp.rpc._connection import Connection
from dsh_acp.rpc._framing import DEFAULT_MAX_MESSAGE_BYTES
from dsh_acp.rpc._stdio import protocol_streams

if TYPE_CHECKING:
    from dsh_acp.rpc._prelude import PreludeEnd

__all__ = ["serve", "serve_after_prelude"]


async def serve(
    config: AgentConfig,
    receive: ByteReceiveStream,
    send: ByteSendStream,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    max_pending_requests: int | None = None,
    started: Callable[[Agent, Connection], None] | None = None,
) -> None:
    """Serve one client until it closes its end; then cancel every turn and release sessions.

    ``started`` is handed the agent and its connection before the first message is read (the
    network server asks them which sessions they hold and whether a request is running)."""
    await _serve(config, receive, send, max_message_bytes, None, max_pending_requests, started)


async def _serve(
    config: AgentConfig,
    receive: ByteReceiveStream,
    send: ByteSendStream,
    max_message_bytes: int,
    handshake: Handshake | None,
    max_pending_requests: int | None = None,
    started: Callable[[Agent, Connection], None] | None = None,
) -> None:
    """``serve``; ``handshake``: the one the prelude answered ``initialize`` with."""
    # Tasks that outlive a request but not the connection (an MCP server's client) live here.
    async with anyio.create_task_group() as background:
        agent = Agent(config, background, handshake)
        connection = Connection(
            receive,
            send,
            agent,
            max_message_bytes=max_message_bytes,
            max_pending_requests=max_pending_requests,
        )
        agent.attach(connection)
        if started is not None:
            started(agent, connection)
        try:
            await connection.serve()
        finally:
            with anyio.CancelScope(shield=True):
                await agent.aclose()
            background.cancel_scope.cancel()


async def serve_after_prelude(
    config: AgentConfig,
    read_fd: int,
    write_fd: int,
    end: PreludeEnd,
    handshake: Handshake,
    stop: asyncio.Event,
    max_message_bytes: int,
) -> None:
    """The full agent on stdio, reading first what the prelude left; a signal (``stop``) ends it."""
    with protocol_streams(read_fd, write_fd, already_read=end.rest, ended=end.ended) as (receive, send):
        async with anyio.create_task_group() as group:

            async def stop_on_signal() -> None:
                await stop.wait()
                group.cancel_scope.cancel()

            group.start_soon(stop_on_signal)
            await _serve(config, receive, send, max_message_bytes, handshake)
            group.cancel_scope.cancel()
