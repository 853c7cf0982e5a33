"""A fake OpenAI-compatible server on 127.0.0.1 for the model tests.

It speaks just enough HTTP/1.1 (one request per connection, ``Connection: close``) to play
scripted replies: streamed SSE chunks (chunked encoding, or delimited by closing), error
statuses, and the misbehaviours a real network offers — a connection dropped mid-stream or
before the answer, a stream that stalls, a stream that trickles keep-alives forever. Every
request is recorded (method, path, headers, JSON body) for the tests to assert on.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = [
    "FakeOpenAI",
    "Recorded",
    "Reply",
    "chunk",
    "error_reply",
    "sse",
    "stream_reply",
    "tool_delta",
]

Ending = Literal["end", "drop", "stall", "trickle", "no_answer", "close_before_answer"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``then`` says how it ends: ``end`` (properly), ``drop`` (close mid-body, chunked encoding
    left unterminated), ``stall`` (send nothing more, keep the connection open), ``trickle``
    (send a keep-alive comment every ``interval`` s, forever), ``no_answer`` (read the request,
    never answer), ``close_before_answer`` (read the request, close the connection).
    """

    status: int = 200
    chunks: Sequence[bytes] = ()
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "text/event-stream"
    chunked: bool = True
    then: Ending = "end"
    interval: float = 0.05


@dataclass(frozen=True)
class Recorded:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def chunk(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    usage: tuple[int, int] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` object."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    document: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else [],
    }
    if usage is not None:
        document["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
    return document


def tool_delta(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    """One entry of ``delta.tool_calls``."""
    entry: dict[str, Any] = {"index": index}
    if id is not None:
        entry["id"] = id
        entry["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        entry["function"] = function
    return entry


def sse(*documents: Any, done: bool = True) -> list[bytes]:
    """Each document as one ``data:`` event, then ``data: [DONE]``."""
    events = [b"data: " + json.dumps(document).encode() + b"\n\n" for document in documents]
    if done:
        events.append(b"data: [DONE]\n\n")
    return events


def stream_reply(*documents: Any, done: bool = True, **options: Any) -> Reply:
    """A 200 event stream of these chunks."""
    return Reply(chunks=sse(*documents, done=done), **options)


def error_reply(status: int, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    """An error status with an OpenAI-style JSON error body."""
    body = json.dumps({"error": {"message": message, "type": "error", "code": None}}).encode()
    return Reply(
        status=status, body=body, headers=headers or {}, content_type="application/json", chunked=False
    )


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
_REASONS |= {429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


class FakeOpenAI:
    """``async with FakeOpenAI([replies...]) as server``: serves on ``server.base_url``; each
    request takes the next reply (a 500 when the script is exhausted)."""

    def __init__(self, replies: Iterable[Reply] = ()) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.requests: list[Recorded] = []
        self.port = 0
        self._group: TaskGroup | None = None
        self._listener: Any = None
        self._release = anyio.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeOpenAI:
        listener = self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(SocketAttribute.local_port)
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(listener.serve, self._handle)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._group is not None
        self._release.set()
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        await self._listener.aclose()

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            try:
                recorded = await self._read_request(BufferedByteReceiveStream(stream))
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, ValueError):
                return
            self.requests.append(recorded)
            reply = self.replies.popleft() if self.replies else error_reply(500, "the script is exhausted")
            try:
                await self._play(stream, reply)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the client went away (as it should after a stall)

    async def _read_request(self, buffered: BufferedByteReceiveStream) -> Recorded:
        head = (await buffered.receive_until(b"\r\n\r\n", 1 << 16)).decode("latin-1")
        request_line, *header_lines = head.split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        body = await buffered.receive_exactly(length) if length else b""
        return Recorded(method, path, headers, body)

    async def _play(self, stream: SocketStream, reply: Reply) -> None:
        if reply.then == "no_answer":
            await self._release.wait()
            return
        if reply.then == "close_before_answer":
            return
        head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
        head.append(f"Content-Type: {reply.content_type}")
        head.append("Connection: close")
        if reply.body:
            head.append(f"Content-Length: {len(reply.body)}")
        elif reply.chunked:
            head.append("Transfer-Encoding: chunked")
        head.extend(f"{name}: {value}" for name, value in reply.headers.items())
        await stream.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if reply.body:
            await stream.send(reply.body)
            return
        for piece in reply.chunks:
            await self._send_piece(stream, reply, piece)
        if reply.then == "stall":
            await self._release.wait()
        elif reply.then == "trickle":
            while True:
                await self._send_piece(stream, reply, b": keep-alive\n\n")
                await anyio.sleep(reply.interval)
        elif reply.then == "end" and reply.chunked:
            await stream.send(b"0\r\n\r\n")
        # "drop", and the end of a close-delimited body: closing the stream is the signal.

    @staticmethod
    async def _send_piece(stream: SocketStream, reply: Reply, piece: bytes) -> None:
        if reply.chunked:
            await stream.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        else:
            await stream.send(piece)
