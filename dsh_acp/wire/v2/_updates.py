"""The ``session/update`` payloads of ACP v2 that v1 does not have, or spells otherwise.

Pure builders over dicts, keys in one fixed order (the goldens pin every byte), as in v1's
``dsh_acp.wire._updates`` — whose builders serve v2 unchanged where the two agree: message
chunks (v2 requires their ``messageId``: every caller gives one), ``session_info_update``,
``usage_update``, ``notice``, ``compaction_update`` and ``compaction_summary_chunk``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from dsh_acp.wire._updates import ConfigOption, PlanEntry, ToolCallFields, WireBlock

__all__ = [
    "PLAN_ID",
    "StopReason",
    "ToolCallStatus",
    "Update",
    "available_commands",
    "config_option",
    "config_option_update",
    "plan_update",
    "replayed_message",
    "state_idle",
    "state_running",
    "terminal_output_chunk",
    "terminal_update",
    "tool_call_upsert",
    "user_message",
]

ToolCallStatus = Literal["pending", "in_progress", "completed", "failed", "cancelled"]
Update = dict[str, Any]
"""One v2 ``session/update`` payload (the ``update`` of the notification), or another v2 object."""
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"]

PLAN_ID = "plan"
"""The id of the session's one plan (v2 names plans; the agent keeps one per session)."""


def user_message(message_id: str, blocks: Sequence[WireBlock]) -> Update:
    """The user's message, whole: the echo of a prompt as it is inserted, and its replay."""
    return {"sessionUpdate": "user_message", "messageId": message_id, "content": list(blocks)}


def replayed_message(kind: Literal["agent_message", "agent_thought"], message_id: str, text: str) -> Update:
    """An agent message or thought, whole (a replay sends each once, not in the chunks it streamed in)."""
    return {"sessionUpdate": kind, "messageId": message_id, "content": [{"type": "text", "text": text}]}


def state_running() -> Update:
    """Foreground work began (a prompt's turn)."""
    return {"sessionUpdate": "state_update", "state": "running"}


def state_idle(stop_reason: StopReason | None = None, error: Mapping[str, Any] | None = None) -> Update:
    """No foreground work: a turn ended (``stop_reason``, and the ``error`` object when it is
    ``error``), or the snapshot a resume sends."""
    update: Update = {"sessionUpdate": "state_update", "state": "idle"}
    if stop_reason is not None:
        update["stopReason"] = stop_reason
    if error is not None:
        update["error"] = dict(error)
    return update


def tool_call_upsert(fields: ToolCallFields, status: ToolCallStatus | None = None) -> Update:
    """A tool call created or changed: v2's one update for both (only the fields given change)."""
    update: dict[str, Any] = {"sessionUpdate": "tool_call_update", **fields}
    if status is not None:
        update["status"] = status
    return update


def _base64(text: str) -> str:
    # Output is text with undecodable bytes shown as ``\xNN`` (the same text the model saw).
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")


def terminal_update(
    terminal_id: str,
    *,
    command: str | None = None,
    cwd: str | None = None,
    output: str | None = None,
    exit_code: int | None = None,
    signal: str | None = None,
    exited: bool = False,
) -> Update:
    """An agent-owned terminal created or changed: its command and folder, a snapshot of its
    whole ``output`` (a replay), its exit (``exited``: the exit code or signal, when known)."""
    update: Update = {"sessionUpdate": "terminal_update", "terminalId": terminal_id}
    if command is not None:
        update["command"] = command
    if cwd is not None:
        update["cwd"] = cwd
    if output is not None:
        update["output"] = {"data": _base64(output)}
    if exited:
        status: dict[str, Any] = {}
        if exit_code is not None:
            status["exitCode"] = exit_code
        if signal is not None:
            status["signal"] = signal
        update["exitStatus"] = status
    return update


def terminal_output_chunk(terminal_id: str, data: str) -> Update:
    """Output appended to an agent-owned terminal."""
    return {"sessionUpdate": "terminal_output_chunk", "terminalId": terminal_id, "data": _base64(data)}


def plan_update(entries: Iterable[PlanEntry]) -> Update:
    """The session's plan: the complete list of entries, every time."""
    return {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": PLAN_ID, "entries": list(entries)},
    }


def available_commands(commands: Iterable[tuple[str, str, str | None]]) -> list[dict[str, Any]]:
    """The ``availableCommands`` of a session's answer and of its updates."""
    return [
        {
            "type": "command",
            "name": name,
            "description": description,
            **({"input": {"type": "text", "hint": hint}} if hint else {}),
        }
        for name, description, hint in commands
    ]


def config_option(option: ConfigOption) -> Update:
    """A config option as v2 spells it (``configId`` for v1's ``id``; the rest is the same)."""
    return {("configId" if key == "id" else key): value for key, value in option.items()}


def config_option_update(options: Iterable[ConfigOption]) -> Update:
    """The complete list of the session's config options, after one of them changed."""
    return {"sessionUpdate": "config_option_update", "configOptions": [config_option(o) for o in options]}
