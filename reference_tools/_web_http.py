"""How ``web_fetch`` reaches a page: the one origin the user approved, its name looked up once,
redirects followed only inside that origin, every wait and every byte bounded.

The client is httpcore2 (the HTTP core under httpx2, which the MCP SDK already brings, so it
adds nothing to install), imported on the first fetch. It is used below httpx on purpose: a
fetch must reach no host but the approved one, and httpcore's network backend is the public seam
where that is decided. ``_PinnedBackend`` is asked for every TCP connection the pool opens; it
resolves the approved name once per fetch, keeps only the addresses the rules allow, and refuses
any other host. httpx's conveniences (redirects, ``trust_env`` reading proxies and ``.netrc``
behind the caller's back) are what this module decides for itself instead.

The rules:

- ``http`` and ``https`` only; no credentials in the URL.
- A name is reached only at public addresses: a name that resolves to loopback, link-local,
  private or reserved addresses is refused (DNS rebinding: a name the user approved must not
  lead the request into their machine or network, e.g. a cloud metadata address). An address
  written in the URL (``http://127.0.0.1:8000/``), and ``localhost``, are reached as written:
  the user saw it.
- A redirect to the same origin (or from ``http`` to ``https`` on the same host) is followed, at
  most ``max_redirects`` times; one to another origin is not: the caller reports it, and a fetch
  of the new URL asks the user again.
- The environment's proxy (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``, as the standard library
  reads them) is used as configured; through a proxy the proxy resolves the name, so the address
  rule above is the proxy's to keep.
- Media types that are not text stop the fetch at the headers; a body is read up to
  ``max_bytes`` (after decompression).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import ssl
import urllib.request
import zlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urljoin, urlsplit, urlunsplit

import anyio

from dsh_tools import ToolError

if TYPE_CHECKING:
    import httpcore2

__all__ = ["READS", "Fetched", "Limits", "Redirected", "Resolver", "Target", "fetch", "parse_url"]

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Looks a host name up: the addresses it has, as strings (the default asks the system)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
READS = "web_fetch reads HTML, Markdown and text"
_ACCEPT = "text/markdown, text/html;q=0.9, text/plain;q=0.8, application/xhtml+xml;q=0.8, */*;q=0.1"
_USER_AGENT = "Mozilla/5.0 (compatible; dsh-acp web_fetch)"
_TEXT_TYPES = frozenset(
    {"application/xhtml+xml", "application/json", "application/xml", "application/javascript",
     "application/x-javascript", "application/ecmascript", "application/x-yaml", "application/yaml",
     "application/toml", "application/x-sh", "application/rss+xml", "application/atom+xml"}
)  # fmt: skip
_SNIFFED_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
"""Media types that say nothing: the body's first bytes decide."""


@dataclass(frozen=True, slots=True)
class Target:
    """A URL checked for fetching: its origin, and whether its host is written as an address."""

    url: str
    scheme: str
    host: str
    """ASCII (IDNA) and lower case; an IPv6 address without brackets."""
    port: int
    literal: bool
    """The host is an IP address or a ``localhost`` name: reached as written."""

    @property
    def origin(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return shown if self.port == _DEFAULT_PORTS[self.scheme] else f"{shown}:{self.port}"


@dataclass(frozen=True, slots=True)
class Limits:
    """What one fetch may take: time, bytes and redirects."""

    max_bytes: int
    max_redirects: int
    connect_timeout: float
    read_timeout: float
    total_timeout: float


@dataclass(frozen=True, slots=True)
class Fetched:
    """A page as the server sent it (decompressed): ``truncated`` when it was longer than the limit."""

    url: str
    status: int
    media_type: str
    charset: str | None
    body: bytes
    truncated: bool


@dataclass(frozen=True, slots=True)
class Redirected:
    """The server sent the request to another origin, which was not followed."""

    url: str
    status: int
    location: str


def _ascii_host(host: str) -> str:
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ToolError(f"{host!r} is not a valid host name") from None


def _is_literal(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def parse_url(url: str) -> Target:
    """``url`` checked for fetching; ``ToolError`` says what is wrong with it."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as error:
        raise ToolError(f"{url!r} is not a valid URL: {error}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ToolError(
            f"only http and https URLs can be fetched, not {scheme!r}"
            if scheme
            else "a URL needs http:// or https://"
        )
    if parts.username is not None or parts.password is not None:
        raise ToolError("a URL with credentials in it is not fetched")
    if not parts.hostname:
        raise ToolError(f"{url!r} has no host")
    host = _ascii_host(parts.hostname)
    port = port if port is not None else _DEFAULT_PORTS[scheme]
    netloc = f"[{host}]" if ":" in host else host
    if port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    normal = urlunsplit(SplitResult(scheme, netloc, parts.path or "/", parts.query, ""))
    return Target(normal, scheme, host, port, _is_literal(host))


def _same_origin(approved: Target, target: Target) -> bool:
    if target.host != approved.host:
        return False
    if target.scheme == approved.scheme and target.port == approved.port:
        return True
    # http → https on the same host, default ports: the usual upgrade, and no less safe.
    return (approved.scheme, approved.port, target.scheme, target.port) == ("http", 80, "https", 443)


def _allowed(address: str, target: Target) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if target.literal:
        # An address in the URL is the one asked for; localhost names reach only this machine.
        return ip.is_loopback if not _is_address(target.host) else True
    return ip.is_global


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def system_resolver(host: str, port: int) -> Sequence[str]:
    """The addresses of ``host`` as the system resolves them, in its order of preference."""
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Addresses:
    """The approved host's addresses, looked up once for the whole fetch (its redirects too),
    so a name cannot point one request here and the next one elsewhere."""

    def __init__(self, target: Target, resolve: Resolver) -> None:
        self._target = target
        self._resolve = resolve
        self._found: list[str] | None = None

    async def get(self) -> list[str]:
        if self._found is None:
            target = self._target
            if _is_address(target.host):
                found: Sequence[str] = [target.host]
            else:
                try:
                    found = await self._resolve(target.host, target.port)
                except OSError as error:
                    reason = getattr(error, "strerror", None) or str(error)
                    raise ToolError(f"{target.host} could not be found ({reason})") from None
            allowed = [address for address in found if _allowed(address, target)]
            if not allowed:
                listed = ", ".join(found) or "no address"
                raise ToolError(
                    f"{target.host} resolves to {listed}, not a public address: a name is fetched only "
                    "from the internet, so that it cannot lead a request into this machine or its "
                    "network; write the address itself in the URL to fetch a page there"
                )
            self._found = allowed
        return self._found


def _pinned_backend(target: Target, addresses: _Addresses, proxy: tuple[str, int] | None) -> Any:
    """An httpcore network backend that connects only to ``target``'s allowed addresses (or to
    the environment's proxy)."""
    import httpcore2

    class PinnedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore2.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> httpcore2.AsyncNetworkStream:
            if proxy is not None and (host.lower(), port) == proxy:
                return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
            if host.lower() != target.host:  # never: the pool only connects to the origin
                raise httpcore2.ConnectError(f"{host} is not the host that was approved")
            failure: Exception | None = None
            for address in await addresses.get():
                try:
                    return await self._inner.connect_tcp(
                        address, port, timeout, local_address, socket_options
                    )
                except httpcore2.ConnectError as error:
                    failure = error
            assert failure is not None
            raise failure

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    return PinnedBackend()


def _proxy_for(target: Target) -> str | None:
    """The environment's proxy for ``target``, as the standard library reads it."""
    if urllib.request.proxy_bypass(target.host):
        return None
    return urllib.request.getproxies().get(target.scheme)


def _proxy_parts(url: str) -> tuple[Any, tuple[str, int]]:
    import httpcore2

    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError(f"the environment's proxy {parts.hostname or url!r} is not an http proxy")
    port = parts.port or _DEFAULT_PORTS[parts.scheme]
    auth = (parts.username or "", parts.password or "") if parts.username else None
    netloc = f"{parts.hostname}:{port}"
    proxy = httpcore2.Proxy(url=urlunsplit((parts.scheme, netloc, "/", "", "")), auth=auth)
    return proxy, (parts.hostname.lower(), port)


@functools.cache
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """The certificates a fetch trusts: ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else the
    system's store (httpcore's default). Made once per setting: loading a store takes about a
    tenth of a second."""
    import httpcore2

    return httpcore2.default_ssl_context()


def _header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1").strip()
    return None


def media_type(content_type: str | None) -> tuple[str, str | None]:
    """The media type (lower case) and charset of a ``Content-Type`` value."""
    if not content_type:
        return "", None
    kind, *params = content_type.split(";")
    charset = None
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip("\"'") or None
    return kind.strip().lower(), charset


def is_text_type(kind: str) -> bool:
    """Whether a page of this media type is read (the others are refused at their headers)."""
    return (
        kind.startswith("text/")
        or kind in _TEXT_TYPES
        or kind in _SNIFFED_TYPES
        or kind.endswith(("+json", "+xml"))
    )


class _Body:
    """The body as it streams in, decompressed and bounded."""

    def __init__(self, encoding: str | None, limit: int) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.truncated = False
        self._limit = limit
        coding = (encoding or "identity").lower()
        if coding in ("gzip", "x-gzip"):
            self._inflate: Any = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._inflate = zlib.decompressobj()
        elif coding == "identity":
            self._inflate = None
        else:
            raise ToolError(f"the page came compressed as {coding!r}, which web_fetch cannot read")

    def add(self, chunk: bytes) -> bool:
        """Take a chunk; False once the limit is reached (stop reading)."""
        if self._inflate is not None:
            try:
                # Never more than the room left: a small compressed body may inflate enormously.
                chunk = self._inflate.decompress(chunk, self._limit - self.size + 1)
            except zlib.error as error:
                raise ToolError(f"the page's compressed body is damaged ({error})") from None
        room = self._limit - self.size
        if len(chunk) > room:
            chunk, self.truncated = chunk[:room], True
        self.parts.append(chunk)
        self.size += len(chunk)
        return not self.truncated

    def data(self) -> bytes:
        return b"".join(self.parts)


def _one_line(error: BaseException) -> str:
    cause: BaseException | None = error
    while cause is not None:  # the TLS error under httpcore's ConnectError says the most
        text = str(cause).strip()
        if text:
            return " ".join(text.split())
        cause = cause.__cause__ or cause.__context__
    return type(error).__name__


def _network_error(error: Exception, target: Target, limits: Limits) -> ToolError:
    import httpcore2

    where = target.origin
    if isinstance(error, httpcore2.ConnectTimeout):
        return ToolError(f"timed out connecting to {where} (after {limits.connect_timeout:g} s)")
    if isinstance(error, httpcore2.ReadTimeout):
        return ToolError(f"{where} sent nothing for {limits.read_timeout:g} s")
    if isinstance(error, httpcore2.TimeoutException):
        return ToolError(f"{where} timed out")
    cause = error.__cause__ or error.__context__
    if isinstance(error, ssl.SSLError) or isinstance(cause, ssl.SSLError):
        tls = cause if isinstance(cause, ssl.SSLError) else error
        verify = getattr(tls, "verify_message", None)
        reason = getattr(tls, "reason", None)
        if verify:
            why = f"certificate verify failed: {verify}"
        else:
            why = reason.lower().replace("_", " ") if reason else _one_line(tls)
        return ToolError(f"TLS error with {where}: {why}")
    if isinstance(error, httpcore2.ConnectError):
        return ToolError(f"could not connect to {where}: {_one_line(error)}")
    if isinstance(error, httpcore2.ProxyError):
        return ToolError(f"the proxy refused the request for {where}: {_one_line(error)}")
    return ToolError(f"the connection to {where} failed: {_one_line(error)}")


async def _get(pool: Any, target: Target, limits: Limits) -> Fetched | tuple[int, str]:
    """One GET: the page, or a redirect's status and ``Location``."""
    headers = [
        ("Accept", _ACCEPT),
        ("Accept-Encoding", "gzip, deflate"),
        ("User-Agent", _USER_AGENT),
    ]
    timeouts = {
        "connect": limits.connect_timeout,
        "read": limits.read_timeout,
        "write": limits.read_timeout,
        "pool": limits.connect_timeout,
    }
    async with pool.stream("GET", target.url, headers=headers, extensions={"timeout": timeouts}) as response:
        status: int = response.status
        location = _header(response.headers, b"location")
        if 300 <= status < 400 and location is not None:
            return status, location
        if status >= 400:
            reason = response.extensions.get("reason_phrase", b"").decode("latin-1", "replace").strip()
            raise ToolError(f"{target.url} answered {status}{' ' + reason if reason else ''}")
        kind, charset = media_type(_header(response.headers, b"content-type"))
        if not is_text_type(kind):
            length = _header(response.headers, b"content-length")
            size = f", {length} bytes" if length and length.isdigit() else ""
            raise ToolError(f"{target.url} is {kind}{size}, not a text page: {READS}")
        body = _Body(_header(response.headers, b"content-encoding"), limits.max_bytes)
        async for chunk in response.aiter_stream():
            if not body.add(chunk):
                break
        return Fetched(target.url, status, kind, charset, body.data(), body.truncated)


async def fetch(target: Target, limits: Limits, resolve: Resolver | None = None) -> Fetched | Redirected:
    """GET ``target``, following redirects inside its origin; ``ToolError`` with one line when
    it cannot be had."""
    import httpcore2

    proxy_url = _proxy_for(target)
    proxy, proxy_at = _proxy_parts(proxy_url) if proxy_url else (None, None)
    addresses = _Addresses(target, resolve or system_resolver)
    pool = httpcore2.AsyncConnectionPool(
        ssl_context=_tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")),
        proxy=proxy,
        network_backend=_pinned_backend(target, addresses, proxy_at),
        max_connections=1,
    )
    current = target
    try:
        with anyio.fail_after(limits.total_timeout):
            for _ in range(limits.max_redirects + 1):
                try:
                    answer = await _get(pool, current, limits)
                except httpcore2.UnsupportedProtocol as error:
                    raise ToolError(f"cannot fetch {current.url}: {_one_line(error)}") from None
                except (
                    httpcore2.NetworkError,
                    httpcore2.TimeoutException,
                    httpcore2.ProtocolError,
                    httpcore2.ProxyError,
                ) as error:
                    raise _network_error(error, current, limits) from None
                if isinstance(answer, Fetched):
                    return answer
                status, location = answer
                following = parse_url(urljoin(current.url, location))
                if not _same_origin(target, following):
                    return Redirected(current.url, status, following.url)
                current = following
    except TimeoutError:
        raise ToolError(f"fetching {target.url} took longer than {limits.total_timeout:g} s") from None
    finally:
        with anyio.CancelScope(shield=True):
            await pool.aclose()
    raise ToolError(f"{target.url} redirected more than {limits.max_redirects} times")
