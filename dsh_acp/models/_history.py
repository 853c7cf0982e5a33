"""The conversation as it is sent: always one the strictest chat templates accept.

A session's history records what happened — a prompt cancelled before the model said anything,
a request that failed, a turn cut off inside a tool step, a summary that replaced everything —
and the session log keeps it that way for replay. What a model is sent must still be a valid
conversation, because strict servers (the chat templates of the Mistral and Gemma families,
llama.cpp's template checks) refuse anything else, and refuse it again on every later prompt.
``conversation`` is the one place that makes it valid, every request goes through it:

- after the system message, user and assistant turns alternate, starting with the user (tool
  steps — an assistant message with tool calls and its results — sit inside a turn);
- consecutive user content (a prompt that got no answer, then the next one; a summary, then a
  prompt) is merged into one user message;
- every tool call is answered by exactly one result right after its message (a missing one
  gets a "cancelled" result; a result that answers no open call is left out);
- an assistant message has text or tool calls (one with only reasoning, or nothing, is left
  out); two assistant messages in a row are merged;
- a user message that follows a tool step which got no answer (the turn was cancelled or failed
  after its tools ran) is preceded by a short assistant note saying the turn was interrupted.

Messages that need no change are passed through as the same objects, so an encoder may cache
their encoding by identity.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

import orjson

from ._model import AssistantMessage, ContextMessage, Message, ToolCallRequest, ToolResultMessage, UserMessage

if TYPE_CHECKING:
    from dsh_tools import ContentBlock

__all__ = ["CANCELLED_TEXT", "INTERRUPTED_TEXT", "conversation", "conversation_from"]

INTERRUPTED_TEXT: Final = "(This turn was interrupted before I answered.)"
"""The assistant's side of a turn that ended inside a tool step."""
CANCELLED_TEXT: Final = "Error: the user cancelled this call before it finished"
"""The result of a tool call that never got one."""


def conversation(messages: Iterable[Message]) -> list[Message]:
    """``messages`` made into a valid conversation (see the module docstring)."""
    return conversation_from(messages)[0]


def conversation_from(
    messages: Iterable[Message], start: int = 0, previous: Message | None = None
) -> tuple[list[Message], tuple[int, int] | None]:
    """``conversation`` of ``messages[start:]``, resumed at a checkpoint whose last message out
    was ``previous``; also the newest checkpoint met: ``(index, count)`` where the messages out
    for ``messages[:index]`` are final (nothing later changes them) and number ``count`` in what
    this call returned. Resuming there gives the same result as starting over, so an encoder can
    keep the encoding of everything before it."""
    built = _Conversation(previous)
    items = messages if isinstance(messages, Sequence) else list(messages)
    for index in range(start, len(items)):
        message = items[index]
        if isinstance(message, ToolResultMessage):
            built.result(message)
        elif isinstance(message, AssistantMessage):
            built.settle()
            built.assistant(message)
        else:
            built.settle()
            built.user(index, message)
    built.settle()
    return built.out, built.checkpoint


class _Conversation:
    """The conversation being built, message by message."""

    def __init__(self, previous: Message | None) -> None:
        self.out: list[Message] = []
        self.previous = previous
        """The last message out before ``out`` (resuming at a checkpoint), if any."""
        self.checkpoint: tuple[int, int] | None = None
        self.open_calls: list[ToolCallRequest] = []
        self.answers: dict[int, ToolResultMessage] = {}
        self.in_step = False
        """The last message out is a tool step's (a call or a result)."""

    def last(self) -> Message | None:
        return self.out[-1] if self.out else self.previous

    def settle(self) -> None:
        """The open step's results, in call order (a call without one is answered cancelled)."""
        for index, call in enumerate(self.open_calls):
            self.out.append(self.answers.get(index) or _missing(call))
        self.open_calls.clear()
        self.answers.clear()

    def result(self, message: ToolResultMessage) -> None:
        for index, call in enumerate(self.open_calls):
            if call.id == message.call_id and index not in self.answers:
                self.answers[index] = message
                return
        # a result for no open call: nothing asked for it

    def assistant(self, message: AssistantMessage) -> None:
        if not message.text.strip() and not message.tool_calls:
            return
        if message.tool_calls and not all(_is_json(call.arguments) for call in message.tool_calls):
            message = _with_json_arguments(message)
        last = self.last()
        if last is None:
            self.out.append(UserMessage(_text_blocks("(The conversation continues.)")))
        elif isinstance(last, AssistantMessage) and not last.tool_calls and self.out:
            message = _merge_assistant(last, message)
            self.out.pop()
        self.out.append(message)
        self.open_calls.extend(message.tool_calls)
        self.in_step = bool(message.tool_calls)

    def user(self, index: int, message: UserMessage | ContextMessage) -> None:
        """A user message, or context (which is sent as user content)."""
        last = self.last()
        if not self.in_step and isinstance(last, AssistantMessage) and not last.tool_calls:
            self.checkpoint = (index, len(self.out))  # appended after an answer: all before it is final
        if self.in_step and isinstance(message, ContextMessage) and isinstance(last, ToolResultMessage):
            # Context a step's tools produced belongs to that step: folded into its last result,
            # it keeps the step between the assistant's call and its next message.
            self.out[-1] = _with_context(last, message.text)
            return
        if self.in_step:
            self.out.append(AssistantMessage(text=INTERRUPTED_TEXT))
            self.in_step = False
            last = self.out[-1]
        if isinstance(last, (UserMessage, ContextMessage)):
            self.out[-1] = _merge_user(last, message)
        else:
            self.out.append(message)


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def _with_json_arguments(message: AssistantMessage) -> AssistantMessage:
    """Strict servers parse a call's arguments (llama.cpp's templates do): text that is not JSON
    (a call cut off, or a model's garbled one) is sent as ``{}``; its result says what went wrong."""
    calls = tuple(
        call if _is_json(call.arguments) else ToolCallRequest(call.id, call.name, "{}", call.cut_off)
        for call in message.tool_calls
    )
    return AssistantMessage(text=message.text, reasoning=message.reasoning, tool_calls=calls)


def _missing(call: ToolCallRequest) -> ToolResultMessage:
    return ToolResultMessage(call.id, call.name, _text_blocks(CANCELLED_TEXT), is_error=True)


def _text_blocks(text: str) -> tuple[ContentBlock, ...]:
    from dsh_tools import TextBlock  # pydantic: loaded with the first request, not at start-up

    return (TextBlock(text=text),)


def _user_blocks(message: UserMessage | ContextMessage) -> tuple[ContentBlock, ...]:
    if isinstance(message, UserMessage):
        return message.content
    return _text_blocks(f"<context>\n{message.text}\n</context>")


def _merge_user(first: UserMessage | ContextMessage, second: UserMessage | ContextMessage) -> UserMessage:
    return UserMessage((*_user_blocks(first), *_user_blocks(second)))


def _merge_assistant(first: AssistantMessage, second: AssistantMessage) -> AssistantMessage:
    return AssistantMessage(
        text="\n\n".join(part for part in (first.text, second.text) if part),
        reasoning="\n\n".join(part for part in (first.reasoning, second.reasoning) if part),
        tool_calls=second.tool_calls,
    )


def _with_context(result: ToolResultMessage, text: str) -> ToolResultMessage:
    blocks = (*result.content, *_text_blocks(f"<context>\n{text}\n</context>"))
    return ToolResultMessage(result.call_id, result.name, blocks, result.is_error)
