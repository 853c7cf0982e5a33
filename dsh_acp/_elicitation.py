"""Questions to the user through the editor: ACP ``elicitation/create`` in form mode, for
clients that advertise ``elicitation.form`` (the ``ask_user`` tool's ``UserQuestions``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from dsh_tools.questions import Answer, UserQuestions

from ._client_requests import elicitation_params
from ._connection import RpcError

__all__ = ["ClientQuestions"]


class ClientQuestions(UserQuestions):
    """Asks through the session's client; an error or an unreadable answer counts as a dismissal."""

    def __init__(self, request: Callable[[str, Any], Awaitable[Any]], session_id: str) -> None:
        self._request = request
        self._session_id = session_id

    async def ask(self, message: str, schema: dict[str, Any], call_id: str) -> Answer:
        params = elicitation_params(self._session_id, call_id, message, schema)
        try:
            response = await self._request("elicitation/create", params)
        except RpcError:
            return Answer("cancel")
        action = response.get("action") if isinstance(response, dict) else None
        if action == "accept":
            content = response.get("content")
            return Answer("accept", dict(content) if isinstance(content, dict) else {})
        return Answer("decline") if action == "decline" else Answer("cancel")
