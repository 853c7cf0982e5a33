"""The agent loop for one prompt turn: stream the model, run its tool calls, repeat.

A model step streams the response to the editor (text, thoughts, the cards of calls as they
stream: ``_streaming_cards``), the tool step runs the calls it asked for (``_tool_step``), and
the conversation is compacted when the next request would not fit the model's window. On cancel
every open card is closed as ``failed`` before the prompt answers ``cancelled``. Everything the
turn does is also written to the session log, from which ``session/load`` replays it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Literal, assert_never

import anyio
import orjson

from dsh_acp.models._history import CANCELLED_TEXT
from dsh_acp.models._model import (
    AssistantMessage,
    ContextOverflow,
    Finish,
    FinishReason,
    Message,
    ModelError,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallRequest,
    ToolCallStart,
    Usage,
    UserMessage,
)
from dsh_acp.models._protocol import Model
from dsh_acp.session._events import AssistantReply, Compacted, CostReported, UsageReported
from dsh_acp.session._session import Session
from dsh_acp.wire._bridge import summary_chunk
from dsh_acp.wire._updates import (
    STEP_BREAK,
    AgentMessageChunk,
    CompactionSummaryChunk,
    Notice,
    agent_message,
    agent_thought,
    compaction_update,
    notice,
    usage_update,
)
from dsh_tools import TextBlock, bound_text

from ._call_lifecycle import ToolStep
from ._compaction import (
    AUTO_THRESHOLD,
    CHARS_PER_TOKEN,
    COMPACT_INSTRUCTION,
    SUMMARY_INPUT_SHARE,
    SUMMARY_SHARE,
    Cut,
    automatic_compaction_notice,
    choose_cut,
    message_chars,
    no_room_message,
)
from ._loop_settings import LoopSettings
from ._streaming_cards import StreamingCards

__all__ = ["CANCELLED_TEXT", "LoopSettings", "StopReason", "TaskHost", "TurnRunner"]


StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
_STOP: dict[FinishReason, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "end_turn",
    "length": "max_tokens",
    "refusal": "refusal",
}


class TaskHost:
    """The session's running turn, which a ``task`` call starts its subagent from (a session
    service: the tool finds it in the call's services)."""

    __slots__ = ("runner",)

    def __init__(self) -> None:
        self.runner: TurnRunner | None = None


class TurnRunner:
    """Runs one prompt turn of a session."""

    def __init__(
        self,
        session: Session,
        settings: LoopSettings,
        new_id: Callable[[], str],
        turn_index: int = 0,
        *,
        call_ids: set[str] | None = None,
        origin: str | None = None,
    ) -> None:
        self.session = session
        self.settings = settings
        self._new_id = new_id
        self.turn_index = turn_index
        self._requests = 0
        self.call_ids: set[str] = set() if call_ids is None else call_ids
        """Every tool-call id of the turn (its subagents' too): each card has its own."""
        self._streaming = StreamingCards(session, self.call_ids)
        self.tool_step = ToolStep(session, settings, self._streaming, origin)
        self.last_text_id: str | None = None
        self.last_usage: Usage | None = None
        self._texted = False
        """Whether a model step of this turn already sent text (the next one starts a paragraph)."""
        self.requests_made = 0
        """Model requests this runner made (its summaries too)."""

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> StopReason:
        """Drive the model until it stops asking for tools (or a limit is reached)."""
        host = self._host()
        try:
            for _ in range(self.settings.max_model_requests):
                message, finish = await self._fitted_step()
                if finish == "length" and message.tool_calls:
                    await self.tool_step.run(message.tool_calls)  # each fails: it was cut off
                    return "max_tokens"
                if finish in ("length", "refusal") or not message.tool_calls:
                    return _STOP[finish]
                await self.tool_step.run(message.tool_calls)
            return "max_turn_requests"
        finally:
            if host is not None and host.runner is self:
                host.runner = None

    def _host(self) -> TaskHost | None:
        """Become the session's running turn, the one its task calls run their subagents in."""
        host = self.session.services.setdefault(TaskHost, TaskHost)
        host.runner = self
        return host

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
        model_window = self.session.model.context_window if self.session.model is not None else None
        if model_window is not None and model_window > 0:
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
        summarised = await self._summarise_oldest(compaction_id, window or self._window(), mid_turn, why)
        if summarised is None:
            return False
        cut, summary, window = summarised
        if window:
            # A small model may ramble until its window is full: a summary larger than a quarter
            # of the window would leave no room, and the next compaction would only summarise it.
            limit = int(window * SUMMARY_SHARE * (session.chars_per_token or CHARS_PER_TOKEN))
            summary = bound_text(summary, head=limit * 3 // 4, tail=limit // 4)
        # The summary replaces the messages before the cut (``SessionState.apply``).
        session.record(Compacted(summary, self.last_text_id, compaction_id, len(session.history) - cut.end))
        session.usage_mark = -1  # the reported usage measured what was just replaced
        return True

    async def _summarise_oldest(
        self, compaction_id: str, window: int | None, mid_turn: bool, why: Notice | None
    ) -> tuple[Cut, str, int | None] | None:
        """The cut, its summary and the window as the server told it; ``None`` when nothing fits.
        The summariser reads less on each attempt the server says did not fit."""
        session = self.session
        share, attempt = SUMMARY_INPUT_SHARE, 0
        while True:
            budget = self._summary_budget(window, share)
            if budget == 0:
                return None  # the system prompt and the instruction fill the summariser's share
            cut = choose_cut(session.history, budget, keep_current_turn=mid_turn)
            if cut is None:
                return None
            if why is not None and session.render.notices and attempt == 0:
                await session.send(why)
            try:
                summary = await self.summarize(
                    f"{compaction_id}-{attempt}" if attempt else compaction_id,
                    cut.prefix,
                    automatic=why is not None,
                )
                return cut, summary, window
            except ContextOverflow as error:
                # Characters per token vary (a model's rambling output can be one token a
                # character): the server said the summariser's input did not fit; send less.
                window = error.context_window or window
                if not window or attempt == 2:
                    raise ModelError(no_room_message(window or 0)) from None
                share, attempt = share / 2, attempt + 1

    def _summary_budget(self, window: int | None, share: float) -> int | None:
        """Characters of conversation the summariser may read (``None``: all of it, the window
        unknown; ``0``: none, the system prompt and the instruction fill its share)."""
        if not window:
            return None
        system = self.settings.system_prompt(self.session) if self.settings.system_prompt else ""
        ratio = self.session.chars_per_token or CHARS_PER_TOKEN
        return max(0, int(window * share * ratio) - len(system) - len(COMPACT_INSTRUCTION))

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
            metadata=self._metadata(),
            notice=self._warn if session.render.notices else None,
            reasoning_effort=session.effort,
        )
        self._requests += 1
        self.requests_made += 1
        response = _Response(self, request, keep=keep, compaction_id=compaction_id, quiet=quiet)
        try:
            send, said, message_id = session.send, response.said, response.text_id
            async with self._streaming.timers():
                async for event in session.model.stream(request):
                    # Nearly every event is a piece of text, shown here: a chunk's every call
                    # counts (bench/README.md, "Shapes the benches chose").
                    if type(event) is TextDelta and message_id is not None:
                        said.append(event.text)
                        await send(agent_message(event.text, message_id))
                    else:
                        await response.read(event)
                        message_id = response.text_id
        finally:
            # Also when cancelled mid-stream: what the user saw stays in the conversation and log.
            message = response.message()
            self.last_text_id = response.ids.get("text")
            with anyio.CancelScope(shield=True):  # closed also when the stream failed or was cancelled
                await self._streaming.response_ended({call.id for call in response.calls})
            if keep:
                response.record(message)
        return message, response.finish

    def _metadata(self) -> dict[str, Any]:
        """Where the request stands (a scripted model plays its step from it)."""
        return {"turn": self.turn_index, "step": self._requests}

    async def _warn(self, title: str, detail: str) -> None:
        """A warning about the running request (a retry) for clients that show notices; others
        see the wait only (it is not part of the conversation)."""
        await self.session.send(notice("warning", title, detail))

    async def _usage(self, usage: Usage) -> None:
        session = self.session
        total = cost_with(session.cost, session.model, usage)
        if not usage.context_window:
            if total is not None and total != session.cost:
                session.record(CostReported(str(total)))  # no usage to carry it: the cost alone
            return
        session.record(UsageReported(usage.used, usage.context_window, None if total is None else str(total)))
        price = float(session.cost) if session.cost is not None else None
        await session.send(usage_update(usage.used, usage.context_window, price))

    # -- cancellation ---------------------------------------------------------------------

    async def close_open_calls(self) -> None:
        """After a cancel: close every card still open as ``failed`` (those of calls that were
        streaming too), and settle the conversation so that every tool call of the interrupted
        step has a result."""
        await self._streaming.close_all()
        await self.tool_step.close_open_calls()


def cost_with(cost: Decimal | None, model: Model | None, usage: Usage) -> Decimal | None:
    """``cost`` (the session's so far) and what the request that used ``usage`` cost, when the
    model's price is known."""
    price_ref = model.price_ref if model is not None else None
    if price_ref is None or not (usage.input_tokens or usage.output_tokens):
        return cost
    from dsh_acp.models._cost import request_cost

    model_name, provider = price_ref
    added = request_cost(model_name, provider, usage.input_tokens, usage.output_tokens)
    return cost if added is None else (cost or 0) + added


class _Response:
    """One model response as it streams: its text and thoughts go to the editor as they come,
    its calls' cards stream in, its usage is counted; what it said is kept once it is over."""

    __slots__ = (
        "calls",
        "compaction_id",
        "finish",
        "ids",
        "keep",
        "quiet",
        "reasoning",
        "request",
        "runner",
        "said",
        "text_id",
        "texted",
    )

    def __init__(
        self, runner: TurnRunner, request: ModelRequest, *, keep: bool, compaction_id: str | None, quiet: bool
    ) -> None:
        self.runner = runner
        self.request = request
        self.keep = keep
        self.compaction_id = compaction_id
        """The compaction this response writes the summary of (its text is shown as that)."""
        self.quiet = quiet
        self.said: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCallRequest] = []
        self.finish: FinishReason = "stop"
        self.ids: dict[str, str] = {}
        """The message ids of the response's text and thought, made as each first streams."""
        self.texted = False
        self.text_id: str | None = None
        """The message id of the answer's text once it began (its next pieces go straight out)."""

    def _id(self, key: str) -> str:
        return self.ids.get(key) or self.ids.setdefault(key, self.runner._new_id())

    def text(self, event: TextDelta) -> AgentMessageChunk | CompactionSummaryChunk | None:
        """The update that shows a piece of the response's text (``None``: a quiet summary)."""
        self.said.append(event.text)
        runner, message_id = self.runner, self._id("text")
        if self.compaction_id is not None:
            if self.quiet:
                return None
            return summary_chunk(event.text, message_id, self.compaction_id, runner.session.render)
        shown = event.text
        if shown and not self.texted:  # the step's first text (a replay does the same)
            self.texted = True
            self.text_id = message_id
            if runner._texted:
                shown = STEP_BREAK + shown
            runner._texted = True
        return agent_message(shown, message_id)

    async def read(self, event: ModelEvent) -> None:
        """Any event of the response (``text`` takes the text on its own, first)."""
        streaming = self.runner._streaming
        match event:
            case TextDelta():
                update = self.text(event)
                if update is not None:
                    await self.runner.session.send(update)
            case ReasoningDelta():
                self.reasoning.append(event.text)
                if self.runner.session.show_reasoning:
                    await self.runner.session.send(agent_thought(event.text, self._id("thought")))
            case ToolCallArguments():
                await streaming.grew(event)
            case ToolCallRequest():
                self.calls.append(streaming.complete(event))
            case ToolCallStart():
                if self.keep:
                    await streaming.started(event)
            case Usage():
                await self._usage(event)
            case Finish():
                self.finish = event.reason
            case _:
                assert_never(event)

    async def _usage(self, event: Usage) -> None:
        runner = self.runner
        session = runner.session
        runner.last_usage = event
        if event.input_tokens > 0 and (session.chars_per_token is None or session.usage_mark < 0):
            # Learned once, and again after a compaction: counting every request's characters
            # would make each step cost O(history).
            chars = runner._request_chars(self.request.messages)
            session.chars_per_token = min(max(chars / event.input_tokens, 2.0), 6.0)
        if self.keep:
            session.usage = event
            await runner._usage(event)

    def message(self) -> AssistantMessage:
        return AssistantMessage(
            text="".join(self.said), reasoning="".join(self.reasoning), tool_calls=tuple(self.calls)
        )

    def record(self, message: AssistantMessage) -> None:
        """Log what the response said (if it said anything), and where its usage counted to."""
        session = self.runner.session
        if self.said or self.reasoning or self.calls:
            session.record(
                AssistantReply(
                    message.text,
                    message.reasoning,
                    self.ids.get("text"),
                    self.ids.get("thought"),
                    message.tool_calls,
                )
            )
        if session.usage is self.runner.last_usage:
            session.usage_mark = len(session.history)  # the usage counted up to here
