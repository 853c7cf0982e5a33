"""The OpenAI-compatible model: ``POST {base_url}/chat/completions`` with ``stream: true``.

Speaks the dialect DeepSeek, OpenAI, vLLM, llama.cpp's server and Ollama share: server-sent
events whose ``data:`` lines carry ``chat.completion.chunk`` objects, ending with ``[DONE]``.

The HTTP client (``_http1_client``, on httptools' parser) is imported inside the methods that use
it: ``import dsh_acp.models._openai`` stays cheap, so the agent answers ``initialize`` before the
HTTP stack has loaded.

Timers: ``first_event_timeout`` bounds the wait for the response to begin (headers, then the
first event that carries the answer) and is counted again from each progress event a server
sends meanwhile (llama.cpp's ``prompt_progress``, asked for with ``return_progress`` where the
server is known to be llama.cpp); ``stall_timeout`` bounds the silence between bytes once the
answer streams; ``request_timeout`` bounds the whole response.

Context windows: unless the config file sets one, a self-hosted server is asked once per base
URL and model (``_openai_server``: llama.cpp, vLLM, Ollama), and a context-size error teaches the
window too; ``context_window`` is then what the usage meter and automatic compaction use.

The pieces: request bodies (``_openai_request``), the event stream (``_openai_sse``), its chunks
made events (``_openai_response``), error messages (``_openai_errors``), the response timers, the
certificates and the environment's proxy (``_openai_http``), what a server says of a model
(``_openai_server``), the HTTP client (``_http1_client``); this module sends, retries and reads.

Failure policy: a request the server refuses as too large for its context raises
``ContextOverflow``; HTTP 401/403 raise ``ModelAuthError``; HTTP 429, 5xx and a connection lost before
the answer are retried with exponential back-off and jitter (bounded in attempts and in total
wait, honouring ``Retry-After``); everything else — a refused connection, a timeout, a stalled or
dropped stream, a malformed chunk — raises ``ModelError`` with one line saying what happened. The
API key is scrubbed from every message, and exceptions from the HTTP client are never chained.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio
import orjson

from dsh_acp._version import VERSION

from ._model import ContextOverflow, ModelAuthError, ModelError, ModelEvent, ModelRequest
from ._openai_errors import (
    connect_reason,
    content_type,
    detail_line,
    display_url,
    error_detail,
    http_failure,
    overflow,
    reason,
    retry_after,
)
from ._openai_http import Route, StreamTimeout, Watchdog, route_from_env, tls_context
from ._openai_request import RequestEncoder
from ._openai_response import Assembler, token_events
from ._openai_server import SERVER_INFO, ServerInfo, ask_server
from ._openai_sse import SSEDecoder
from ._protocol import Model
from ._settings import ModelSettings, is_self_hosted

if TYPE_CHECKING:
    from ._http1 import Response
    from ._http1_client import HttpClient

__all__ = ["OpenAIModel"]

_log = logging.getLogger(__name__)

_MAX_ERROR_BODY: Final = 64 * 1024
_INFO_TIMEOUT: Final = 5.0


@dataclass(frozen=True, slots=True)
class _Retry:
    """A request that failed in a way worth another try."""

    failure: str
    asked: float | None = None
    """The wait the server asked for (``Retry-After``), if it did."""
    rate_limited: bool = False


class OpenAIModel(Model):
    """A ``Model`` backed by an OpenAI-compatible ``/chat/completions`` endpoint.

    One instance per session; it keeps one ``HttpClient`` (made at the first request, its
    connections kept alive between requests) — close it with ``aclose()``. ``sleep`` and
    ``jitter`` are injectable so tests can observe the back-off without waiting for it.
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
        self._client: HttpClient | None = None
        self._route: Route | None = None
        self._encoder = RequestEncoder(settings)

    # Derived on use, not stored: a model is made for every session, most of them idle.
    @property
    def _where(self) -> str:
        return display_url(self.settings.base_url)

    @property
    def _key(self) -> tuple[str, str]:
        return (self.settings.base_url, self.settings.model)

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
                    info = await ask_server(
                        self._http(), await self._routed(), self.settings.base_url, self.settings.model
                    )
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
        self._route = None  # a new client looks the environment up again
        if client is not None:
            await client.close()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Send the request and yield its events (deltas as they come; tool calls, usage and
        ``Finish`` once the stream is complete)."""
        from ._http1 import HttpError  # the HTTP client: with the first request (test_openai)

        info = await self.server_info()
        body = self._encoder.encode(request, progress=info.progress)
        settings = self.settings
        # One generator, not one wrapping another: a model's every token resumes it twice (its
        # read, then the consumer asking for the next event), and a layer more would double that.
        # Closed early (the consumer stops, or is cancelled at a read), the finally below
        # releases the response at once.
        try:
            deadline = anyio.current_time() + settings.request_timeout
            response = content = await self._send(body, request.notice)
            # Until the answer begins only the first-event timer runs (progress restarts it); from
            # then on, the stall timer between bytes. One watchdog keeps all three timers.
            watchdog = Watchdog(content, deadline, settings.first_event_timeout, settings.stall_timeout)
            saw_done = False
            try:
                assembler = Assembler(self.context_window, self._where)
                feed = assembler.feed_any
                decoder = SSEDecoder()
                clock = watchdog.clock
                while not saw_done:
                    watchdog.read_since = clock()
                    watchdog.reading = True
                    try:
                        data = await content.read_chunk()
                    except StreamTimeout as timeout:
                        raise ModelError(self._timed_out(timeout.why)) from None
                    except HttpError as error:
                        raise ModelError(
                            f"the connection to {self._where} dropped mid-response: {reason(error)}"
                        ) from None
                    watchdog.reading = False
                    for payload in decoder.feed(data) if data else decoder.close():
                        # A chunk is a JSON object: only what is not may be the end marker.
                        if payload[:1] != "{" and payload.strip() == "[DONE]":
                            saw_done = True
                            break
                        try:
                            document = orjson.loads(payload)
                        except orjson.JSONDecodeError:
                            raise ModelError(self._malformed(payload)) from None
                        if not watchdog.begun:
                            if isinstance(document, dict) and "prompt_progress" in document:
                                watchdog.progress()
                            else:
                                watchdog.begin()
                        # A token's chunk (most of them) is answered by the shortcut, without a
                        # call through the assembler; any other by its general walk.
                        events = token_events(document)
                        for event in feed(document) if events is None else events:
                            yield event
                    if not data:
                        break
                for event in assembler.end(saw_done):
                    yield event
            finally:
                watchdog.stop()
                # Kept when read to its end (its last bytes may follow [DONE]), else closed.
                response.release(drain=saw_done)
        except ContextOverflow as error:
            raise ContextOverflow(
                self._scrub(str(error)), error.context_window, error.prompt_tokens
            ) from None
        except ModelError as error:
            # One gate for every message: whatever a server echoes back, the key stays here.
            raise type(error)(self._scrub(str(error))) from None

    def _timed_out(self, why: str) -> str:
        if why == "deadline":
            return f"the response from {self._where} took longer than {self.settings.request_timeout:g} s"
        if why == "first":
            return self._no_answer()
        return f"the API at {self._where} stopped streaming: nothing for {self.settings.stall_timeout:g} s"

    # -- HTTP ---------------------------------------------------------------------------------

    def _http(self) -> HttpClient:
        if self._client is None:
            from ._http1_client import HttpClient

            settings = self.settings
            tls = tls_context() if settings.base_url.startswith("https:") else None
            # Only the connection is bounded here: the first-event, stall and request timers are
            # ours (see Watchdog). The environment's proxy and .netrc are looked up once
            # (``_routed``).
            self._client = HttpClient(tls, settings.connect_timeout)
        return self._client

    async def _routed(self) -> Route:
        """The headers of a request and the proxy of the environment for the base URL, looked up
        once."""
        if self._route is None:
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
            self._route = await anyio.to_thread.run_sync(route_from_env, settings.base_url, headers)
        return self._route

    async def _send(
        self, body: bytes, notice: Callable[[str, str], Awaitable[None]] | None = None
    ) -> Response:
        """POST ``body``: the streamed response, after retries (with back-off) of what is worth
        another try; ``ModelError`` when the request fails for good."""
        settings = self.settings
        route = await self._routed()
        waited = 0.0
        attempt = 0
        while True:
            attempt += 1
            outcome = await self._attempt(route, body)
            if not isinstance(outcome, _Retry):
                return outcome
            delay = outcome.asked
            if delay is None:
                ceiling = min(settings.retry_max_delay, settings.retry_base_delay * 2 ** (attempt - 1))
                delay = ceiling * (0.5 + 0.5 * self._jitter())
            failure = outcome.failure
            if attempt > settings.max_retries or waited + delay > settings.retry_budget:
                asked = outcome.asked
                why = f"; it asked to wait {asked:g} s" if asked and attempt <= settings.max_retries else ""
                raise ModelError(self._scrub(f"{failure}; gave up after {attempt} attempt(s){why}"))
            _log.warning("%s; retrying in %.1f s (attempt %d)", self._scrub(failure), delay, attempt + 1)
            if notice is not None:
                what = "Rate limited" if outcome.rate_limited else "The model request failed"
                wait = f"{delay:.0f} s" if delay >= 1 else f"{delay:.1f} s"
                await notice(f"{what}; retrying in {wait}", self._scrub(failure))
            await self._sleep(delay)
            waited += delay

    async def _attempt(self, route: Route, body: bytes) -> Response | _Retry:
        """One try: the response, what to retry, or ``ModelError`` for what a retry cannot mend."""
        from ._http1 import ConnectionLost, HttpError
        from ._http1_client import ConnectFailed, ConnectTimedOut

        settings = self.settings
        try:
            with anyio.fail_after(settings.first_event_timeout):
                response = await self._http().request(
                    "POST",
                    f"{settings.base_url}/chat/completions",
                    route.headers,
                    body,
                    proxy=route.proxy,
                    proxy_headers=route.proxy_headers,
                )
        except ConnectTimedOut:
            raise ModelError(
                f"cannot connect to {self._where}: no answer within {settings.connect_timeout:g} s"
            ) from None
        except TimeoutError:
            raise ModelError(self._no_answer()) from None
        except ConnectFailed as error:
            raise ModelError(
                f"cannot connect to {self._where}: {self._scrub(connect_reason(error))}"
            ) from None
        except ConnectionLost as error:
            # Often a kept-alive connection the server had closed: worth another try.
            return _Retry(f"the connection to {self._where} was lost before the answer ({reason(error)})")
        except HttpError as error:
            raise ModelError(f"the request to {self._where} failed: {self._scrub(reason(error))}") from None
        return await self._answered(response)

    async def _answered(self, response: Response) -> Response | _Retry:
        """The API's answer: the event stream, a status worth a retry (429, 5xx), or the error."""
        status = response.status
        if status == 200:
            if content_type(response.headers) not in ("text/event-stream", ""):
                response.close()
                kind = content_type(response.headers)
                raise ModelError(f"the API at {self._where} answered with {kind}, not an event stream")
            return response
        detail, document = await self._error_detail(response)
        model = self.settings.model
        too_large = overflow(status, detail, document)
        if too_large is not None:
            window, tokens = too_large
            if window:
                self._learn_window(window)
            raise ContextOverflow(
                self._scrub(http_failure(self._where, status, detail, model)), window, tokens
            )
        if status in (401, 403):
            raise ModelAuthError(self._auth_message(status, detail))
        failure = http_failure(self._where, status, detail, model)
        if status != 429 and status < 500:
            raise ModelError(self._scrub(failure))
        return _Retry(failure, retry_after(response.headers), rate_limited=status == 429)

    def _no_answer(self) -> str:
        wait = self.settings.first_event_timeout
        return (
            f"the API at {self._where} did not begin its answer within {wait:g} s"
            " (a local server may still be reading a long prompt: raise first_event_timeout)"
        )

    def _malformed(self, payload: str) -> str:
        snippet = payload if len(payload) <= 80 else payload[:77] + "..."
        return f"the API at {self._where} sent a malformed stream chunk (invalid JSON): {snippet!r}"

    async def _error_detail(self, response: Response) -> tuple[str, Any]:
        body = bytearray()
        try:
            with anyio.move_on_after(self.settings.stall_timeout):
                while len(body) < _MAX_ERROR_BODY:
                    chunk = await response.read_chunk()
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
            detail = error_detail(document)
        except orjson.JSONDecodeError:
            detail = bytes(body).decode("utf-8", errors="replace")
        return self._scrub(detail_line(detail or response.reason or "")), document

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
