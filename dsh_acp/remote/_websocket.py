"""ACP over WebSocket on ``/acp``: the upgrade's 101 carries ``Acp-Connection-Id``; then one
JSON-RPC message per text frame each way, ``initialize`` first (any other first message closes the
socket with 1002). Binary frames are ignored.

The socket's end is the client's end unless a request is running: then the connection waits for
the grace period (see ``_hub``) with its turns running, for the client to come back and load the
session. Dead peers are found by pings (every 20 s, 20 s to answer).
"""

from __future__ import annotations

from typing import Final

import anyio
import orjson
from starlette.responses import PlainTextResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from ._admit import admit, client_name, is_request_id, session_of
from ._channel import Channel
from ._guard import refusal
from ._hub import Hub

__all__ = ["serve_websocket"]

_NORMAL: Final = 1000
_GOING_AWAY: Final = 1001
_PROTOCOL_ERROR: Final = 1002
_TRY_AGAIN_LATER: Final = 1013


async def serve_websocket(websocket: WebSocket, hub: Hub) -> None:
    """One WebSocket client, from the upgrade to the socket's end."""
    refused = refusal(websocket.headers, hub.options)
    if refused is not None:
        response = PlainTextResponse(refused.text, status_code=refused.status, headers=refused.headers)
        await websocket.send_denial_response(response)
        return
    if hub.stopping:
        await websocket.close(_TRY_AGAIN_LATER, "the agent is shutting down")
        return
    client = websocket.client
    channel = hub.open("websocket", f"{client.host}:{client.port}" if client is not None else "?")
    await websocket.accept(headers=[(b"acp-connection-id", channel.id.encode())])
    channel.attach()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_send_all, websocket, channel, hub)
            await _receive_all(websocket, channel, hub)
            group.cancel_scope.cancel()
    finally:
        channel.detach()
        if not channel.busy:
            channel.close("the client disconnected")


async def _receive_all(websocket: WebSocket, channel: Channel, hub: Hub) -> None:
    initialized = False
    while True:
        event = await websocket.receive()
        if event["type"] == "websocket.disconnect":
            return
        text = event.get("text")
        if text is None:
            continue
        data = text.encode()
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            message = None  # the agent answers it (a parse error), as on stdio
        if not initialized:
            if not _is_initialize(message):
                channel.close("the first message was not initialize")
                await websocket.close(_PROTOCOL_ERROR, "the first message must be initialize")
                return
            initialized = True
            channel.log("initialize", client=client_name(message))
        elif type(message) is dict and not await admit(hub, channel, message, session_of(message)):
            continue
        await channel.send(data)


def _is_initialize(message: object) -> bool:
    return (
        type(message) is dict and message.get("method") == "initialize" and is_request_id(message.get("id"))
    )


async def _send_all(websocket: WebSocket, channel: Channel, hub: Hub) -> None:
    """The agent's messages, one text frame each, until the connection ends; then close."""
    try:
        while (lines := await channel.take(channel.box)) is not None:
            for line in lines:
                await websocket.send_text(line.decode())
        code = _GOING_AWAY if hub.stopping else _NORMAL
        await websocket.close(code, (channel.reason or "")[:120])
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass  # the client is gone: what was taken is lost with it, as on a closed pipe
