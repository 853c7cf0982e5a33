"""``ask_user``: the agent asks the user a question (free text, one of some choices, or a small
form) and waits for the answer.

The tool reaches the user through the ``UserQuestions`` service the host registers for the
session (an ACP host asks with ``elicitation/create``); a host that cannot ask registers none and
should not offer the tool at all.
"""

from __future__ import annotations

from typing import Any

from dsh_tools import GenericCallView, ToolDefinition, ToolError, ToolExecution, define_tool, text
from dsh_tools.questions import UserQuestions, answer_text

__all__ = ["ask_user_tool"]

_FIELD_TYPES = ("string", "number", "integer", "boolean")


def _schema(args: dict[str, Any]) -> dict[str, Any]:
    choices = args.get("choices") or []
    fields = args.get("fields") or []
    if choices and fields:
        raise ToolError("give either choices or fields, not both")
    if choices:
        return {
            "type": "object",
            "properties": {
                "answer": {"type": "string", "title": "Answer", "enum": [str(c) for c in choices]}
            },
            "required": ["answer"],
        }
    if not fields:
        return {
            "type": "object",
            "properties": {"answer": {"type": "string", "title": "Answer"}},
            "required": ["answer"],
        }
    properties: dict[str, Any] = {}
    for item in fields:
        name, kind = item["name"], item.get("type", "string")
        if kind not in _FIELD_TYPES:
            raise ToolError(f"field {name!r}: type must be one of {', '.join(_FIELD_TYPES)}")
        if name in properties:
            raise ToolError(f"field {name!r} is given twice")
        properties[name] = {"type": kind, "title": item.get("title") or name}
        if item.get("description"):
            properties[name]["description"] = item["description"]
    return {"type": "object", "properties": properties, "required": list(properties)}


async def _ask(args: dict[str, Any], execution: ToolExecution) -> list[Any]:
    questions = execution.services.get(UserQuestions)  # type: ignore[type-abstract]
    if questions is None:
        raise ToolError("this editor cannot ask the user questions; decide yourself or say what you need")
    schema = _schema(args)
    answer = await questions.ask(args["question"], schema, execution.call_id)
    return [text(answer_text(answer))]


def _present(args: dict[str, Any]) -> GenericCallView:
    question = " ".join(str(args.get("question", "")).split())
    return GenericCallView(title=f"Question: {question[:120]}", kind="other")


def ask_user_tool() -> ToolDefinition:
    """The ``ask_user`` tool (offer it only where the host registers ``UserQuestions``)."""
    return define_tool(
        name="ask_user",
        # When to ask (ambiguity, risk) the system prompt says; what is optional, the schema.
        description=(
            "Ask the user and wait, when a decision is theirs rather than a guess. choices: pick one; "
            "fields: a small form; neither: free text. The user may decline."
        ),
        parameters={
            "question": {
                "type": "string",
                "required": True,
                "description": "One or two sentences.",
            },
            "choices": {"type": "array", "items": {"type": "string"}},
            "fields": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "required": True},
                        "type": {"type": "string", "enum": list(_FIELD_TYPES)},
                        "title": {"type": "string"},
                        "description": {"type": "string"},
                    },
                },
            },
        },
        execute=_ask,
        present_call=_present,
        kind="other",
        read_only=True,
        parallel_safe=False,
    )
