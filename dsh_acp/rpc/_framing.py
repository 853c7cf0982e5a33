"""Sans-IO framing for newline-delimited JSON-RPC: bytes in, messages out.

Nothing here does I/O or knows about anyio, so every corner of the framing (partial reads, oversize
lines, broken UTF-8) can be tested by feeding bytes, the way h11 is tested.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "Frame",
    "FrameDecoder",
    "FrameError",
    "Message",
    "encode_message",
    "json_bytes",
]

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024

# JSON-RPC codes used by the decoder; the connection layer defines the full public set.
_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600


@dataclass(frozen=True, slots=True)
class Message:
    """One decoded line: the parsed JSON value, not yet checked to be a JSON-RPC message."""

    value: Any


@dataclass(frozen=True, slots=True)
class FrameError:
    """A line that could not be decoded; `code` and `message` are ready for a JSON-RPC error."""

    code: int
    message: str


Frame: TypeAlias = Message | FrameError


class FrameDecoder:
    """Split a byte stream into newline-delimited JSON values.

    A line's size is its bytes before the ``\\n``. A line longer than ``max_message_bytes`` yields a
    single ``FrameError(-32600)`` as soon as the overflow is seen, and the rest of that line is
    dropped as it arrives, so memory stays bounded however long the line is.
    """

    __slots__ = ("_buffer", "_discarding", "_max")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        if max_message_bytes < 1:
            raise ValueError("max_message_bytes must be positive")
        self._max = max_message_bytes
        self._buffer = bytearray()  # the start of a line whose newline has not arrived yet
        self._discarding = False  # inside an oversize line, dropping bytes until its newline

    def feed(self, data: bytes) -> list[Frame]:
        """Consume ``data`` and return the frames of every line it completes, in order."""
        frames: list[Frame] = []
        start = 0
        end = data.find(b"\n")
        if self._discarding:
            if end < 0:
                return frames
            self._discarding = False
            start = end + 1
            end = data.find(b"\n", start)
        elif self._buffer:
            buffer = self._buffer
            if end < 0:
                if len(buffer) + len(data) > self._max:
                    frames.append(self._overflow())
                else:
                    buffer += data
                return frames
            if len(buffer) + end > self._max:
                buffer.clear()
                frames.append(self._oversize())
            else:
                buffer += memoryview(data)[:end]
                _decode(buffer, frames)
                buffer.clear()
            start = end + 1
            end = data.find(b"\n", start)
        limit = self._max
        while end >= 0:
            if end - start > limit:
                frames.append(self._oversize())
            elif start == 0 and end == len(data) - 1:
                # The common case, one whole line per read: parse in place (JSON allows the
                # trailing newline as whitespace), no slice, no copy.
                _decode(data, frames)
            else:
                _decode(data[start:end], frames)
            start = end + 1
            end = data.find(b"\n", start)
        rest = len(data) - start
        if rest > limit:
            frames.append(self._overflow())
        elif rest:
            self._buffer += memoryview(data)[start:]
        return frames

    def close(self) -> list[Frame]:
        """Signal end of input: a last line without a newline is still decoded."""
        frames: list[Frame] = []
        if self._buffer:
            _decode(self._buffer, frames)
            self._buffer.clear()
        self._discarding = False
        return frames

    def _overflow(self) -> FrameError:
        # The newline has not arrived yet: forget what we hold and drop the rest as it comes.
        self._buffer.clear()
        self._discarding = True
        return self._oversize()

    def _oversize(self) -> FrameError:
        return FrameError(_INVALID_REQUEST, f"Invalid request: message exceeds {self._max} bytes")


def _decode(line: bytes | bytearray, frames: list[Frame]) -> None:
    try:
        frames.append(Message(orjson.loads(line)))
    except orjson.JSONDecodeError as exc:
        if line.isspace() or not line:
            return  # blank lines between messages are tolerated
        frames.append(FrameError(_PARSE_ERROR, _parse_error_message(str(exc))))


def _parse_error_message(detail: str) -> str:
    if detail.startswith("str is not valid UTF-8"):
        return "Parse error: invalid UTF-8"
    return "Parse error: " + " ".join(detail.split())


def encode_message(message: Mapping[str, Any]) -> bytes:
    """Serialize one message as a single line (orjson escapes every newline inside strings)."""
    try:  # orjson first, as json_bytes does, without its frame: every notification comes here
        return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return json_bytes(message, orjson.OPT_APPEND_NEWLINE)  # a lone surrogate, or not JSON at all


def json_bytes(value: Any, option: int = 0) -> bytes:
    """``orjson.dumps``, except that a lone surrogate (text made from bytes that were not UTF-8
    and escaped nowhere before) is escaped as ``dsh_tools.shown_text`` does instead of failing."""
    try:
        return orjson.dumps(value, option=option)
    except TypeError as error:
        if "surrogates" not in str(error):
            raise
        from dsh_tools import json_safe  # rare: not loaded before initialize for it

        return orjson.dumps(json_safe(value), option=option)
