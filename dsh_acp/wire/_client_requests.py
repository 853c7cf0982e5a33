"""Every request the agent sends its client: ``session/request_permission``, ``fs/*``,
``terminal/*`` and ``elicitation/create`` params, as pure builders over typed dicts (the keys are
spelled once; the order they are written in is part of the wire)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypedDict

from dsh_acp._safe_text import visible

from ._updates import ToolCallCard

__all__ = [
    "CreateTerminalParams",
    "ElicitationParams",
    "EnvVariable",
    "PermissionOption",
    "PermissionParams",
    "ReadTextFileParams",
    "TerminalParams",
    "WriteTextFileParams",
    "create_terminal_params",
    "elicitation_params",
    "permission_params",
    "read_text_file_params",
    "terminal_params",
    "write_text_file_params",
]


class PermissionOption(TypedDict):
    optionId: str
    name: str
    kind: str


class PermissionParams(TypedDict):
    sessionId: str
    toolCall: ToolCallCard
    options: list[PermissionOption]


def permission_params(
    session_id: str, tool_call: ToolCallCard, options: Iterable[PermissionOption]
) -> PermissionParams:
    """``session/request_permission``: the call's card and the buttons to put on it (their names
    made ``visible``: a rule's path or command cannot hide what choosing it remembers)."""
    shown: list[PermissionOption] = [{**option, "name": visible(option["name"])} for option in options]
    return {"sessionId": session_id, "toolCall": tool_call, "options": shown}


class ReadTextFileParams(TypedDict):
    sessionId: str
    path: str


def read_text_file_params(session_id: str, path: str) -> ReadTextFileParams:
    """``fs/read_text_file``: a file as the editor has it (unsaved changes included)."""
    return {"sessionId": session_id, "path": path}


class WriteTextFileParams(TypedDict):
    sessionId: str
    path: str
    content: str


def write_text_file_params(session_id: str, path: str, content: str) -> WriteTextFileParams:
    """``fs/write_text_file``: a file written through the editor."""
    return {"sessionId": session_id, "path": path, "content": content}


class EnvVariable(TypedDict):
    name: str
    value: str


class CreateTerminalParams(TypedDict):
    sessionId: str
    command: str
    args: list[str]
    cwd: str
    env: list[EnvVariable]
    outputByteLimit: int


def create_terminal_params(
    session_id: str,
    command: str,
    args: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    output_byte_limit: int,
) -> CreateTerminalParams:
    """``terminal/create``: a command run in the client's terminal."""
    return {
        "sessionId": session_id,
        "command": command,
        "args": list(args),
        "cwd": cwd,
        "env": [{"name": name, "value": value} for name, value in env.items()],
        "outputByteLimit": output_byte_limit,
    }


class TerminalParams(TypedDict):
    sessionId: str
    terminalId: str


def terminal_params(session_id: str, terminal_id: str) -> TerminalParams:
    """``terminal/output``, ``wait_for_exit``, ``kill`` and ``release``: one terminal of the session."""
    return {"sessionId": session_id, "terminalId": terminal_id}


class ElicitationParams(TypedDict):
    sessionId: str
    toolCallId: str
    mode: Literal["form"]
    message: str
    requestedSchema: dict[str, Any]


def elicitation_params(
    session_id: str, call_id: str, message: str, schema: dict[str, Any]
) -> ElicitationParams:
    """``elicitation/create`` in form mode: a question to the user, asked for a tool call (its
    message and the form's labels made ``visible``; the values an answer carries stay exact)."""
    return {
        "sessionId": session_id,
        "toolCallId": call_id,
        "mode": "form",
        "message": visible(message, lines=True),
        "requestedSchema": _shown_labels(schema),
    }


def _shown_labels(schema: dict[str, Any]) -> dict[str, Any]:
    """A form's schema with every ``title`` (one line) and ``description`` made ``visible``. A
    form is flat (MCP's, or the ``ask_user`` tool's), so this goes a few levels deep at most."""
    shown: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "description") and isinstance(value, str):
            value = visible(value, lines=key == "description")
        elif isinstance(value, dict):
            value = _shown_labels(value)
        elif isinstance(value, list):
            value = [_shown_labels(item) if isinstance(item, dict) else item for item in value]
        shown[key] = value
    return shown
