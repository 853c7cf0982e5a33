"""ACP over Streamable HTTP on ``/acp``, as the official SDK's client speaks it.

- ``POST`` carries one client message (``Content-Type: application/json``). ``initialize``, without
  ``Acp-Connection-Id``, opens a connection and is answered in the response (200, the JSON answer,
  the new ``Acp-Connection-Id`` header); every later message carries that header (and
  ``Acp-Session-Id`` when it is about a session) and is accepted with 202, its answer coming on an
  event stream.
- ``GET`` with ``Accept: text/event-stream`` opens the connection's event stream, or one session's
  with ``Acp-Session-Id`` (see ``_channel``); one reader per stream (409 for a second). Each message
  is one ``data:`` event; a comment every 15 s keeps proxies from closing a quiet stream.
- ``DELETE`` ends the connection: its turns are cancelled as on stdin's end.

Statuses: 400 for a missing or mismatched header or a malformed body, 404 for an unknown
connection (the client's transport then closes), 406, 409, 413 for a message over the size limit,
415, 501 for a batch, 503 while shutting down, 504 for an ``initialize`` left unanswered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import orjson
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from ._admit import SESSION_SCOPED, admit, client_name, is_request_id, session_of
from ._channel import Channel
from ._hub import Hub
from ._mailbox import Mailbox

__all__ = ["delete", "get", "post"]

CONNECTION_HEADER: Final = "acp-connection-id"
SESSION_HEADER: Final = "acp-session-id"
KEEPALIVE_SECONDS: Final = 15.0
_EVENT_HEADERS: Final = {
    "Cache-Control": "no-cache, no-transform",
    # nginx buffers a proxied response unless told not to: events must leave as they come.
    "X-Accel-Buffering": "no",
}


def _text(status: int, text: str) -> Response:
    return PlainTextResponse(text, status_code=status)


def _peer(request: Request) -> str:
    client = request.client
    return f"{client.host}:{client.port}" if client is not None else "?"


def _channel(request: Request, hub: Hub) -> Channel | Response:
    """The connection a request names, or the answer to a missing or unknown id."""
    connection_id = request.headers.get(CONNECTION_HEADER)
    if connection_id is None:
        return _text(400, "Acp-Connection-Id is missing (initialize first)")
    channel = hub.get(connection_id)
    if channel is None:
        return _text(404, "unknown Acp-Connection-Id: the connection is closed (initialize again)")
    return channel


async def post(request: Request, hub: Hub) -> Response:
    read = await _message(request, hub.config.max_message_bytes)
    if isinstance(read, Response):
        return read
    message, body = read
    if message.get("method") == "initialize" and is_request_id(message.get("id")):
        if request.headers.get(CONNECTION_HEADER) is not None:
            return _text(400, "initialize opens a connection: send it without Acp-Connection-Id")
        return await _initialize(request, hub, message, body)
    channel = _channel(request, hub)
    if not isinstance(channel, Channel):
        return channel
    session = _session_named(request, message)
    if isinstance(session, Response):
        return session
    if await admit(hub, channel, message, session):
        await channel.send(body)
    return Response(status_code=202)


async def _message(request: Request, limit: int) -> tuple[dict[str, Any], bytes] | Response:
    """The JSON-RPC message a POST carries and its bytes, or the answer to a body that is not one."""
    content_type = request.headers.get("content-type", "")
    if content_type.partition(";")[0].strip().lower() != "application/json":
        return _text(415, "Content-Type must be application/json")
    body = await _body(request, limit)
    if body is None:
        return _text(413, f"a message is at most {limit} bytes")
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _text(400, "the body is not JSON")
    if type(message) is list:
        return _text(501, "JSON-RPC batches are not supported")
    if type(message) is not dict:
        return _text(400, "the body is not a JSON-RPC message")
    return message, body


def _session_named(request: Request, message: dict[str, Any]) -> str | Response | None:
    """The session a message is for (its header's, else its params'), or the answer to a header
    missing where a session is required, or naming another session than the params."""
    header_session = request.headers.get(SESSION_HEADER)
    params_session = session_of(message)
    if header_session is None and message.get("method") in SESSION_SCOPED:
        return _text(400, "Acp-Session-Id is missing")
    if header_session is not None and params_session is not None and header_session != params_session:
        return _text(400, "Acp-Session-Id does not match the params' sessionId")
    return header_session or params_session


async def _initialize(request: Request, hub: Hub, message: dict[str, Any], body: bytes) -> Response:
    if hub.stopping:
        return _text(503, "the agent is shutting down")
    channel = hub.open("http", _peer(request))
    answer = await channel.initialize(message["id"], body, hub.options.initialize_timeout)
    if answer is None:
        channel.close("initialize was not answered")
        return _text(504, "initialize was not answered in time")
    if b'"error":' in answer and "error" in orjson.loads(answer):
        channel.close("initialize failed")
    else:
        channel.log("initialize", client=client_name(message))
    headers = {"Acp-Connection-Id": channel.id}
    return Response(answer, status_code=200, media_type="application/json", headers=headers)


async def _body(request: Request, limit: int) -> bytes | None:
    """The request's body, or ``None`` once it passes ``limit`` bytes (the rest is not read)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def get(request: Request, hub: Hub) -> Response:
    if "text/event-stream" not in request.headers.get("accept", "").lower():
        return _text(406, "Accept must include text/event-stream")
    channel = _channel(request, hub)
    if not isinstance(channel, Channel):
        return channel
    session_id = request.headers.get(SESSION_HEADER)
    box = channel.session_box(session_id) if session_id is not None else channel.box
    if box is None:
        return _text(400, "too many session streams on this connection")
    if box.reader is not None:
        return _text(409, "this stream already has a reader")
    reader = box.reader = object()
    if session_id is None:
        channel.attach()
    events = _events(channel, box, reader, connection_stream=session_id is None)
    return StreamingResponse(events, media_type="text/event-stream", headers=_EVENT_HEADERS)


async def _events(
    channel: Channel, box: Mailbox, reader: object, *, connection_stream: bool
) -> AsyncIterator[bytes]:
    """The stream's events until the connection ends or the client goes."""
    try:
        while (lines := await channel.take(box, KEEPALIVE_SECONDS)) is not None:
            if not lines:
                yield b":\n\n"
                continue
            yield b"".join([b"data: " + line + b"\n\n" for line in lines])
    finally:
        if box.reader is reader:
            box.reader = None
            if connection_stream:
                channel.detach()


def delete(request: Request, hub: Hub) -> Response:
    channel = _channel(request, hub)
    if not isinstance(channel, Channel):
        return channel
    channel.close("the client closed the connection")
    return Response(status_code=202)
