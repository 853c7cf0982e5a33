"""A short, safe rendering of a value a peer sent, for log lines, and text folded onto one line.

Peers (the editor, an MCP server, a model API) control the size and shape of what they send: a
``repr`` of a 4 MiB id is a 4 MiB log line, and a ``repr`` of an array nested a thousand levels deep
raises ``RecursionError``, which the logging module re-raises into whoever logged. ``brief`` walks
the value with an explicit stack (no recursion), stops at a depth and a character budget, and never
calls a peer-controlled ``repr`` on anything unbounded, so it costs what it prints and cannot fail.

``one_line`` is for messages that must stay one line (a JSON-RPC error, a failure shown to the
user). It lives here, not beside ``dsh_tools.bound_text``, because the JSON-RPC layer uses it and
loads before ``initialize`` is answered, when ``dsh_tools`` must not be imported yet.

``visible`` is the one escaper of text a person reads (a card's title, a permission option, a
notice, the plan, a session title): what the model, an MCP server or a file name controls must
not make it show something else than it is. Control characters (C0, DEL, C1) move the cursor,
erase, or start escape sequences in a terminal client (``touch X #<CR>ls -la`` would show as
``ls -la``); bidirectional overrides and isolates reorder what follows them (a file name with
U+202E shows reversed); invisible format characters (zero-width spaces and joiners, the BOM, tag
characters, fillers) hide text or make two names look alike; line and paragraph separators break
a title. Each becomes an escape a person can read: ``\\r``, ``\\x1b``, ``\\u202e``; a lone
surrogate (a file name byte that was not UTF-8) becomes ``\\xNN`` as elsewhere. Text that has
none of them (nearly all) is returned as it is.
"""

from __future__ import annotations

import functools
import re
from itertools import islice
from typing import Final, Literal

__all__ = ["BRIEF_LIMIT", "brief", "one_line", "visible"]

BRIEF_LIMIT: Final = 300
"""Characters of one value in a log line (a little more with the closing marker)."""

_DEPTH: Final = 6
_STRING: Final = 120  # characters of one string inside a container


def brief(value: object, limit: int = BRIEF_LIMIT, depth: int = _DEPTH) -> str:
    """``value`` as one line of at most about ``limit`` characters, containers cut at ``depth``."""
    out: list[str] = []
    size = 0
    # A value to render at a depth, or literal text (brackets, separators).
    stack: _Stack = [(value, 0)]
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
                text = (
                    _open_dict(current, level, room, stack) if level < depth else "{…}" if current else "{}"
                )
            elif isinstance(current, list | tuple):
                text = (
                    _open_list(current, level, room, stack) if level < depth else "[…]" if current else "[]"
                )
            else:
                text = _leaf(current, min(room, _STRING) if level else room)
        out.append(text)
        size += len(text)
    return "".join(out)


_Stack = list[tuple[object, int] | str]


def _open_dict(current: dict[object, object], level: int, room: int, stack: _Stack) -> str:
    """The dict's opening brace; what follows it (as many entries as ``room`` may show) goes on
    the stack, last first."""
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
    return "{"


def _open_list(current: list[object] | tuple[object, ...], level: int, room: int, stack: _Stack) -> str:
    """The list's opening bracket; what follows it goes on the stack, last first."""
    stack.append("]")
    shown = current[: room // 2 + 1]
    if len(current) > len(shown):
        stack.append(f", …(+{len(current) - len(shown)})")
    for index in range(len(shown) - 1, -1, -1):
        stack.append((shown[index], level + 1))
        if index:
            stack.append(", ")
    return "["


# What ``visible`` escapes: Cc, Cf, Zl, Zp and the default-ignorable code points (Unicode 15),
# surrogates; not the variation selectors U+FE00-FE0F, which emoji need. Tab and newline are
# taken out of the class for text of many lines.
_INVISIBLE = (
    r"\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    r"\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164"
    r"\ud800-\udfff\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    r"\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_ASCII_LINE = re.compile(r"[\x00-\x1f\x7f]")
_ASCII_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"  # a byte os.fsdecode could not decode
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


@functools.cache
def _escaped(lines: bool) -> re.Pattern[str]:
    """The class ``visible`` escapes, compiled on first use: off the path to the ``initialize``
    answer."""
    return re.compile(f"[{_INVISIBLE}]" if lines else rf"[\t\n{_INVISIBLE}]")


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with every character that could make it show something else escaped (see the
    module docstring). ``lines=True`` keeps newlines and tabs (a description, a notice's body;
    a CRLF becomes a newline); otherwise they are escaped too, for text that must stay one line
    (a title, an option's name). Escaping twice changes nothing more."""
    if text.isascii() and (_ASCII_LINES if lines else _ASCII_LINE).search(text) is None:
        return text
    escaped = _escaped(lines)
    if escaped.search(text) is None:
        return text
    if lines:
        text = text.replace("\r\n", "\n")
    return escaped.sub(_escape, text)


def one_line(text: str, limit: int | None = None, *, cut: Literal["end", "middle"] = "end") -> str:
    """``text`` as one line, for a message that must stay one (a JSON-RPC error, a log line, a
    failure shown to the user): text with a line break has every run of whitespace folded to
    one space; text already on one line is kept as it is (a path with two spaces in it still
    names its file), but for what ``visible`` escapes (tabs stay).

    Longer than ``limit`` characters, it is cut: at the end with ``…`` (``cut="end"``), or in
    the middle with a marker naming how many characters went (``cut="middle"``: the first third
    and the last two thirds are kept, for messages whose cause comes last).
    """
    if "\n" in text or "\r" in text:
        text = " ".join(text.split())
    text = visible(text, lines=True)  # no line break is left; a tab stays
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
