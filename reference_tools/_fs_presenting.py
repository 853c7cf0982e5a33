"""What the file tools' result presenters share: the ``meta`` they trust, the result's text and
the code block it is shown in."""

from __future__ import annotations

import re
from typing import Any

from dsh_tools import ToolResult

__all__ = ["fenced", "result_meta", "result_text"]


def fenced(body: str, info: str = "") -> str:
    """``body`` as a Markdown code block: tool output must not render as Markdown (a ``#``
    line would become a heading). The fence is longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0) if "`" in body else 0
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def result_text(result: ToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def result_meta(result: ToolResult) -> dict[str, Any] | None:
    # Presenters validate softly: a failed call or an old log's meta gives the generic card.
    return result.meta if not result.is_error and isinstance(result.meta, dict) else None
