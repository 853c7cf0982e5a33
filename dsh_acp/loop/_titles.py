"""Session titles: a few words the model writes after the first turn, or the first prompt's words.

The model is asked once, without tools, with a bounded instruction and a bounded wait; whatever
goes wrong (no answer in time, an error, an empty or odd answer) the title falls back to the
first prompt's words, so a session always gets one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio

from dsh_acp.models._model import ModelRequest, TextDelta, UserMessage
from dsh_acp.models._protocol import Model
from dsh_tools import ContentBlock, TextBlock

__all__ = ["TITLE_LIMIT", "model_title", "prompt_words", "short_title"]

_log = logging.getLogger("dsh_acp.titles")

TITLE_LIMIT = 60
"""Characters of a title (the panel's history list shows one line)."""
_PROMPT_LIMIT = 2000  # characters of the first prompt the title request carries
_WAIT = 20.0  # seconds the title request may take
_INSTRUCTION = (
    "Write a title of at most six words for a coding session that starts with the request below. "
    "Answer with the title only: no quotes, no punctuation at the end.\n\nRequest:\n"
)


def prompt_words(prompt: Sequence[ContentBlock]) -> str:
    """The first text of a prompt, on one line (empty when it has none)."""
    text = next((block.text for block in prompt if isinstance(block, TextBlock) and block.text.strip()), "")
    return " ".join(text.split())


def short_title(text: str) -> str:
    """One line of at most ``TITLE_LIMIT`` characters (cut at the limit with an ellipsis)."""
    title = " ".join(text.split())
    if len(title) > TITLE_LIMIT:
        title = title[: TITLE_LIMIT - 1].rstrip() + "…"
    return title


async def model_title(model: Model, words: str) -> str | None:
    """The title the model writes for a session whose first prompt is ``words``; ``None`` when
    it gives none in time."""
    request = ModelRequest(
        messages=[UserMessage((TextBlock(text=_INSTRUCTION + words[:_PROMPT_LIMIT]),))],
        tools=[],
        system="You name coding sessions.",
        metadata={"purpose": "title"},
    )
    text: list[str] = []
    with anyio.move_on_after(_WAIT):
        try:
            async for event in model.stream(request):
                if type(event) is TextDelta:
                    text.append(event.text)
                    if sum(map(len, text)) > 4 * TITLE_LIMIT:
                        break  # a title, not an essay: what came so far is enough
        except Exception as error:  # the title is a nicety: the session goes on without it
            _log.info("the model wrote no title: %s", error)
            return None
    title = short_title("".join(text).strip().strip("\"'`*#").strip())
    return title or None
