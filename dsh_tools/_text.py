"""Bounding text for a reader with a budget (a model's context, a UI panel)."""

from __future__ import annotations

__all__ = ["bound_text"]


def bound_text(text: str, *, head: int = 30 * 1024, tail: int = 30 * 1024, note: str = "") -> str:
    """Keep the first ``head`` and last ``tail`` UTF-8 bytes of ``text`` and replace the middle
    with a marker naming how much was dropped (``note`` is appended to the marker, e.g. where the
    whole text was saved). Cuts fall on character boundaries. Text within budget is returned as is.
    """
    if len(text) <= head + tail and len(text.encode("utf-8")) <= head + tail:
        return text
    data = text.encode("utf-8")
    if len(data) <= head + tail:
        return text
    start = data[:head].decode("utf-8", errors="ignore")
    end = data[len(data) - tail :].decode("utf-8", errors="ignore") if tail else ""
    dropped = len(data) - len(start.encode("utf-8")) - len(end.encode("utf-8"))
    suffix = f"; {note}" if note else ""
    return f"{start}\n[... {dropped} bytes omitted{suffix} ...]\n{end}"
