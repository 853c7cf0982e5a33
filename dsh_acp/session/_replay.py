"""Replay: the ``session/update`` payloads that bring an editor to where a logged session left it.

A pure map from the log's events to updates, through the same bridge functions as the live run.
A tool call's card is drawn again by its tool: ``present_call`` runs on the logged arguments and
``present_result`` on the logged arguments, result content, error flag and ``meta``, so a replayed
card is what the tool shows today for what happened. Only when the tool is not registered (its MCP
server is gone, the tool was removed) does the card come from the view the log kept of the live
run. A call that had no view live (its arguments were refused, its presenter failed) has none on
replay either.

Output that streamed live in many chunks replays as one; a call the log shows started but never
finished (the agent was killed) replays as ``failed``, never ``pending``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from dsh_acp.wire._bridge import (
    CallInfo,
    RenderContext,
    announce_call,
    cancelled_call,
    finish_call,
    wire_block,
)
from dsh_acp.wire._updates import (
    SessionUpdate,
    agent_message,
    agent_thought,
    compaction_update,
    session_info_update,
    usage_update,
    user_message_chunk,
)

from ._events import (
    AssistantReply,
    Compacted,
    SessionEvent,
    TitleSet,
    ToolCalled,
    ToolCancelled,
    ToolFinished,
    UsageReported,
    UserPrompt,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from dsh_tools import ToolCallView, ToolDefinition, ToolRegistry, ToolResultView

__all__ = ["replay_updates"]

_log = logging.getLogger("dsh_acp.replay")


@functools.cache
def _adapters() -> tuple[TypeAdapter[ToolCallView], TypeAdapter[ToolResultView]]:
    from pydantic import TypeAdapter

    from dsh_tools import ToolCallView, ToolResultView

    return TypeAdapter(ToolCallView), TypeAdapter(ToolResultView)


def _logged_view(raw: dict[str, Any] | None, result: bool = False) -> Any:
    """The view the log kept (the tool is gone); ``None`` if it no longer validates."""
    if raw is None:
        return None
    from pydantic import ValidationError

    try:
        return _adapters()[1 if result else 0].validate_python(raw)
    except ValidationError:
        _log.warning("session log: a logged view no longer validates; using the generic card")
        return None


class _Call:
    __slots__ = ("definition", "info", "plan")

    def __init__(self, info: CallInfo, definition: ToolDefinition | None, plan: bool) -> None:
        self.info = info
        self.definition = definition
        self.plan = plan


def replay_updates(
    events: Iterable[SessionEvent], render: RenderContext, tools: ToolRegistry | None = None
) -> Iterator[SessionUpdate]:
    """The updates that replay ``events`` to a client with ``render``; ``tools`` present the calls
    of tools they have (without it, every card comes from the log)."""
    # Imported once per replay, not once per event (an import statement costs as much as a
    # small event's whole replay).
    from dsh_tools import PlanView, ToolResult

    calls: dict[str, _Call] = {}
    open_calls: dict[str, CallInfo] = {}
    lookup = tools.get if tools is not None else None
    for event in events:
        kind = type(event)
        if kind is ToolCalled:
            assert isinstance(event, ToolCalled)
            definition = lookup(event.name) if lookup is not None else None
            if event.view is None:
                view = None  # it had no card of its own live: none now either
            elif definition is not None:
                view = definition.call_view(event.arguments)
            else:
                view = _logged_view(event.view)
            info = CallInfo(
                call_id=event.call_id,
                name=event.name,
                arguments=event.arguments,
                view=view,
                kind=event.kind,
                notice=event.notice,
                cwd=event.cwd,
            )
            call = calls[event.call_id] = _Call(info, definition, isinstance(view, PlanView))
            if call.plan:
                continue
            open_calls[event.call_id] = info
            yield announce_call(info, "in_progress", render)
        elif kind is ToolFinished:
            assert isinstance(event, ToolFinished)
            # A call ends once (a result or a cancel): its card is dropped then, not kept to the
            # end of the replay (a long load would hold every card, amid the conversation it keeps).
            found = calls.pop(event.call_id, None)
            if found is None:
                continue
            open_calls.pop(event.call_id, None)
            result = ToolResult(content=event.content, is_error=event.is_error, meta=event.meta)
            if event.view is None:
                result_view = None
            elif found.definition is not None:
                result_view = found.definition.result_view(found.info.arguments, result)
            else:
                result_view = _logged_view(event.view, result=True)
            yield from finish_call(found.info, result, result_view, render, streamed=False)
        elif kind is ToolCancelled:
            assert isinstance(event, ToolCancelled)
            found = calls.pop(event.call_id, None)
            if found is None:
                continue
            open_calls.pop(event.call_id, None)
            if not found.plan:
                yield from cancelled_call(found.info, render)
                continue
            from dsh_acp.models._history import CANCELLED_TEXT
            from dsh_tools import TextBlock

            cancelled = ToolResult(content=(TextBlock(text=CANCELLED_TEXT),), is_error=True)
            yield from finish_call(found.info, cancelled, None, render, streamed=False)
        elif kind is AssistantReply:
            assert isinstance(event, AssistantReply)
            if event.reasoning:
                yield agent_thought(event.reasoning, event.thought_id)
            if event.text:
                yield agent_message(event.text, event.text_id)
        elif kind is UsageReported:
            assert isinstance(event, UsageReported)
            yield usage_update(event.used, event.size, float(event.cost) if event.cost is not None else None)
        elif kind is UserPrompt:
            assert isinstance(event, UserPrompt)
            for block in event.content:
                yield user_message_chunk(wire_block(block), event.message_id)
        elif kind is Compacted:
            assert isinstance(event, Compacted)
            if render.compaction and event.compaction_id:
                yield compaction_update(event.compaction_id, "completed", event.summary)
            else:
                yield agent_message(event.summary, event.text_id)
        elif kind is TitleSet:
            assert isinstance(event, TitleSet)
            yield session_info_update(event.title, event.updated_at)
    for info in open_calls.values():  # the agent stopped before these finished
        yield from cancelled_call(info, render)
