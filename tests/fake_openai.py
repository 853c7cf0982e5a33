"""A fake OpenAI-compatible server on 127.0.0.1 for the model tests.

It speaks just enough HTTP/1.1 (one request per connection, ``Connection: close``) to play
scripted replies: streamed SSE chunks (chunked encoding, or delimited by closing), error
statuses, and the misbehaviours a real network offers — a connection dropped mid-stream or
before the answer, a stream that stalls, a stream that trickles keep-alives forever, a first
event that comes late (with llama.cpp's ``prompt_progress`` events meanwhile when the request
asks for ``return_progress``), chunks paced apart or held mid-stream until the test resumes
them. Every request is recorded (method, path, headers, JSON body) for the tests to assert on.

``strict=True`` makes it as strict as the strictest real servers: a conversation whose roles do
not alternate (the rule Mistral's and Gemma's chat templates enforce, tool steps aside), a tool
call without exactly one result, or an empty assistant turn is answered HTTP 400 the way
llama.cpp answers a template exception. ``n_ctx`` gives it a context window: a prompt of that
many tokens or more (estimated as ``prompt_tokens`` does) is answered with llama.cpp's
``exceed_context_size_error`` body, and ``GET /v1/models`` reports the window as llama.cpp
(``meta.n_ctx``) or vLLM (``max_model_len``) do; in the Ollama style the list says nothing of it
(``owned_by: library``, as Ollama's does) and ``POST /api/show`` tells it as Ollama does, in the
model's ``num_ctx`` parameter or, with ``ollama_num_ctx=False``, only as the architecture's
``context_length`` in ``model_info``.
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
    "ALTERNATION_ERROR",
    "FakeOpenAI",
    "Recorded",
    "Reply",
    "chunk",
    "conversation_problem",
    "error_reply",
    "llama_error",
    "progress_chunk",
    "prompt_tokens",
    "scripted_replies",
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
    first_delay: float = 0.0
    """Seconds between the headers and the first chunk (a server reading a long prompt)."""
    progress: int = 0
    """``prompt_progress`` events spread over ``first_delay``, sent only when the request asked
    for them with ``return_progress`` (as llama.cpp does)."""
    pause: float = 0.0
    """Seconds between two chunks (a model generating its answer, a tool call's arguments)."""
    hold_after: int | None = None
    """Send this many chunks, then wait for ``FakeOpenAI.resume()`` before the rest (a test can
    look at what the client shows mid-stream, however loaded the machine is)."""


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


def scripted_replies(steps: Sequence[Mapping[str, Any]]) -> list[Reply]:
    """Replies written as JSON, for a run driven from outside Python (the official client test's
    ``tests/client/real_model.json``). Each streams its ``thought``, ``text`` (a string or a list
    of chunks) and ``tool_calls`` (``[{"id", "name", "arguments"}]``, arguments an object or a
    verbatim string), then finishes (``finish``; else ``tool_calls`` when it calls, else
    ``stop``) and reports ``usage`` (``[input, output]``) when given."""
    replies = []
    for step in steps:
        documents: list[dict[str, Any]] = []
        if "thought" in step:
            documents.append(chunk(reasoning=step["thought"]))
        text = step.get("text")
        documents.extend(chunk(piece) for piece in ([text] if isinstance(text, str) else text or ()))
        calls = step.get("tool_calls") or ()
        for index, call in enumerate(calls):
            arguments = call.get("arguments", {})
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
            delta = tool_delta(index, id=call["id"], name=call["name"], arguments=arguments)
            documents.append(chunk(tool_calls=[delta]))
        documents.append(chunk(finish=step.get("finish", "tool_calls" if calls else "stop")))
        if "usage" in step:
            input_tokens, output_tokens = step["usage"]
            documents.append(chunk(choices=False, usage=(input_tokens, output_tokens)))
        replies.append(stream_reply(*documents))
    return replies


def error_reply(status: int, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    """An error status with an OpenAI-style JSON error body."""
    body = json.dumps({"error": {"message": message, "type": "error", "code": None}}).encode()
    return Reply(
        status=status, body=body, headers=headers or {}, content_type="application/json", chunked=False
    )


def progress_chunk(processed: int, total: int) -> dict[str, Any]:
    """A llama.cpp prompt-processing progress chunk (``return_progress``): an empty delta."""
    document = chunk()
    document["choices"][0]["delta"] = {"role": "assistant", "content": None}
    document["prompt_progress"] = {"total": total, "cache": 0, "processed": processed, "time_ms": 1.0}
    return document


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """The fake's token count of a request: a quarter of the characters of its messages and
    tools as JSON, as a stand-in for a tokenizer (deterministic, roughly English-sized)."""
    text = json.dumps(body.get("messages", []), ensure_ascii=False)
    if body.get("tools"):
        text += json.dumps(body["tools"], ensure_ascii=False)
    return (len(text) + 3) // 4


ALTERNATION_ERROR = (
    "After the optional system message, conversation roles must alternate user/assistant/user/assistant/..."
)


def conversation_problem(messages: Sequence[Any]) -> str | None:
    """Why a strict server would refuse these chat messages, or ``None``.

    The rules: at most one system message, first; tool messages and assistant messages with
    ``tool_calls`` aside, roles alternate user/assistant starting with user (the check of
    Mistral's tool-aware template); each assistant tool call is answered by exactly one tool
    message, right after it, before anything else; an assistant message has text or tool calls;
    the conversation ends with the user's turn (a user or tool message).
    """
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty array"
    rest = messages[1:] if messages[0].get("role") == "system" else messages
    expect_user = True
    open_calls: list[str] = []
    for index, message in enumerate(rest):
        role = message.get("role")
        if role == "system":
            return f"message {index}: a system message may only come first"
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                return f"message {index}: tool result {call_id!r} answers no open tool call"
            open_calls.remove(call_id)
            continue
        if open_calls:
            return f"message {index}: tool call(s) {open_calls} have no result"
        if role == "assistant":
            calls = message.get("tool_calls") or []
            content = message.get("content")
            if not calls and not (isinstance(content, str) and content.strip()):
                return f"message {index}: an assistant message needs content or tool calls"
            if calls:
                ids = [call.get("id") for call in calls]
                if len(set(ids)) != len(ids):
                    return f"message {index}: duplicate tool call ids {ids}"
                open_calls = list(ids)
                continue
            if expect_user:
                return ALTERNATION_ERROR
            expect_user = True
        elif role == "user":
            if not expect_user:
                return ALTERNATION_ERROR
            expect_user = False
        else:
            return f"message {index}: unknown role {role!r}"
    if open_calls:
        return f"tool call(s) {open_calls} have no result"
    last = rest[-1].get("role") if rest else None
    if last not in ("user", "tool"):
        return "the conversation must end with a user or tool message"
    return None


def _is_model_query(recorded: Recorded) -> bool:
    return (recorded.method == "GET" and recorded.path.endswith("/models")) or recorded.path == "/api/show"


def _is_title_request(recorded: Recorded) -> bool:
    try:
        messages = recorded.json.get("messages") or []
    except ValueError:
        return False
    return bool(messages) and messages[0].get("content") == "You name coding sessions."


def llama_error(status: int, message: str, kind: str, **extra: Any) -> Reply:
    """An error in llama.cpp's shape: ``{"error": {"code", "message", "type", ...}}``."""
    body = json.dumps({"error": {"code": status, "message": message, "type": kind, **extra}}).encode()
    return Reply(status=status, body=body, content_type="application/json; charset=utf-8", chunked=False)


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
_REASONS |= {429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}


class FakeOpenAI:
    """``async with FakeOpenAI([replies...]) as server``: serves on ``server.base_url``; each
    chat request takes the next reply (a 500 when the script is exhausted). A chat request a
    strict server refuses (see the module's docstring) is answered 400 without taking a reply;
    ``refused`` keeps why."""

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        strict: bool = False,
        n_ctx: int | None = None,
        models_style: Literal["llama.cpp", "vllm", "ollama", "none"] = "llama.cpp",
        ollama_num_ctx: bool = True,
        model_id: str = "fake",
        title: str | None = None,
    ) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.requests: list[Recorded] = []
        """The chat requests (``/chat/completions`` and anything else but the model queries)."""
        self.model_requests: list[Recorded] = []
        """``GET /models`` and Ollama's ``POST /api/show``."""
        self.refused: list[str] = []
        self.strict = strict
        self.n_ctx = n_ctx
        self.models_style = models_style
        self.ollama_num_ctx = ollama_num_ctx
        self.model_id = model_id
        self.title = title
        """When set, session-title requests are answered with it (without taking a scripted
        reply) and kept in ``title_requests``: they race the next prompt's request."""
        self.title_requests: list[Recorded] = []
        self.departed = anyio.Event()
        """Set once a reply was cut short by the client closing the connection (seen when the
        server's next send fails)."""
        self._arrived = anyio.Event()
        self.port = 0
        self._group: TaskGroup | None = None
        self._listener: Any = None
        self._release = anyio.Event()
        self._resumed = anyio.Event()

    def resume(self) -> None:
        """Let a reply held mid-stream (``hold_after``) send the rest."""
        self._resumed.set()

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
        self._resumed.set()
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        await self._listener.aclose()

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            try:
                recorded = await self._read_request(BufferedByteReceiveStream(stream))
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, ValueError):
                return
            if self.title is not None and _is_title_request(recorded):
                self.title_requests.append(recorded)
                reply = stream_reply(chunk(self.title), chunk(finish="stop"))
            else:
                (self.model_requests if _is_model_query(recorded) else self.requests).append(recorded)
                self._arrived.set()
                reply = self._reply_to(recorded)
            try:
                await self._play(stream, reply, recorded)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.departed.set()  # the client went away (after a stall, or an agent that stopped)

    async def wait_for_requests(self, count: int) -> None:
        """Wait until ``count`` chat requests have come in."""
        while len(self.chat_requests) < count:
            await self._arrived.wait()
            self._arrived = anyio.Event()

    @property
    def chat_requests(self) -> list[Recorded]:
        """The chat requests, in order."""
        return self.requests

    def _reply_to(self, recorded: Recorded) -> Reply:
        if recorded.method == "GET" and recorded.path.endswith("/models"):
            return self._models()
        if recorded.path == "/api/show":
            return self._ollama_show(recorded)
        if self.strict or self.n_ctx is not None:
            try:
                body = recorded.json
            except ValueError:
                return llama_error(400, "invalid JSON in the request body", "invalid_request_error")
            if self.strict:
                problem = conversation_problem(body.get("messages"))
                if problem is not None:
                    self.refused.append(problem)
                    return llama_error(400, f"Jinja Exception: {problem}", "invalid_request_error")
            if self.n_ctx is not None:
                tokens = prompt_tokens(body)
                if tokens >= self.n_ctx:
                    message = (
                        f"request ({tokens} tokens) exceeds the available context size ({self.n_ctx} tokens),"
                        " try increasing it"
                    )
                    self.refused.append(message)
                    return llama_error(
                        400, message, "exceed_context_size_error", n_prompt_tokens=tokens, n_ctx=self.n_ctx
                    )
        return self.replies.popleft() if self.replies else error_reply(500, "the script is exhausted")

    def _models(self) -> Reply:
        entry: dict[str, Any] = {"id": self.model_id, "object": "model", "created": 0, "owned_by": "fake"}
        if self.models_style == "none":
            return error_reply(404, "File Not Found")
        if self.models_style == "ollama":
            entry["owned_by"] = "library"
        elif self.n_ctx is not None and self.models_style == "llama.cpp":
            entry["owned_by"] = "llamacpp"
            entry["meta"] = {"vocab_type": 2, "n_vocab": 49152, "n_ctx": self.n_ctx, "n_ctx_train": 8192}
        elif self.n_ctx is not None:
            entry["owned_by"] = "vllm"
            entry["max_model_len"] = self.n_ctx
        body = json.dumps({"object": "list", "data": [entry]}).encode()
        return Reply(body=body, content_type="application/json", chunked=False)

    def _ollama_show(self, recorded: Recorded) -> Reply:
        if self.models_style != "ollama" or recorded.method != "POST":
            return error_reply(404, "404 page not found")
        try:
            name = recorded.json.get("model")
        except ValueError:
            name = None
        if name != self.model_id:
            return error_reply(404, f"model '{name}' not found")
        trained = 131072
        document: dict[str, Any] = {
            "parameters": 'stop                           "<|eot_id|>"',
            "model_info": {"general.architecture": "llama", "llama.context_length": trained},
        }
        if self.n_ctx is not None and self.ollama_num_ctx:
            document["parameters"] += f"\nnum_ctx                        {self.n_ctx}"
        elif self.n_ctx is not None:
            document["model_info"]["llama.context_length"] = self.n_ctx
        return Reply(body=json.dumps(document).encode(), content_type="application/json", chunked=False)

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

    async def _play(self, stream: SocketStream, reply: Reply, recorded: Recorded) -> None:
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
        if reply.first_delay:
            await self._wait_first(stream, reply, recorded)
        for index, piece in enumerate(reply.chunks):
            if index == reply.hold_after:
                await self._resumed.wait()
            if index and reply.pause:
                await anyio.sleep(reply.pause)
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

    async def _wait_first(self, stream: SocketStream, reply: Reply, recorded: Recorded) -> None:
        wants_progress = False
        try:
            wants_progress = bool(recorded.json.get("return_progress"))
        except ValueError:
            pass
        steps = reply.progress if wants_progress else 0
        if not steps:
            await anyio.sleep(reply.first_delay)
            return
        total = 1000
        for step in range(1, steps + 1):
            await anyio.sleep(reply.first_delay / steps)
            document = progress_chunk(total * step // steps, total)
            await self._send_piece(stream, reply, sse(document, done=False)[0])

    @staticmethod
    async def _send_piece(stream: SocketStream, reply: Reply, piece: bytes) -> None:
        if reply.chunked:
            await stream.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        else:
            await stream.send(piece)
