"""The model's own HTTP/1.1 client, through the model, against servers that speak HTTP the ways
real ones do and the fake server does not: connections kept alive (and closed by the server
meanwhile), bodies framed by length or by closing, interim answers, a compressed stream, TLS, a
CONNECT proxy that really tunnels, nonsense instead of HTTP, a burst bigger than the socket's
buffer.

``tests/tls/localhost.pem`` is a self-signed certificate for 127.0.0.1 and localhost, made for
these tests (100 years), with its key beside it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import ssl
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from fake_openai import chunk, sse

from dsh_acp import Finish, ModelError, ModelEvent, ModelRequest, TextDelta, UserMessage
from dsh_acp.models._openai import OpenAIModel
from dsh_acp.models._settings import ModelSettings
from dsh_tools._content import TextBlock

pytestmark = pytest.mark.anyio

KEY = "sk-test-http1-5d0c2b7a"
TLS = Path(__file__).parent / "tls"
REQUEST = ModelRequest(messages=[UserMessage((TextBlock(text="hello"),))], tools=[], system="")
STREAM = b"".join(sse(chunk("Hello"), chunk(" world", finish="stop")))
OK = [TextDelta("Hello"), TextDelta(" world"), Finish("stop")]

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class Server:
    """An asyncio server on 127.0.0.1 running ``handler(reader, writer, connection number)`` for
    each connection; it records every request (head and body) it reads with ``head``."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.heads: list[str] = []
        self.bodies: list[bytes] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port: int = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def head(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """The next chat request's head, recorded with its body; "" at EOF. The model's question
        for the server's models (a self-hosted server is asked) is answered 404 on the way."""
        while True:
            try:
                raw = (await reader.readuntil(b"\r\n\r\n")).decode()
            except asyncio.IncompleteReadError:
                return ""
            length = 0
            for line in raw.split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":")[1])
            body = await reader.readexactly(length)
            if not raw.startswith("GET /v1/models "):
                self.heads.append(raw)
                self.bodies.append(body)
                return raw
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer, self.connections)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went, or the test is over
        finally:
            writer.close()


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def model_for(port: int, scheme: str = "http", **changes: Any) -> OpenAIModel:
    settings = ModelSettings(
        model="m",
        base_url=f"{scheme}://127.0.0.1:{port}/v1",
        api_key=KEY,
        context_window=8192,
        stall_timeout=5.0,
        retry_base_delay=0.01,
        **changes,
    )
    return OpenAIModel(settings)


async def collect(model: OpenAIModel) -> list[ModelEvent]:
    async with aclosing(model.stream(REQUEST)) as events:
        return [event async for event in events]


async def stream_once(port: int, scheme: str = "http") -> list[ModelEvent]:
    model = model_for(port, scheme)
    try:
        return await collect(model)
    finally:
        await model.aclose()


async def failure(model: OpenAIModel) -> str:
    """The one-line message the model fails with (closed after)."""
    try:
        with pytest.raises(ModelError) as caught:
            await collect(model)
    finally:
        await model.aclose()
    message = str(caught.value)
    assert "\n" not in message
    return message


async def stream_twice(port: int, scheme: str = "http") -> tuple[list[ModelEvent], list[ModelEvent]]:
    model = model_for(port, scheme)
    try:
        return await collect(model), await collect(model)
    finally:
        await model.aclose()


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


# -- connections kept alive -----------------------------------------------------------------------


@pytest.mark.parametrize("terminator_later", [False, True])
async def test_a_connection_is_kept_for_the_next_request(terminator_later: bool) -> None:
    # The body's last chunk may come a moment after [DONE] (the model stops reading at [DONE]):
    # the connection is kept either way.
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        while await server.head(reader, writer):
            writer.write(STREAM_HEAD + chunked(STREAM))
            if terminator_later:
                await writer.drain()
                await asyncio.sleep(0.05)
            writer.write(b"0\r\n\r\n")

    async with Server(handler) as server:
        model = model_for(server.port)
        try:
            assert await collect(model) == OK
            await asyncio.sleep(0.1)  # the last chunk came meanwhile
            assert await collect(model) == OK
        finally:
            await model.aclose()
    assert server.connections == 1
    assert len(server.heads) == 2


async def test_a_body_that_never_ends_after_done_costs_the_next_request_little() -> None:
    # [DONE], then the chunked body is never ended: the next request waits a moment for the
    # connection, then takes a new one; the old one is closed after its grace.
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        writer.write(STREAM_HEAD + chunked(STREAM))
        await writer.drain()
        await reader.read()  # until the client closes it

    async with Server(handler) as server:
        model = model_for(server.port)
        try:
            assert await collect(model) == OK
            started = time.monotonic()
            assert await collect(model) == OK
            waited = time.monotonic() - started
        finally:
            await model.aclose()
    assert server.connections == 2
    assert waited < 0.5


async def test_a_kept_connection_the_server_closed_is_not_used() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        writer.write(STREAM_HEAD + chunked(STREAM) + b"0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.01)  # keep-alive said, then the server closes it anyway

    async with Server(handler) as server:
        model = model_for(server.port)
        sleeps: list[float] = []

        async def sleep(delay: float) -> None:
            sleeps.append(delay)

        model._sleep = sleep
        try:
            assert await collect(model) == OK
            await asyncio.sleep(0.1)
            assert await collect(model) == OK
        finally:
            await model.aclose()
    assert server.connections == 2
    assert sleeps == []  # a new connection at once, not a retry after a back-off


async def test_a_kept_connection_closed_as_the_request_goes_is_replaced_at_once() -> None:
    # The server reads the second request on the kept connection and closes without a word (its
    # idle timer ran out as the request came): the request goes again on a new connection, with
    # no back-off, and the model never hears of it.
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> None:
        await server.head(reader, writer)
        writer.write(STREAM_HEAD + chunked(STREAM) + b"0\r\n\r\n")
        if number == 1:
            await server.head(reader, writer)  # and closes

    async with Server(handler) as server:
        sleeps: list[float] = []

        async def sleep(delay: float) -> None:
            sleeps.append(delay)

        model = OpenAIModel(model_for(server.port).settings, sleep=sleep)
        try:
            assert await collect(model) == OK
            assert await collect(model) == OK
        finally:
            await model.aclose()
    assert server.connections == 2
    assert len(server.heads) == 3
    assert sleeps == []


async def test_a_header_with_a_line_break_is_refused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _keep_alive_stream(reader, writer, server)

    async with Server(handler) as server:
        model = model_for(server.port)
        model.settings = replace(model.settings, api_key="sk-abc\r\nX-Injected: 1")
        message = await failure(model)
    assert "holds a line break" in message
    assert server.heads == []


async def test_connection_close_is_honoured() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        head = STREAM_HEAD.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
        writer.write(head + chunked(STREAM) + b"0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.5)  # the client, not the server, must end it

    async with Server(handler) as server:
        assert await stream_twice(server.port) == (OK, OK)
    assert server.connections == 2


# -- how a body is framed ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(STREAM),
        b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n",  # ends by closing
        # An interim answer first (what a server sends for Expect or early hints).
        b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(STREAM),
    ],
    ids=["content-length", "until-close", "interim-answer"],
)
async def test_bodies_framed_every_way(head: bytes) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        writer.write(head)
        for byte in range(0, len(STREAM), 7):  # split anywhere
            writer.write(STREAM[byte : byte + 7])
            await writer.drain()

    async with Server(handler) as server:
        assert await stream_once(server.port) == OK


async def test_a_compressed_stream_is_read() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        head = STREAM_HEAD.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n")
        writer.write(head + chunked(gzip.compress(STREAM)) + b"0\r\n\r\n")

    async with Server(handler) as server:
        assert await stream_once(server.port) == OK
    assert "accept-encoding: identity" in server.heads[0].lower()


async def test_a_compression_bomb_is_refused() -> None:
    # 40 MB of zeros in 40 KB of gzip: refused as it inflates (a read that would inflate past
    # 16 MiB at once) or as the line it makes outgrows the event stream's limit, whichever
    # comes first as the reads fall; never held whole in memory.
    bomb = gzip.compress(b"data: " + b"0" * 40_000_000, compresslevel=9)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        head = STREAM_HEAD.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n")
        writer.write(head + chunked(bomb) + b"0\r\n\r\n")

    async with Server(handler) as server:
        message = await failure(model_for(server.port))
    assert "inflates past" in message or "line longer than" in message


async def test_endless_headers_are_refused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        writer.write(b"HTTP/1.1 200 OK\r\nX-Padding: ")
        with contextlib.suppress(ConnectionError):
            for _ in range(2000):  # 2 MB of one header, and no end to it
                writer.write(b"a" * 1024)
                await writer.drain()

    async with Server(handler) as server:
        message = await failure(model_for(server.port))
    assert "headers" in message


async def test_a_base_url_with_a_space_is_sent_quoted() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _keep_alive_stream(reader, writer, server)

    async with Server(handler) as server:
        settings = replace(
            model_for(server.port).settings, base_url=f"http://127.0.0.1:{server.port}/my api/v1"
        )
        model = OpenAIModel(settings)
        try:
            assert await collect(model) == OK
        finally:
            await model.aclose()
    assert server.heads[0].startswith("GET /my%20api/v1/models HTTP/1.1\r\n")  # not the fixture's own
    assert server.heads[1].startswith("POST /my%20api/v1/chat/completions HTTP/1.1\r\n")


async def test_nonsense_instead_of_http_is_one_line() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async with Server(handler) as server:
        message = await failure(model_for(server.port))
    assert "malformed HTTP response" in message
    assert server.connections == 1  # not retried: it is no stale connection


async def test_a_burst_bigger_than_the_buffers_arrives_whole() -> None:
    # 4 MB of events in one go while the reader is slow: the socket is paused past the high
    # water mark and resumed as the reader catches up, and nothing is lost.
    texts = [f"{n:07d}" + "x" * 200 for n in range(20000)]
    body = b"".join(sse(*(chunk(text) for text in texts), chunk("", finish="stop")))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.head(reader, writer)
        writer.write(STREAM_HEAD + chunked(body) + b"0\r\n\r\n")
        await writer.drain()

    async with Server(handler) as server:
        model = model_for(server.port)
        seen: list[str] = []
        try:
            async with aclosing(model.stream(REQUEST)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        seen.append(event.text)
                        if len(seen) % 2000 == 0:
                            await asyncio.sleep(0.02)
        finally:
            await model.aclose()
    assert seen == texts


# -- TLS and proxies --------------------------------------------------------------------------------


def _server_tls() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS / "localhost.pem", TLS / "localhost.key")
    return context


async def _keep_alive_stream(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, server: Server
) -> None:
    while await server.head(reader, writer):
        writer.write(STREAM_HEAD + chunked(STREAM) + b"0\r\n\r\n")


async def test_https_with_the_certificates_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "localhost.pem"))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _keep_alive_stream(reader, writer, server)

    async with Server(handler, _server_tls()) as server:
        assert await stream_twice(server.port, "https") == (OK, OK)
    assert server.connections == 1
    assert f"authorization: bearer {KEY}" in server.heads[0].lower()


async def test_https_to_an_untrusted_certificate_fails_to_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _keep_alive_stream(reader, writer, server)

    async with Server(handler, _server_tls()) as server:
        message = await failure(model_for(server.port, "https"))
    assert message.startswith(f"cannot connect to https://127.0.0.1:{server.port}/v1: ")
    assert "certificate verify failed" in message
    assert server.heads == []


async def test_https_through_a_tunnelling_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A real CONNECT proxy: it reads the CONNECT, then relays bytes both ways. It sees its own
    # credentials and nothing of the API's: the key travels inside the TLS of the tunnel.
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "localhost.pem"))
    tunnels: list[str] = []

    async def api(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _keep_alive_stream(reader, writer, api_server)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        head = await proxy_server.head(reader, writer)
        tunnels.append(head)
        target = head.split()[1]
        host, port = target.rsplit(":", 1)
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    async with Server(api, _server_tls()) as api_server, Server(proxy) as proxy_server:
        monkeypatch.setenv("HTTPS_PROXY", f"http://user:pw@127.0.0.1:{proxy_server.port}")
        assert await stream_twice(api_server.port, "https") == (OK, OK)
    [connect] = tunnels  # one tunnel, kept alive for both requests
    assert connect.startswith(f"CONNECT 127.0.0.1:{api_server.port} HTTP/1.1\r\n")
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'user:pw').decode()}" in connect
    assert KEY not in connect
    assert len(api_server.heads) == 2
    assert all(f"Authorization: Bearer {KEY}" in head for head in api_server.heads)


async def test_a_proxy_that_refuses_the_tunnel(monkeypatch: pytest.MonkeyPatch) -> None:
    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await proxy_server.head(reader, writer)
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    async with Server(proxy) as proxy_server:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy_server.port}")
        model = OpenAIModel(ModelSettings(model="m", base_url="https://models.example/v1", api_key=KEY))
        message = await failure(model)
    assert message == (
        "cannot connect to https://models.example/v1:"
        " the proxy refused the tunnel (HTTP 407 Proxy Authentication Required)"
    )


async def test_what_a_request_says() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _keep_alive_stream(reader, writer, server)

    async with Server(handler) as server:
        assert await stream_once(server.port) == OK
    [head] = server.heads
    [body] = server.bodies
    lines = head.split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    assert lines[1] == f"Host: 127.0.0.1:{server.port}"
    fields = dict(line.split(": ", 1) for line in lines[1:] if line)
    assert fields["Content-Type"] == "application/json"
    assert fields["Accept"] == "text/event-stream"
    assert int(fields["Content-Length"]) == len(body)
    assert orjson.loads(body)["stream"] is True


# -- a real server ----------------------------------------------------------------------------------


@pytest.mark.parametrize("implementation", ["h11", "httptools"])
async def test_against_uvicorn(implementation: str) -> None:
    # Uvicorn, with each of its HTTP/1.1 implementations, streaming an ASGI app's events as
    # they are made: two turns on one kept-alive connection, the events paced apart.
    import uvicorn

    connections: set[Any] = set()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        connections.add(scope["client"])
        if scope["path"] != "/v1/chat/completions":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for piece in sse(chunk("Hello"), chunk(" world", finish="stop")):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b""})

    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, http=implementation, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn says so by an attribute alone)
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        assert await stream_twice(port) == (OK, OK)
    finally:
        server.should_exit = True
        await serving
    assert len(connections) == 1  # the model list and both turns on one connection
