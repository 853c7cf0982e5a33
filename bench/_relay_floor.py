"""Floor for bench_relay: a bare asyncio + orjson loop relaying an OpenAI-compatible HTTP stream.

    python bench/_relay_floor.py BASE_URL

Answers ``initialize`` and ``session/new`` inline; on ``session/prompt`` it POSTs to
``BASE_URL/chat/completions`` over a plain asyncio connection (HTTP/1.1, close-delimited body),
and writes each SSE ``data:`` chunk's ``delta.content`` as one ``agent_message_chunk``
notification (one ``orjson.dumps``, one write), then answers the prompt.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any
from urllib.parse import urlsplit

import orjson

_OPT = orjson.OPT_APPEND_NEWLINE


async def relay(base: str, session_id: str, out: asyncio.StreamWriter | Any) -> None:
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
