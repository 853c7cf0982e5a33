"""Every network connection of one server: opened, found by id, watched, handed sessions, closed.

Sessions live in the one durable store (each connection's agent claims what it opens, so two
connections never write one log). A session is driven by one connection at a time: a connection
that loads a session another one holds takes it over when that other's client is gone (its turn
is cancelled then, its log synced and its claim dropped, so the load succeeds at once), and is
answered with an error while that other's client is still there.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from ._channel import Channel, Transport

if TYPE_CHECKING:
    from dsh_acp._config import AgentConfig
    from dsh_acp.launch._listen import ListenOptions

__all__ = ["Hub"]

_log = logging.getLogger("dsh_acp.remote")


class Hub:
    """The channels of one server (see the module docstring)."""

    def __init__(self, config: AgentConfig, options: ListenOptions, group: TaskGroup) -> None:
        self.config = config
        self.options = options
        self._group = group
        self.channels: dict[str, Channel] = {}
        self.stopping = False

    def open(self, transport: Transport, peer: str) -> Channel:
        """A new connection with its own agent, running in the server's task group."""
        channel = Channel(self.config, self.options, transport, peer, self._forget)
        self.channels[channel.id] = channel
        self._group.start_soon(channel.run, name=f"acp connection {channel.id}")
        return channel

    def get(self, connection_id: str) -> Channel | None:
        """The open connection of this id (``None``: unknown, or closing)."""
        channel = self.channels.get(connection_id)
        return channel if channel is not None and channel.reason is None else None

    def _forget(self, channel: Channel) -> None:
        if self.channels.get(channel.id) is channel:
            del self.channels[channel.id]

    async def claim(self, channel: Channel, session_id: str) -> str | None:
        """Make way for ``channel`` to open ``session_id``: a connection whose client is gone
        gives the session up now; the error to answer if one whose client is there holds it."""
        for other in list(self.channels.values()):
            if other is channel or not other.holds(session_id):
                continue
            if other.detached_at is None and other.reason is None:
                return (
                    f"session {session_id} is open on another connection whose client is still "
                    "connected: close it there (session/close) or end that connection first"
                )
            other.log("takeover", session=session_id, by=channel.id)
            assert other.agent is not None
            await other.agent.release(session_id)
        return None

    async def watch(self) -> None:
        """Close, once a second, the connections whose client has been gone for the grace
        period, and those idle for the idle timeout with nothing running."""
        grace, idle = self.options.grace, self.options.idle_timeout
        while True:
            await anyio.sleep(1)
            now = time.monotonic()
            for channel in list(self.channels.values()):
                if channel.detached_at is not None and now - channel.detached_at >= grace:
                    channel.close(f"the client has been gone for {grace:g} s")
                elif idle and now - channel.last_active >= idle and not channel.busy:
                    channel.close(f"idle for {idle:g} s")

    async def close_all(self, reason: str, seconds: float) -> None:
        """Close every connection (turns cancelled, logs synced) and wait at most ``seconds``."""
        self.stopping = True
        channels = list(self.channels.values())
        for channel in channels:
            channel.close(reason)
        with anyio.move_on_after(seconds) as waited:
            for channel in channels:
                await channel.ended.wait()
        if waited.cancelled_caught:
            _log.warning("%d connections did not end within %g s", len(self.channels), seconds)
