"""Who may talk to the agent: the bearer token, compared in constant time, and the browser origins
allowed (a page in a browser can reach a server on localhost; a client outside a browser sends no
``Origin``). Checked on every request and on the WebSocket upgrade, before anything is created.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Final

from dsh_acp.launch._listen import TOKEN_VARIABLE, ListenOptions

__all__ = ["Refusal", "refusal"]

_UNAUTHORIZED: Final = f"a valid bearer token is required: Authorization: Bearer <{TOKEN_VARIABLE}>"


class Refusal:
    """An HTTP answer instead of the request: its status, text and headers."""

    __slots__ = ("headers", "status", "text")

    def __init__(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.text = text
        self.headers = headers or {}


def refusal(headers: Mapping[str, str], options: ListenOptions) -> Refusal | None:
    """Why this request is refused (401 without the token, 403 from an origin not allowed), or
    ``None``. ``headers`` are looked up by lower-case name."""
    token = options.token
    if token is not None:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        # Both sides as bytes: compare_digest refuses non-ASCII text, and a header may hold any.
        presented = given.strip().encode("utf-8", "surrogateescape")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented, token.encode()):
            return Refusal(401, _UNAUTHORIZED, {"WWW-Authenticate": 'Bearer realm="dsh-acp"'})
    origin = headers.get("origin")
    if origin is not None and origin.strip().rstrip("/").lower() not in options.allowed_origins:
        return Refusal(403, f"origin {origin[:200]!r} is not allowed (dsh-acp --allow-origin ORIGIN)")
    return None
