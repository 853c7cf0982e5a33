"""The calls a call makes of its own (a subagent's, under its ``task`` card), as the client sees them.

A client that nests (``RenderContext.nested_calls``) gets each child call as a card of its own,
every ``tool_call`` and update marked with ``_meta.parentToolCallId`` (``nested``). Any other client
gets the children as lines of the parent card's content, each the title and status the child's own
card has (``StepList``): the child's cards are drawn by the bridge as usual and folded here, live
and on replay alike, so both end with the same lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ._updates import SessionUpdate, ToolCallCard, ToolCallUpdate

__all__ = ["PARENT_KEY", "StepList", "nested"]

PARENT_KEY: Final = "parentToolCallId"
"""The ``_meta`` key of a child call naming its parent's ``toolCallId`` (and the capability a
client advertises, under ``clientCapabilities._meta``, to get child cards)."""

_MARKS: Final = {"pending": "·", "in_progress": "…", "completed": "✓", "failed": "✗"}
_TITLE_CHARS: Final = 160
_MARKDOWN: Final = re.compile(r"[\\`*\[~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|<(?=[A-Za-z/!?])")
"""What in a title would start Markdown (code, emphasis, a link, HTML): escaped, and nothing else,
for the clients that show the text as it is (a path's ``my_file.py`` stays as it is)."""


def nested(update: Any, parent_id: str) -> Any:
    """A child's ``tool_call``/``tool_call_update`` (or a permission request's card) with its
    parent named in ``_meta``, beside whatever ``_meta`` it has (a terminal's)."""
    meta = {**update.get("_meta", {}), PARENT_KEY: parent_id}
    return {**update, "_meta": meta}


def _one_line(title: str) -> str:
    text = " ".join(title.split())
    return text if len(text) <= _TITLE_CHARS else text[: _TITLE_CHARS - 1] + "…"


def _line(title: str, status: str) -> str:
    escaped = _MARKDOWN.sub(lambda match: "\\" + match.group(0), _one_line(title))
    return f"- {_MARKS.get(status, '…')} {escaped}"


class StepList:
    """The child calls of one call, in the order they appeared, with the title and status their
    own cards show now."""

    __slots__ = ("_steps",)

    def __init__(self) -> None:
        self._steps: dict[str, list[str]] = {}

    def __bool__(self) -> bool:
        return bool(self._steps)

    def feed(self, update: SessionUpdate | ToolCallCard | ToolCallUpdate | Mapping[str, Any]) -> bool:
        """Take in one of a child's updates; whether a line changed (anything but a card's
        title or status, such as live output, changes none)."""
        kind = update.get("sessionUpdate")
        if kind not in ("tool_call", "tool_call_update"):
            return False
        call_id = update.get("toolCallId")
        if not isinstance(call_id, str):
            return False
        title, status = update.get("title"), update.get("status")
        step = self._steps.get(call_id)
        if step is None:
            if kind != "tool_call" and not isinstance(title, str):
                return False  # never announced: not a step (v2 announces with an upsert, titled)
            self._steps[call_id] = [title if isinstance(title, str) else call_id, str(status or "pending")]
            return True
        changed = False
        if isinstance(title, str) and title != step[0]:
            step[0], changed = title, True
        if isinstance(status, str) and status != step[1]:
            step[1], changed = status, True
        return changed

    def current(self) -> str | None:
        """The title of the newest step still going (waiting or running), if one is: what a
        client that shows only a card's title (a collapsed card) can show of the work."""
        for title, status in reversed(self._steps.values()):
            if status in ("pending", "in_progress"):
                return _one_line(title)
        return None

    def text(self) -> str:
        """The steps as a Markdown list, one line each: a mark for the status, the title."""
        return "\n".join(_line(title, status) for title, status in self._steps.values())
