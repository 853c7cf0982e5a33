"""Checks of meaning the schema cannot express: what real clients need beyond schema validity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["wire_problems"]


def _tool_calls(message: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The tool-call objects a message carries, each with where it was found."""
    params = message.get("params")
    if not isinstance(params, Mapping):
        return []
    method = message.get("method")
    if method == "session/update":
        update = params.get("update")
        if isinstance(update, Mapping) and update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            return [(str(update["sessionUpdate"]), update)]
    elif method == "session/request_permission":
        call = params.get("toolCall")  # v1
        if isinstance(call, Mapping):
            return [("session/request_permission toolCall", call)]
        subject = params.get("subject")  # v2: the call is the request's subject
        call = subject.get("toolCall") if isinstance(subject, Mapping) else None
        if isinstance(call, Mapping):
            return [("session/request_permission subject.toolCall", call)]
    return []


def wire_problems(message: Any) -> list[str]:
    """What is wrong with one agent message for real clients, one line per problem.

    ``rawInput`` must be a JSON object: the schema allows any value, but typed clients (Toad)
    reject a tool call or a permission request whose ``rawInput`` is a string, and the user
    then cannot approve the call at all. An error's human message must also be its
    ``data.details``: some clients (Toad) show ``data`` and not ``message``.
    """
    if not isinstance(message, Mapping):
        return []
    problems = []
    error = message.get("error")
    if isinstance(error, Mapping):
        data = error.get("data")
        details = data.get("details") if isinstance(data, Mapping) else None
        if details != error.get("message"):
            problems.append(
                f"error {error.get('code')!r}: its message must also be data.details "
                "(some clients show only data)"
            )
    for where, call in _tool_calls(message):
        if "rawInput" in call and not isinstance(call["rawInput"], Mapping):
            problems.append(
                f"{where} {call.get('toolCallId')!r}: rawInput must be a JSON object, "
                f"not {type(call['rawInput']).__name__} {str(call['rawInput'])[:60]!r}"
            )
    return problems
