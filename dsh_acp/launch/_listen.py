"""What ``--listen`` asks for: the address, the token, and the limits of each network connection.

Read and checked before anything is served: a listener reachable from other machines without a
token, or one on loopback without a token and without ``--no-auth``, never starts. Only the
standard library here: the server stack (``dsh_acp.remote``) is imported by the command alone,
once these checks passed.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["TOKEN_VARIABLE", "ListenError", "ListenOptions", "listen_options"]

TOKEN_VARIABLE = "DSH_ACP_TOKEN"
"""The environment variable that holds the bearer token clients must send."""
MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused: a guessable token is no lock."""


class ListenError(ValueError):
    """The listener must not start; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class ListenOptions:
    """One network listener and the limits of each connection it accepts."""

    host: str
    port: int
    token: str | None
    """The bearer token clients send (``None`` only with ``--no-auth`` on loopback)."""
    allowed_origins: frozenset[str] = frozenset()
    """``Origin`` values accepted (a request without ``Origin``, a non-browser client, is accepted)."""
    grace: float = 30.0
    """Seconds a connection whose client is gone keeps its turns running before they are cancelled."""
    idle_timeout: float = 3600.0
    """Seconds without a message either way and no request running before a connection is closed
    (0: never)."""
    max_pending_requests: int = 64
    """Requests of one connection being handled at once; more are answered with an error."""
    max_buffered_bytes: int = 64 * 1024 * 1024
    """Output one connection may hold for a client that does not read it; past it, it is closed."""
    initialize_timeout: float = 30.0
    """Seconds an HTTP ``initialize`` waits for its answer."""

    @property
    def url(self) -> str:
        """The endpoint, as a client names it (the port is the one asked for)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/acp"


def listen_options(
    address: str,
    *,
    no_auth: bool,
    origins: Sequence[str] = (),
    grace: float = 30.0,
    idle_timeout: float = 3600.0,
    environ: Mapping[str, str] | None = None,
) -> ListenOptions:
    """The checked options of ``--listen ADDRESS``; ``ListenError`` says why it must not start."""
    host, port = _split_address(address)
    environ = os.environ if environ is None else environ
    token = environ.get(TOKEN_VARIABLE) or None
    if token is None:
        _check_no_token(address, host, no_auth)
    else:
        _check_token(token)
    if grace < 0 or idle_timeout < 0:
        raise ListenError("--grace and --idle-timeout take seconds, 0 or more")
    return ListenOptions(
        host=host,
        port=port,
        token=token,
        allowed_origins=frozenset(_origin(origin) for origin in origins),
        grace=grace,
        idle_timeout=idle_timeout,
    )


def _check_no_token(address: str, host: str, no_auth: bool) -> None:
    """Serving without a token: only on this machine, and only when asked to."""
    if not _is_loopback(host):
        raise ListenError(
            f"--listen {address} is reachable from other machines: set {TOKEN_VARIABLE} to the bearer "
            "token clients must send"
        )
    if not no_auth:
        raise ListenError(
            f"--listen {address}: set {TOKEN_VARIABLE} to the bearer token clients must send, or give "
            "--no-auth to serve this machine's users without one"
        )


def _check_token(token: str) -> None:
    if len(token) < MIN_TOKEN_CHARS:
        raise ListenError(
            f"{TOKEN_VARIABLE} is shorter than {MIN_TOKEN_CHARS} characters: use a long random one "
            "(openssl rand -hex 32)"
        )
    if not (token.isascii() and token.isprintable() and " " not in token):
        raise ListenError(
            f"{TOKEN_VARIABLE} must be printable ASCII without spaces (an HTTP header carries it)"
        )


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ListenError(f"--listen takes HOST:PORT (127.0.0.1:8765, [::1]:8765), not {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ListenError(f"--listen: write an IPv6 address in brackets, as [{host}]:{port_text}")
    return host, int(port_text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def _origin(origin: str) -> str:
    """An allowed origin as browsers send it: scheme://host[:port], lower case, no slash."""
    value = origin.strip().rstrip("/").lower()
    if "://" not in value:
        raise ListenError(f"--allow-origin takes an origin such as https://example.com, not {origin!r}")
    return value
