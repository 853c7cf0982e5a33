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

A subagent's calls (``TaskEvent``s) are drawn the same way and shown as live: as cards marked with
their task for a client that nests them, else folded into the lines of the task's card, which
its result or cancel then shows (``wire._steps``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, assert_never

from pydantic import TypeAdapter, ValidationError

from dsh_acp.models._history import CANCELLED_TEXT
from dsh_acp.wire._bridge import CallInfo, RenderContext
from dsh_acp.wire._dialect import Dialect, Update
from dsh_acp.wire._dialect_of import dialect_of
from dsh_acp.wire._steps import StepList, nested
from dsh_acp.wire._updates import (
    STEP_BREAK,
    agent_message,
    compaction_update,
    session_info_update,
    usage_update,
)
from dsh_tools import PlanView, TextBlock, ToolCallView, ToolResult, ToolResultView

from ._events import (
    AssistantReply,
    Compacted,
    ConfigChanged,
    CostReported,
    FileChanged,
    FilesRestored,
    ModeChanged,
    PermissionAnswered,
    PermissionRemoved,
    SessionEvent,
    TaskEvent,
    TitleSet,
    ToolCalled,
    ToolCancelled,
    ToolContext,
    ToolFinished,
    TurnStopped,
    UsageReported,
    UserPrompt,
)

if TYPE_CHECKING:
    from dsh_tools import ToolDefinition, ToolRegistry

__all__ = ["replay_updates", "restored_card"]

_log = logging.getLogger("dsh_acp.replay")


@functools.cache
def _adapters() -> tuple[TypeAdapter[ToolCallView], TypeAdapter[ToolResultView]]:
    return TypeAdapter(ToolCallView), TypeAdapter(ToolResultView)


def _logged_view(raw: dict[str, Any] | None, result: bool = False) -> Any:
    """The view the log kept (the tool is gone); ``None`` if it no longer validates."""
    if raw is None:
        return None

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


class _Replay:
    """The cards of one replay (or of one subagent's calls in it): each call's, from its
    announcement to its end."""

    __slots__ = ("calls", "dialect", "ids", "lookup", "open_calls", "render", "tasks", "texted")

    def __init__(self, render: RenderContext, lookup: Callable[[str], ToolDefinition | None] | None) -> None:
        self.render = render
        self.dialect: Dialect = dialect_of(render)
        self.ids = _LoggedIds(self.dialect.version == 2)
        self.lookup = lookup
        self.calls: dict[str, _Call] = {}
        self.open_calls: dict[str, CallInfo] = {}
        """The calls announced and not yet ended, in order (plans are not announced)."""
        self.texted = False
        """Whether a model step of the turn being replayed sent text (as the live turn tracks)."""
        self.tasks: dict[str, _Task] = {}
        """The subagents of the calls still open that have one."""

    def called(self, event: ToolCalled) -> Iterator[Update]:
        definition = self.lookup(event.name) if self.lookup is not None else None
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
        call = self.calls[event.call_id] = _Call(info, definition, isinstance(view, PlanView))
        if not call.plan:
            self.open_calls[event.call_id] = info
            yield from self.dialect.announce(info, "in_progress", self.render)

    def _ended(self, call_id: str) -> _Call | None:
        # A call ends once (a result or a cancel): its card is dropped then, not kept to the end
        # of the replay (a long load would hold every card, amid the conversation it keeps).
        self.open_calls.pop(call_id, None)
        return self.calls.pop(call_id, None)

    def _task_ended(self, call_id: str) -> tuple[list[Update], StepList | None]:
        """The updates that close the subagent's calls of the call ``call_id`` (they end before
        it does) and the lines they leave it, if it had a subagent."""
        task = self.tasks.pop(call_id, None)
        if task is None:
            return [], None
        return list(task.ended()), task.steps

    def finished(self, event: ToolFinished) -> Iterator[Update]:
        closing, steps = self._task_ended(event.call_id)
        yield from closing
        found = self._ended(event.call_id)
        if found is None:
            return
        result = ToolResult(content=event.content, is_error=event.is_error, meta=event.meta)
        if event.view is None:
            result_view = None
        elif found.definition is not None:
            result_view = found.definition.result_view(found.info.arguments, result)
        else:
            result_view = _logged_view(event.view, result=True)
        yield from self.dialect.finish(
            found.info, result, result_view, self.render, streamed=False, steps=steps
        )

    def cancelled(self, event: ToolCancelled) -> Iterator[Update]:
        closing, steps = self._task_ended(event.call_id)
        yield from closing
        found = self._ended(event.call_id)
        if found is None:
            return
        if not found.plan:
            yield from self.dialect.cancelled(found.info, self.render, steps=steps)
            return
        cancelled = ToolResult(content=(TextBlock(text=CANCELLED_TEXT),), is_error=True)
        yield from self.dialect.finish(found.info, cancelled, None, self.render, streamed=False)

    def compacted(self, event: Compacted) -> Update:
        if self.render.compaction and event.compaction_id:
            return compaction_update(event.compaction_id, "completed", event.summary)
        return agent_message(event.summary, self.ids.of(event.text_id))

    def reply(self, event: AssistantReply) -> list[Update]:
        text = event.text
        if text and not event.aside:  # an aside is a command's answer: a turn of its own, no model step
            text = STEP_BREAK + text if self.texted else text
            self.texted = True
        text_id = self.ids.of(event.text_id) if text else event.text_id
        thought_id = self.ids.of(event.thought_id) if event.reasoning else event.thought_id
        return self.dialect.replayed_reply(text, text_id, event.reasoning, thought_id)

    def prompt(self, event: UserPrompt) -> list[Update]:
        self.texted = False
        return self.dialect.replayed_prompt(self.ids.of(event.message_id), event.content)

    def in_task(self, event: TaskEvent) -> Iterator[Update]:
        """One event of the subagent of the open call ``event.task_id``."""
        task = self.tasks.get(event.task_id)
        if task is None:
            if event.task_id not in self.open_calls:
                return  # no open call of that id to show it in
            task = self.tasks[event.task_id] = _Task(event.task_id, self)
        yield from task.shown(task.replay.event(event.event))

    def event(self, event: SessionEvent) -> Iterator[Update]:
        """A subagent's event: its calls' cards (its words are its answer, not the chat)."""
        match event:
            case ToolCalled():
                yield from self.called(event)
            case ToolFinished():
                yield from self.finished(event)
            case ToolCancelled():
                yield from self.cancelled(event)
            case _:
                pass

    def unfinished(self) -> Iterator[Update]:
        """The calls the agent stopped before they finished: failed, never pending (a
        subagent's before the task's)."""
        for info in self.open_calls.values():
            closing, steps = self._task_ended(info.call_id)
            yield from closing
            yield from self.dialect.cancelled(info, self.render, steps=steps, crashed=True)


class _LoggedIds:
    """The ids of logged messages, made up (``logged-N``) for those a log of an older agent kept
    without one, when the client's version requires them."""

    __slots__ = ("_made", "_required")

    def __init__(self, required: bool) -> None:
        self._required = required
        self._made = 0

    def of(self, message_id: str | None) -> str | None:
        if message_id is not None or not self._required:
            return message_id
        self._made += 1
        return f"logged-{self._made}"


class _Task:
    """A subagent's calls (the call ``task_id``'s): cards of their own marked with their task for
    a client that nests them, else lines of the task's card (``steps``)."""

    __slots__ = ("replay", "steps", "task_id")

    def __init__(self, task_id: str, parent: _Replay) -> None:
        self.task_id = task_id
        self.replay = _Replay(parent.render.for_children(), parent.lookup)
        self.steps = StepList()

    def shown(self, updates: Iterable[Update]) -> Iterator[Update]:
        if self.replay.render.nested_calls:
            for update in updates:
                yield nested(update, self.task_id)
        else:
            for update in updates:
                self.steps.feed(update)

    def ended(self) -> Iterator[Update]:
        yield from self.shown(self.replay.unfinished())


def restored_card(event: FilesRestored, render: RenderContext) -> list[Update]:
    """An undo's card, live and replayed alike: a finished ``edit`` card with the diffs of what
    was restored, its first lines saying what was left as it was (in the client's version)."""
    info = CallInfo(
        call_id=event.call_id,
        name="undo",
        arguments={},
        view=_logged_view(event.view),
        kind="edit",
        notice=event.notice,
    )
    return dialect_of(render).announce(info, "completed", render)


def replay_updates(
    events: Iterable[SessionEvent], render: RenderContext, tools: ToolRegistry | None = None
) -> Iterator[Update]:
    """The updates that replay ``events`` to a client with ``render``, in the shapes of the ACP
    version it speaks; ``tools`` present the calls of tools they have (without it, every card
    comes from the log)."""
    replay = _Replay(render, tools.get if tools is not None else None)
    for event in events:
        match event:
            case ToolCalled():
                yield from replay.called(event)
            case ToolFinished():
                yield from replay.finished(event)
            case AssistantReply():
                yield from replay.reply(event)
            case UsageReported():
                yield usage_update(event.used, event.size, None if event.cost is None else float(event.cost))
            case ToolCancelled():
                yield from replay.cancelled(event)
            case UserPrompt():
                yield from replay.prompt(event)
            case Compacted():
                yield replay.compacted(event)
            case TitleSet():
                yield session_info_update(event.title, event.updated_at)
            case FilesRestored():
                yield from restored_card(event, render)
            case TaskEvent():
                yield from replay.in_task(event)
            case (
                ToolContext()
                | PermissionAnswered()
                | PermissionRemoved()
                | ModeChanged()
                | ConfigChanged()
                | CostReported()
                | TurnStopped()
                | FileChanged()
            ):
                pass  # the client is brought up to date on these by the load's answer, not updates
            case _:
                assert_never(event)
    yield from replay.unfinished()
