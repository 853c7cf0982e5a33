"""What the server decides about a client message before the agent sees it, on both transports:
which session it is about, and whether a load may go ahead (see ``Hub.claim``)."""

from __future__ import annotations

from typing import Any, Final

from dsh_acp.rpc._errors import INVALID_PARAMS, INVALID_REQUEST

from ._channel import Channel, request_key
from ._hub import Hub

__all__ = ["SESSION_SCOPED", "admit", "client_name", "is_request_id", "session_of"]

SESSION_SCOPED: Final = frozenset(
    {
        "session/cancel",
        "session/close",
        "session/delete",
        "session/fork",
        "session/load",
        "session/prompt",
        "session/resume",
        "session/set_config_option",
        "session/set_mode",
        "session/set_model",
    }
)
"""Methods about one session: over HTTP they carry ``Acp-Session-Id`` (what the SDK's client sends)."""
_CLAIMING: Final = frozenset({"session/load", "session/resume"})


def is_request_id(value: Any) -> bool:
    return type(value) is int or type(value) is str


def client_name(message: Any) -> str:
    """The ``clientInfo.name`` an ``initialize`` gives (for the logs), cut to 100 characters."""
    params = message.get("params") if type(message) is dict else None
    info = params.get("clientInfo") if type(params) is dict else None
    name = info.get("name") if type(info) is dict else None
    return str(name)[:100] if name is not None else "?"


def session_of(message: dict[str, Any]) -> str | None:
    """The ``sessionId`` a client message's params name, if any."""
    params = message.get("params")
    session_id = params.get("sessionId") if type(params) is dict else None
    return session_id if type(session_id) is str else None


async def admit(hub: Hub, channel: Channel, message: dict[str, Any], session_id: str | None) -> bool:
    """Whether the agent gets this message of an initialized connection: a second ``initialize``
    and the load of a session a live connection holds are answered here instead. The answer of a
    request about a session goes to that session's stream (HTTP)."""
    method, request_id = message.get("method"), message.get("id")
    if type(method) is not str or not is_request_id(request_id):
        return True
    if channel.transport == "http":  # before any answer, which looks its stream up here
        channel.routes[request_key(request_id)] = session_id
    if method == "initialize":
        channel.answer(request_id, INVALID_REQUEST, "this connection is already initialized")
        return False
    if method in _CLAIMING and session_id is not None:
        problem = await hub.claim(channel, session_id)
        if problem is not None:
            channel.answer(request_id, INVALID_PARAMS, problem)
            return False
    return True
