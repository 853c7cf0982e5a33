"""Questions to the user through the editor: ACP ``elicitation/create`` in form mode, for
clients that advertise ``elicitation.form`` (the ``ask_user`` tool's ``UserQuestions``, and the
questions of the session's MCP servers)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

import anyio

from dsh_acp.rpc._errors import RpcError
from dsh_acp.session._events import SessionEvent, ToolCalled, ToolCancelled, ToolFinished
from dsh_acp.wire._bridge import CallInfo
from dsh_acp.wire._client_requests import elicitation_params
from dsh_tools import GenericCallView, TextBlock, ToolResult
from dsh_tools.questions import Answer, UserQuestions, answer_text

from ._form_answers import form_problem

if TYPE_CHECKING:
    from dsh_acp.session._session import Session

__all__ = ["MCP_QUESTION", "ClientQuestions", "McpQuestions"]

_log = logging.getLogger("dsh_acp.elicitation")

MCP_QUESTION = "mcp_question"
"""The tool name on the card of an MCP server's question (no tool of the model's: a card only)."""


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
            problem = form_problem(schema, content)
            if problem is not None:  # not what the user could have answered in that form
                _log.warning("elicitation answer refused: %s", problem)
                return Answer(
                    "cancel",
                    note=(
                        "The user's client sent an answer that does not fit the question "
                        f"({problem}): treat the question as unanswered."
                    ),
                )
            assert isinstance(content, dict)
            return Answer("accept", dict(content))
        return Answer("decline") if action == "decline" else Answer("cancel")


class McpQuestions:
    """The session's MCP servers' questions (``_mcp.AskUser``): each is its own card while it
    waits, as an ``ask_user`` question is, asked with that card's id, closed with the answer, and
    logged as a call and its result so a reload shows question and answer."""

    def __init__(self, session: Session, questions: UserQuestions, new_id: Callable[[], str]) -> None:
        self._session = session
        self._questions = questions
        self._new_id = new_id

    async def __call__(
        self, server: str, message: str, schema: dict[str, Any]
    ) -> tuple[Literal["accept", "decline", "cancel"], dict[str, Any]]:
        session = self._session
        view = GenericCallView(
            title=f"Question from {server}: {' '.join(message.split())[:120]}", kind="other"
        )
        info = CallInfo(
            call_id=f"question-{self._new_id()}",
            name=MCP_QUESTION,
            arguments={"server": server, "message": message},
            view=view,
        )
        self._record(
            ToolCalled(info.call_id, info.name, info.arguments, "other", view.model_dump(mode="json"))
        )
        for update in session.dialect.announce(info, "in_progress", session.render):
            await session.send(update)
        try:
            answer = await self._questions.ask(message, schema, info.call_id)
        except BaseException:
            with anyio.CancelScope(shield=True):  # the server gave up (or the session closed)
                self._record(ToolCancelled(info.call_id))
                for closing in session.dialect.cancelled(info, session.render):
                    await session.send(closing)
            raise
        said = answer_text(answer)
        result = ToolResult(content=(TextBlock(text=said),))
        self._record(ToolFinished(info.call_id, result.content))
        for update in session.dialect.finish(info, result, None, session.render):
            await session.send(update)
        return answer.action, answer.values

    def _record(self, event: SessionEvent) -> None:
        try:
            self._session.record(event)
        except Exception as error:  # outside a turn a log failure must not fail the server's call
            _log.warning("session log: a question was not logged: %s", error)
