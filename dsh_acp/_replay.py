"""Reading a session log back: the updates that replay it to an editor, and the conversation
the model continues from.

Replay goes through the same pure bridge functions as the live run, fed with the logged views
and ``meta``, so a loaded session shows the same cards, titles, statuses, diffs and text. Output
that streamed live in many chunks replays as one; a call the log shows started but never finished
(the agent was killed) replays as ``failed``, never ``pending``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from dsh_tools import (
    ContentBlock,
    PlanView,
    TextBlock,
    ToolCallView,
    ToolResult,
    ToolResultView,
)

from ._bridge import CallInfo, RenderContext, announce_call, cancelled_call, finish_call
from ._model import AssistantMessage, ContextMessage, Message, ToolCallRequest, ToolResultMessage, UserMessage
from ._modes import PermissionState
from ._updates import (
    SessionUpdate,
    agent_message,
    agent_thought,
    compaction_update,
    session_info_update,
    usage_update,
    user_message_chunk,
)

__all__ = ["RestoredState", "replay_updates", "restore_state"]

_log = logging.getLogger("dsh_acp.replay")


@functools.cache
def _adapters() -> tuple[TypeAdapter[ContentBlock], TypeAdapter[ToolCallView], TypeAdapter[ToolResultView]]:
    return TypeAdapter(ContentBlock), TypeAdapter(ToolCallView), TypeAdapter(ToolResultView)


def _blocks(raw: Iterable[Any]) -> tuple[ContentBlock, ...]:
    adapter = _adapters()[0]
    out = []
    for item in raw:
        try:
            out.append(adapter.validate_python(item))
        except ValidationError:
            _log.warning("session log: skipping a content block that no longer validates")
    return tuple(out)


def _view(raw: Any, result: bool = False) -> Any:
    if raw is None:
        return None
    try:
        return _adapters()[2 if result else 1].validate_python(raw)
    except ValidationError:
        _log.warning("session log: a logged view no longer validates; using the generic card")
        return None


def replay_updates(events: Sequence[dict[str, Any]], render: RenderContext) -> list[SessionUpdate]:
    """The ``session/update`` payloads that bring an editor to where the live run left it."""
    updates: list[SessionUpdate] = []
    calls: dict[str, CallInfo] = {}
    open_calls: dict[str, CallInfo] = {}
    for event in events:
        kind = event.get("type")
        if kind == "user":
            for block in event.get("content", ()):
                updates.append(user_message_chunk(block, event.get("message_id")))
        elif kind == "assistant":
            if event.get("reasoning"):
                updates.append(agent_thought(event["reasoning"], event.get("thought_id")))
            if event.get("text"):
                updates.append(agent_message(event["text"], event.get("text_id")))
        elif kind == "compact":
            summary = event.get("summary", "")
            if render.compaction and event.get("compaction_id"):
                updates.append(compaction_update(event["compaction_id"], "completed", summary))
                continue
            updates.append(agent_message(summary, event.get("text_id")))
        elif kind == "usage":
            cost = float(event["cost"]) if event.get("cost") is not None else None
            updates.append(usage_update(event["used"], event["size"], cost))
        elif kind == "title" and event.get("title"):
            updates.append(session_info_update(event["title"], event.get("updated_at")))
        elif kind == "tool_call":
            info = CallInfo(
                call_id=event["call_id"],
                name=event["name"],
                arguments=event.get("arguments"),
                view=_view(event.get("view")),
                kind=event.get("kind", "other"),
                notice=event.get("notice") if isinstance(event.get("notice"), str) else None,
                cwd=event.get("cwd") if isinstance(event.get("cwd"), str) else None,
            )
            calls[info.call_id] = info
            if isinstance(info.view, PlanView):
                continue
            open_calls[info.call_id] = info
            updates.append(announce_call(info, "in_progress", render))
        elif kind == "tool_result":
            found = calls.get(event.get("call_id", ""))
            if found is None:
                continue
            info = found
            open_calls.pop(info.call_id, None)
            result = ToolResult(
                content=_blocks(event.get("content", ())),
                is_error=bool(event.get("is_error")),
                meta=event.get("meta"),
            )
            view = _view(event.get("view"), result=True)
            if event.get("cancelled") and not isinstance(info.view, PlanView):
                updates.extend(cancelled_call(info, render))
            else:
                updates.extend(finish_call(info, result, view, render, streamed=False))
    for info in open_calls.values():  # the agent stopped before these finished
        updates.extend(cancelled_call(info, render))
    return updates


@dataclass
class RestoredState:
    """What a session log restores besides the updates: the conversation and the settings."""

    history: list[Message] = field(default_factory=list)
    permissions: PermissionState = field(default_factory=PermissionState)
    mode: str | None = None
    """The last mode the session was switched to (``None``: it never was)."""
    model_id: str | None = None
    show_reasoning: bool = True
    title: str | None = None
    prompts: int = 0
    cost: str | None = None
    """The session's cost so far, as logged (a decimal string)."""
    effort: str | None = None


def restore_state(events: Sequence[dict[str, Any]]) -> RestoredState:
    """Rebuild the model's conversation (tool results in call order; a call without a result gets
    a cancelled one) and the session's mode, permission answers and title."""
    from ._approvals import migrate_key, rule_from_json
    from ._history import CANCELLED_TEXT

    state = RestoredState()
    pending: list[ToolCallRequest] = []
    results: dict[str, ToolResultMessage] = {}

    def settle() -> None:
        for call in pending:
            state.history.append(
                results.get(call.id)
                or ToolResultMessage(call.id, call.name, (TextBlock(text=CANCELLED_TEXT),), is_error=True)
            )
        pending.clear()
        results.clear()

    for event in events:
        kind = event.get("type")
        if kind in ("tool_call",):
            continue
        if kind == "tool_result":
            call_id = event.get("call_id", "")
            name = next((c.name for c in pending if c.id == call_id), "")
            results[call_id] = ToolResultMessage(
                call_id, name, _blocks(event.get("content", ())), bool(event.get("is_error"))
            )
            continue
        if kind in ("user", "assistant", "context", "compact"):
            settle()
        if kind == "user":
            state.prompts += 1
            if not event.get("command"):
                # A model command (``/init``) gave the model an instruction in place of the text.
                content = event.get("model_content") or event.get("content", ())
                state.history.append(UserMessage(_blocks(content)))
        elif kind == "assistant" and event.get("aside"):
            continue  # said to the user outside the model (a command's answer)
        elif kind == "compact":
            kept = event.get("kept") or 0  # an automatic compaction keeps the newest messages
            tail = state.history[-kept:] if isinstance(kept, int) and kept > 0 else []
            state.history[:] = [
                ContextMessage(f"Summary of the conversation so far:\n{event.get('summary', '')}"),
                *tail,
            ]
        elif kind == "usage" and event.get("cost") is not None:
            state.cost = str(event["cost"])
        elif kind == "config":
            state.model_id = event.get("model_id", state.model_id)
            state.show_reasoning = event.get("show_reasoning", state.show_reasoning)
            state.effort = event.get("reasoning_effort", state.effort)
        elif kind == "assistant":
            calls = tuple(
                ToolCallRequest(c["id"], c["name"], c["arguments"]) for c in event.get("tool_calls", ())
            )
            state.history.append(
                AssistantMessage(
                    text=event.get("text", ""), reasoning=event.get("reasoning", ""), tool_calls=calls
                )
            )
            pending.extend(calls)
        elif kind == "context":
            state.history.append(ContextMessage(event.get("text", "")))
        elif kind == "mode":
            state.mode = event.get("mode_id", state.mode)
        elif kind == "permission":
            rule = rule_from_json(event["match"]) if "match" in event else migrate_key(event.get("key"))
            if rule is not None:
                (state.permissions.allow if event.get("rule") == "allow" else state.permissions.reject).add(
                    rule
                )
        elif kind == "permission_removed":
            rule = rule_from_json(event.get("match"))
            if rule is not None:
                (
                    state.permissions.allow if event.get("rule") == "allow" else state.permissions.reject
                ).discard(rule)
        elif kind == "title":
            state.title = event.get("title")
    settle()
    return state
