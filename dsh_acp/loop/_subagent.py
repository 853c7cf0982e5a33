"""A subagent: the ``task`` tool's nested agent loop, run inside the turn that called it.

The subagent has the session's model, a fresh conversation whose first message is the task's
prompt, the session's tools but ``task`` (its registry is a layer that hides it), the session's
permission mode and remembered answers, and the same guarded processes and sandbox (its commands
are the session's tools). Its final answer is the task call's result. Its commands run in the
client's terminals only where its calls are cards of their own: a client that does not nest them
shows a terminal it was asked to create as the session's own.

What the user sees of it goes through the running turn's tool step (``ToolStep.child_update``,
``child_question``): its calls' cards, drawn by the bridge as any card, are marked with the task's
call for a client that nests them, else folded into lines of the task's card; its permission
questions name the task. Its words and thoughts are its answer to the caller, not the user's chat.

Its events are logged in the session's log inside ``TaskEvent``s (its conversation is its own),
so a load shows the task's card as it ended. Its model requests count against their own limit
(``LoopSettings.max_task_requests``), compact its own conversation against the model's window,
and add their cost to the session's. A cancel of the turn reaches it: its open cards close,
its commands are stopped as any cancelled command is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import anyio

from dsh_acp._config import counter_ids
from dsh_acp.models._model import AssistantMessage, Usage
from dsh_acp.session._events import (
    AssistantReply,
    Compacted,
    CostReported,
    SessionEvent,
    TaskEvent,
    ToolCalled,
    ToolCancelled,
    ToolContext,
    ToolFinished,
    UsageReported,
    UserPrompt,
)
from dsh_acp.session._session import Session, SessionIO
from dsh_acp.wire._updates import SessionUpdate, usage_update
from dsh_tools import TextBlock, ToolExecution, ToolOutput, shown_text, text
from dsh_tools.terminals import TerminalHost

from ._call_lifecycle import ToolStep
from ._loop_settings import LoopSettings
from ._turn import StopReason, TaskHost, TurnRunner, cost_with

__all__ = ["TASK_RULES", "run_task"]

TASK_RULES: Final = (
    "\n# Task\n"
    "You are a subagent: you work on one task for another agent, which reads only your final "
    "answer. Work on your own and end with a complete answer (what you found or changed, with "
    "paths and results).\n"
)
"""What the system prompt adds for a subagent."""

_ORIGIN_CHARS: Final = 100
"""A task's description is cut here where a permission card names it."""

_OWN: Final = (UserPrompt, AssistantReply, ToolContext, ToolCalled, ToolFinished, ToolCancelled, Compacted)
"""The subagent's conversation: logged inside the task's events, applied to its own state."""


class _Link:
    """A subagent's line to the turn that called it: where its cards go, how it asks."""

    def __init__(self, parent: Session, step: ToolStep, task_id: str) -> None:
        self.parent = parent
        self.step = step
        self.task_id = task_id

    async def send(self, update: SessionUpdate | Mapping[str, Any]) -> None:
        kind = update["sessionUpdate"]
        if kind == "tool_call" or kind == "tool_call_update":
            await self.step.child_update(self.task_id, update)
        # Its words, thoughts, plan, compactions and context meter are its own: not the user's
        # chat (its render context asks for no notices).

    async def request(self, method: str, params: Any) -> Any:
        if method == "session/request_permission":
            return await self.step.child_question(self.task_id, params)
        return await self.parent.io.request(method, params)


@dataclass(eq=False, slots=True, kw_only=True)
class _TaskSession(Session):
    """A subagent's session: the parent's place, tools, model and permissions, a conversation of
    its own, and a ``_Link`` in place of the client."""

    parent: Session
    link: _Link

    def send(self, update: SessionUpdate | Mapping[str, Any]) -> Awaitable[None]:
        return self.link.send(update)

    def record(self, event: SessionEvent) -> bool:
        """Log the subagent's own events inside a ``TaskEvent`` (they change its state, not the
        session's); what is the session's (an "always" answer, the cost) is the session's."""
        if not isinstance(event, _OWN):
            return self.parent.record(event)
        if not self.parent.record(TaskEvent(self.link.task_id, event)):
            return False
        self.apply(event)
        return True


class _TaskRunner(TurnRunner):
    """The subagent's turn: a turn whose requests say which task they are for, which is not the
    session's running turn, and whose cost is the session's (its context meter is its own)."""

    def _host(self) -> TaskHost | None:
        return None

    def _metadata(self) -> dict[str, Any]:
        session = self.session
        assert isinstance(session, _TaskSession)
        return {**super()._metadata(), "task": session.link.task_id}

    async def _usage(self, usage: Usage) -> None:
        session = self.session
        assert isinstance(session, _TaskSession)
        parent = session.parent
        total = cost_with(parent.cost, parent.model, usage)
        if total is None or total == parent.cost:
            return
        meter = parent.usage
        if meter is not None and meter.context_window:
            # The session's meter as it was, with the cost the subagent added.
            parent.record(UsageReported(meter.used, meter.context_window, str(total)))
            await parent.send(usage_update(meter.used, meter.context_window, float(total)))
        else:
            parent.record(CostReported(str(total)))


def _task_settings(settings: LoopSettings) -> LoopSettings:
    base = settings.system_prompt
    return replace(
        settings,
        max_model_requests=settings.max_task_requests,
        system_prompt=(lambda session: base(session) + TASK_RULES) if base is not None else None,
    )


async def run_task(parent: TurnRunner, execution: ToolExecution, description: str, prompt: str) -> ToolOutput:
    """Run the subagent of the task call ``execution`` to its answer (see the module docstring)."""
    session = parent.session
    task_id = execution.call_id
    link = _Link(session, parent.tool_step, task_id)
    registry = session.registry.layer(without=(execution.name,))
    services = session.services
    if not session.render.nested_calls:
        # A client shows a command in its own terminal as the session's: the subagent's run here.
        services = services.layer(without=(TerminalHost,))
    child = _TaskSession(
        session_id=session.session_id,
        cwd=session.cwd,
        model=session.model,
        tool_side=session.tool_side,
        render=session.render.for_children(),
        io=SessionIO(session.io.notify, session.io.notify_each, link.request),
        additional_directories=session.additional_directories,
        turn=session.turn,
        permissions=session.permissions,
        model_id=session.model_id,
        show_reasoning=session.show_reasoning,
        effort=session.effort,
        chars_per_token=session.chars_per_token,
        _tools=(registry, services),
        parent=session,
        link=link,
    )
    origin = shown_text(" ".join(description.split()))
    if len(origin) > _ORIGIN_CHARS:
        origin = origin[: _ORIGIN_CHARS - 1] + "…"
    runner = _TaskRunner(
        child,
        _task_settings(parent.settings),
        counter_ids(f"{task_id}/"),  # its messages are never shown: ids of its own
        parent.turn_index,
        call_ids=parent.call_ids,
        origin=origin,
    )
    try:
        child.record(UserPrompt((TextBlock(text=prompt),)))
        stop = await runner.run()
    except BaseException:
        with anyio.CancelScope(shield=True):  # its cards end before the task's card does
            await runner.close_open_calls()
        raise
    finally:
        registry.close()
    return _answer(child, stop, runner.requests_made, parent.settings.max_task_requests)


def _answer(child: Session, stop: StopReason, requests: int, limit: int) -> ToolOutput:
    """The task's result: the subagent's last words, an error when it stopped short of them."""
    said = (m.text.strip() for m in reversed(child.history) if isinstance(m, AssistantMessage))
    words = next((w for w in said if w), "")
    meta = {"model_requests": requests}
    if stop == "end_turn" and words:
        return ToolOutput(content=[text(words)], meta=meta)
    why = {
        "end_turn": "the subagent ended without an answer",
        "max_turn_requests": f"the subagent reached its limit of {limit} model requests before it answered",
        "max_tokens": "the subagent's answer reached the model's output limit",
        "refusal": "the model refused the task",
        "cancelled": "the task was cancelled",
    }[stop]
    last = f"\n\nIts last words:\n{words}" if words else ""
    return ToolOutput(content=[text(f"Error: {why}.{last}")], meta=meta, is_error=True)
