"""The policies of the model client's HTTP: the timers of a streamed response, the certificates
trusted, and the proxy and credentials the environment gives a base URL."""

from __future__ import annotations

import asyncio
import base64
import logging
import netrc
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from ._http1 import Response

_log = logging.getLogger("dsh_acp.models._openai")

__all__ = ["Route", "StreamTimeout", "Watchdog", "Why", "route_from_env", "tls_context"]


class StreamTimeout(Exception):
    """Set on the response's byte stream by the watchdog: the read that waits for it ends."""

    def __init__(self, why: Why) -> None:
        super().__init__(why)
        self.why = why


Why = Literal["first", "stall", "deadline"]


class Watchdog:
    """The timers of one response, kept by one event-loop callback instead of a timeout scope
    per read: a read costs a clock reading, and the callback wakes about once per stall period
    (the times only move later, except at ``begin``, which sets the callback again).

    Before the answer begins, the first-event timer (restarted by progress events); then the
    stall timer, counted from the start of each read (the time the consumer takes between
    reads is not the server's silence); always the whole request's deadline. When one runs out
    during a read, the reader gets ``StreamTimeout``: a stream exception, so nothing is cancelled
    (between reads the generator may be suspended at a ``yield``, and its consumer's awaits
    are not ours to cut).

    The reader says when a read begins and ends by setting ``read_since`` (the ``clock``'s time)
    and ``reading``: attributes, not method calls, since a model's every token is a read.
    """

    def __init__(self, content: Response, deadline: float, first: float, stall: float) -> None:
        self._loop = loop = asyncio.get_running_loop()
        # The loop's clock; asyncio's own is time.monotonic, called directly (no method frame).
        self.clock: Callable[[], float] = (
            time.monotonic if type(loop).time is asyncio.BaseEventLoop.time else loop.time
        )
        self._content = content
        self._deadline = deadline
        self._first = first
        self._stall = stall
        self.begun = False
        self.reading = False
        """True from the start of a read to its end."""
        self.read_since = loop.time()
        """When the last read began: the stall timer counts from then."""
        self._first_by = self.read_since + first
        self._handle: asyncio.TimerHandle | None = loop.call_at(self._due()[0], self._check)

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
            limit, why = self.read_since + self._stall, "stall"
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
            self._content.set_exception(StreamTimeout(why))
            return
        self._handle = self._loop.call_at(due, self._check)


def tls_context() -> ssl.SSLContext:
    """The certificates httpx and requests trust: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set,
    else the certifi bundle (the same on every platform, whatever the system store holds)."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi  # with importlib.resources: not carried by an agent whose model speaks http:

    return ssl.create_default_context(cafile=certifi.where())


@dataclass(frozen=True, slots=True)
class Route:
    """How the requests to one base URL go: the proxy the environment names for it (its URL
    without credentials), the headers for the proxy (its credentials), and the headers of each
    request."""

    proxy: str | None
    proxy_headers: dict[str, str] | None
    headers: dict[str, str]


def route_from_env(base_url: str, headers: dict[str, str]) -> Route:
    """The proxy of the environment for the base URL (``HTTP(S)_PROXY`` and ``NO_PROXY``, as
    curl reads them; the proxy's credentials from its URL, else from ``.netrc``), and ``.netrc``'s
    credentials for a request without an Authorization of its own (no API key) to a base URL
    without credentials of its own. Looked up once per model; reads files: call it off the event
    loop.

    The proxy's credentials go to the proxy alone: on the request itself when it is forwarded,
    on the CONNECT when it is tunnelled (which carries nothing of the request's headers, so the
    API key never reaches the proxy)."""
    # Not at the top: urllib.request brings http.client and the email package, which weigh on
    # an idle agent (bench_agent's idle RSS); this runs once, at the first request.
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(base_url)
    entries = _netrc()
    found = getproxies().get(parts.scheme) if parts.hostname and not proxy_bypass(parts.hostname) else None
    proxy, proxy_headers = _proxy(found, entries) if found else (None, None)
    if "Authorization" not in headers and parts.hostname and parts.username is None and entries is not None:
        user = _netrc_user(entries, parts.hostname)
        if user is not None:
            headers = {**headers, "Authorization": _basic(*user)}
    return Route(proxy, proxy_headers, headers)


def _proxy(found: str, entries: netrc.netrc | None) -> tuple[str | None, dict[str, str] | None]:
    """The proxy an environment variable names, as ``http://host:port``, and the header that
    carries its credentials (from its URL, else from ``.netrc``)."""
    via = urlsplit(found if "://" in found else f"http://{found}")
    if via.scheme != "http" or not via.hostname:
        # A TLS connection to the proxy itself is not spoken here.
        _log.warning("ignoring the proxy %s: only http:// proxies are supported", via.hostname or found)
        return None, None
    port = f":{via.port}" if via.port else ""
    host = f"[{via.hostname}]" if ":" in via.hostname else via.hostname
    user = (unquote(via.username or ""), unquote(via.password or "")) if via.username else None
    if user is None and entries is not None:
        user = _netrc_user(entries, via.hostname)
    return f"http://{host}{port}", None if user is None else {"Proxy-Authorization": _basic(*user)}


def _netrc() -> netrc.netrc | None:
    """The ``.netrc`` curl reads: ``NETRC``'s file, else the home directory's (None where there is
    none, or it does not parse)."""
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        return netrc.netrc(path)
    except (OSError, netrc.NetrcParseError):
        return None


def _netrc_user(entries: netrc.netrc, host: str) -> tuple[str, str] | None:
    found = entries.authenticators(host)
    return None if found is None else (found[0] or "", found[2] or "")


def _basic(login: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode("ascii")
