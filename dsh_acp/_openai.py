"""The OpenAI-compatible model: ``POST {base_url}/chat/completions`` with ``stream: true``.

Speaks the dialect DeepSeek, OpenAI, vLLM, llama.cpp's server and Ollama share: server-sent
events whose ``data:`` lines carry ``chat.completion.chunk`` objects, ending with ``[DONE]``.

aiohttp is imported inside the methods that use it: ``import dsh_acp._openai`` stays cheap, so the
agent answers ``initialize`` before the HTTP stack has loaded.

Timers: ``first_event_timeout`` bounds the wait for the response to begin (headers, then the
first event that carries the answer) and is counted again from each progress event a server
sends meanwhile (llama.cpp's ``prompt_progress``, asked for with ``return_progress`` where the
server is known to be llama.cpp); ``stall_timeout`` bounds the silence between bytes once the
answer streams; ``request_timeout`` bounds the whole response.

Context windows: unless the config file sets one, a self-hosted server is asked once per base
URL and model (``_server_info``: llama.cpp, vLLM, Ollama), and a context-size error teaches the
window too; ``context_window`` is then what the usage meter and
automatic compaction use.

Failure policy: a request the server refuses as too large for its context raises
``ContextOverflow``; HTTP 401/403 raise ``ModelAuthError``; HTTP 429, 5xx and a connection lost before
the answer are retried with exponential back-off and jitter (bounded in attempts and in total
wait, honouring ``Retry-After``); everything else — a refused connection, a timeout, a stalled or
dropped stream, a malformed chunk — raises ``ModelError`` with one line saying what happened. The
API key is scrubbed from every message, and exceptions from aiohttp are never chained.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
import orjson

from ._brief import brief
from ._config import VERSION
from ._history import conversation, conversation_from
from ._model import (
    AssistantMessage,
    ContextMessage,
    ContextOverflow,
    Finish,
    FinishReason,
    Message,
    ModelAuthError,
    ModelError,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
    ToolCallStart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._server_info import SERVER_INFO, ServerInfo, ask_server
from ._settings import ModelSettings, is_self_hosted

if TYPE_CHECKING:
    import ssl

    import aiohttp

    from dsh_tools import ContentBlock, ToolSchema

__all__ = ["OpenAIModel", "RequestEncoder", "SSEDecoder", "ServerInfo", "chat_messages", "chat_request"]

_log = logging.getLogger(__name__)

_FINISH: Final[dict[str, FinishReason]] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",  # the pre-tools name some servers still send
    "length": "length",
    "content_filter": "refusal",
}
_MAX_LINE: Final = 16 * 1024 * 1024
_MAX_ERROR_BODY: Final = 64 * 1024
_DETAIL_CHARS: Final = 1200
"""A server's error message is kept whole up to this; longer, its middle is cut (its cause, often
last, stays)."""
_INFO_TIMEOUT: Final = 5.0


# -- server-sent events ---------------------------------------------------------------------


class SSEDecoder:
    """Sans-IO server-sent-events decoder: bytes in, the ``data`` of each event out.

    Lines may end in CRLF, LF or CR and may be split anywhere across ``feed`` calls (UTF-8
    sequences too: a line is decoded only once complete). Comments (``: keep-alive``) and the
    ``event``/``id``/``retry`` fields are skipped; several ``data`` lines of one event are joined
    with newlines, as the SSE spec says.
    """

    def __init__(self, max_line: int = _MAX_LINE) -> None:
        self._buffer = bytearray()
        self._data: list[str] = []
        self._max_line = max_line
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[str]:
        """Consume bytes; return the data of every event they complete."""
        out: list[str] = []
        buffer = self._buffer
        buffer += chunk
        start = 0
        length = len(buffer)
        while start < length:
            if self._skip_lf:
                self._skip_lf = False
                if buffer[start] == 0x0A:  # the LF of a CRLF split across two chunks
                    start += 1
                    continue
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            end = min(i for i in (cr, lf) if i != -1)
            self._line(bytes(buffer[start:end]), out)
            if buffer[end] == 0x0D:
                if end + 1 < length:
                    start = end + 2 if buffer[end + 1] == 0x0A else end + 1
                else:
                    start = end + 1
                    self._skip_lf = True
            else:
                start = end + 1
        del buffer[:start]
        if len(buffer) > self._max_line:
            raise ModelError(f"the event stream sent a line longer than {self._max_line} bytes")
        return out

    def close(self) -> list[str]:
        """The end of the stream: a last event not followed by a blank line still counts."""
        out: list[str] = []
        if self._buffer:
            self._line(bytes(self._buffer), out)
            self._buffer.clear()
        self._line(b"", out)
        return out

    def _line(self, raw: bytes, out: list[str]) -> None:
        if not raw:
            if self._data:
                out.append("\n".join(self._data))
                self._data = []
            return
        if raw[:1] == b":":
            return
        name, colon, value = raw.partition(b":")
        if not colon:
            return  # a field with no value: "data" alone would add "", nothing we use
        if name == b"data":
            if value[:1] == b" ":
                value = value[1:]
            self._data.append(value.decode("utf-8", errors="replace"))


# -- requests ---------------------------------------------------------------------------------


def chat_request(settings: ModelSettings, request: ModelRequest, *, progress: bool = False) -> dict[str, Any]:
    """The JSON body of one ``/chat/completions`` call: every request's conversation passes
    through ``conversation`` here, so what is sent is valid whatever the history holds."""
    body: dict[str, Any] = {
        "model": settings.model,
        "messages": chat_messages(
            conversation(request.messages),
            system=request.system,
            accepts_images=settings.accepts_images,
            send_reasoning=settings.send_reasoning,
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [_tool(schema) for schema in request.tools]
    if request.reasoning_effort and request.reasoning_effort in settings.reasoning_efforts:
        body["reasoning_effort"] = request.reasoning_effort
    if progress:
        body["return_progress"] = True  # llama.cpp only: other servers may refuse unknown fields
    return body


class RequestEncoder:
    """Builds request bodies in time linear in what changed since the last one.

    A conversation only grows between compactions, so the messages before the newest
    checkpoint of ``conversation_from`` (a point after which nothing changes what came before)
    keep their encoding; a request re-encodes only the messages after it. The history is
    compared by identity, so a compaction (or any other rewrite) simply starts over. The tool
    schemas' encoding is kept while the same schema objects are sent.
    """

    def __init__(self, settings: ModelSettings) -> None:
        self.settings = settings
        self._inputs: list[Message] = []
        self._parts: list[bytes] = []
        self._previous: Message | None = None
        self._schemas: list[ToolSchema] = []  # kept alive: compared by identity
        self._tools = b""

    def encode(self, request: ModelRequest, *, progress: bool = False) -> bytes:
        """The JSON body of ``chat_request`` for ``request``, as bytes."""
        import operator

        settings = self.settings
        messages = request.messages
        point = len(self._inputs)
        if point and len(messages) >= point and all(map(operator.is_, messages, self._inputs)):
            kept, previous = self._parts, self._previous
        else:
            point, kept, previous = 0, [], None
        tail, checkpoint = conversation_from(messages, point, previous)
        encoded = [
            orjson.dumps(entry)
            for entry in chat_messages(
                tail, accepts_images=settings.accepts_images, send_reasoning=settings.send_reasoning
            )
        ]
        parts = kept + encoded if kept else encoded
        if checkpoint is not None:
            index, count = checkpoint
            final = len(kept) + count
            self._inputs = list(messages[:index])
            self._parts = parts[:final]
            self._previous = tail[count - 1] if count else previous
        head: list[bytes] = []
        if request.system:
            head.append(orjson.dumps({"role": "system", "content": request.system}))
        rest: dict[str, Any] = {
            "model": settings.model,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if progress:
            rest["return_progress"] = True
        if request.reasoning_effort and request.reasoning_effort in settings.reasoning_efforts:
            rest["reasoning_effort"] = request.reasoning_effort
        body = b'{"messages":[' + b",".join(head + parts) + b"]," + orjson.dumps(rest)[1:-1]
        if request.tools:
            schemas = self._schemas
            if len(schemas) != len(request.tools) or not all(map(operator.is_, schemas, request.tools)):
                self._schemas = list(request.tools)
                self._tools = orjson.dumps([_tool(schema) for schema in request.tools])
            body += b',"tools":' + self._tools
        return body + b"}"


def _tool(schema: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": schema.name, "description": schema.description, "parameters": schema.parameters},
    }


def chat_messages(
    messages: Sequence[Message],
    *,
    system: str = "",
    accepts_images: bool = False,
    send_reasoning: bool = False,
) -> list[dict[str, Any]]:
    """Our conversation in the chat-completions shape (as given: ``chat_request`` makes it a
    valid conversation first).

    Tool results become ``role: tool`` messages (text only, as the API takes); when the model
    takes images, images a tool returned follow in one user message after that step's results
    (a user message between the results of one step would break the call/result pairing).
    ``ContextMessage`` becomes a user message wrapped in ``<context>`` so the model can tell it
    from what the user typed.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    pending_images: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ToolResultMessage) and pending_images:
            out.append(_tool_images(pending_images))
            pending_images = []
        if isinstance(message, UserMessage):
            out.append({"role": "user", "content": _user_content(message.content, accepts_images)})
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message, send_reasoning))
        elif isinstance(message, ToolResultMessage):
            text, images = _tool_content(message.content, accepts_images)
            out.append({"role": "tool", "tool_call_id": message.call_id, "content": text})
            if images:
                pending_images.append({"type": "text", "text": f"Images from tool call {message.call_id}:"})
                pending_images.extend(images)
        elif isinstance(message, ContextMessage):
            out.append({"role": "user", "content": f"<context>\n{message.text}\n</context>"})
    if pending_images:
        out.append(_tool_images(pending_images))
    return out


def _tool_images(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "user", "content": parts}


def _assistant(message: AssistantMessage, send_reasoning: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        entry["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    elif not message.text:
        entry["content"] = ""  # an assistant message needs content or tool_calls
    if send_reasoning and (message.reasoning or message.tool_calls):
        entry["reasoning_content"] = message.reasoning
    return entry


def _user_content(blocks: Iterable[ContentBlock], accepts_images: bool) -> str | list[dict[str, Any]]:
    parts = [_part(block, accepts_images) for block in blocks]
    if all(part["type"] == "text" for part in parts):
        # A plain string is what every server takes (some local ones reject part lists).
        return "\n\n".join(part["text"] for part in parts)
    return parts


def _part(block: ContentBlock, accepts_images: bool) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "image":
        if accepts_images:
            return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}}
        return {"type": "text", "text": "[an image was attached, but this model does not take images]"}
    if block.type == "resource_link":
        return {"type": "text", "text": _mention(block.uri, block.name)}
    if block.type == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return {"type": "text", "text": f'<resource uri="{resource.uri}">\n{text}\n</resource>'}
        mime = resource.mime_type or "application/octet-stream"
        blob = getattr(resource, "blob", "")
        if accepts_images and mime.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{blob}"}}
        return {"type": "text", "text": f"[binary resource {resource.uri} ({mime}) not shown]"}
    return {"type": "text", "text": "[audio is not supported]"}


def _mention(uri: str, name: str) -> str:
    if uri.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return f"[@{name}]({uri}) (file: {unquote(urlsplit(uri).path)})"
    return f"[@{name}]({uri})"


def _tool_content(blocks: Iterable[ContentBlock], accepts_images: bool) -> tuple[str, list[dict[str, Any]]]:
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for block in blocks:
        part = _part(block, accepts_images)
        if part["type"] == "text":
            texts.append(part["text"])
        else:
            images.append(part)
            texts.append("[image: shown in the next message]")
    return "\n".join(texts), images


# -- the response -----------------------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    started: bool = False


class _Assembler:
    """Chunks in, events out: deltas at once; tool calls, usage and the finish at the end."""

    def __init__(self, context_window: int | None, where: str) -> None:
        self.context_window = context_window
        self.where = where
        self.calls: dict[int, _PartialCall] = {}
        self.finish: str | None = None
        self.usage: Usage | None = None

    def feed(self, chunk: Any) -> list[ModelEvent]:
        if not isinstance(chunk, dict):
            raise ModelError(f"the API at {self.where} sent a stream chunk that is not a JSON object")
        if chunk.get("error"):
            raise ModelError(f"the API at {self.where} reported an error mid-response: {_detail(chunk)}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                self.usage = Usage(prompt, completion, self.context_window)
        events: list[ModelEvent] = []
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return events
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # we ask for one choice (n=1)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                # DeepSeek and vLLM say reasoning_content; OpenRouter, Ollama and newer vLLM, reasoning.
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    events.append(ReasoningDelta(reasoning))
                content = delta.get("content")
                if isinstance(content, str) and content:
                    events.append(TextDelta(content))
                tool_calls = delta.get("tool_calls")
                if isinstance(tool_calls, list):
                    self._tool_deltas(tool_calls, events)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish = reason
        return events

    def _tool_deltas(self, deltas: list[Any], events: list[ModelEvent]) -> None:
        for position, delta in enumerate(deltas):
            if not isinstance(delta, dict):
                continue
            index = delta.get("index")
            if not isinstance(index, int):
                index = position  # a few servers omit it; they send one call per position
            call = self.calls.setdefault(index, _PartialCall())
            if isinstance(delta.get("id"), str) and delta["id"] and not call.id:
                call.id = delta["id"]
            function = delta.get("function")
            if isinstance(function, dict):
                # Some servers repeat the name in every delta: the first one wins, never concatenated.
                if isinstance(function.get("name"), str) and function["name"] and not call.name:
                    call.name = function["name"]
                if isinstance(function.get("arguments"), str):
                    call.arguments += function["arguments"]
            if call.name and not call.started:
                # Announced as soon as its name is known: its arguments may stream for seconds.
                call.started = True
                call.id = call.id or f"call_{uuid.uuid4().hex}"
                events.append(ToolCallStart(call.id, call.name))

    def end(self, saw_done: bool) -> list[ModelEvent]:
        if self.finish is None and not saw_done:
            raise ModelError(f"the response from {self.where} ended before it was complete")
        reason = _FINISH.get(self.finish or "stop", "stop")
        events: list[ModelEvent] = []
        if self.calls and reason == "refusal":
            _log.info("dropping %d tool call(s) of a refused response", len(self.calls))
        else:
            # A call cut off by the output limit is still reported (marked), so the editor and
            # the model hear that it was not run rather than nothing at all.
            cut_off = reason == "length"
            for index in sorted(self.calls):
                call = self.calls[index]
                if not call.name:
                    if cut_off:
                        continue  # cut before even its name: nothing to show
                    raise ModelError(f"the API at {self.where} sent a tool call without a name")
                events.append(
                    ToolCallRequest(
                        id=call.id or f"call_{uuid.uuid4().hex}",
                        name=call.name,
                        arguments=call.arguments,
                        cut_off=cut_off,
                    )
                )
            if events and reason == "stop":
                reason = "tool_calls"  # Ollama and others report "stop" after tool calls
        if self.usage is not None:
            events.append(self.usage)
        events.append(Finish(reason))
        return events


# -- the model --------------------------------------------------------------------------------


class OpenAIModel:
    """A ``Model`` backed by an OpenAI-compatible ``/chat/completions`` endpoint.

    One instance per session; it keeps one ``aiohttp.ClientSession`` (made at the first request)
    — close it with ``aclose()``. ``sleep`` and ``jitter`` are injectable so tests can observe the
    back-off without waiting for it.
    """

    writes_titles = True
    """A real model names the session after its first turn (see ``_titles``)."""

    @property
    def price_ref(self) -> tuple[str, str] | None:
        """``(model, provider)`` to look its prices up by, when its provider is known."""
        provider = self.settings.price_provider
        return (self.settings.model, provider) if provider else None

    def __init__(
        self,
        settings: ModelSettings,
        *,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings
        self._sleep = sleep or anyio.sleep
        self._jitter = jitter
        self._client: aiohttp.ClientSession | None = None
        self._where = _display_url(settings.base_url)
        self._key = (settings.base_url, settings.model)
        self._encoder = RequestEncoder(settings)

    @property
    def context_window(self) -> int | None:
        """The window the meter and compaction use: the config file's, else the server's, else
        the documented one."""
        settings = self.settings
        if settings.context_window_configured:
            return settings.context_window
        info = SERVER_INFO.get(self._key)
        if info is not None and info.context_window:
            return info.context_window
        return settings.context_window

    async def server_info(self) -> ServerInfo:
        """Ask a self-hosted server about the model once per process (cloud APIs' windows are in
        the table of known models)."""
        info = SERVER_INFO.get(self._key)
        if info is not None:
            return info
        info = ServerInfo()
        if is_self_hosted(self.settings.base_url):
            try:
                with anyio.fail_after(_INFO_TIMEOUT):
                    info = await ask_server(self._http(), self.settings.base_url, self.settings.model)
            except Exception as error:  # a server without /models still serves chats
                _log.info("could not ask %s about its models: %s", self._where, type(error).__name__)
        # Learned meanwhile (a context-size error of a concurrent request) is kept.
        return SERVER_INFO.setdefault(self._key, info)

    def _learn_window(self, window: int) -> None:
        info = SERVER_INFO.setdefault(self._key, ServerInfo())
        info.context_window = window

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def accepts_images(self) -> bool:
        return self.settings.accepts_images

    async def aclose(self) -> None:
        """Close the HTTP connections (the model can still be used: a new client is made)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Send the request and yield its events (deltas as they come; tool calls, usage and
        ``Finish`` once the stream is complete)."""
        info = await self.server_info()
        body = self._encoder.encode(request, progress=info.progress)
        try:
            # aclosing: when the consumer stops early, the response closes now, not at GC time.
            async with aclosing(self._events(body, request.notice)) as events:
                async for event in events:
                    yield event
        except ContextOverflow as error:
            raise ContextOverflow(
                self._scrub(str(error)), error.context_window, error.prompt_tokens
            ) from None
        except ModelError as error:
            # One gate for every message: whatever a server echoes back, the key stays here.
            raise type(error)(self._scrub(str(error))) from None

    async def _events(
        self, body: bytes, notice: Callable[[str, str], Awaitable[None]] | None = None
    ) -> AsyncGenerator[ModelEvent, None]:
        import aiohttp

        settings = self.settings
        deadline = anyio.current_time() + settings.request_timeout
        response = await self._send(body, notice)
        content = response.content
        # Until the answer begins only the first-event timer runs (progress restarts it); from
        # then on, the stall timer between bytes. One watchdog keeps all three timers.
        watchdog = _Watchdog(content, deadline, settings.first_event_timeout, settings.stall_timeout)
        try:
            assembler = _Assembler(self.context_window, self._where)
            decoder = SSEDecoder()
            saw_done = False
            while not saw_done:
                watchdog.wait()
                try:
                    data = await content.readany()
                except _Timeout as timeout:
                    raise ModelError(self._timed_out(timeout.why)) from None
                except aiohttp.ClientError as error:
                    raise ModelError(
                        f"the connection to {self._where} dropped mid-response: {self._scrub(_reason(error))}"
                    ) from None
                watchdog.read()
                for payload in decoder.feed(data) if data else decoder.close():
                    if payload.strip() == "[DONE]":
                        saw_done = True
                        break
                    document = self._json(payload)
                    if not watchdog.begun:
                        if isinstance(document, dict) and "prompt_progress" in document:
                            watchdog.progress()
                        else:
                            watchdog.begin()
                    for event in assembler.feed(document):
                        yield event
                if not data:
                    break
            for event in assembler.end(saw_done):
                yield event
        finally:
            watchdog.stop()
            response.release()  # back to the pool when read to its end, else closed

    def _timed_out(self, why: str) -> str:
        if why == "deadline":
            return f"the response from {self._where} took longer than {self.settings.request_timeout:g} s"
        if why == "first":
            return self._no_answer()
        return f"the API at {self._where} stopped streaming: nothing for {self.settings.stall_timeout:g} s"

    # -- HTTP ---------------------------------------------------------------------------------

    def _http(self) -> aiohttp.ClientSession:
        if self._client is None:
            import aiohttp

            settings = self.settings
            headers = {
                "Content-Type": "application/json",
                "Accept": "text/event-stream",
                # A compressed event stream may be held back by the decompressor; deltas are small.
                "Accept-Encoding": "identity",
                "User-Agent": f"dsh-acp/{VERSION}",
            }
            if settings.api_key:
                headers["Authorization"] = f"Bearer {settings.api_key}"
            tls = _tls_context() if settings.base_url.startswith("https:") else None
            self._client = aiohttp.ClientSession(
                headers=headers,
                # Only the connection is bounded here: the first-event, stall and request timers
                # are ours (see _Watchdog).
                timeout=aiohttp.ClientTimeout(total=None, connect=settings.connect_timeout),
                connector=aiohttp.TCPConnector(ssl=tls if tls is not None else True),
                # Proxies from HTTP(S)_PROXY / NO_PROXY and credentials from .netrc, as the
                # environment says (what curl and httpx do).
                trust_env=True,
            )
        return self._client

    async def _send(
        self, body: bytes, notice: Callable[[str, str], Awaitable[None]] | None = None
    ) -> aiohttp.ClientResponse:
        import aiohttp

        settings = self.settings
        client = self._http()
        url = f"{settings.base_url}/chat/completions"
        waited = 0.0
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            rate_limited = False
            try:
                with anyio.fail_after(settings.first_event_timeout):
                    response = await client.post(url, data=body, allow_redirects=False)
            except aiohttp.ConnectionTimeoutError:
                raise ModelError(
                    f"cannot connect to {self._where}: no answer within {settings.connect_timeout:g} s"
                ) from None
            except TimeoutError:
                raise ModelError(self._no_answer()) from None
            except aiohttp.ClientConnectorError as error:
                raise ModelError(f"cannot connect to {self._where}: {self._scrub(_reason(error))}") from None
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
                # Often a pooled connection the server had closed: worth another try.
                failure = f"the connection to {self._where} was lost before the answer ({_reason(error)})"
            except aiohttp.ClientError as error:
                raise ModelError(
                    f"the request to {self._where} failed: {self._scrub(_reason(error))}"
                ) from None
            else:
                status = response.status
                if status == 200:
                    if _content_type(response.headers) not in ("text/event-stream", ""):
                        response.close()
                        raise ModelError(
                            f"the API at {self._where} answered with {_content_type(response.headers)},"
                            " not an event stream"
                        )
                    return response
                detail, document = await self._error_detail(response)
                overflow = _overflow(status, detail, document)
                if overflow is not None:
                    window, tokens = overflow
                    if window:
                        self._learn_window(window)
                    failure = self._scrub(_http_failure(self._where, status, detail, settings.model))
                    raise ContextOverflow(failure, window, tokens)
                if status in (401, 403):
                    raise ModelAuthError(self._auth_message(status, detail))
                failure = _http_failure(self._where, status, detail, settings.model)
                if status != 429 and status < 500:
                    raise ModelError(self._scrub(failure))
                retry_after = _retry_after(response.headers)
                rate_limited = status == 429
            delay = retry_after
            if delay is None:
                ceiling = min(settings.retry_max_delay, settings.retry_base_delay * 2 ** (attempt - 1))
                delay = ceiling * (0.5 + 0.5 * self._jitter())
            if attempt > settings.max_retries or waited + delay > settings.retry_budget:
                why = (
                    f"; it asked to wait {retry_after:g} s"
                    if retry_after and attempt <= settings.max_retries
                    else ""
                )
                raise ModelError(self._scrub(f"{failure}; gave up after {attempt} attempt(s){why}"))
            _log.warning("%s; retrying in %.1f s (attempt %d)", self._scrub(failure), delay, attempt + 1)
            if notice is not None:
                what = "Rate limited" if rate_limited else "The model request failed"
                wait = f"{delay:.0f} s" if delay >= 1 else f"{delay:.1f} s"
                await notice(f"{what}; retrying in {wait}", self._scrub(failure))
            await self._sleep(delay)
            waited += delay

    def _no_answer(self) -> str:
        wait = self.settings.first_event_timeout
        return (
            f"the API at {self._where} did not begin its answer within {wait:g} s"
            " (a local server may still be reading a long prompt: raise first_event_timeout)"
        )

    def _json(self, payload: str) -> Any:
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError:
            snippet = payload if len(payload) <= 80 else payload[:77] + "..."
            raise ModelError(
                self._scrub(
                    f"the API at {self._where} sent a malformed stream chunk (invalid JSON): {snippet!r}"
                )
            ) from None

    async def _error_detail(self, response: aiohttp.ClientResponse) -> tuple[str, Any]:
        body = bytearray()
        try:
            with anyio.move_on_after(self.settings.stall_timeout):
                while len(body) < _MAX_ERROR_BODY:
                    chunk = await response.content.readany()
                    if not chunk:
                        break
                    body += chunk
        except Exception:  # the status line is what matters; a broken body does not
            _log.debug("could not read the error body", exc_info=False)
        finally:
            response.release()
        document: Any = None
        try:
            document = orjson.loads(bytes(body))
            detail = _detail(document)
        except orjson.JSONDecodeError:
            detail = bytes(body).decode("utf-8", errors="replace")
        return self._scrub(_one_line(detail or response.reason or "")), document

    def _auth_message(self, status: int, detail: str) -> str:
        settings = self.settings
        if settings.api_key:
            what = (
                f"rejected the key from {settings.key_source}" if settings.key_source else "rejected the key"
            )
        else:
            what = "wants an API key"
        said = f": {detail}" if detail else ""
        return self._scrub(
            f"the API at {self._where} {what} (HTTP {status}{said}): set {settings.key_hint}, "
            "or run `dsh-acp login`"
        )

    def _scrub(self, text: str) -> str:
        key = self.settings.api_key
        return text.replace(key, "[redacted]") if key else text


class _Timeout(Exception):
    """Set on the response's byte stream by the watchdog: the read that waits for it ends."""

    def __init__(self, why: Why) -> None:
        super().__init__(why)
        self.why = why


Why = Literal["first", "stall", "deadline"]


class _Watchdog:
    """The timers of one response, kept by one event-loop callback instead of a timeout scope
    per read: a read costs a clock reading, and the callback wakes about once per stall period
    (the times only move later, except at ``begin``, which sets the callback again).

    Before the answer begins, the first-event timer (restarted by progress events); then the
    stall timer, counted from the start of each read (the time the consumer takes between
    reads is not the server's silence); always the whole request's deadline. When one runs out
    during a read, the reader gets ``_Timeout``: a stream exception, so nothing is cancelled
    (between reads the generator may be suspended at a ``yield``, and its consumer's awaits
    are not ours to cut).
    """

    def __init__(self, content: aiohttp.StreamReader, deadline: float, first: float, stall: float) -> None:
        import asyncio

        self._loop = loop = asyncio.get_running_loop()
        self._content = content
        self._deadline = deadline
        self._first = first
        self._stall = stall
        self.begun = False
        self.reading = False
        self._last = loop.time()
        self._first_by = self._last + first
        self._handle: asyncio.TimerHandle | None = loop.call_at(self._due()[0], self._check)

    def wait(self) -> None:
        """A read begins: the stall timer counts from now."""
        self.reading = True
        self._last = self._loop.time()

    def read(self) -> None:
        self.reading = False

    def progress(self) -> None:
        self._first_by = self._loop.time() + self._first

    def begin(self) -> None:
        """The answer began: from now on the stall timer (sooner than the first-event one)."""
        self.begun = True
        self.stop()
        self._handle = self._loop.call_at(self._due()[0], self._check)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _due(self) -> tuple[float, Why]:
        why: Why
        if self.begun:
            limit, why = self._last + self._stall, "stall"
        else:
            limit, why = self._first_by, "first"
        if self._deadline <= limit:
            return self._deadline, "deadline"
        return limit, why

    def _check(self) -> None:
        due, why = self._due()
        now = self._loop.time()
        if not self.reading:
            due = max(due, now + self._stall)  # the next read restarts the count anyway
        elif now >= due:
            self._handle = None
            self._content.set_exception(_Timeout(why))
            return
        self._handle = self._loop.call_at(due, self._check)


def _tls_context() -> ssl.SSLContext:
    """The certificates httpx and requests trust: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set,
    else the certifi bundle (the same on every platform, whatever the system store holds)."""
    import os
    import ssl

    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _http_failure(where: str, status: int, detail: str, model: str) -> str:
    said = f": {detail}" if detail else ""
    if status == 429:
        return f"the API at {where} is rate-limiting requests (HTTP 429{said})"
    if status >= 500:
        return f"the API at {where} failed (HTTP {status}{said})"
    if status == 404:
        return f"the API at {where} answered HTTP 404{said} (check the model name {model!r} and the base URL)"
    return f"the API at {where} refused the request (HTTP {status}{said})"


def _detail(document: Any) -> str:
    """The message of an error document (``{"error": {"message": ...}}`` and its variants)."""
    if isinstance(document, dict):
        error = document.get("error", document)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail") or error.get("msg")
            if isinstance(message, str):
                return _one_line(message)
            return _one_line(brief(error, _DETAIL_CHARS))
        if isinstance(error, str):
            return _one_line(error)
    return _one_line(brief(document, _DETAIL_CHARS))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= _DETAIL_CHARS:
        return text
    head = _DETAIL_CHARS // 3
    tail = _DETAIL_CHARS - head
    return f"{text[:head]} [… {len(text) - head - tail} characters …] {text[-tail:]}"


_WINDOW_PATTERNS: Final = (
    # llama.cpp: "request (1045 tokens) exceeds the available context size (1024 tokens)"
    r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)",
    # OpenAI, vLLM: "maximum context length is 4096 tokens. However, you requested 5000 tokens"
    r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens",
)


def _overflow(status: int, detail: str, document: Any) -> tuple[int | None, int | None] | None:
    """``(window, prompt tokens)`` when an error says the request did not fit the context."""
    error = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict) and (
        error.get("type") == "exceed_context_size_error" or error.get("code") == "context_length_exceeded"
    ):
        window, tokens = error.get("n_ctx"), error.get("n_prompt_tokens")
        if isinstance(window, int) and isinstance(tokens, int):
            return window, tokens
    if status != 400 and not error:
        return None
    import re

    llama = re.search(_WINDOW_PATTERNS[0], detail)
    if llama:
        return int(llama.group(2)), int(llama.group(1))
    openai = re.search(_WINDOW_PATTERNS[1], detail)
    if openai:
        return int(openai.group(1)), int(openai.group(2))
    if isinstance(error, dict) and error.get("type") == "exceed_context_size_error":
        return None, None
    return None


def _reason(error: BaseException) -> str:
    return _one_line(str(error)) or type(error).__name__


def _content_type(headers: Mapping[str, str]) -> str:
    value = headers.get("content-type", "")
    return value.split(";")[0].strip().lower()


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` in seconds or as
    an HTTP date), or ``None``."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    import email.utils
    import time

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _display_url(url: str) -> str:
    """The URL without credentials or query: it goes into messages the editor shows."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
