"""Running the agent on a pair of byte streams: stdio for real, memory pipes in tests."""

from __future__ import annotations

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from dsh_acp._config import AgentConfig
from dsh_acp.acp._agent import Agent
from dsh_acp.rpc._connection import Connection
from dsh_acp.rpc._framing import DEFAULT_MAX_MESSAGE_BYTES

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
    """Serve on the process's stdio, with fd 1 guarded for the protocol alone.

    The exit status is 0 when the client closed stdin. Ctrl+C (SIGINT) and SIGTERM end the agent
    the same orderly way (turns cancelled, commands and servers stopped), without a traceback,
    with the shell's usual status: 128 + the signal's number (130, 143).
    """
    import signal

    from dsh_acp.rpc._stdio import protocol_stdio

    stopped_by: list[int] = []

    async def main() -> None:
        with protocol_stdio() as (receive, send):
            async with anyio.create_task_group() as group:

                async def stop_on_signal() -> None:
                    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                        async for signum in signals:
                            stopped_by.append(signum)
                            group.cancel_scope.cancel()
                            return

                group.start_soon(stop_on_signal)
                await serve(config, receive, send, max_message_bytes=max_message_bytes)
                group.cancel_scope.cancel()

    try:
        anyio.run(main, backend="asyncio")
    except KeyboardInterrupt:  # before the handler was in place
        return 128 + signal.SIGINT
    return 128 + stopped_by[0] if stopped_by else 0
