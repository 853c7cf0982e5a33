"""The tool calls of one model response, run to their end: the lifecycle editors expect.

Each call is announced with ``tool_call`` before it runs (``pending`` while a person is asked,
else ``in_progress``; a call whose card appeared while it streamed gets its full card as an
update), shows its live terminal output while it runs, and gets one final
``completed``/``failed`` update; on cancel every open call is closed as ``failed``. Everything
is also written to the session log, from which ``session/load`` replays it through the same
bridge functions.

A call that makes calls of its own (a ``task``, whose subagent runs its own tool steps) hands
their cards and questions to its step (``child_update``, ``child_question``): under its card
for a client that nests calls, else as lines of its card, which its questions borrow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import anyio
from anyio.abc import TaskGroup

from dsh_acp.models._model import ToolCallRequest
from dsh_acp.permissions._declared_paths import PreviewableCalls
from dsh_acp.session._events import ToolCalled, ToolCancelled, ToolContext, ToolFinished
from dsh_acp.session._session import Session
from dsh_acp.wire._bridge import CallInfo, steps_card, steps_update
from dsh_acp.wire._steps import StepList, nested
from dsh_acp.wire._updates import SessionUpdate, ToolCallStatus
from dsh_tools import (
    Allow,
    Ask,
    Deny,
    PlanView,
    ProgressEvent,
    TerminalAttached,
    TextBlock,
    ToolCallView,
    ToolErrorInfo,
    ToolExecution,
    ToolExecutionResult,
)

from ._ask_permission import PermissionQuestion
from ._call_arguments import parse_arguments
from ._coalesce import OutputCoalescer
from ._kept_output import Printed, model_content
from ._loop_settings import LoopSettings
from ._streaming_cards import StreamingCards

__all__ = ["CUT_OFF_TEXT", "PREVIEW_SECONDS", "ToolStep", "view_json"]

_log = logging.getLogger("dsh_acp.turn")

CUT_OFF_TEXT = (
    "the response reached the model's output limit before this call was complete, so it was "
    "not run; make the call again, with shorter arguments if they were long"
)


class CardState(Enum):
    """Where a call's card is, as the editor sees it."""

    UNSHOWN = "unshown"
    """The editor has not heard of the call (its card may be streaming in: ``StreamingCards``)."""
    SHOWN = "shown"
    """Announced: ``pending`` while a person is asked, then ``in_progress``."""
    CLOSED = "closed"
    """Its final status was sent: ``completed``, ``failed``, or failed by a cancel."""


class LogState(Enum):
    """What the session log holds of a call."""

    NOTHING = "nothing"
    CALL = "call"
    """``ToolCalled`` was written (or its write failed, and the turn is stopping)."""
    RESULT = "result"
    """``ToolFinished`` or ``ToolCancelled`` was written: the call has its answer."""


_CARD_MOVES: dict[CardState, frozenset[CardState]] = {
    CardState.UNSHOWN: frozenset({CardState.SHOWN}),
    CardState.SHOWN: frozenset({CardState.CLOSED}),
    CardState.CLOSED: frozenset(),
}
_LOG_MOVES: dict[LogState, frozenset[LogState]] = {
    LogState.NOTHING: frozenset({LogState.CALL}),
    LogState.CALL: frozenset({LogState.RESULT}),
    LogState.RESULT: frozenset(),
}


@dataclass(eq=False)
class _Call:
    """One tool call of the turn: its card and its log entries, each a small state machine (a move
    the tables above do not allow is a bug, and fails at once)."""

    info: CallInfo
    card: CardState = CardState.UNSHOWN
    log: LogState = LogState.NOTHING
    output: OutputCoalescer | None = None
    rejected: str | None = None
    """Why the call cannot run (its arguments are too deep or too big): it fails unannounced to
    its tool."""
    attached: str | None = None
    """The client's own terminal the command runs in (``terminal/create``), if any."""
    printed: Printed | None = None
    partial_plan: bool = False
    """Whether entries of the call's plan were shown while it streamed (its result replaces them)."""
    steps: StepList | None = None
    """The calls the call made of its own (a subagent's), as a client that does not nest them
    sees them: lines of this card."""
    asking: anyio.Lock | None = None
    """Held while one of those calls asks a person on this card (one question at a time)."""

    @property
    def is_plan(self) -> bool:
        return isinstance(self.info.view, PlanView)

    def move_card(self, state: CardState) -> None:
        if state not in _CARD_MOVES[self.card]:
            raise AssertionError(f"tool call {self.info.call_id}: card {self.card.value} -> {state.value}")
        self.card = state

    def move_log(self, state: LogState) -> None:
        if state not in _LOG_MOVES[self.log]:
            raise AssertionError(f"tool call {self.info.call_id}: log {self.log.value} -> {state.value}")
        self.log = state


def view_json(view: Any) -> Any:
    """A render intent as plain JSON for the session log (``None`` stays ``None``)."""
    return None if view is None else view.model_dump(mode="json")


class ToolStep:
    """Runs the tool calls of a turn's model responses, one step at a time (``run``), and
    closes what is open when the turn is cancelled (``close_open_calls``)."""

    def __init__(
        self, session: Session, settings: LoopSettings, streaming: StreamingCards, origin: str | None = None
    ) -> None:
        self.session = session
        self.settings = settings
        self._streaming = streaming
        self._origin = origin
        """What the calls are run for (a subagent's task), named on each permission card."""
        self._calls: dict[str, _Call] = {}
        self._step: list[_Call] = []
        self._group: TaskGroup | None = None

    async def run(self, requests: Sequence[ToolCallRequest]) -> None:
        """Run the calls of one model response (those that can run), each card to its end."""
        session = self.session
        executions = []
        rejected = []
        self._step = []
        for request in requests:
            arguments, problem = parse_arguments(request.arguments)
            if request.cut_off:
                problem = CUT_OFF_TEXT
            definition = session.registry.get(request.name)
            view = definition.call_view(arguments) if definition and problem is None else None
            info = CallInfo(
                call_id=request.id,
                name=request.name,
                arguments=arguments,
                view=view,
                kind=definition.kind if definition else "other",
            )
            call = _Call(info, rejected=problem)
            self._calls[request.id] = call
            self._step.append(call)
            if problem is not None:
                rejected.append(call)
                continue
            executions.append(
                ToolExecution(
                    call_id=request.id,
                    name=request.name,
                    arguments=arguments,
                    cwd=session.cwd,
                    session_id=session.session_id,
                    additional_directories=session.additional_directories,
                    services=session.services,
                    progress=self._progress_sink(call),
                    approver=self._approve,
                    on_dispatch=self._dispatched,
                )
            )
        for call in rejected:  # the whole step was checked first: these fail before any call runs
            await self._finished(_rejection(call))
        async with anyio.create_task_group() as group:
            self._group = group
            results = await session.registry.execute_many(executions, on_result=self._finished)
            group.cancel_scope.cancel()  # only coalescer timers remain, and they have flushed
        self._group = None
        self._settle_step()
        context = [result.additional_context for result in results if result.additional_context]
        if context:
            text = "\n\n".join(context)
            session.record(ToolContext(text))

    def _settle_step(self) -> None:
        """Close the step: a call that has no result (the turn was cancelled) is logged as
        cancelled, so the step's results join the conversation (``SessionState.apply``) and it
        stays well formed."""
        for call in self._step:
            self._record_call(call)
            if call.log is LogState.CALL:
                call.move_log(LogState.RESULT)
                self.session.record(ToolCancelled(call.info.call_id))
        self._step = []

    def _record_call(self, call: _Call) -> bool:
        """Log a call when the editor first hears of it, so a replay keeps the live order; False
        if the log could not be written."""
        if call.log is not LogState.NOTHING:
            return True
        call.move_log(LogState.CALL)
        info = call.info
        return self.session.record(
            ToolCalled(
                info.call_id,
                info.name,
                info.arguments,
                info.kind,
                view_json(info.view),
                info.notice,
                info.cwd,
            )
        )

    async def _announce(self, call: _Call, status: ToolCallStatus) -> None:
        if not self._record_call(call):
            return  # the log failed and the turn is stopping: the editor never hears of the call
        call.move_card(CardState.SHOWN)
        early = self._streaming.take(call.info.call_id)
        call.partial_plan = self._streaming.take_plan(call.info.call_id)
        if call.is_plan:
            return  # a plan is shown as the session's plan, not as a tool card
        session = self.session
        # A card that exists since the call began streaming gets its details as an update.
        show = session.dialect.card_details if early else session.dialect.announce
        for update in show(call.info, status, session.render):
            await session.send(update)

    async def _dispatched(self, execution: ToolExecution) -> None:
        call = self._calls[execution.call_id]
        if call.card is CardState.UNSHOWN:
            await self._announce(call, "in_progress")
        elif not call.is_plan:
            await self.session.send(self.session.dialect.status(call.info.call_id, "in_progress"))

    def _progress_sink(self, call: _Call) -> Callable[[ProgressEvent], Any]:
        render = self.session.render

        async def sink(event: ProgressEvent) -> None:
            if isinstance(event, TerminalAttached):
                call.attached = event.terminal_id
                if call.card is CardState.SHOWN and not call.is_plan:
                    await self.session.send(
                        self.session.dialect.attach_terminal(call.info, event.terminal_id)
                    )
                return
            if call.output is None:
                if not render.live_output or not call.info.is_terminal:
                    # A client without live output gets it once, at the end (or, if the call
                    # is cancelled, what was printed until then).
                    if call.info.is_terminal:
                        if call.printed is None:
                            call.printed = Printed(render.fallback_head, render.fallback_tail)
                        call.printed.feed(event.data)
                    return
                assert self._group is not None
                call.output = OutputCoalescer(self._flusher(call), self.settings.coalesce, self._group)
            await call.output.feed(event.data)

        return sink

    def _flusher(self, call: _Call) -> Callable[[str], Any]:
        session = self.session

        async def flush(data: str) -> None:
            update = session.dialect.output(call.info, data, session.render)
            if update is not None:
                await session.send(update)

        return flush

    async def _finished(self, result: ToolExecutionResult) -> None:
        session = self.session
        call = self._calls[result.call_id]
        if call.output is not None:
            await call.output.aclose()
        if call.card is CardState.UNSHOWN:
            await self._announce(call, "pending")  # it never ran: refused before dispatch
        definition = session.registry.get(call.info.name) if call.rejected is None else None
        tool_result = result.as_tool_result()
        view = definition.result_view(call.info.arguments, tool_result) if definition else None
        content = model_content(result.content, self.settings.output_head, self.settings.output_tail)
        error = None if result.error is None else {"name": result.error.name, "code": result.error.code}
        logged = session.record(
            ToolFinished(result.call_id, content, result.is_error, error, result.meta, view_json(view))
        )
        if not logged:
            # The turn is stopping: the call closes as failed, as a reload of the log will show it.
            if call.partial_plan:
                await self._streaming.withdraw()
            return
        call.move_log(LogState.RESULT)
        if call.card is CardState.SHOWN:
            call.move_card(CardState.CLOSED)
        updates = session.dialect.finish(
            call.info,
            tool_result,
            view,
            session.render,
            streamed=_streamed(call),
            attached=call.attached,
            steps=call.steps,
        )
        for update in updates:
            await session.send(update)
        if call.partial_plan and not any(
            update["sessionUpdate"] in ("plan", "plan_update") for update in updates
        ):
            await self._streaming.withdraw()  # the plan it showed while streaming is not kept

    async def _approve(self, execution: ToolExecution, ask: Ask) -> Allow | Deny:
        previewable = execution.services.get(PreviewableCalls)
        may_preview = previewable is not None and execution.call_id in previewable.ids
        if previewable is not None:
            previewable.ids.discard(execution.call_id)
        asking = PermissionQuestion(self.session, execution, ask)
        answer = asking.remembered()
        if answer is not None:
            return answer
        call = self._calls[execution.call_id]
        view = call.info.view
        if may_preview and call.card is CardState.UNSHOWN:
            view = await _preview(self.session, execution) or view
        question = asking.question
        notice = question.notice
        if self._origin is not None:  # a subagent's question says whose it is
            notice = "\n\n".join(filter(None, (f"For the task “{self._origin}”.", notice)))
        call.info = replace(call.info, view=view, notice=notice, cwd=question.cwd)
        await self._announce(call, "pending")
        return await asking.ask(call.info)

    # -- a call's own calls (a subagent's) ------------------------------------------------

    async def child_update(self, parent_id: str, update: SessionUpdate | Mapping[str, Any]) -> None:
        """One of the cards of the calls that the running call ``parent_id`` makes of its own:
        sent as a card under it to a client that nests them, else folded into its lines."""
        call = self._calls.get(parent_id)
        if call is None or call.card is not CardState.SHOWN:
            return
        render = self.session.render
        if render.nested_calls:
            await self.session.send(nested(update, parent_id))
            return
        if call.steps is None:
            call.steps = StepList()
        if call.steps.feed(update):
            shown = steps_update(call.info, call.steps, render)
            if shown is not None:
                await self.session.send(shown)

    async def child_question(self, parent_id: str, params: dict[str, Any]) -> Any:
        """Ask a person about a call the running call ``parent_id`` makes of its own: on the
        child's own card where the client nests them, else on ``parent_id``'s card, which gets
        its own card back once answered (its questions are asked one at a time)."""
        call = self._calls[parent_id]
        session = self.session
        params = session.dialect.child_question(params, call.info, session.render)
        if session.render.nested_calls:
            return await session.io.request("session/request_permission", params)
        if call.asking is None:
            call.asking = anyio.Lock()
        async with call.asking:
            answer = await session.io.request("session/request_permission", params)
            await session.send(steps_card(call.info, call.steps or StepList(), session.render, "in_progress"))
            return answer

    # -- cancellation ---------------------------------------------------------------------

    async def close_open_calls(self) -> None:
        """After a cancel: close every announced, unfinished call as ``failed``, and settle the
        conversation so that every tool call of the interrupted step has a result."""
        if any(call.partial_plan and call.card is not CardState.CLOSED for call in self._calls.values()):
            await self._streaming.withdraw()  # a plan that streamed in, its call never finished
        for call in self._calls.values():
            if call.card is CardState.SHOWN and not call.is_plan:
                call.move_card(CardState.CLOSED)
                if call.output is not None:
                    await call.output.aclose()  # what the tool printed before the cancel still shows
                updates = self.session.dialect.cancelled(
                    call.info,
                    self.session.render,
                    streamed=_streamed(call),
                    attached=call.attached,
                    partial=call.printed.text() if call.printed is not None else None,
                    steps=call.steps,
                )
                for update in updates:
                    await self.session.send(update)
        if self._step:
            self._settle_step()


PREVIEW_SECONDS = 5.0
"""How long a tool's preview may take before the person is asked with its call card instead."""


async def _preview(session: Session, execution: ToolExecution) -> ToolCallView | None:
    """The card the tool offers a person approving the call (its ``preview``), if it has one and
    gives it in time. Only for calls the gate found to name no path it asks about: nothing
    outside the workspace is read for a card before the person answered."""
    definition = session.registry.get(execution.name)
    if definition is None or definition.preview is None:
        return None
    with anyio.move_on_after(PREVIEW_SECONDS):
        return await definition.approval_view(execution)
    _log.warning(
        "the preview of %s took over %g s; asking with its call card", execution.name, PREVIEW_SECONDS
    )
    return None


def _rejection(call: _Call) -> ToolExecutionResult:
    assert call.rejected is not None
    return ToolExecutionResult(
        call_id=call.info.call_id,
        content=(TextBlock(text=f"Error: {call.rejected}"),),
        is_error=True,
        error=ToolErrorInfo(name="ToolArgsError", code="INVALID_ARGS"),
    )


def _streamed(call: _Call) -> bool:
    return call.output is not None and call.output.flushed_any
