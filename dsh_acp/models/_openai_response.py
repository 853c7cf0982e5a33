"""The chunks of a streamed chat completion in, model events out: text and reasoning deltas at
once, a tool call announced as soon as its name is known and its arguments reported as they
grow (their start only), then the calls, the usage and the finish once the stream is complete."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Final

from ._model import (
    ARGUMENTS_SHOWN,
    Finish,
    FinishReason,
    ModelError,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallRequest,
    ToolCallStart,
    Usage,
)
from ._openai_errors import error_detail

__all__ = ["Assembler", "token_events"]

_log = logging.getLogger("dsh_acp.models._openai")

_FINISH: Final[dict[str, FinishReason]] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",  # the pre-tools name some servers still send
    "length": "length",
    "content_filter": "refusal",
}


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    started: bool = False
    shown: int = 0
    """Characters of the arguments reported so far (``ToolCallArguments``)."""

    def take(self, delta: dict[str, Any]) -> None:
        """Add what one delta tells of the call."""
        if isinstance(delta.get("id"), str) and delta["id"] and not self.id:
            self.id = delta["id"]
        function = delta.get("function")
        if isinstance(function, dict):
            # Some servers repeat the name in every delta: the first one wins, never concatenated.
            if isinstance(function.get("name"), str) and function["name"] and not self.name:
                self.name = function["name"]
            if isinstance(function.get("arguments"), str):
                self.arguments += function["arguments"]

    def news(self) -> list[ModelEvent]:
        """What is new to report of the call: its start, the start of its arguments."""
        events: list[ModelEvent] = []
        if self.name and not self.started:
            # Announced as soon as its name is known: its arguments may stream for seconds.
            self.started = True
            self.id = self.id or f"call_{uuid.uuid4().hex}"
            events.append(ToolCallStart(self.id, self.name))
        if self.started and self.shown < len(self.arguments) and self.shown < ARGUMENTS_SHOWN:
            # Only the start: enough for a title, and never a copy of megabytes per delta
            # (a slice that covers the whole string is that string, not a copy).
            shown = self.arguments[:ARGUMENTS_SHOWN]
            self.shown = len(shown)
            events.append(ToolCallArguments(self.id, shown))
        return events


def token_events(chunk: Any) -> list[ModelEvent] | None:
    """The events of the common chunk, one choice with a text or a reasoning delta and nothing
    else (a model's every token), or None for any other: looked at only for what would make it
    another, without the general walk of ``Assembler``, which gives the same events for it."""
    if type(chunk) is not dict or chunk.get("error") or chunk.get("usage") is not None:
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason") is not None or choice.get("index", 0) != 0:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or delta.get("tool_calls") is not None:
        return None
    content = delta.get("content")
    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
    if not reasoning:
        return [TextDelta(content)] if type(content) is str and content else []  # [] for a role alone
    if type(reasoning) is str and not content:
        return [ReasoningDelta(reasoning)]
    return None


class Assembler:
    """Chunks in, events out: deltas at once; tool calls, usage and the finish at the end."""

    def __init__(self, context_window: int | None, where: str) -> None:
        self.context_window = context_window
        self.where = where
        self.calls: dict[int, _PartialCall] = {}
        self.finish: str | None = None
        self.usage: Usage | None = None

    def feed(self, chunk: Any) -> list[ModelEvent]:
        """One chunk's events: the shortcut's for a token, else ``feed_any``'s."""
        events = token_events(chunk)
        return self.feed_any(chunk) if events is None else events

    def feed_any(self, chunk: Any) -> list[ModelEvent]:
        """One chunk's events, whatever it holds (the general walk)."""
        if not isinstance(chunk, dict):
            raise ModelError(f"the API at {self.where} sent a stream chunk that is not a JSON object")
        if chunk.get("error"):
            raise ModelError(f"the API at {self.where} reported an error mid-response: {error_detail(chunk)}")
        self._take_usage(chunk.get("usage"))
        events: list[ModelEvent] = []
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue  # we ask for one choice (n=1)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta, events)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish = reason
        return events

    def _take_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                self.usage = Usage(prompt, completion, self.context_window)

    def _delta(self, delta: dict[str, Any], events: list[ModelEvent]) -> None:
        # DeepSeek and vLLM say reasoning_content; OpenRouter, Ollama and newer vLLM, reasoning.
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            events.append(ReasoningDelta(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            events.append(TextDelta(content))
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            self._tool_deltas(tool_calls, events)

    def _tool_deltas(self, deltas: list[Any], events: list[ModelEvent]) -> None:
        for position, delta in enumerate(deltas):
            if not isinstance(delta, dict):
                continue
            index = delta.get("index")
            # A few servers omit the index; they send one call per position.
            call = self.calls.setdefault(index if isinstance(index, int) else position, _PartialCall())
            call.take(delta)
            events += call.news()

    def end(self, saw_done: bool) -> list[ModelEvent]:
        if self.finish is None and not saw_done:
            raise ModelError(f"the response from {self.where} ended before it was complete")
        reason = _FINISH.get(self.finish or "stop", "stop")
        events: list[ModelEvent] = []
        if self.calls and reason == "refusal":
            _log.info("dropping %d tool call(s) of a refused response", len(self.calls))
        else:
            # A call cut off by the output limit is still reported (marked), so the editor and
            # the model hear that it was not run rather than nothing at all.
            cut_off = reason == "length"
            for index in sorted(self.calls):
                call = self.calls[index]
                if not call.name:
                    if cut_off:
                        continue  # cut before even its name: nothing to show
                    raise ModelError(f"the API at {self.where} sent a tool call without a name")
                events.append(
                    ToolCallRequest(
                        id=call.id or f"call_{uuid.uuid4().hex}",
                        name=call.name,
                        arguments=call.arguments,
                        cut_off=cut_off,
                    )
                )
            if events and reason == "stop":
                reason = "tool_calls"  # Ollama and others report "stop" after tool calls
        if self.usage is not None:
            events.append(self.usage)
        events.append(Finish(reason))
        return events
