"""A short, safe rendering of a value a peer sent, for log lines, and text folded onto one line.

Peers (the editor, an MCP server, a model API) control the size and shape of what they send: a
``repr`` of a 4 MiB id is a 4 MiB log line, and a ``repr`` of an array nested a thousand levels deep
raises ``RecursionError``, which the logging module re-raises into whoever logged. ``brief`` walks
the value with an explicit stack (no recursion), stops at a depth and a character budget, and never
calls a peer-controlled ``repr`` on anything unbounded, so it costs what it prints and cannot fail.

``one_line`` is for messages that must stay one line (a JSON-RPC error, a failure shown to the
user). It lives here, not beside ``dsh_tools.bound_text``, because the JSON-RPC layer uses it and
loads before ``initialize`` is answered, when ``dsh_tools`` must not be imported yet.
"""

from __future__ import annotations

from itertools import islice
from typing import Final, Literal

__all__ = ["BRIEF_LIMIT", "brief", "one_line"]

BRIEF_LIMIT: Final = 300
"""Characters of one value in a log line (a little more with the closing marker)."""

_DEPTH: Final = 6
_STRING: Final = 120  # characters of one string inside a container


def brief(value: object, limit: int = BRIEF_LIMIT, depth: int = _DEPTH) -> str:
    """``value`` as one line of at most about ``limit`` characters, containers cut at ``depth``."""
    out: list[str] = []
    size = 0
    # A value to render at a depth, or literal text (brackets, separators).
    stack: list[tuple[object, int] | str] = [(value, 0)]
    while stack:
        if size >= limit:
            out.append("…")
            break
        item = stack.pop()
        if isinstance(item, str):
            text = item
        else:
            current, level = item
            room = max(limit - size, 8)
            if isinstance(current, dict):
                if level >= depth:
                    text = "{…}" if current else "{}"
                else:
                    text = "{"
                    stack.append("}")
                    entries = list(islice(current.items(), room // 4 + 1))
                    if len(current) > len(entries):
                        stack.append(f", …(+{len(current) - len(entries)})")
                    for index in range(len(entries) - 1, -1, -1):
                        key, entry = entries[index]
                        stack.append((entry, level + 1))
                        stack.append(": ")
                        stack.append((key, level + 1))
                        if index:
                            stack.append(", ")
            elif isinstance(current, list | tuple):
                if level >= depth:
                    text = "[…]" if current else "[]"
                else:
                    text = "["
                    stack.append("]")
                    shown = current[: room // 2 + 1]
                    if len(current) > len(shown):
                        stack.append(f", …(+{len(current) - len(shown)})")
                    for index in range(len(shown) - 1, -1, -1):
                        stack.append((shown[index], level + 1))
                        if index:
                            stack.append(", ")
            else:
                text = _leaf(current, min(room, _STRING) if level else room)
        out.append(text)
        size += len(text)
    return "".join(out)


def one_line(text: str, limit: int | None = None, *, cut: Literal["end", "middle"] = "end") -> str:
    """``text`` as one line, for a message that must stay one (a JSON-RPC error, a log line, a
    failure shown to the user): text with a line break has every run of whitespace folded to
    one space; text already on one line is kept as it is (a path with two spaces in it still
    names its file).

    Longer than ``limit`` characters, it is cut: at the end with ``…`` (``cut="end"``), or in
    the middle with a marker naming how many characters went (``cut="middle"``: the first third
    and the last two thirds are kept, for messages whose cause comes last).
    """
    if "\n" in text or "\r" in text:
        text = " ".join(text.split())
    if limit is None or len(text) <= limit:
        return text
    if cut == "end":
        return text[: limit - 1] + "…"
    head = limit // 3
    tail = limit - head
    return f"{text[:head]} [… {len(text) - head - tail} characters …] {text[-tail:]}"


def _leaf(value: object, room: int) -> str:
    if isinstance(value, str | bytes | bytearray):
        if len(value) <= room:
            return repr(value)
        return f"{value[:room]!r}…({len(value)} {'chars' if isinstance(value, str) else 'bytes'})"
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        # Very large ints are slow to print (and past 4300 digits refuse to).
        return repr(value) if value.bit_length() <= 256 else f"<int of {value.bit_length()} bits>"
    if isinstance(value, float):
        return repr(value)
    try:
        text = repr(value)
    except Exception as error:  # an object whose repr fails (or recurses) is still named
        return f"<{type(value).__name__}: repr failed ({type(error).__name__})>"
    return text if len(text) <= room else text[:room] + "…"
