"""Running the agent on a pair of byte streams: stdio for real, memory pipes in tests.

On stdio, ``initialize`` is answered by the prelude (``dsh_acp.rpc._prelude``) on the bare asyncio
loop, and only then are anyio, the connection and the agent imported: nothing at the top of this
module may import them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dsh_acp._config import AgentConfig
from dsh_acp.rpc._framing import DEFAULT_MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from anyio.abc import ByteReceiveStream, ByteSendStream

    from dsh_acp.acp._agent import Agent
    from dsh_acp.rpc._connection import Connection
    from dsh_acp.rpc._prelude import PreludeEnd
    from dsh_acp.wire._client_profile import ClientProfile

__all__ = ["serve", "serve_stdio"]


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
    initialized: ClientProfile | None,
    max_pending_requests: int | None = None,
    started: Callable[[Agent, Connection], None] | None = None,
) -> None:
    """``serve``; ``initialized``: the client's profile when the prelude answered ``initialize``."""
    import anyio

    from dsh_acp.acp._agent import Agent
    from dsh_acp.rpc._connection import Connection

    # Tasks that outlive a request but not the connection (an MCP server's client) live here.
    async with anyio.create_task_group() as background:
        agent = Agent(config, background)
        connection = Connection(
            receive,
            send,
            agent,
            max_message_bytes=max_message_bytes,
            max_pending_requests=max_pending_requests,
        )
        agent.attach(connection)
        if initialized is not None:
            agent.initialized(initialized)
        if started is not None:
            started(agent, connection)
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
    import asyncio
    import signal

    from dsh_acp.acp._initialize import PreludeAnswers
    from dsh_acp.rpc._prelude import answer_first_requests
    from dsh_acp.rpc._protocol_fds import protocol_fds

    stopped_by: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        def on_signal(signum: int) -> None:
            stopped_by.append(signum)
            stop.set()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            with protocol_fds() as (read_fd, write_fd):
                answers = PreludeAnswers(config)
                prelude = loop.create_task(
                    answer_first_requests(read_fd, write_fd, answers.answer, max_line_bytes=max_message_bytes)
                )
                stopping = loop.create_task(stop.wait())
                await asyncio.wait((prelude, stopping), return_when=asyncio.FIRST_COMPLETED)
                if stop.is_set():
                    prelude.cancel()
                    await asyncio.wait((prelude,))
                    os.close(read_fd)
                    os.close(write_fd)
                    return
                stopping.cancel()
                await _serve_after_prelude(
                    config, read_fd, write_fd, prelude.result(), answers.profile, stop, max_message_bytes
                )
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # before the handler was in place
        return 128 + signal.SIGINT
    return 128 + stopped_by[0] if stopped_by else 0


async def _serve_after_prelude(
    config: AgentConfig,
    read_fd: int,
    write_fd: int,
    end: PreludeEnd,
    profile: ClientProfile | None,
    stop: asyncio.Event,
    max_message_bytes: int,
) -> None:
    """The full agent, reading first what the prelude left; a signal (``stop``) ends it."""
    import anyio

    from dsh_acp.rpc._stdio import protocol_streams

    with protocol_streams(read_fd, write_fd, already_read=end.rest, ended=end.ended) as (receive, send):
        async with anyio.create_task_group() as group:

            async def stop_on_signal() -> None:
                await stop.wait()
                group.cancel_scope.cancel()

            group.start_soon(stop_on_signal)
            await _serve(config, receive, send, max_message_bytes, profile)
            group.cancel_scope.cancel()
