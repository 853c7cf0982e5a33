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

    def to_json(self) -> dict[str, Any]:
        return {
            "cwd": self.cwd,
            "additional_directories": self.additional_directories,
            "title": self.title,
            "updated_at": self.updated_at,
            "size": self.size,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Listing:
        title, size = data["title"], data["size"]
        if not isinstance(data["cwd"], str) or not (title is None or isinstance(title, str)):
            raise TypeError("not a listing")
        if not isinstance(size, int) or not isinstance(data["updated_at"], str):
            raise TypeError("not a listing")
        directories = [d for d in data["additional_directories"] if isinstance(d, str)]
        return cls(data["cwd"], directories, title, data["updated_at"], size)

    def catch_up(self, data: bytes) -> None:
        """Take in the lines of ``data`` (what the log gained): titles and the last time."""
        for line in data.split(b"\n"):
            if b'"title"' not in line and b'"ts"' not in line:
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(record, dict):
                continue
            if record.get("type") == "title" and isinstance(record.get("title"), str) and record["title"]:
                self.title = record["title"]
            if isinstance(record.get("ts"), str):
                self.updated_at = record["ts"]
