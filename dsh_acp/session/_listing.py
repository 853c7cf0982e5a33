"""What ``session/list`` shows of one stored session, kept beside its log (see ``_store``).

A listing says how long the log was when it was written; ``catch_up`` takes in what the log gained
since (titles and the time of the last event), so a stale listing costs a short read, never a
wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["Listing"]


@dataclass(slots=True)
class Listing:
    """What ``session/list`` shows of one session, and the log length it describes."""

    cwd: str
    additional_directories: list[str]
    title: str | None
    updated_at: str
    size: int = 0
    prompted: bool = False
    """Whether the session was ever prompted: ``session/list`` lists only those (one opened and
    left is no conversation to go back to)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "additional_directories": self.additional_directories,
            "title": self.title,
            "updated_at": self.updated_at,
            "size": self.size,
            "prompted": self.prompted,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Listing:
        title, size = data["title"], data["size"]
        if not isinstance(data["cwd"], str) or not (title is None or isinstance(title, str)):
            raise TypeError("not a listing")
        if not isinstance(size, int) or not isinstance(data["updated_at"], str):
            raise TypeError("not a listing")
        # A listing written before the key existed: its session was listed then, and stays so.
        prompted = data.get("prompted", True)
        if not isinstance(prompted, bool):
            raise TypeError("not a listing")
        directories = [d for d in data["additional_directories"] if isinstance(d, str)]
        return cls(data["cwd"], directories, title, data["updated_at"], size, prompted)

    def catch_up(self, data: bytes) -> None:
        """Take in the lines of ``data`` (what the log gained): titles, whether a prompt came,
        and the last time.

        Only the lines that can change them are parsed (parsing every line of a long log was most
        of its first load): a title event's line holds ``"title"`` twice, as its type and as its
        key (a card's line, holding it once, is not parsed); the time is the last line's that has
        one, found from the end."""
        lines = data.split(b"\n")
        for line in lines:
            if not self.prompted and b'"type":"user"' in line:
                record = _record(line)
                self.prompted = record is not None and record.get("type") == "user"
            if line.count(b'"title"') < 2:
                continue
            record = _record(line)
            if record is not None and record.get("type") == "title":
                title = record.get("title")
                if isinstance(title, str) and title:
                    self.title = title
        for line in reversed(lines):
            if b'"ts"' in line:
                record = _record(line)
                if record is not None and isinstance(record.get("ts"), str):
                    self.updated_at = record["ts"]
                    return


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None
