"""The ``UserQuestions`` seam: a tool asks the user of its session a question and waits.

A host that can reach the user (an ACP host through ``elicitation/create``) registers a
``UserQuestions`` in the session's ``Services``; a tool looks it up with
``execution.services.get(UserQuestions)``. A host that cannot ask registers none, and should
not offer a tool that needs it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Answer", "UserQuestions", "answer_text"]


@dataclass(frozen=True, slots=True)
class Answer:
    """What the user did with a question: answered it (``values``, by field name), declined it,
    or dismissed it (``cancel``)."""

    action: Literal["accept", "decline", "cancel"]
    values: dict[str, Any] = field(default_factory=dict)
    note: str | None = None
    """What the model is told instead of the usual words (an answer the host refused)."""


class UserQuestions(ABC):
    """Asks the user of a session (the host's service; register it as ``UserQuestions``)."""

    @abstractmethod
    async def ask(self, message: str, schema: dict[str, Any], call_id: str) -> Answer:
        """Show ``message`` with a form described by ``schema`` (a flat JSON Schema object of
        primitive properties) and wait for the answer."""


def answer_text(answer: Answer) -> str:
    """What an answer says, to the model and on the question's card."""
    if answer.note is not None:
        return answer.note
    if answer.action == "decline":
        return "The user declined to answer."
    if answer.action == "cancel":
        return "The user dismissed the question without answering."
    values = answer.values
    shown = (
        str(values["answer"])
        if set(values) == {"answer"}
        else "\n".join(f"{name}: {value}" for name, value in values.items())
    )
    return f"The user answered:\n{shown}"
