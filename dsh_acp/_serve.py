"""Running the agent on a pair of byte streams: stdio for real, memory pipes in tests."""

from __future__ import annotations

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from ._agent import Agent
from ._config import AgentConfig
from ._connection import Connection
from ._framing import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["serve", "serve_stdio"]


async def serve(
    config: AgentConfig,
    receive: ByteReceiveStream,
    send: ByteSendStream,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> None:
    """Serve one client until it closes its end; then cancel every turn and release sessions."""
    # Tasks that outlive a request but not the connection (an MCP server's client) live here.
    async with anyio.create_task_group() as background:
        agent = Agent(config, background)
        connection = Connection(receive, send, agent, max_message_bytes=max_message_bytes)
        agent.attach(connection)
        try:
            await connection.serve()
        finally:
            with anyio.CancelScope(shield=True):
                await agent.aclose()
            background.cancel_scope.cancel()


def serve_stdio(config: AgentConfig, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> int:
    """Serve on the process's stdio, with fd 1 guarded for the protocol alone; exit status 0."""
    from ._stdio import protocol_stdio

    async def main() -> None:
        with protocol_stdio() as (receive, send):
            await serve(config, receive, send, max_message_bytes=max_message_bytes)

    anyio.run(main, backend="asyncio")
    return 0
