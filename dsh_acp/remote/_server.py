"""Running the network server: the socket, uvicorn, and an orderly stop on SIGTERM or Ctrl+C.

uvicorn parses HTTP (with httptools, already the model client's parser) and WebSocket (with the
websockets library's Sans-I/O protocol); Starlette routes. On a signal every connection is closed
first, as on stdin's end (turns cancelled, commands stopped, logs synced), and only then does
uvicorn stop: open event streams and sockets end with their connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Final

import anyio
import uvicorn

from dsh_acp._config import AgentConfig
from dsh_acp.launch._listen import ListenOptions

from ._app import ENDPOINT, build_app
from ._hub import Hub

__all__ = ["serve_network"]

_log = logging.getLogger("dsh_acp.remote")

_STOP_TIMEOUT: Final = 10.0
"""Seconds the connections get to end their turns at shutdown."""
_DEAD_PEER_SECONDS: Final = 30
"""A peer that acknowledges nothing for this long is gone (TCP keep-alive and user timeout)."""


class _Server(uvicorn.Server):
    """uvicorn's server without its own signal handling: ``serve_network`` stops it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def serve_network(config: AgentConfig, options: ListenOptions) -> int:
    """Serve ACP at ``options``' address until SIGTERM or SIGINT; the exit status (0, or 1 when
    the address cannot be used)."""
    try:
        sock = _listening_socket(options)
    except OSError as error:
        sys.stderr.write(
            f"dsh-acp: cannot listen on {options.host}:{options.port}: {error.strerror or error}\n"
        )
        return 1
    _raise_descriptor_limit()
    if not _log.isEnabledFor(logging.DEBUG):  # uvicorn's own lines per socket: only when debugging
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(
        f"dsh-acp: serving ACP on http://{shown}:{port}{ENDPOINT} (Streamable HTTP and WebSocket; "
        f"health: http://{shown}:{port}/healthz)\n"
    )
    sys.stderr.flush()
    asyncio.run(_serve(config, options, sock))
    return 0


async def _serve(config: AgentConfig, options: ListenOptions, sock: socket.socket) -> None:
    stop = anyio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with anyio.create_task_group() as group:
            hub = Hub(config, options, group)
            server = _Server(_uvicorn_config(hub, config))
            served = anyio.Event()

            async def run_server() -> None:
                try:
                    await server.serve([sock])
                finally:
                    served.set()
                    stop.set()

            group.start_soon(hub.watch, name="connection watch")
            group.start_soon(run_server, name="http server")
            await stop.wait()
            if not served.is_set():
                _log.info("stopping: closing %d connections", len(hub.channels))
                await hub.close_all("the agent is shutting down", _STOP_TIMEOUT)
                server.should_exit = True
                await served.wait()
            group.cancel_scope.cancel()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def _uvicorn_config(hub: Hub, config: AgentConfig) -> uvicorn.Config:
    return uvicorn.Config(
        build_app(hub),
        http="httptools",
        ws="websockets-sansio",
        lifespan="off",
        log_config=None,  # the agent's own logging (--log-level) applies
        access_log=False,
        server_header=False,
        # A frame up to twice the limit reaches the agent, which answers an oversized message with
        # an error as on stdio; a larger one closes the socket (1009).
        ws_max_size=2 * config.max_message_bytes,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        # Compression would cost each idle connection its zlib windows and each chunk its CPU.
        ws_per_message_deflate=False,
        timeout_graceful_shutdown=3,
    )


def _listening_socket(options: ListenOptions) -> socket.socket:
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    host = "127.0.0.1" if options.host == "localhost" else options.host
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit these: a client that vanished without closing (a laptop
        # lid, a dropped network) is found in about half a minute even while nothing is sent.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", 15), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, _DEAD_PEER_SECONDS * 1000)
        sock.bind((host, options.port))
        sock.listen(1024)
    except BaseException:
        sock.close()
        raise
    return sock


def _raise_descriptor_limit() -> None:
    """Each client holds a socket: allow as many as the hard limit permits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
