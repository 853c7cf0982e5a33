"""The model seam: the conversation the loop keeps, the request it sends, the events it reads.

Provider-neutral and cheap (plain dataclasses): a real model adapter (OpenAI-compatible HTTP) and
the scripted model both implement ``Model``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # annotations only: the scripted model loads before pydantic is imported
    from dsh_tools import ContentBlock, ToolSchema

__all__ = [
    "ARGUMENTS_SHOWN",
    "AssistantMessage",
    "ContextMessage",
    "ContextOverflow",
    "Finish",
    "FinishReason",
    "Message",
    "ModelAuthError",
    "ModelError",
    "ModelEvent",
    "ModelRequest",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallArguments",
    "ToolCallRequest",
    "ToolCallStart",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
]

FinishReason = Literal["stop", "tool_calls", "length", "refusal"]


class ModelError(Exception):
    """A model request failed for good (retries spent, stream dropped, timed out): the turn ends
    with this exception's one-line message as its error."""


class ContextOverflow(ModelError):
    """The server refused the request as larger than the model's context window; it said how
    large the window is (``context_window``) and the prompt was (``prompt_tokens``) when it did."""

    def __init__(self, message: str, context_window: int | None = None, prompt_tokens: int | None = None):
        super().__init__(message)
        self.context_window = context_window
        self.prompt_tokens = prompt_tokens


class ModelAuthError(ModelError):
    """The provider refused the credentials (HTTP 401/403): answered as ACP's -32000,
    authentication required; the message names the variable to set."""


# The events a model yields per token are not frozen: a frozen dataclass's __init__ sets each field
# through object.__setattr__, slower than a slot store, on every streamed token. Nothing keeps or
# shares them past the loop that reads them.


@dataclass(slots=True)
class TextDelta:
    """A piece of the assistant's visible answer."""

    text: str


@dataclass(slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (shown as a thought)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A complete tool call: ``arguments`` is the model's JSON text, exactly as sent."""

    id: str
    name: str
    arguments: str
    cut_off: bool = False
    """The response ended (its output limit) before this call was complete: it is not run."""


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call began streaming: its id and name are known, its arguments still coming (the
    complete ``ToolCallRequest`` with the same id follows)."""

    id: str
    name: str


@dataclass(slots=True)
class ToolCallArguments:
    """The arguments of a call still streaming, as far as they came: the start of the text, at
    most ``ARGUMENTS_SHOWN`` characters (enough for a card's title; what follows is not read)."""

    id: str
    text: str


ARGUMENTS_SHOWN = 4096
"""Characters of a streaming call's arguments a model reports as they come (``ToolCallArguments``)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the provider reported for one request."""

    input_tokens: int
    output_tokens: int
    context_window: int | None = None

    @property
    def used(self) -> int:
        """Tokens now in the context: what went in plus what came out."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Finish:
    """The end of one model response."""

    reason: FinishReason = "stop"


ModelEvent = TextDelta | ReasoningDelta | ToolCallStart | ToolCallArguments | ToolCallRequest | Usage | Finish


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the user sent: ACP prompt blocks mapped to content blocks."""

    content: tuple[ContentBlock, ...]
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One model response: its text, reasoning and tool calls."""

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    """A tool's result as the model sees it (already within the output budget)."""

    call_id: str
    name: str
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    role: Literal["tool"] = "tool"


@dataclass(frozen=True, slots=True)
class ContextMessage:
    """Extra context for the model (post-execute ``additional_context``, a summary...)."""

    text: str
    role: Literal["context"] = "context"


Message = UserMessage | AssistantMessage | ToolResultMessage | ContextMessage


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything one model call needs."""

    messages: Sequence[Message]
    tools: Sequence[ToolSchema]
    system: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    reasoning_effort: str | None = None
    """How hard a reasoning model should think (``low``/``medium``/``high``), when chosen."""
    notice: Callable[[str, str], Awaitable[None]] | None = None
    """Where a model tells the user, while the request waits, what is happening around it (a
    retry after a rate limit): ``(title, detail)``; ``None`` when nobody listens."""
