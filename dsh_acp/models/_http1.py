"""One HTTP/1.1 connection of the model client, and the response read on it: the bytes off the
socket go through httptools' parser (llhttp, in C) and a streamed body reaches its reader as the
socket gives it, with one parser call and one wake-up per read.

A model's every token is a read. aiohttp's stream reader, the layer this replaces, cost about as
many instructions per read as the whole of a bare relay's margin allows; this path costs what
asyncio's own stream reader does (bench/README.md, "Our own HTTP client").

The connection is kept for the next request when the response says so and its body was read to
the end (``release``); anything else closes it.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from typing import Final

import httptools

__all__ = ["Connection", "ConnectionLost", "HttpError", "MalformedResponse", "Response", "os_reason"]

HIGH_WATER: Final = 1 << 20
"""Body bytes held unread before the socket is paused (a reader slower than the server)."""
MAX_HEAD: Final = 256 * 1024
"""Bytes of status line and headers a response may take (aiohttp allowed 8 KiB a line)."""
MAX_INFLATED: Final = 16 * 1024 * 1024
"""Bytes a compressed read may inflate to at once (the event stream's longest line)."""
DRAIN_GRACE: Final = 1.0
"""Seconds a connection released with ``drain`` may take to finish its body (the terminating
chunk after ``[DONE]``) before it is closed instead of kept."""


class HttpError(Exception):
    """A request failed below HTTP: no connection, or the connection was lost or spoke nonsense."""


class ConnectionLost(HttpError):
    """The connection ended: raised by ``send`` when no answer had begun (often a kept-alive
    connection the server had closed meanwhile), by ``read_chunk`` when the body was cut."""


class MalformedResponse(HttpError):
    """The server's answer is not HTTP, or not one we take (endless headers, a body that does
    not decompress): the connection is closed."""


def os_reason(error: BaseException) -> str:
    """The system's words for a failed connection (``strerror``), else the error's own."""
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


class Response:
    """A response's status and headers, and its body as it arrives: ``read_chunk`` until b""."""

    __slots__ = (
        "_chunks",
        "_connection",
        "_exception",
        "_inflate",
        "_paused",
        "_size",
        "_waiter",
        "complete",
        "headers",
        "reason",
        "released",
        "status",
        "until_eof",
    )

    def __init__(self, connection: Connection, status: int, reason: str, headers: dict[str, str]) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        """Names in lower case; a repeated header's values joined with ", "."""
        self._connection = connection
        self._chunks: list[bytes] = []
        self._size = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._exception: BaseException | None = None
        self.complete = False
        self.released = False
        # Neither a length nor chunks: the body ends when the server closes (HTTP/1.0 style).
        self.until_eof = (
            "content-length" not in headers
            and "chunked" not in headers.get("transfer-encoding", "").lower()
            and status not in (204, 304)
        )
        # We ask for identity; a proxy or server that compresses anyway is still understood.
        self._inflate: zlib._Decompress | None = None
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(47)  # 47: gzip or zlib, by its header

    async def read_chunk(self) -> bytes:
        """The body bytes that have come since the last read (waiting for some), b"" at its end.
        What came before a failure is read first, then the failure is raised."""
        chunks = self._chunks
        if not chunks:
            if self._exception is None and not self.complete:
                self._waiter = waiter = self._connection.loop.create_future()
                try:
                    await waiter
                finally:
                    self._waiter = None
            if not chunks:
                if self._exception is not None:
                    raise self._exception
                return b""
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._size = 0
        self._resume()
        return data

    async def read(self, limit: int) -> bytes:
        """The body, or its first ``limit`` bytes and a little more (what was already read)."""
        body = bytearray()
        while len(body) < limit:
            chunk = await self.read_chunk()
            if not chunk:
                break
            body += chunk
        return bytes(body)

    def set_exception(self, error: BaseException) -> None:
        """Fail the body from outside (a timer): the waiting read, or the next, raises ``error``."""
        if self._exception is None:
            self._exception = error
        self._wake()

    def release(self, drain: bool = False) -> None:
        """Done with the response: the connection is kept if the body was read to its end and
        the server keeps it alive, else closed at once (a server may go on generating for as
        long as it is read). ``drain``: the reader saw the body's last event, only the framing's
        end may be still to come, and it is given ``DRAIN_GRACE`` to come."""
        if self.released:
            return
        self.released = True
        self._connection.released(self, drain)

    def close(self) -> None:
        """Done with the response, its connection closed whatever it still had to say."""
        self.released = True
        self._connection.close()

    # -- fed by the connection ------------------------------------------------------------------

    def _resume(self) -> None:
        """Read from the socket again, if the held body had paused it."""
        if self._paused:
            self._paused = False
            self._connection.resume()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if not self.complete:
            self.set_exception(error)

    def _finish(self) -> None:
        inflate, self._inflate = self._inflate, None
        if inflate is not None:
            rest = inflate.flush()  # what the decompressor held back for a longer match
            if rest:
                self._chunks.append(rest)
        self.complete = True
        self._wake()


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: a request is written whole, its response parsed as it arrives.
    ``on_*`` are httptools' callbacks."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, key: object, keep: Callable[[Connection], None]
    ) -> None:
        self.loop = loop
        self.key = key
        """What the client keeps the connection under (its origin and proxy)."""
        self._keep = keep
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        """When the connection became idle (kept for the next request)."""
        self.response: Response | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._head: asyncio.Future[Response] | None = None
        self._reason = ""
        self._headers: dict[str, str] = {}
        self._lost: BaseException | None = None
        self._head_size = 0
        self.draining: asyncio.Future[None] | None = None
        """Set while a released response's last bytes are awaited; done when the connection is
        kept or closed."""

    # -- asyncio's side -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:  # bytes nobody asked for: an idle connection is no longer clean
            self.close()
            return
        if self.response is None:
            self._head_size += len(data)
            if self._head_size > MAX_HEAD:  # the parser would hold the headers without end
                self._broken(f"the server sent more than {MAX_HEAD // 1024} KiB of headers")
                return
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._broken("the server switched protocols")
        except httptools.HttpParserError as error:
            self._broken(f"the server sent a malformed HTTP response ({error})")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._lost = exc
        response = self.response
        if response is not None and not response.complete:
            if response.until_eof and exc is None and self._parser is not None:
                self._parser = None
                response._finish()
            else:
                response._fail(ConnectionLost(self._why("during the response", exc)))
        head = self._head
        if head is not None and not head.done():
            head.set_exception(ConnectionLost(self._why("before the answer", exc)))

    # -- the request ----------------------------------------------------------------------------

    async def send(self, head: bytes, body: bytes) -> Response:
        """Write one request; return its response once the status line and headers are in."""
        if self.closed or self.transport is None or self.transport.is_closing():
            raise ConnectionLost(self._why("before the request was sent", self._lost))
        self.response = None
        self._headers = {}
        self._head_size = 0
        self._parser = httptools.HttpResponseParser(self)
        future: asyncio.Future[Response] = self.loop.create_future()
        self._head = future
        if len(body) < 65536:
            self.transport.write(head + body)  # one segment for the common request
        else:
            self.transport.write(head)  # (no copy of a long conversation)
            self.transport.write(body)
        try:
            return await future
        except BaseException:
            self.close()  # cancelled or failed mid-head: nothing else can use the connection
            raise
        finally:
            self._head = None

    async def tunnel(self, head: bytes) -> Response:
        """Send a CONNECT; its response has no body, whatever its headers say."""
        response = await self.send(head, b"")
        self._parser = None
        response.complete = True
        return response

    def released(self, response: Response, drain: bool) -> None:
        if response is not self.response or self.closed:
            return
        if not response.complete:
            if drain and response._exception is None:
                # The end may be a read away (the terminating chunk after [DONE]).
                self.draining = self.loop.create_future()
                self.loop.call_later(DRAIN_GRACE, self._drained, response)
                response._resume()
                return
            self.close()
            return
        self._idle()

    def close(self) -> None:
        self.closed = True
        self._drain_over()
        if self.transport is not None:
            self.transport.close()

    def resume(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # -- httptools' side ------------------------------------------------------------------------

    def on_status(self, reason: bytes) -> None:
        self._reason = reason.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self._headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._headers = {}  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            return
        self.response = response = Response(self, status, self._reason, self._headers)
        head = self._head
        if head is not None and not head.done():
            head.set_result(response)

    def on_body(self, body: bytes) -> None:
        response = self.response
        if response is None:
            return
        inflate = response._inflate
        if inflate is not None:
            try:
                body = inflate.decompress(body, MAX_INFLATED)
            except Exception as error:  # zlib.error: a body that is not what it says
                self._broken(f"the server sent a body that does not decompress ({error})")
                return
            if inflate.unconsumed_tail:
                self._broken(f"the server sent a compressed body that inflates past {MAX_INFLATED} bytes")
                return
            if not body:
                return
        response._chunks.append(body)
        response._size += len(body)
        waiter = response._waiter  # (``_wake``, inline: every token's read comes this way)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if response._size > HIGH_WATER and not response._paused and self.transport is not None:
            response._paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        response = self.response
        if response is None:
            return  # the end of an interim answer
        parser = self._parser
        keep = parser is not None and parser.should_keep_alive()
        self._parser = None
        response._finish()
        if not keep:
            self.close()
        elif response.released:
            self._idle()

    # -- helpers --------------------------------------------------------------------------------

    def _idle(self) -> None:
        if self.closed:
            return
        self.idle_since = self.loop.time()
        self._keep(self)
        self._drain_over()

    def _drain_over(self) -> None:
        draining, self.draining = self.draining, None
        if draining is not None and not draining.done():
            draining.set_result(None)

    def _drained(self, response: Response) -> None:
        if self.response is response and not response.complete:
            self.close()

    def _broken(self, message: str) -> None:
        self._parser = None
        error = MalformedResponse(message)
        if self.response is not None:
            self.response._fail(error)
        head = self._head
        if head is not None and not head.done():
            head.set_exception(error)
        self.close()

    @staticmethod
    def _why(when: str, exc: BaseException | None) -> str:
        if exc is None:
            return f"the server closed the connection {when}"
        return f"the connection was lost {when}: {os_reason(exc)}"
