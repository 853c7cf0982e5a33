"""What a session's log makes of it: the one reducer from events to the session's durable state.

``SessionState.apply`` is the only code that changes the conversation, the permission answers, the
mode, the model settings, the title and the cost from what happened: the live session applies
each event as it writes it, a loaded session applies its log's events in order, so the two cannot
come out different. (The session itself is a ``SessionState``: ``_session.Session``.)

Tool results join the conversation in call order once every call of their step has one; a call
that never got one (the agent died) gets a cancelled result when the next message comes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from itertools import islice
from typing import TYPE_CHECKING, Any, assert_never

from dsh_acp.models._model import (
    AssistantMessage,
    ContextMessage,
    Message,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from dsh_acp.permissions._modes import PermissionState
from dsh_acp.permissions._rules import rule_from_json

from ._events import (
    SUMMARY_PREFIX,
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
from ._file_history import FileHistory, undo_note
from ._memory import collector_paused

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

__all__ = ["SessionState", "cancelled_result"]

_BATCH = 64
"""Events a load reads and applies before they are replayed (see ``applying``; larger batches
gain no speed and hold more memory: bench/README.md, "Shapes the benches chose")."""


def cancelled_result(call: ToolCallRequest) -> ToolResultMessage:
    """The result the model is sent for a call that never got one."""
    from dsh_acp.models._history import CANCELLED_TEXT
    from dsh_tools import TextBlock

    return ToolResultMessage(call.id, call.name, (TextBlock(text=CANCELLED_TEXT),), is_error=True)


@dataclass(eq=False, slots=True)
class SessionState:
    """A session's durable state (what its log restores)."""

    history: list[Message] = field(default_factory=list)
    """The model's conversation."""
    permissions: PermissionState = field(default_factory=PermissionState)
    title: str | None = None
    model_id: str | None = None
    show_reasoning: bool = True
    effort: str | None = None
    """The reasoning effort picked for this session (``None``: the model's default)."""
    prompts: int = 0
    """Prompts this session has had (the next one is turn ``prompts`` of a scripted model)."""
    cost: Decimal | None = None
    """What the session's model requests cost so far (US dollars), when their price is known."""
    plan: Sequence[Any] = ()
    """The entries of the session's plan as the log keeps them, the last a plan tool's result
    gave: what the client shows when no call is streaming a plan in (a streamed plan the tool
    does not keep gives way to it)."""
    files: FileHistory | None = None
    """What tools changed in files, turn by turn (``None`` until something does)."""
    _step: list[ToolCallRequest] | None = field(default=None, repr=False)
    """The calls of the last assistant step still waiting for results (``None``: none)."""
    _results: dict[str, ToolResultMessage] | None = field(default=None, repr=False)

    def apply(self, event: SessionEvent) -> None:
        """Change the state as ``event`` says."""
        match event:
            case (
                ToolFinished()
                | ToolCancelled()
                | AssistantReply()
                | UserPrompt()
                | ToolContext()
                | Compacted()
            ):
                self._converse(event)
            case ToolCalled() | TaskEvent() | FileChanged() | FilesRestored():
                self._file_event(event)
            case ConfigChanged() | ModeChanged() | PermissionAnswered() | PermissionRemoved() | TitleSet():
                self._setting(event)
            case UsageReported() | CostReported():
                self._cost(event)
            case TurnStopped():
                pass  # what it changes lives elsewhere: the turn's answer
            case _:
                assert_never(event)

    def _converse(
        self, event: ToolFinished | ToolCancelled | AssistantReply | UserPrompt | ToolContext | Compacted
    ) -> None:
        """An event of the model's conversation."""
        match event:
            case ToolFinished() | ToolCancelled():
                self._result(event)
            case AssistantReply():
                self._reply(event)
            case UserPrompt():
                self.settle()
                self.prompts += 1
                if event.command is None:
                    # A model command (``/init``) gave the model an instruction in place of the text.
                    self.history.append(UserMessage(event.model_content or event.content))
            case ToolContext():
                self.settle()
                self.history.append(ContextMessage(event.text))
            case Compacted():
                self.settle()
                kept = self.history[-event.kept :] if event.kept > 0 else []
                self.history[:] = [ContextMessage(SUMMARY_PREFIX + event.summary), *kept]
            case _:
                assert_never(event)

    def _file_event(self, event: ToolCalled | TaskEvent | FileChanged | FilesRestored) -> None:
        """An event of what tools changed in files."""
        match event:
            case ToolCalled():
                self._called(event)
            case TaskEvent():
                if isinstance(event.event, ToolCalled):  # its conversation is its own, not its commands
                    self._called(event.event)
            case FileChanged():
                self._files().change(self.prompts - 1, event, self._prompt_words())
            case FilesRestored():
                self.settle()
                self._files().restored(event)
                self.history.append(ContextMessage(undo_note(event)))
            case _:
                assert_never(event)

    def _setting(
        self, event: ConfigChanged | ModeChanged | PermissionAnswered | PermissionRemoved | TitleSet
    ) -> None:
        """An event of the session's settings: model, mode, permission answers, title."""
        match event:
            case ConfigChanged():
                self._config(event)
            case ModeChanged():
                self.permissions.mode = event.mode_id
            case PermissionAnswered() | PermissionRemoved():
                self._permission(event)
            case TitleSet():
                self.title = event.title
            case _:
                assert_never(event)

    def _cost(self, event: UsageReported | CostReported) -> None:
        match event:
            case UsageReported():
                if event.cost is not None:
                    self.cost = Decimal(event.cost)
            case CostReported():
                self.cost = Decimal(event.cost)
            case _:
                assert_never(event)

    def _called(self, event: ToolCalled) -> None:
        if event.kind == "execute":  # a command may change files the log never sees
            self._files().commands.add(self.prompts - 1)

    def _files(self) -> FileHistory:
        if self.files is None:
            self.files = FileHistory()
        return self.files

    def _prompt_words(self) -> str:
        """The first words of the running turn's prompt (what an undo card names the turn by)."""
        from dsh_tools import TextBlock

        for message in reversed(self.history):
            if isinstance(message, UserMessage):
                text = next((b.text for b in message.content if isinstance(b, TextBlock)), "")
                line = " ".join(text.split())
                return line if len(line) <= 60 else line[:59].rstrip() + "…"
        return ""

    def _reply(self, event: AssistantReply) -> None:
        self.settle()
        if event.aside:
            return  # said to the user outside the model (a command's answer)
        if event.text or event.reasoning or event.tool_calls:
            self.history.append(AssistantMessage(event.text, event.reasoning, event.tool_calls))
        if event.tool_calls:
            self._step = list(event.tool_calls)
            self._results = {}

    def _config(self, event: ConfigChanged) -> None:
        if event.model_id is not None:
            self.model_id = event.model_id
        if event.show_reasoning is not None:
            self.show_reasoning = event.show_reasoning
        if event.reasoning_effort is not None:
            self.effort = event.reasoning_effort

    def _permission(self, event: PermissionAnswered | PermissionRemoved) -> None:
        rule = rule_from_json(event.match)
        if rule is None:
            return
        rules = self.permissions.allow if event.rule == "allow" else self.permissions.reject
        if isinstance(event, PermissionAnswered):
            rules.add(rule)
        else:
            rules.discard(rule)

    def apply_all(self, events: Iterable[SessionEvent]) -> None:
        """Apply a log's events in order, then settle its last step (the agent may have died)."""
        with collector_paused():
            for _ in self.applying(events):
                pass

    def applying(self, events: Iterable[SessionEvent]) -> Iterator[SessionEvent]:
        """The log's events, each applied before it passes (a load replays them in the same pass);
        the last step is settled once they are all through.

        They are taken ``_BATCH`` at a time: read and applied in one loop, then passed on, so each
        stage runs its own code many times in a row rather than every stage's code once per event;
        a batch is a few dozen events, never the whole log."""
        apply, taken = self.apply, iter(events)
        while batch := list(islice(taken, _BATCH)):
            for event in batch:
                apply(event)
            yield from batch
        self.settle()

    def _result(self, event: ToolFinished | ToolCancelled) -> None:
        step, results = self._step, self._results
        if step is None or results is None:
            return  # a result for no call of the open step: nothing asked for it
        call_id = event.call_id
        if call_id in results:
            return  # answered already
        for call in step:
            if call.id == call_id:
                break
        else:
            return
        if type(event) is ToolFinished:
            results[call.id] = ToolResultMessage(call.id, call.name, event.content, event.is_error)
            view = event.view
            if view is not None and not event.is_error and view.get("card") == "plan":
                entries = view.get("entries")
                self.plan = entries if isinstance(entries, list) else ()
        else:
            results[call.id] = cancelled_result(call)
        if len(results) == len(step):
            self.settle()

    def settle(self) -> None:
        """Put the open step's results into the conversation in call order (a call without one
        gets a cancelled result)."""
        step, results = self._step, self._results
        if step is None or results is None:
            return
        self._step = self._results = None
        self.history.extend(results.get(call.id) or cancelled_result(call) for call in step)
