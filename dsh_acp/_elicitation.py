"""Questions to the user through the editor: ACP ``elicitation/create`` in form mode, for
clients that advertise ``elicitation.form`` (the ``ask_user`` tool's ``UserQuestions``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from dsh_tools.questions import Answer, UserQuestions

from ._connection import RpcError

__all__ = ["ClientQuestions", "can_ask"]


def can_ask(client_capabilities: Mapping[str, Any]) -> bool:
    """Whether the client advertised form elicitation (``elicitation.form``)."""
    elicitation = client_capabilities.get("elicitation")
    return isinstance(elicitation, Mapping) and isinstance(elicitation.get("form"), Mapping)


class ClientQuestions(UserQuestions):
    """Asks through the session's client; an error or an unreadable answer counts as a dismissal."""

    def __init__(self, request: Callable[[str, Any], Awaitable[Any]], session_id: str) -> None:
        self._request = request
        self._session_id = session_id

    async def ask(self, message: str, schema: dict[str, Any], call_id: str) -> Answer:
        params = {
            "sessionId": self._session_id,
            "toolCallId": call_id,
            "mode": "form",
            "message": message,
            "requestedSchema": schema,
        }
        try:
            response = await self._request("elicitation/create", params)
        except RpcError:
            return Answer("cancel")
        action = response.get("action") if isinstance(response, dict) else None
        if action == "accept":
            content = response.get("content")
            return Answer("accept", dict(content) if isinstance(content, dict) else {})
        return Answer("decline") if action == "decline" else Answer("cancel")
