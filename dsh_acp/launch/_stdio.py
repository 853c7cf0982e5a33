"""Serving on the process's stdio: ``initialize`` answered by the prelude (``dsh_acp.rpc._prelude``)
on the bare asyncio loop, and only then the full agent (``_serve``), which imports anyio, the
connection and the agent: nothing at the top of this module may import them.
"""

from __future__ import annotations

import asyncio
import os
import signal

from dsh_acp._config import AgentConfig
from dsh_acp.acp._initialize import Handshake
from dsh_acp.rpc._framing import DEFAULT_MAX_MESSAGE_BYTES
from dsh_acp.rpc._prelude import answer_first_requests
from dsh_acp.rpc._protocol_fds import protocol_fds

__all__ = ["serve_stdio"]


def serve_stdio(config: AgentConfig, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> int:
    """Serve on the process's stdio, with fd 1 guarded for the protocol alone.

    The exit status is 0 when the client closed stdin. Ctrl+C (SIGINT) and SIGTERM end the agent
    the same orderly way (turns cancelled, commands and servers stopped), without a traceback,
    with the shell's usual status: 128 + the signal's number (130, 143).
    """
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
                handshake = Handshake(config)
                prelude = loop.create_task(
                    answer_first_requests(
                        read_fd, write_fd, handshake.prelude_answer, max_line_bytes=max_message_bytes
                    )
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
                from ._serve import serve_after_prelude  # anyio and the agent: after the answer

                await serve_after_prelude(
                    config, read_fd, write_fd, prelude.result(), handshake, stop, max_message_bytes
                )
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # before the handler was in place
        return 128 + signal.SIGINT
    return 128 + stopped_by[0] if stopped_by else 0
