"""``initialize`` in ACP v2: what the agent says it can do, and what it reads of the client.

v2 names the two sides ``info`` and ``capabilities``; its capabilities are objects (``{}``: yes)
rather than flags, and a client has no terminals or file system of its own to offer (the agent's
commands run in terminals it owns, its files on its disk). What a v2 client shows without asking:
notices, compactions, boolean options and agent terminals are part of the draft's baseline.

Light: no views, no pydantic (the answer is written on the agent's start-up path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsh_acp.wire._client_profile import ClientProfile

__all__ = ["client_profile", "initialize_result"]


def client_profile(capabilities: Any) -> ClientProfile:
    """The profile of a v2 client from its ``initialize`` ``capabilities``."""
    capabilities = capabilities if isinstance(capabilities, Mapping) else {}
    elicitation = capabilities.get("elicitation")
    auth = capabilities.get("auth")
    return ClientProfile(
        protocol=2,
        compaction=True,
        notices=True,
        questions=isinstance(elicitation, Mapping) and isinstance(elicitation.get("form"), Mapping),
        boolean_options=True,
        terminal_login=isinstance(auth, Mapping) and isinstance(auth.get("terminal"), Mapping),
    )


def _auth_method(method: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 ``authMethods`` entry as v2 spells it: every method has its ``type`` (``agent``: the
    agent handles it) and its id is ``methodId``."""
    out: dict[str, Any] = {"type": method.get("type", "agent"), "methodId": method["id"]}
    out.update((key, value) for key, value in method.items() if key not in ("type", "id"))
    return out


def initialize_result(
    *,
    images: bool,
    durable: bool,
    auth_methods: Sequence[Mapping[str, Any]],
    agent_info: Mapping[str, Any],
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The result of a v2 ``initialize``: ``images`` whether prompts may carry them, ``durable``
    whether sessions are kept (delete and fork need the store; list and resume are v2's
    baseline, and answer from an empty store without one). A prompt sent while a turn runs is
    held until its turn (v2's baseline: v1 needed a ``_meta`` key to say so)."""
    prompt: dict[str, Any] = {"image": {}} if images else {}
    prompt["embeddedContext"] = {}
    session: dict[str, Any] = {
        "prompt": prompt,
        "mcp": {"stdio": {}, "http": {}},
        "additionalDirectories": {},
    }
    if durable:
        session["delete"] = {}
        session["fork"] = {}  # unstable in v2 too (the package's schema.unstable.json)
    return {
        "protocolVersion": 2,
        "info": dict(agent_info),
        "capabilities": {"session": session, **({"_meta": dict(meta)} if meta else {})},
        "authMethods": [_auth_method(m) for m in auth_methods],
    }
