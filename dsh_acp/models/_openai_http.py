"""The HTTP side of the model client that aiohttp leaves to us: the timers of a streamed response,
the certificates trusted, and the proxy and credentials the environment gives a base URL."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import asyncio
    import ssl

    import aiohttp
    import yarl

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

    def __init__(self, content: aiohttp.StreamReader, deadline: float, first: float, stall: float) -> None:
        import asyncio

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
    import os
    import ssl

    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


@dataclass(frozen=True, slots=True)
class Route:
    """How the requests to one base URL go: the proxy the environment names for it, the headers
    for the proxy (its credentials), and the headers of each request (with the host's)."""

    proxy: yarl.URL | None
    proxy_headers: dict[str, str] | None
    headers: dict[str, str]


def route_from_env(base_url: str, headers: dict[str, str]) -> Route:
    """What aiohttp's ``trust_env`` looks up before every request (``HTTP(S)_PROXY`` and
    ``NO_PROXY``, then ``.netrc``, as curl does), looked up once: ``trust_env`` hands both lookups
    to a worker thread on every request, and adds ``.netrc`` credentials even to a request with an
    Authorization header, which aiohttp then refuses to send at all. ``.netrc`` is for requests
    without one (no API key) to a base URL without credentials of its own. Reads files: call it
    off the event loop.

    The request's headers are the requests' own, never the session's defaults: aiohttp sends a
    session's default headers to an explicit proxy too, and an Authorization among them would go
    to the proxy as its Proxy-Authorization (the API key, in the clear of a CONNECT)."""
    from aiohttp.helpers import basicauth_from_netrc, get_env_proxy_for_url, netrc_from_env
    from yarl import URL

    url = URL(base_url)
    proxy = proxy_headers = None
    with suppress(LookupError):
        proxy, proxy_auth = get_env_proxy_for_url(url)
        if proxy_auth is not None:
            # aiohttp moves the Authorization of the proxy's headers to Proxy-Authorization on
            # the hop the proxy reads (the request itself, or its CONNECT): what proxy_auth,
            # deprecated, did.
            proxy_headers = {"Authorization": proxy_auth.encode()}
    if "Authorization" not in headers and url.host is not None and url.user is None:
        with suppress(LookupError):
            netrc = basicauth_from_netrc(netrc_from_env(), url.host)
            headers = {**headers, "Authorization": netrc.encode()}
    return Route(proxy, proxy_headers, headers)
