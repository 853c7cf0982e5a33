"""Text for a reader: bounded for a budget (a model's context, a UI panel), and always valid
Unicode, whatever bytes it came from."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["BOUND_BYTES", "bound_text", "fenced", "json_safe", "shown_bytes", "shown_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_BACKTICKS = re.compile("`+")

BOUND_BYTES = 30 * 1024
"""What ``bound_text`` keeps by default at each end: what a model, or a panel without a live
terminal, is shown of a command's output."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    # U+DC80..U+DCFF is how os.fsdecode (surrogateescape) carries an undecodable byte: show the
    # byte, as bytes.decode(errors="backslashreplace") would.
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def shown_text(text: str) -> str:
    """``text`` with every lone surrogate escaped: a byte that ``os.fsdecode`` could not decode
    (a file name, say) as ``\\xNN``, any other surrogate as ``\\uNNNN``. The result encodes as
    UTF-8 (JSON encoders and files reject lone surrogates); valid text is returned as is."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(_escape, text)
    return text


def shown_bytes(data: bytes) -> str:
    """``data`` as UTF-8 text, each byte that is not valid UTF-8 shown as ``\\xNN``: the same
    convention as ``shown_text`` for a name that came from the OS."""
    return data.decode("utf-8", "backslashreplace")


def json_safe(value: Any) -> Any:
    """``value`` with ``shown_text`` applied to every string in it (keys too), for a JSON encoder
    that rejects lone surrogates: the last guard where text becomes JSON."""
    if isinstance(value, str):
        return shown_text(value)
    if isinstance(value, dict):
        return {json_safe(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def bound_text(text: str, *, head: int = BOUND_BYTES, tail: int = BOUND_BYTES, note: str = "") -> str:
    """Keep the first ``head`` and last ``tail`` UTF-8 bytes of ``text`` and replace the middle
    with a marker naming how much was dropped (``note`` is appended to the marker, e.g. where the
    whole text was saved). Cuts fall on character boundaries; lone surrogates are escaped
    (``shown_text``). Text within budget is returned as is.
    """
    text = shown_text(text)
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


def fenced(body: str, info: str = "") -> str:
    """``body`` as a Markdown code block (``info`` names its language: ``console``, ``json``,
    ``py``), so that text a tool printed does not render as Markdown (a ``#`` line would become a
    heading). The fence is longer than any backtick run inside; the closing fence starts a line
    of its own (an empty body gives an empty block)."""
    longest = max(map(len, _BACKTICKS.findall(body)), default=0) if "`" in body else 0
    fence = "`" * max(3, longest + 1)
    newline = "" if body.endswith("\n") or not body else "\n"
    return f"{fence}{info}\n{body}{newline}{fence}"
