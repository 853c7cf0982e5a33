"""The model's HTTP client: requests to one API, over HTTP/1.1 connections kept alive per origin,
directly or through the environment's proxy (absolute-form requests to an ``http://`` API, a
``CONNECT`` tunnel to an ``https://`` one), with TLS where the API or the proxy asks for it.

It does what the model needs and no more: no redirects (a model API that redirects is
misconfigured, and its key should not follow), no cookies, no HTTP/2.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import quote, urlsplit

from ._http1 import Connection, ConnectionLost, HttpError, Response, os_reason
from ._openai_http import tls_context

if TYPE_CHECKING:
    import ssl

__all__ = ["ConnectFailed", "ConnectTimedOut", "HttpClient", "Origin"]

DRAIN_WAIT: Final = 0.05
"""Seconds a request waits for a connection whose last response is still ending (its last chunk
a moment behind ``[DONE]``) before it opens another: a turn and the next request often follow
each other at once, and a new connection to a remote API costs a TLS handshake."""
KEEP_IDLE: Final = 15.0
"""Seconds an idle connection is kept for the next request (what aiohttp, nginx and llama.cpp's
server keep theirs for, or near it)."""


_SAFE: Final = "/%:@!$&'()*+,;=-._~"
"""What a request target keeps unquoted: the delimiters of a path, and the escapes already made."""


class ConnectFailed(HttpError):
    """No connection could be made. ``os_error``: the system's reason, when it gave one."""

    def __init__(self, message: str, os_error: OSError | None = None) -> None:
        super().__init__(message)
        self.os_error = os_error


class ConnectTimedOut(HttpError):
    """The connection (TCP, the proxy's tunnel, TLS) was not made within the connect timeout."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go, and what a connection is kept for: scheme, host and port (the host as
    the URL spells it, without brackets)."""

    scheme: str
    host: str
    port: int

    @staticmethod
    def of(url: str) -> tuple[Origin, str]:
        """The URL's origin, and its request target (path and query)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HttpError(f"not an http(s) URL: {url!r}")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as error:
            raise HttpError(f"a bad port in {url!r}") from error
        # Quoted as a request line needs it (a space in a base URL), its escapes kept.
        path = quote(parts.path or "/", safe=_SAFE)
        target = path + (f"?{quote(parts.query, safe=_SAFE + '?')}" if parts.query else "")
        return Origin(parts.scheme, parts.hostname, port), target

    @property
    def authority(self) -> str:
        """``host:port`` as a Host header or a CONNECT says it (the port only where not the
        scheme's own, for Host)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return self.authority if self.port != default else self.authority.rsplit(":", 1)[0]


class HttpClient:
    """Requests over kept-alive connections; ``close`` ends them all (the client can be used
    again after it, with new connections)."""

    def __init__(self, tls: ssl.SSLContext | None, connect_timeout: float) -> None:
        self._tls = tls
        self._connect_timeout = connect_timeout
        self._idle: dict[object, list[Connection]] = {}
        """Idle connections by their key: the origin and the proxy they reach it through."""
        self._open: set[Connection] = set()
        self.closed = False

    async def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes = b"",
        *,
        proxy: str | None = None,
        proxy_headers: dict[str, str] | None = None,
    ) -> Response:
        """Send a request; return its response once its headers are in (read its body, then
        ``release`` it). ``ConnectionLost`` when the connection ended before the answer began, as a
        kept-alive one the server had closed may (once a new connection has been tried too)."""
        self.closed = False
        origin, target = Origin.of(url)
        via = Origin.of(proxy)[0] if proxy else None
        tunnelled = via is not None and origin.scheme == "https"
        if via is not None and not tunnelled:  # a forwarding proxy is given the whole URL
            target = f"{origin.scheme}://{origin.host_header}{target}"
        lines = [f"{method} {target} HTTP/1.1", f"Host: {origin.host_header}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if via is not None and not tunnelled:
            lines += [f"{name}: {value}" for name, value in (proxy_headers or {}).items()]
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body)}")
        head = _head(lines)
        kept = self._idle_connection((origin, via)) or await self._drained((origin, via))
        if kept is not None:
            try:
                return await kept.send(head, body)
            except ConnectionLost:
                # The server closed the kept connection as the request went (its FIN was still on
                # the way): not a byte of an answer, so a new connection at once, not a retry.
                pass
        connection = await self._connect(origin, via, proxy_headers)
        return await connection.send(head, body)

    async def close(self) -> None:
        self.closed = True
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # the transports' close callbacks run

    # -- connections ----------------------------------------------------------------------------

    async def _drained(self, key: tuple[Origin, Origin | None]) -> Connection | None:
        """A connection of ``key`` kept once its last response has ended, if it ends soon."""
        for connection in self._open:
            draining = connection.draining
            if draining is not None and connection.key == key:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(draining), DRAIN_WAIT)
                return self._idle_connection(key)
        return None

    def _idle_connection(self, key: tuple[Origin, Origin | None]) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < KEEP_IDLE:
                return connection
            connection.close()
            self._open.discard(connection)
        return None

    async def _connect(
        self, origin: Origin, via: Origin | None, proxy_headers: dict[str, str] | None
    ) -> Connection:
        key = (origin, via)
        loop = asyncio.get_running_loop()
        first = via or origin
        tls = self._tls_for(first)
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: Connection(loop, key, self._keep),
                    first.host,
                    first.port,
                    ssl=tls,
                    server_hostname=first.host if tls is not None else None,
                )
                self._open = {kept for kept in self._open if not kept.closed}
                self._open.add(connection)
                if via is not None and origin.scheme == "https":
                    await self._tunnel(connection, origin, proxy_headers)
        except TimeoutError:
            raise ConnectTimedOut(f"no connection within {self._connect_timeout:g} s") from None
        except OSError as error:  # ssl.SSLError is one
            raise ConnectFailed(os_reason(error), error) from None
        return connection

    def _keep(self, connection: Connection) -> None:
        """An idle connection, for the next request to its origin (called by the connection)."""
        if self.closed or connection.closed:
            self._open.discard(connection)
            return
        self._idle.setdefault(connection.key, []).append(connection)

    async def _tunnel(
        self, connection: Connection, origin: Origin, proxy_headers: dict[str, str] | None
    ) -> None:
        """Through the proxy to the API: CONNECT, then TLS inside the tunnel. The proxy reads
        only the CONNECT, which carries the proxy's credentials and nothing of the API's."""
        lines = [f"CONNECT {origin.authority} HTTP/1.1", f"Host: {origin.authority}"]
        lines += [f"{name}: {value}" for name, value in (proxy_headers or {}).items()]
        try:
            answer = await connection.tunnel(_head(lines))
        except HttpError as failed:  # lost, or not answered in HTTP
            connection.close()
            raise ConnectFailed(f"no tunnel through the proxy: {failed}") from None
        if answer.status != 200:
            connection.close()
            said = f"HTTP {answer.status} {answer.reason}".strip()
            raise ConnectFailed(f"the proxy refused the tunnel ({said})")
        transport = connection.transport
        assert transport is not None
        tls = self._tls_for(origin)
        assert tls is not None
        loop = asyncio.get_running_loop()
        try:
            inner = await loop.start_tls(transport, connection, tls, server_hostname=origin.host)
        except BaseException:
            connection.close()
            raise
        if inner is None:  # the loop's start_tls says it may be: the connection closed meanwhile
            raise ConnectFailed("the connection closed during the TLS handshake")
        connection.transport = inner

    def _tls_for(self, origin: Origin) -> ssl.SSLContext | None:
        if origin.scheme != "https":
            return None
        if self._tls is None:
            self._tls = tls_context()
        return self._tls


def _head(lines: list[str]) -> bytes:
    """A request's head, its lines and the blank line that ends it; ``HttpError`` if a line
    holds a line break of its own (a key pasted with its newline), which would end it early and
    begin another, of the value's choosing."""
    text = "\r\n".join(lines)
    if text.count("\n") != len(lines) - 1 or text.count("\r") != len(lines) - 1:
        raise HttpError("a request header holds a line break")
    return (text + "\r\n\r\n").encode()
