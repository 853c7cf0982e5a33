"""Floor for bench_relay: a bare asyncio + orjson loop relaying an OpenAI-compatible HTTP stream.

    python bench/_relay_floor.py BASE_URL [raw|httpx|aiohttp]

Answers ``initialize`` and ``session/new`` inline; on ``session/prompt`` it POSTs to
``BASE_URL/chat/completions`` over a plain asyncio connection (HTTP/1.1, close-delimited body),
and writes each SSE ``data:`` chunk's ``delta.content`` as one ``agent_message_chunk``
notification (one ``orjson.dumps``, one write), then answers the prompt. With ``httpx`` or
``aiohttp`` the same relay reads the stream through that client library instead (to weigh what
a library costs per chunk).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any
from urllib.parse import urlsplit

import orjson

_OPT = orjson.OPT_APPEND_NEWLINE
LIBRARY = sys.argv[2] if len(sys.argv) > 2 else "raw"


def _emit(event: bytes, session_id: str, out: Any) -> None:
    if not event.startswith(b"data: ") or event == b"data: [DONE]":
        return
    document = orjson.loads(event[6:])
    choices = document.get("choices") or []
    text = choices[0].get("delta", {}).get("content") if choices else None
    if text:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        params = {"sessionId": session_id, "update": update}
        out.write(orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params}, option=_OPT))


async def relay_library(base: str, session_id: str, out: Any, library: str) -> None:
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True})
    buffer = b""
    if library == "httpx":
        import httpx

        async with (
            httpx.AsyncClient() as client,
            client.stream("POST", f"{base}/chat/completions", content=body) as response,
        ):
            async for data in response.aiter_bytes():
                buffer += data
                *events, buffer = buffer.split(b"\n\n")
                for event in events:
                    _emit(event, session_id, out)
        return
    import aiohttp

    async with (
        aiohttp.ClientSession() as client,
        client.post(f"{base}/chat/completions", data=body) as response,
    ):
        async for data in response.content.iter_any():
            buffer += data
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                _emit(event, session_id, out)


async def relay(base: str, session_id: str, out: asyncio.StreamWriter | Any) -> None:
    if LIBRARY != "raw":
        await relay_library(base, session_id, out, LIBRARY)
        return
    url = urlsplit(base)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "go"}], "stream": True})
    writer.write(
        f"POST {url.path}/chat/completions HTTP/1.1\r\nHost: {url.hostname}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")
    buffer = b""
    while True:
        data = await reader.read(65536)
        if not data:
            break
        buffer += data
        *events, buffer = buffer.split(b"\n\n")
        for event in events:
            if not event.startswith(b"data: ") or event == b"data: [DONE]":
                continue
            document = orjson.loads(event[6:])
            choices = document.get("choices") or []
            text = choices[0].get("delta", {}).get("content") if choices else None
            if text:
                update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
                message = {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": session_id, "update": update},
                }
                out.write(orjson.dumps(message, option=_OPT))
    writer.close()


async def main() -> None:
    base = sys.argv[1]
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    out = asyncio.StreamWriter(transport, protocol, None, loop)
    while line := await reader.readline():
        message = orjson.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            result: Any = {"protocolVersion": 1, "agentCapabilities": {}}
        elif method == "session/new":
            result = {"sessionId": "s1"}
        elif method == "session/prompt":
            await relay(base, message["params"]["sessionId"], out)
            result = {"stopReason": "end_turn"}
        else:
            continue
        out.write(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, option=_OPT))
        await out.drain()


asyncio.run(main())
