"""One ACP connection over the network: an agent of its own, fed and drained by its transport.

A channel runs the same agent and JSON-RPC connection as stdio (``launch.serve``) over an
in-memory pipe: the transport writes each client message into it as one line, and each line the
agent writes is put in a mailbox for the transport to deliver. On WebSocket there is one mailbox,
read by the socket's sender. On Streamable HTTP there is one for the connection's event stream and
one per session whose stream the client opened (``Acp-Session-Id``): a message about a session
(its updates, the agent's requests about it, the answers to the client's requests about it) goes
to that session's stream once the client opened one, else to the connection's, so a client that
opens only the connection's stream gets everything there.

Closing a channel is the client closing stdin: its turns are cancelled, its processes stopped,
its logs synced and its sessions released. The transport marks the channel attached while its
client is there (the socket, the connection's event stream); the hub closes a channel whose
client has been gone for the grace period, or that stayed idle too long.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
import anyio.lowlevel
import orjson
from anyio.abc import ByteSendStream

from dsh_acp.launch._serve import serve
from dsh_acp.rpc._memory import MemoryByteReceiveStream

from ._mailbox import Mailbox

if TYPE_CHECKING:
    from dsh_acp._config import AgentConfig
    from dsh_acp.acp._agent import Agent
    from dsh_acp.launch._listen import ListenOptions
    from dsh_acp.rpc._connection import Connection

__all__ = ["Channel", "RequestKey", "Transport", "request_key"]

_log = logging.getLogger("dsh_acp.remote")

Transport = Literal["http", "websocket"]
RequestKey = tuple[bool, Any]
"""A JSON-RPC id as a dict key: ``1`` and ``"1"`` are different requests."""

# Almost every line the agent writes is a session update, and it writes them all this way: their
# session is read without parsing the message.
_UPDATE_HEAD: Final = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"'
_MAX_SESSION_STREAMS: Final = 1024
"""Session streams one HTTP connection may open."""


def request_key(request_id: Any) -> RequestKey:
    return (type(request_id) is str, request_id)


class Channel:
    """One client's ACP connection (see the module docstring)."""

    def __init__(
        self,
        config: AgentConfig,
        options: ListenOptions,
        transport: Transport,
        peer: str,
        on_end: Callable[[Channel], None],
    ) -> None:
        self.id = secrets.token_urlsafe(18)
        """The ``Acp-Connection-Id``: unguessable, though the token guards every request anyway."""
        self.transport: Transport = transport
        self.peer = peer
        self._config = config
        self._options = options
        self._on_end = on_end
        self.opened_at = time.monotonic()
        self.last_active = self.opened_at
        self.detached_at: float | None = self.opened_at
        """Since when no client is attached (``None``: one is)."""
        self.agent: Agent | None = None
        self.connection: Connection | None = None
        self.reason: str | None = None
        """Why the channel is closing (``None``: it is not)."""
        self.ended = anyio.Event()
        self.client: str = "?"
        self.messages_in = self.messages_out = 0
        self._inbound, receive = anyio.create_memory_object_stream[bytes](math.inf)
        self._receive = MemoryByteReceiveStream(receive)
        self._partial = b""
        self.buffered = 0
        """Bytes of output queued for the client and not yet taken."""
        self.box = Mailbox()
        """All output (WebSocket), or the connection's event stream's (HTTP)."""
        self.session_boxes: dict[str, Mailbox] = {}
        self.routes: dict[RequestKey, str | None] = {}
        """The session each pending HTTP request is about (its answer goes to that session's stream)."""
        self._initialize: tuple[RequestKey, anyio.Event, list[bytes]] | None = None

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the client until the channel is closed; then end as on stdin's end."""
        self.log("open", transport=self.transport, peer=self.peer)
        try:
            await serve(
                self._config,
                self._receive,
                _Sink(self._put),
                max_message_bytes=self._config.max_message_bytes,
                max_pending_requests=self._options.max_pending_requests,
                started=self._started,
            )
        finally:
            self.reason = self.reason or "ended"
            self.box.close()
            for box in self.session_boxes.values():
                box.close()
            self._on_end(self)
            self.ended.set()
            self.log(
                "close",
                reason=self.reason,
                seconds=round(time.monotonic() - self.opened_at, 1),
                received=self.messages_in,
                sent=self.messages_out,
            )

    def _started(self, agent: Agent, connection: Connection) -> None:
        self.agent, self.connection = agent, connection

    def close(self, reason: str) -> None:
        """End the client's connection (idempotent): the agent reads the end of its input."""
        if self.reason is None:
            self.reason = reason
        self._inbound.close()

    @property
    def busy(self) -> bool:
        """Whether the agent is handling a request of this client's (a prompt turn is one)."""
        return self.connection is not None and self.connection.handling > 0

    def holds(self, session_id: str) -> bool:
        return self.agent is not None and self.agent.holds(session_id)

    def attach(self) -> None:
        self.detached_at = None

    def detach(self) -> None:
        if self.detached_at is None:
            self.detached_at = time.monotonic()

    # -- client to agent ----------------------------------------------------------------------

    async def send(self, message: bytes) -> None:
        """Hand one client message (JSON text) to the agent, as one line."""
        self.messages_in += 1
        self.last_active = time.monotonic()
        if b"\n" in message:  # whitespace only: a raw line break cannot be inside a JSON string
            message = message.replace(b"\n", b" ")
        try:
            await self._inbound.send(message + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # closing: the agent reads no more

    async def initialize(self, request_id: Any, message: bytes, seconds: float) -> bytes | None:
        """Send ``initialize`` and return its answer instead of queuing it (HTTP answers it in
        the response to the POST); ``None`` if none came within ``seconds``."""
        answered = anyio.Event()
        answer: list[bytes] = []
        self._initialize = (request_key(request_id), answered, answer)
        await self.send(message)
        with anyio.move_on_after(seconds):
            await answered.wait()
        self._initialize = None
        if self.detached_at is not None:  # the grace for opening the event stream starts now
            self.detached_at = time.monotonic()
        return answer[0] if answer else None

    def answer(self, request_id: Any, code: int, message: str) -> None:
        """Answer a client request with an error here, without the agent."""
        error = {"code": code, "message": message, "data": {"details": message}}
        self._put(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}) + b"\n")

    # -- agent to client ----------------------------------------------------------------------

    def _put(self, data: bytes) -> None:
        """What the agent wrote: whole lines go to their mailboxes (a write may end mid-line)."""
        if self._partial:
            data, self._partial = self._partial + data, b""
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if end > start:
                self._deliver(data[start:end])
            start = end + 1
        if start < len(data):
            self._partial = data[start:]

    def _deliver(self, line: bytes) -> None:
        self.messages_out += 1
        self.last_active = time.monotonic()
        if self._initialize is not None and self._is_initialize_answer(line):
            return
        box = self.box if self.transport == "websocket" else self._http_box(line)
        if box.closed:
            return
        box.put(line)
        self.buffered += len(line)
        if self.buffered > self._options.max_buffered_bytes and self.reason is None:
            limit = self._options.max_buffered_bytes // (1024 * 1024)
            self.close(f"the client read none of {limit} MiB of output")

    def _is_initialize_answer(self, line: bytes) -> bool:
        assert self._initialize is not None
        key, answered, answer = self._initialize
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        if type(message) is not dict or "method" in message or request_key(message.get("id")) != key:
            return False
        self._initialize = None
        answer.append(line)
        answered.set()
        return True

    def _http_box(self, line: bytes) -> Mailbox:
        """The mailbox of the stream this message goes out on (see the module docstring)."""
        session_id: str | None = None
        if line.startswith(_UPDATE_HEAD):
            end = line.find(b'"', len(_UPDATE_HEAD))
            raw = line[len(_UPDATE_HEAD) : end]
            escaped = b"\\" in raw
            session_id = _session_of(orjson.loads(line), self.routes) if escaped else raw.decode()
        elif self.session_boxes or self.routes:
            session_id = _session_of(orjson.loads(line), self.routes)
        if session_id is not None:
            box = self.session_boxes.get(session_id)
            if box is not None:
                return box
        return self.box

    def session_box(self, session_id: str) -> Mailbox | None:
        """The mailbox of a session's event stream, made when the client first opens it
        (``None``: this connection opened too many)."""
        box = self.session_boxes.get(session_id)
        if box is None:
            if len(self.session_boxes) >= _MAX_SESSION_STREAMS:
                return None
            box = self.session_boxes[session_id] = Mailbox()
            if self.reason is not None:
                box.close()
        return box

    async def take(self, box: Mailbox, keepalive: float | None = None) -> list[bytes] | None:
        """What waits in ``box`` (see ``Mailbox.take``), counted as delivered."""
        lines = await box.take(keepalive)
        if lines:
            self.buffered -= sum(map(len, lines))
        return lines

    # -- logs ---------------------------------------------------------------------------------

    def log(self, event: str, **fields: Any) -> None:
        """One structured line about this connection (``conn=ID event=EVENT key=value ...``)."""
        if _log.isEnabledFor(logging.INFO):
            _log.info("%s", describe(self.id, event, fields))


def describe(connection_id: str, event: str, fields: dict[str, Any]) -> str:
    """``conn=… event=… key=value …``, values quoted where they hold spaces or quotes."""
    parts = [f"conn={connection_id}", f"event={event}"]
    for name, value in fields.items():
        text = str(value)
        if not text or any(c in text for c in ' "=\\') or not text.isprintable():
            text = orjson.dumps(text).decode()
        parts.append(f"{name}={text}")
    return " ".join(parts)


def _session_of(message: Any, routes: dict[RequestKey, str | None]) -> str | None:
    """The session a message of the agent's is about: its params' ``sessionId`` (updates and
    requests), or the session of the request it answers."""
    if type(message) is not dict:
        return None
    if "method" in message:
        params = message.get("params")
        session_id = params.get("sessionId") if type(params) is dict else None
        return session_id if type(session_id) is str else None
    return routes.pop(request_key(message.get("id")), None)


class _Sink(ByteSendStream):
    """The agent's output stream: every write is handed over at once, never waits (the mailboxes
    are bounded by the channel, which closes a connection whose client stopped reading)."""

    def __init__(self, put: Callable[[bytes], None]) -> None:
        self._put = put

    def write_nowait(self, data: bytes) -> int:
        self._put(bytes(data))
        return len(data)

    async def send(self, item: bytes) -> None:
        self._put(bytes(item))
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        pass
