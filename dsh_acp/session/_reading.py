"""Reading a session log back: its header at once, then its events one at a time.

A load takes the events as the log gives them: each is applied to the session's state and
replayed to the editor, then dropped, before the next line is read. So a load of 100,000 events
never holds them all (the memory of the one just dropped is reused for the next, and the
conversation it keeps is not left scattered among freed events the allocator cannot give back).

A line that is not JSON is skipped and described (``line 12 (the last, torn by a crash?)``), as is
one without its event's fields; a kind of event this agent does not know (written by a later one)
is left out.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ._event_lines import BadEvent, parse_event
from ._events import READABLE_VERSIONS, SessionEvent

__all__ = ["LoadedSession", "LogStream", "check_header", "header_of"]

_log = logging.getLogger("dsh_acp.store")
_NEWLINE = ord("\n")


@dataclass
class LoadedSession:
    """A session's header and events, read back from its log."""

    header: dict[str, Any]
    events: list[SessionEvent] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """The lines that could not be read, described (``line 12 (the last, torn by a crash?)``)."""

    @property
    def session_id(self) -> str:
        return str(self.header["session_id"])

    @property
    def cwd(self) -> str:
        return str(self.header["cwd"])


class LogStream:
    """A session log being read: its ``header`` (checked), and its events as they are iterated
    (once). ``skipped`` lists the lines that could not be read, complete once iterated."""

    def __init__(self, session_id: str, name: str, data: bytes) -> None:
        self.name = name
        self.skipped: list[str] = []
        self._data = data
        # The final line ends here (after it, only newlines): a bad line there was torn. Found
        # from the end, not with ``rstrip``, which would copy the whole log.
        end = len(data)
        while end and data[end - 1] == _NEWLINE:
            end -= 1
        self._end = end
        header, self._start, self._number = self._header()
        check_header(session_id, header)
        assert header is not None
        self.header: dict[str, Any] = header

    def _header(self) -> tuple[dict[str, Any] | None, int, int]:
        data, start, number = self._data, 0, 0
        while start < len(data):
            stop = data.find(b"\n", start)
            stop = len(data) if stop < 0 else stop
            number += 1
            line = data[start:stop]
            start = stop + 1
            if not line or line.isspace():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                self._unreadable(number, stop)
                continue
            if type(record) is dict:
                return record, start, number
        return None, start, number

    def _unreadable(self, number: int, stop: int) -> None:
        torn = stop >= self._end
        self.skipped.append(f"line {number}" + (" (the last, torn by a crash?)" if torn else ""))

    def __iter__(self) -> Iterator[SessionEvent]:
        data, start, number = self._data, self._start, self._number
        self._data = b""  # read once; the bytes go when the iteration ends
        loads, parse, find, size = orjson.loads, parse_event, data.find, len(data)
        # One line at a time, never all of them at once: a list of every line would be as large
        # as the log, and freed around the events it leaves behind (memory the agent keeps).
        while start < size:
            stop = find(b"\n", start)
            if stop < 0:
                stop = size
            number += 1
            line = data[start:stop]
            start = stop + 1
            if not line or line.isspace():
                continue
            try:
                record = loads(line)
            except orjson.JSONDecodeError:
                self._unreadable(number, stop)
                continue
            if type(record) is not dict:
                continue
            try:
                event = parse(record)
            except BadEvent as error:
                _log.warning("session log: line %d: %s", number, error)
                self.skipped.append(f"line {number} (not a complete event)")
                continue
            if event is not None:
                yield event
        for where in self.skipped:
            _log.warning("session log %s: skipped %s: not readable", self.name, where)


def check_header(session_id: str, header: dict[str, Any] | None) -> None:
    """``ValueError`` unless ``header`` is a session header of a format this agent reads."""
    if header is None or header.get("type") != "session":
        raise ValueError(f"session {session_id}: the log has no header")
    if header.get("version") not in READABLE_VERSIONS:
        raise ValueError(
            f"session {session_id}: log format {header.get('version')!r} is not supported "
            f"(this dsh-acp reads formats {', '.join(map(str, READABLE_VERSIONS))})"
        )


def header_of(data: bytes) -> tuple[dict[str, Any] | None, bytes]:
    """The header of a log (its first line that is a JSON object), and the bytes after it."""
    offset = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        end = len(data) if end < 0 else end
        line = data[offset:end]
        offset = end + 1
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict):
            return record, data[offset:]
    return None, b""
