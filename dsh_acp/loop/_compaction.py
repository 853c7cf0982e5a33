"""Sizing a conversation against a context window, and choosing what a compaction summarises.

No tokenizer is at hand for an arbitrary server, so sizes are estimated from characters: at the
characters per token the server's own counts showed for the last request, else three (which
over-counts English and code for the tokenizers in use, so compaction comes a little early rather
than a request too late). Where the server has reported usage, the estimate is that count plus the
characters added since.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from dsh_acp.models._model import AssistantMessage, ContextMessage, Message, ToolResultMessage, UserMessage
from dsh_acp.session._events import SUMMARY_PREFIX
from dsh_acp.wire._updates import Notice, notice
from dsh_tools import ContentBlock, TextBlock, bound_text

__all__ = [
    "AUTO_THRESHOLD",
    "CHARS_PER_TOKEN",
    "COMPACT_INSTRUCTION",
    "SUMMARY_INPUT_SHARE",
    "SUMMARY_SHARE",
    "Cut",
    "automatic_compaction_notice",
    "choose_cut",
    "message_chars",
    "no_room_message",
]

CHARS_PER_TOKEN: Final = 3
AUTO_THRESHOLD: Final = 0.85
"""Compact on its own when the next request is estimated above this share of the window."""
SUMMARY_INPUT_SHARE: Final = 0.6
"""The share of the window the summariser's input may take (the rest: the system prompt, the
instruction and the summary itself)."""
SUMMARY_SHARE: Final = 0.25
"""A summary longer than this share of the window is cut (head and tail)."""
_RESULT_CHARS: Final = 1500
"""A tool result the summariser sees is cut to this many characters (head and tail)."""

COMPACT_INSTRUCTION = (
    "Summarize our conversation so far for your own future reference: the user's goals, what was "
    "done (files read and changed, commands run and their outcomes), decisions made, and what "
    "remains. Be complete but concise; this summary will replace the conversation."
)
"""What the model is asked for when the conversation is compacted (``/compact`` or automatically)."""


def message_chars(message: Message) -> int:
    """The characters a message puts into a request (its texts and tool-call arguments)."""
    if isinstance(message, AssistantMessage):
        return len(message.text) + sum(len(c.name) + len(c.arguments) + 16 for c in message.tool_calls) + 8
    if isinstance(message, ContextMessage):
        return len(message.text) + 24
    return sum(len(getattr(block, "text", "")) or 256 for block in message.content) + 8


@dataclass(frozen=True, slots=True)
class Cut:
    """A compaction's plan: summarise ``prefix`` (shrunk for the summariser), keep
    ``history[end:]`` after the summary."""

    end: int
    prefix: list[Message]


def choose_cut(
    history: Sequence[Message], budget_chars: int | None, *, keep_current_turn: bool = False
) -> Cut | None:
    """The longest prefix, oldest first, that fits ``budget_chars`` once shrunk (``None``: no
    limit), cut where a turn or a tool step begins; ``None`` when nothing can be summarised (the
    history is one turn's first message, or all that may go is an earlier compaction's summary).
    With ``keep_current_turn`` (compacting in the middle of a turn) the newest message always
    stays, and so does the turn's prompt where the cut can fall before it."""
    cuts = _cut_points(history, keep_current_turn)
    if not cuts or (cuts[-1] == 1 and _is_summary(history[0])):
        # Summarising a summary alone costs a model call and frees next to nothing: it is
        # already cut to a share of the window, and a new one may be as long.
        return None
    shrunk = [_shrink(message, _RESULT_CHARS) for message in history]
    if budget_chars is None:
        return Cut(cuts[-1], shrunk[: cuts[-1]])
    sizes = _running_sizes(shrunk)
    fitting = [i for i in cuts if sizes[i] <= budget_chars]
    if fitting and sizes[-1] - sizes[fitting[-1]] <= budget_chars:
        end = fitting[-1]
        return Cut(end, shrunk[:end])
    return _harder_cut(history, cuts[-1], budget_chars)


def _cut_points(history: Sequence[Message], keep_current_turn: bool) -> list[int]:
    """Where a cut may fall: where a turn or a tool step begins (and after the last message,
    unless the current turn stays)."""
    cuts = [i for i in range(1, len(history)) if isinstance(history[i], (UserMessage, AssistantMessage))]
    if not keep_current_turn:
        cuts.append(len(history))
    elif cuts:
        turn = max((i for i in cuts if isinstance(history[i], UserMessage)), default=0)
        if turn > 0:
            cuts = [i for i in cuts if i <= turn]
    return cuts


def _harder_cut(history: Sequence[Message], end: int, budget_chars: int) -> Cut:
    """What fits as it is would free too little (or nothing fits): summarise all that may go,
    each message shrunk harder, and leave out the oldest if even that is too much (they are
    usually an earlier summary's material already)."""
    per_message = max(budget_chars // end - 64, 120)
    prefix = [_shrink(message, per_message, every_text=True) for message in history[:end]]
    sizes = _running_sizes(prefix)
    start = next(i for i in range(end + 1) if sizes[-1] - sizes[i] <= budget_chars)
    return Cut(end, prefix[start:] or prefix[-1:])


def _is_summary(message: Message) -> bool:
    return isinstance(message, ContextMessage) and message.text.startswith(SUMMARY_PREFIX)


def _running_sizes(messages: Sequence[Message]) -> list[int]:
    sizes = [0]
    for message in messages:
        sizes.append(sizes[-1] + message_chars(message))
    return sizes


def no_room_message(window: int) -> str:
    """What to do when even a compacted conversation does not fit."""
    return (
        f"the conversation no longer fits this model's context window ({window} tokens), even "
        "after compacting it: start a new session, or use a model with a larger window "
        "(a larger context size on the server, or context_window in the config file)"
    )


def automatic_compaction_notice(window: int, estimate: int | None) -> Notice:
    """What a client that shows notices is told as the agent compacts on its own, and why:
    ``estimate`` is the next request's estimated size in tokens, ``None`` when the server has
    just refused the request as too large (then the request is sent again)."""
    if estimate is None:
        return notice(
            "warning",
            "Context window exceeded: compacting and retrying",
            f"The server refused the request as larger than its {window:,}-token context window; "
            "the oldest part of the conversation is being summarised and the request will be sent again.",
        )
    share = round(100 * estimate / window)
    return notice(
        "info",
        "Compacting the conversation",
        f"The next request would take about {share} % of the model's {window:,}-token context "
        "window; the oldest part of the conversation is being summarised to make room.",
    )


def _shrink(message: Message, limit: int, every_text: bool = False) -> Message:
    """The message as the summariser sees it: long texts keep their head and tail."""
    half = max(limit // 2, 50)
    if isinstance(message, ToolResultMessage):
        content = tuple(_shrunk_block(block, half) for block in message.content)
        return ToolResultMessage(message.call_id, message.name, content, message.is_error)
    if not every_text:
        return message
    if isinstance(message, UserMessage):
        return UserMessage(tuple(_shrunk_block(block, half) for block in message.content))
    if isinstance(message, ContextMessage):
        return ContextMessage(_bound(message.text, half))
    return AssistantMessage(
        text=_bound(message.text, half),
        reasoning="",
        tool_calls=tuple(type(c)(c.id, c.name, _bound(c.arguments, half)) for c in message.tool_calls),
    )


def _shrunk_block(block: ContentBlock, half: int) -> ContentBlock:
    if isinstance(block, TextBlock) and len(block.text) > 2 * half:
        return TextBlock(text=_bound(block.text, half))
    return block


def _bound(text: str, half: int) -> str:
    return bound_text(text, head=half, tail=half) if len(text) > 2 * half else text
