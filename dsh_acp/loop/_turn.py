"""The agent loop for one prompt turn: stream the model, run its tool calls, repeat.

Tool calls follow the lifecycle editors expect: announced with ``tool_call`` before
they run — ``pending`` while a person is asked, else ``in_progress`` — live terminal output while
they run, one final ``completed``/``failed`` update each, and on cancel every open call closed as
``failed`` before the prompt answers ``cancelled``. Everything the turn does is also written to
the session log, from which ``session/load`` replays it through the same bridge functions.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio
import orjson
from anyio.abc import TaskGroup

from dsh_acp._config import MAX_MODEL_REQUESTS
from dsh_acp.acp._bridge import (
    CallInfo,
    announce_call,
    attach_terminal,
    cancelled_call,
    finish_call,
    output_chunk,
    permission_tool_call,
    summary_chunk,
)
from dsh_acp.acp._client_requests import permission_params
from dsh_acp.acp._updates import (
    Notice,
    ToolCallStatus,
    agent_message,
    agent_thought,
    card_details,
    compaction_update,
    notice,
    tool_call_update,
    usage_update,
)
from dsh_acp.models._history import CANCELLED_TEXT
from dsh_acp.models._model import (
    AssistantMessage,
    ContextOverflow,
    Finish,
    FinishReason,
    Message,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallRequest,
    ToolCallStart,
    Usage,
    UserMessage,
)
from dsh_acp.rpc._connection import RpcError
from dsh_acp.session._events import (
    AssistantReply,
    Compacted,
    PermissionAnswered,
    ToolCalled,
    ToolCancelled,
    ToolContext,
    ToolFinished,
    UsageReported,
)
from dsh_acp.session._session import Session
from dsh_tools import (
    Allow,
    Ask,
    ContentBlock,
    Deny,
    DiffCallView,
    PlanView,
    ProgressEvent,
    TerminalAttached,
    TextBlock,
    ToolErrorInfo,
    ToolExecution,
    ToolExecutionResult,
    bound_text,
    shown_text,
)

from ._coalesce import CoalescePolicy, OutputCoalescer
from ._commands import COMPACT_INSTRUCTION
from ._compaction import (
    AUTO_THRESHOLD,
    CHARS_PER_TOKEN,
    SUMMARY_INPUT_SHARE,
    SUMMARY_SHARE,
    automatic_compaction_notice,
    choose_cut,
    message_chars,
    no_room_message,
)
from ._streaming_cards import StreamingCards
from ._toolcalls import parse_arguments

CUT_OFF_TEXT = (
    "the response reached the model's output limit before this call was complete, so it was "
    "not run; make the call again, with shorter arguments if they were long"
)

__all__ = ["CANCELLED_TEXT", "LoopSettings", "StopReason", "TurnRunner", "view_json"]

_log = logging.getLogger("dsh_acp.turn")

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
_STOP: dict[FinishReason, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "end_turn",
    "length": "max_tokens",
    "refusal": "refusal",
}


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """Knobs of the loop; the golden kit pins the ones that vary between runs."""

    max_model_requests: int = MAX_MODEL_REQUESTS
    output_head: int = 32 * 1024
    output_tail: int = 32 * 1024
    """The model sees at most this much of each result's text (head and tail, marker between)."""
    coalesce: CoalescePolicy = field(default_factory=CoalescePolicy)
    system_prompt: Callable[[Session], str] | None = None


class _Printed:
    """What a command printed, head and tail within a budget: shown fenced to a client with no
    live terminal if the call is cancelled (else the result shows the output)."""

    def __init__(self, head: int, tail: int) -> None:
        self._room, self._tail_max = head, tail
        self._head: list[str] = []
        self._tail = ""
        self._dropped = 0

    def feed(self, text: str) -> None:
        if self._room > 0:
            self._head.append(text[: self._room])
            text = text[self._room :]
            self._room -= len(self._head[-1])
        if text:
            kept = self._tail + text
            self._dropped += max(0, len(kept) - self._tail_max)
            self._tail = kept[-self._tail_max :]

    def text(self) -> str:
        marker = f"\n[... {self._dropped} characters omitted ...]\n" if self._dropped else ""
        return "".join(self._head) + marker + self._tail


@dataclass(eq=False)
class _Call:
    info: CallInfo
    announced: bool = False
    finished: bool = False
    output: OutputCoalescer | None = None
    answered: bool = False
    """Whether the call's result (or its cancellation) was logged."""
    recorded: bool = False
    rejected: str | None = None
    """Why the call cannot run (its arguments are too deep or too big): it fails unannounced to
    its tool."""
    attached: str | None = None
    """The client's own terminal the command runs in (``terminal/create``), if any."""
    printed: _Printed | None = None

    @property
    def is_plan(self) -> bool:
        return isinstance(self.info.view, PlanView)


def view_json(view: Any) -> Any:
    """A render intent as plain JSON for the session log (``None`` stays ``None``)."""
    return None if view is None else view.model_dump(mode="json")


class TurnRunner:
    """Runs one prompt turn of a session."""

    def __init__(
        self, session: Session, settings: LoopSettings, new_id: Callable[[], str], turn_index: int = 0
    ) -> None:
        self.session = session
        self.settings = settings
        self._new_id = new_id
        self._turn_index = turn_index
        self._requests = 0
        self._calls: dict[str, _Call] = {}
        self._call_ids: set[str] = set()  # every tool-call id of the turn: each card has its own
        self._step: list[_Call] = []
        self._streaming = StreamingCards(session, self._call_ids)
        self._group: TaskGroup | None = None
        self.last_text_id: str | None = None
        self.last_usage: Usage | None = None

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> StopReason:
        """Drive the model until it stops asking for tools (or a limit is reached)."""
        for _ in range(self.settings.max_model_requests):
            message, finish = await self._fitted_step()
            if finish == "length" and message.tool_calls:
                await self._run_tools(message.tool_calls)  # each fails: it was cut off
                return "max_tokens"
            if finish in ("length", "refusal") or not message.tool_calls:
                return _STOP[finish]
            await self._run_tools(message.tool_calls)
        return "max_turn_requests"

    async def _fitted_step(self) -> tuple[AssistantMessage, FinishReason]:
        """One model step, compacting first when the request would not fit the window, and
        once more (then retrying) when the server still says it does not fit."""
        window = self._window()
        if window and self._estimate() > AUTO_THRESHOLD * window:
            await self._compact_to_fit(window)
        try:
            return await self._model_step()
        except ContextOverflow as error:
            window = error.context_window or self._window()
            if not window:
                raise
            await self._compact_to_fit(window, force=True)
            try:
                return await self._model_step()
            except ContextOverflow:
                raise ModelError(no_room_message(window)) from None

    async def _compact_to_fit(self, window: int, force: bool = False) -> None:
        """Compact (at most three rounds, each summarising what fits) until the next request is
        estimated within the threshold; raise the what-to-do error only when what is left is
        estimated larger than the whole window (else the server has the last word)."""
        for round_ in range(3):
            estimate = self._estimate()
            if (round_ or not force) and estimate <= AUTO_THRESHOLD * window:
                return
            why = automatic_compaction_notice(window, None if force and not round_ else estimate)
            if not await self.compact(f"compaction-{self._new_id()}", window=window, mid_turn=True, why=why):
                break
        if self._estimate() > window:
            raise ModelError(no_room_message(window))

    def _window(self) -> int | None:
        model_window = getattr(self.session.model, "context_window", None)
        if isinstance(model_window, int) and model_window > 0:
            return model_window
        usage = self.session.usage
        return usage.context_window if usage is not None else None

    def _request_chars(self, messages: Sequence[Message]) -> int:
        session = self.session
        system = self.settings.system_prompt(session) if self.settings.system_prompt else ""
        tools = sum(len(t.description) + len(orjson.dumps(t.parameters)) for t in session.registry.schemas())
        return len(system) + tools + sum(message_chars(m) for m in messages)

    def _estimate(self) -> int:
        """Tokens the next request is estimated to take: the last reported usage plus what was
        added since; with none, the characters of everything sent, at the characters per token
        the server's counts showed (else a cautious three)."""
        session = self.session
        history = session.history
        ratio = session.chars_per_token or CHARS_PER_TOKEN
        if session.usage is not None and 0 <= session.usage_mark <= len(history):
            added = sum(message_chars(m) for m in history[session.usage_mark :])
            return session.usage.used + int(added / ratio)
        return int(self._request_chars(history) / ratio)

    async def compact(
        self, compaction_id: str, window: int | None = None, mid_turn: bool = False, why: Notice | None = None
    ) -> bool:
        """Summarise the oldest part of the conversation that fits the window (all of it when
        the window is unknown) and put the summary in its place; the rest stays (``mid_turn``:
        at least the newest message, and the turn's prompt where possible). False when there is
        nothing to summarise. ``why`` marks a compaction the agent chose on its own: clients that
        show notices get it as one, and the summary is not a message in their chat."""
        session = self.session
        window = window or self._window()
        share = SUMMARY_INPUT_SHARE
        for attempt in range(3):
            budget = None
            if window:
                system = self.settings.system_prompt(session) if self.settings.system_prompt else ""
                ratio = session.chars_per_token or CHARS_PER_TOKEN
                budget = int(window * share * ratio) - len(system) - len(COMPACT_INSTRUCTION)
                if budget <= 0:
                    return False
            cut = choose_cut(session.history, budget, keep_current_turn=mid_turn)
            if cut is None:
                return False
            if why is not None and session.render.notices and attempt == 0:
                await session.send(why)
            try:
                summary = await self.summarize(
                    f"{compaction_id}-{attempt}" if attempt else compaction_id,
                    cut.prefix,
                    automatic=why is not None,
                )
                break
            except ContextOverflow as error:
                # Characters per token vary (a model's rambling output can be one token a
                # character): the server said the summariser's input did not fit; send less.
                window = error.context_window or window
                if not window or attempt == 2:
                    raise ModelError(no_room_message(window or 0)) from None
                share /= 2
        assert cut is not None
        if window:
            # A small model may ramble until its window is full: a summary larger than a quarter
            # of the window would leave no room, and the next compaction would only summarise it.
            limit = int(window * SUMMARY_SHARE * (session.chars_per_token or CHARS_PER_TOKEN))
            summary = bound_text(summary, head=limit * 3 // 4, tail=limit // 4)
        # The summary replaces the messages before the cut (``SessionState.apply``).
        session.record(Compacted(summary, self.last_text_id, compaction_id, len(session.history) - cut.end))
        session.usage_mark = -1  # the reported usage measured what was just replaced
        return True

    async def summarize(
        self, compaction_id: str, messages: Sequence[Message] | None = None, automatic: bool = False
    ) -> str:
        """Ask the model (without tools) to summarize ``messages`` (the conversation); the summary
        streams to the user (as a compaction for clients that show them, else as an agent
        message, except an ``automatic`` one for clients told of it by a notice) and is
        returned. The conversation itself is left alone."""
        session = self.session
        shown = session.render.compaction
        instruction = UserMessage((TextBlock(text=COMPACT_INSTRUCTION),))
        if shown:
            await session.send(compaction_update(compaction_id, "in_progress"))
        try:
            message, _ = await self._model_step(
                extra=(instruction,),
                with_tools=False,
                keep=False,
                compaction_id=compaction_id,
                messages=session.history if messages is None else messages,
                quiet=automatic and session.render.notices and not shown,
            )
        except BaseException as error:
            if shown:  # close the compaction the client is showing, whatever stopped it
                status: Literal["failed", "cancelled"] = (
                    "failed" if isinstance(error, Exception) else "cancelled"
                )
                with anyio.CancelScope(shield=True):
                    await session.send(compaction_update(compaction_id, status))
            raise
        if shown:
            await session.send(compaction_update(compaction_id, "completed"))
        usage = self.last_usage
        if usage is not None and usage.context_window:
            # The request's own usage measured the long conversation being summarized; what is
            # left in context now is about the summary itself.
            await self._usage(Usage(0, usage.output_tokens, usage.context_window))
        return message.text

    async def _model_step(
        self,
        extra: Sequence[Message] = (),
        *,
        with_tools: bool = True,
        keep: bool = True,
        compaction_id: str | None = None,
        messages: Sequence[Message] | None = None,
        quiet: bool = False,
    ) -> tuple[AssistantMessage, FinishReason]:
        session = self.session
        assert session.model is not None
        system = self.settings.system_prompt(session) if self.settings.system_prompt else ""
        request = ModelRequest(
            messages=[*(session.history if messages is None else messages), *extra],
            tools=session.registry.schemas() if with_tools else [],
            system=system,
            metadata={"turn": self._turn_index, "step": self._requests},
            notice=self._warn if session.render.notices else None,
            reasoning_effort=session.effort,
        )
        self._requests += 1
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCallRequest] = []
        finish: FinishReason = "stop"
        ids: dict[str, str] = {}
        send = session.send
        try:
            async for event in session.model.stream(request):
                if type(event) is TextDelta:
                    text.append(event.text)
                    message_id = ids.get("text") or ids.setdefault("text", self._new_id())
                    if compaction_id is not None:
                        if not quiet:
                            await send(summary_chunk(event.text, message_id, compaction_id, session.render))
                        continue
                    await send(agent_message(event.text, message_id))
                elif type(event) is ReasoningDelta:
                    reasoning.append(event.text)
                    if not session.show_reasoning:
                        continue
                    thought_id = ids.get("thought") or ids.setdefault("thought", self._new_id())
                    await send(agent_thought(event.text, thought_id))
                elif type(event) is ToolCallArguments:
                    await self._streaming.grew(event)
                elif type(event) is ToolCallRequest:
                    calls.append(self._streaming.complete(event))
                elif type(event) is ToolCallStart:
                    if keep:
                        await self._streaming.started(event)
                elif type(event) is Usage:
                    self.last_usage = event
                    if event.input_tokens > 0 and (session.chars_per_token is None or session.usage_mark < 0):
                        # Learned once, and again after a compaction: counting every request's
                        # characters would make each step cost O(history).
                        chars = self._request_chars(request.messages)
                        session.chars_per_token = min(max(chars / event.input_tokens, 2.0), 6.0)
                    if keep:
                        session.usage = event
                        await self._usage(event)
                elif type(event) is Finish:
                    finish = event.reason
        finally:
            # Also when cancelled mid-stream: what the user saw stays in the conversation and log.
            message = AssistantMessage(
                text="".join(text), reasoning="".join(reasoning), tool_calls=tuple(calls)
            )
            self.last_text_id = ids.get("text")
            with anyio.CancelScope(shield=True):  # closed also when the stream failed or was cancelled
                await self._streaming.response_ended({call.id for call in calls})
            if keep and (text or reasoning or calls):
                session.record(
                    AssistantReply(
                        message.text,
                        message.reasoning,
                        ids.get("text"),
                        ids.get("thought"),
                        message.tool_calls,
                    )
                )
            if keep and session.usage is self.last_usage:
                session.usage_mark = len(session.history)  # the usage counted up to here
        return message, finish

    async def _warn(self, title: str, detail: str) -> None:
        """A warning about the running request (a retry) for clients that show notices; others
        see the wait only (it is not part of the conversation)."""
        await self.session.send(notice("warning", title, detail))

    async def _usage(self, usage: Usage) -> None:
        session = self.session
        total = session.cost
        price_ref = getattr(session.model, "price_ref", None)
        if price_ref is not None and (usage.input_tokens or usage.output_tokens):
            from dsh_acp.models._cost import request_cost

            model_name, provider = price_ref
            cost = request_cost(model_name, provider, usage.input_tokens, usage.output_tokens)
            if cost is not None:
                total = (total or 0) + cost
        if not usage.context_window:
            session.cost = total  # nothing to log: the next usage logged carries the cost
            return
        session.record(UsageReported(usage.used, usage.context_window, None if total is None else str(total)))
        price = float(session.cost) if session.cost is not None else None
        await session.send(usage_update(usage.used, usage.context_window, price))

    # -- tools ----------------------------------------------------------------------------

    async def _run_tools(self, requests: Sequence[ToolCallRequest]) -> None:
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
            if not call.answered:
                call.answered = True
                self.session.record(ToolCancelled(call.info.call_id))
        self._step = []

    def _record_call(self, call: _Call) -> bool:
        """Log a call when the editor first hears of it, so a replay keeps the live order; False
        if the log could not be written."""
        if call.recorded:
            return True
        call.recorded = True
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
        call.announced = True
        early = self._streaming.take(call.info.call_id)
        if call.is_plan:
            return  # a plan is shown as the session's plan, not as a tool card
        card = announce_call(call.info, status, self.session.render)
        # A card that exists since the call began streaming gets its details as an update.
        await self.session.send(card_details(card) if early else card)

    async def _dispatched(self, execution: ToolExecution) -> None:
        call = self._calls[execution.call_id]
        if not call.announced:
            await self._announce(call, "in_progress")
        elif not call.is_plan:
            await self.session.send(tool_call_update(call.info.call_id, "in_progress"))

    def _progress_sink(self, call: _Call) -> Callable[[ProgressEvent], Any]:
        render = self.session.render

        async def sink(event: ProgressEvent) -> None:
            if isinstance(event, TerminalAttached):
                call.attached = event.terminal_id
                if call.announced and not call.is_plan:
                    await self.session.send(attach_terminal(call.info, event.terminal_id))
                return
            if call.output is None:
                if render.terminal_key is None or not call.info.is_terminal:
                    # A client without live output gets it once, at the end (or, if the call
                    # is cancelled, what was printed until then).
                    if call.info.is_terminal:
                        if call.printed is None:
                            call.printed = _Printed(render.fallback_head, render.fallback_tail)
                        call.printed.feed(event.data)
                    return
                assert self._group is not None
                call.output = OutputCoalescer(self._flusher(call), self.settings.coalesce, self._group)
            await call.output.feed(event.data)

        return sink

    def _flusher(self, call: _Call) -> Callable[[str], Any]:
        async def flush(data: str) -> None:
            update = output_chunk(call.info, data, self.session.render)
            if update is not None:
                await self.session.send(update)

        return flush

    async def _finished(self, result: ToolExecutionResult) -> None:
        session = self.session
        call = self._calls[result.call_id]
        if call.output is not None:
            await call.output.aclose()
        if not call.announced:
            await self._announce(call, "pending")  # it never ran: refused before dispatch
        definition = session.registry.get(call.info.name) if call.rejected is None else None
        tool_result = result.as_tool_result()
        view = definition.result_view(call.info.arguments, tool_result) if definition else None
        content = _budget(result.content, self.settings.output_head, self.settings.output_tail)
        error = None if result.error is None else {"name": result.error.name, "code": result.error.code}
        logged = session.record(
            ToolFinished(result.call_id, content, result.is_error, error, result.meta, view_json(view))
        )
        if not logged:
            # The turn is stopping: the call closes as failed, as a reload of the log will show it.
            return
        call.answered = call.finished = True
        updates = finish_call(
            call.info, tool_result, view, session.render, streamed=_streamed(call), attached=call.attached
        )
        for update in updates:
            await session.send(update)

    async def _approve(self, execution: ToolExecution, ask: Ask) -> Allow | Deny:
        from dsh_acp.permissions._approvals import Question  # loaded with the first question, not at start-up

        session = self.session
        call = self._calls[execution.call_id]
        definition = session.registry.get(execution.name)
        subject = ask.subject or (definition.subject_of(execution) if definition is not None else None)
        question = Question.of(execution.name, subject, _roots(execution), ask.reason)
        rules = session.permissions
        project_allow, project_reject = rules.project.load() if rules.project is not None else ([], [])
        rejected = question.rejected_by([*rules.reject, *project_reject])
        if rejected is not None:
            return Deny(f"the user chose to always reject {rejected.phrase()}; do not retry it")
        if question.allowed_by([*rules.allow, *project_allow]) is not None:
            return Allow()
        view = call.info.view
        if isinstance(view, DiffCallView) and not call.announced:
            from ._whole_diffs import widened  # an approval of an edit, not start-up, loads it

            view = await widened(view, session.cwd, execution.services)
        call.info = replace(call.info, view=view, notice=question.notice, cwd=question.cwd)
        await self._announce(call, "pending")
        options = question.options([*rules.allow, *project_allow], project=rules.project is not None)
        params = permission_params(
            session.session_id,
            permission_tool_call(call.info, session.render),
            [option.wire() for option in options],
        )
        try:
            response = await session.io.request("session/request_permission", params)
        except RpcError as error:
            return Deny(f"the user's client declined to ask for permission ({error.message})")
        outcome = response.get("outcome") if isinstance(response, dict) else None
        kind = outcome.get("outcome") if isinstance(outcome, dict) else None
        if kind == "cancelled":
            if session.turn is not None:
                session.turn.cancel()
            await anyio.lowlevel.checkpoint()  # raises: the turn's scope is cancelled
            return Deny("the turn was cancelled")
        option_id = outcome.get("optionId") if isinstance(outcome, dict) and kind == "selected" else None
        chosen = next((option for option in options if option.option_id == option_id), None)
        if chosen is None:
            return Deny(f"the permission answer was not understood ({response!r:.80}); the call was not run")
        if chosen.remember:
            rule: Literal["allow", "reject"] = "allow" if chosen.kind == "allow_always" else "reject"
            if chosen.project and rules.project is not None:
                try:
                    rules.project.add(rule, chosen.remember)
                except OSError as error:
                    _log.warning("could not keep the answer for the project: %s", error)
            else:
                for remembered in chosen.remember:
                    session.record(PermissionAnswered(rule, remembered.to_json()))
        if chosen.kind in ("allow_once", "allow_always"):
            return Allow()
        return Deny("the user declined this call; do not retry it unchanged")

    # -- cancellation ---------------------------------------------------------------------

    async def close_open_calls(self) -> None:
        """After a cancel: close every announced, unfinished call as ``failed``, and settle the
        conversation so that every tool call of the interrupted step has a result."""
        await self._streaming.close_all()
        for call in self._calls.values():
            if call.announced and not call.finished and not call.is_plan:
                call.finished = True
                if call.output is not None:
                    await call.output.aclose()  # what the tool printed before the cancel still shows
                updates = cancelled_call(
                    call.info,
                    self.session.render,
                    streamed=_streamed(call),
                    attached=call.attached,
                    partial=call.printed.text() if call.printed is not None else None,
                )
                for update in updates:
                    await self.session.send(update)
        if self._step:
            self._settle_step()


def _rejection(call: _Call) -> ToolExecutionResult:
    assert call.rejected is not None
    return ToolExecutionResult(
        call_id=call.info.call_id,
        content=(TextBlock(text=f"Error: {call.rejected}"),),
        is_error=True,
        error=ToolErrorInfo(name="ToolArgsError", code="INVALID_ARGS"),
    )


def _roots(execution: ToolExecution) -> tuple[str, ...]:
    """The real paths of the session's folder and additional directories (the first is its cwd)."""
    cwd = (execution.cwd,) if execution.cwd else ()
    return tuple(os.path.realpath(root) for root in (*cwd, *execution.additional_directories))


def _streamed(call: _Call) -> bool:
    return call.output is not None and call.output.flushed_any


def _budget(content: Sequence[ContentBlock], head: int, tail: int) -> tuple[ContentBlock, ...]:
    """Whatever a tool returned, the model sees at most head + tail bytes of its text, and text
    that encodes (lone surrogates, say from an OS name, escaped as ``shown_text`` does)."""
    content = [_encodable(block) for block in content]
    texts = [block for block in content if isinstance(block, TextBlock)]
    total = sum(len(block.text) for block in texts)
    if total <= head + tail and sum(len(block.text.encode()) for block in texts) <= head + tail:
        return tuple(content)
    joined = "\n".join(block.text for block in texts)
    others = [block for block in content if not isinstance(block, TextBlock)]
    return (TextBlock(text=bound_text(joined, head=head, tail=tail)), *others)


def _encodable(block: ContentBlock) -> ContentBlock:
    if isinstance(block, TextBlock):
        shown = shown_text(block.text)
        if shown is not block.text:
            return block.model_copy(update={"text": shown})
    return block
