"""The permission question of one tool call: answered by the remembered rules when they decide
it, else put to the user through the client (``session/request_permission``), and an "always"
answer kept, for the session or the project.

Loaded with the first question a session asks, not at start-up.
"""

from __future__ import annotations

import logging
import os
from typing import Final, Literal

import anyio

from dsh_acp.permissions._modes import PermissionState
from dsh_acp.permissions._permission_choices import Option, Question
from dsh_acp.rpc._errors import RpcError
from dsh_acp.session._events import PermissionAnswered
from dsh_acp.session._session import Session
from dsh_acp.wire._bridge import CallInfo
from dsh_tools import Allow, Ask, Deny, ToolExecution, shown_text

__all__ = ["PermissionQuestion"]

_log = logging.getLogger("dsh_acp.turn")


class PermissionQuestion:
    """What a person approving ``execution`` is asked (``question``: its subject, the notice
    and real directory its card shows) and the rules that may answer it already."""

    def __init__(self, session: Session, execution: ToolExecution, ask: Ask) -> None:
        self._session = session
        definition = session.registry.get(execution.name)
        subject = ask.subject or (definition.subject_of(execution) if definition is not None else None)
        self.question = Question.of(execution.name, subject, _roots(execution), ask.reason)
        rules = session.permissions
        project_allow, project_reject = rules.project.load() if rules.project is not None else ([], [])
        self._allow = [*rules.allow, *project_allow]
        self._reject = [*rules.reject, *project_reject]

    def remembered(self) -> Allow | Deny | None:
        """The answer the remembered rules give (a rejection first), or ``None``: ask."""
        rejected = self.question.rejected_by(self._reject)
        if rejected is not None:
            return Deny(f"the user chose to always reject {rejected.phrase()}; do not retry it")
        if self.question.allowed_by(self._allow) is not None:
            return Allow()
        return None

    async def ask(self, info: CallInfo) -> Allow | Deny:
        """Ask the user about the call whose card is ``info`` (already shown ``pending``)."""
        session = self._session
        rules = session.permissions
        options = self.question.options(
            self._allow, project=rules.project is not None, names_shown=session.render.option_names
        )
        params = session.dialect.permission(
            session.session_id, info, session.render, [option.wire() for option in options]
        )
        try:
            response = await session.io.request("session/request_permission", params)
        except RpcError as error:
            return Deny(f"the user's client declined to ask for permission ({_client_reason(error)})")
        outcome = response.get("outcome") if isinstance(response, dict) else None
        kind = outcome.get("outcome") if isinstance(outcome, dict) else None
        if kind == "cancelled":
            if session.turn is not None:
                session.turn.cancel()
            await anyio.lowlevel.checkpoint()  # raises: the turn's scope is cancelled
            return Deny("the turn was cancelled")
        option_id = outcome.get("optionId") if isinstance(outcome, dict) and kind == "selected" else None
        chosen = next((option for option in options if option.option_id == option_id), None)
        if chosen is None:
            return Deny(
                f"the permission answer was not understood ({_unread(outcome)}); the call was not run"
            )
        if chosen.remember:
            self._remember(chosen, rules)
        if chosen.kind in ("allow_once", "allow_always"):
            return Allow()
        return Deny("the user declined this call; do not retry it unchanged")

    def _remember(self, chosen: Option, rules: PermissionState) -> None:
        """Keep the rules an "always" answer covers: in the project's file when the user picked
        that, else in the session's log."""
        rule: Literal["allow", "reject"] = "allow" if chosen.kind == "allow_always" else "reject"
        if chosen.project and rules.project is not None:
            try:
                rules.project.add(rule, chosen.remember)
            except OSError as error:
                _log.warning("could not keep the answer for the project: %s", error)
        else:
            for remembered in chosen.remember:
                self._session.record(PermissionAnswered(rule, remembered.to_json()))


def _unread(outcome: object) -> str:
    """What was wrong with an answer, without printing it: the client is not to be trusted with
    the size or the depth of what the model reads (a repr of a deeply nested value raised
    ``RecursionError``, whose text reached the model)."""
    if not isinstance(outcome, dict):
        return f"its outcome is {type(outcome).__name__}, not an object"
    option_id = outcome.get("optionId")
    if isinstance(option_id, str):
        shown = shown_text(option_id[:_REASON_CHARS])
        return f"no option {shown!r} was offered"
    said = outcome.get("outcome")
    said = shown_text(said[:40]) if isinstance(said, str) else type(said).__name__
    return f"outcome {said!r} with no option that was offered"


def _roots(execution: ToolExecution) -> tuple[str, ...]:
    """The real paths of the session's folder and additional directories (the first is its cwd)."""
    cwd = (execution.cwd,) if execution.cwd else ()
    return tuple(os.path.realpath(root) for root in (*cwd, *execution.additional_directories))


_REASON_CHARS: Final = 300
"""A client's reason is cut here: the client is not to be trusted with the card's size."""


def _client_reason(error: RpcError) -> str:
    """The client's message and, when it says more there, its ``data.details``: acpx answers a
    prompt the user aborted as "Internal error" with the why ("Aborted with Ctrl+C") only in
    the details."""
    details = error.data.get("details") if isinstance(error.data, dict) else None
    said = error.message
    if isinstance(details, str) and details.strip() and details.strip() != said.strip():
        said = f"{said}: {details.strip()}"
    said = shown_text(" ".join(said.split()))
    return said if len(said) <= _REASON_CHARS else said[: _REASON_CHARS - 1] + "…"
