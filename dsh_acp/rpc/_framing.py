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
    "readable_id",
]

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
_HEAD_BYTES = 64 * 1024
"""The start of a line that cannot be accepted, read for its id (``readable_id``)."""

# JSON-RPC codes used by the decoder; the connection layer defines the full public set.
_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600


@dataclass(frozen=True, slots=True)
class Message:
    """One decoded line: the parsed JSON value, not yet checked to be a JSON-RPC message."""

    value: Any


@dataclass(frozen=True, slots=True)
class FrameError:
    """A line that could not be decoded; `code` and `message` are ready for a JSON-RPC error.

    ``request_id`` is the line's id when its start can still be read (see ``readable_id``), and
    ``response`` whether the line answers a request (it has ``result`` or ``error``, no
    ``method``): a request waiting for that answer can then fail at once, with the reason."""

    code: int
    message: str
    request_id: int | str | None = None
    response: bool = False


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
                    frames.append(self._overflow(_head(buffer, data)))
                else:
                    buffer += data
                return frames
            if len(buffer) + end > self._max:
                frames.append(self._oversize(_head(buffer, data[:end])))
                buffer.clear()
            else:
                buffer += memoryview(data)[:end]
                _decode(buffer, frames)
                buffer.clear()
            start = end + 1
            end = data.find(b"\n", start)
        limit = self._max
        while end >= 0:
            if end - start > limit:
                frames.append(self._oversize(data[start : start + _HEAD_BYTES]))
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
            frames.append(self._overflow(data[start : start + _HEAD_BYTES]))
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

    def _overflow(self, head: bytes | bytearray) -> FrameError:
        # The newline has not arrived yet: forget what we hold and drop the rest as it comes.
        frame = self._oversize(head)
        self._buffer.clear()
        self._discarding = True
        return frame

    def _oversize(self, head: bytes | bytearray) -> FrameError:
        return _broken(_INVALID_REQUEST, f"Invalid request: message exceeds {self._max} bytes", head)


def _decode(line: bytes | bytearray, frames: list[Frame]) -> None:
    try:
        frames.append(Message(orjson.loads(line)))
    except orjson.JSONDecodeError as exc:
        if line.isspace() or not line:
            return  # blank lines between messages are tolerated
        frames.append(_broken(_PARSE_ERROR, _parse_error_message(str(exc)), line[:_HEAD_BYTES]))


def _head(buffer: bytearray, data: bytes) -> bytes:
    """The first ``_HEAD_BYTES`` of a line held in ``buffer`` that goes on in ``data``."""
    head = bytes(buffer[:_HEAD_BYTES])
    return head + data[: _HEAD_BYTES - len(head)]


def _broken(code: int, message: str, head: bytes | bytearray) -> FrameError:
    found = readable_id(head)
    if found is None:
        return FrameError(code, message)
    return FrameError(code, message, *found)


def readable_id(head: bytes | bytearray) -> tuple[int | str, bool] | None:
    """The id of the message a line that cannot be accepted starts with, and whether it is a
    response, read from its top-level members in order up to the first that cannot be read (a
    value too large, broken or cut at the end of ``head``); ``None`` when no id is read.

    A response is a line with ``result`` or ``error`` and no ``method`` among the members read:
    it answers the request of ours with that id. Only for lines already refused: off the path of
    every message that is fine, and of the start-up (``json`` loads here, on the first one).
    """
    import json

    text = bytes(head).decode("utf-8", "replace")

    def skip(at: int) -> int:  # JSON's whitespace
        while text[at : at + 1] in (" ", "\t", "\n", "\r"):
            at += 1
        return at

    decode = json.JSONDecoder().raw_decode
    members: dict[str, object] = {}
    index = skip(0)
    if not text.startswith("{", index):
        return None
    index += 1
    try:
        while text.startswith('"', index := skip(index)):
            key, index = decode(text, index)
            index = skip(index)
            if not text.startswith(":", index):
                break
            members[key] = None  # seen: its value may be what cannot be read
            members[key], index = decode(text, skip(index + 1))
            index = skip(index)
            if not text.startswith(",", index):
                break
            index += 1
    except (ValueError, RecursionError):  # a value too large for the head, broken, or too deep
        pass
    request_id = members.get("id")
    if type(request_id) is not int and type(request_id) is not str:
        return None
    if "method" in members:
        return request_id, False
    return (request_id, True) if "result" in members or "error" in members else None


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
