"""Durable sessions: one append-only JSONL event log per session.

The first line is a header (format version, session id, cwd, created); every later line is one
event, written and flushed as the turn runs, so a killed agent loses at most the event it was
writing (a torn last line is skipped with a warning on load). A log is locked while a process has
its session open, so two agents never write the same session. Strings that look like secrets are
redacted before they reach the disk.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from dsh_tools import redact_secret_shapes, secret_values

from ._config import default_state_dir
from ._framing import json_bytes

__all__ = [
    "FORMAT_VERSION",
    "LoadedSession",
    "Redactor",
    "SessionBusy",
    "SessionLog",
    "SessionStore",
    "StoredSession",
    "default_state_dir",
]

_log = logging.getLogger("dsh_acp.store")

FORMAT_VERSION = 1
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class SessionBusy(RuntimeError):
    """Another process has this session open."""


class Redactor:
    """Replaces secrets in strings: known values (API keys, the secrets of the agent's environment
    as ``dsh_tools.secret_values`` finds them) and tokens of a known shape wherever they appear
    (``dsh_tools.redact_secret_shapes``: the same definition that keeps them from commands)."""

    def __init__(self, secrets: Iterable[str] = (), environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._values = {s for s in secrets if s and len(s) >= 6}
        self._values |= secret_values(env)
        self._pattern: re.Pattern[str] | None = None
        self._compile()

    def _compile(self) -> None:
        ordered = sorted(self._values, key=len, reverse=True)  # the longest secret wins an overlap
        self._pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None

    def add(self, secret: str | None) -> None:
        """Also redact ``secret`` from now on (a key stored by ``dsh-acp login`` after start-up)."""
        if secret and len(secret) >= 6 and secret not in self._values:
            self._values.add(secret)
            self._compile()

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            if self._pattern is not None:
                value = self._pattern.sub("[REDACTED]", value)
            return redact_secret_shapes(value)
        if isinstance(value, list):
            return [self(item) for item in value]
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        return value


@dataclass
class StoredSession:
    """What ``session/list`` shows of a stored session."""

    session_id: str
    cwd: str
    additional_directories: list[str]
    title: str | None
    updated_at: str


@dataclass
class LoadedSession:
    """A session's header and events, read back from its log."""

    header: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        return str(self.header["session_id"])

    @property
    def cwd(self) -> str:
        return str(self.header["cwd"])


class SessionLog:
    """The open, locked log of one session: ``append`` writes and flushes one event."""

    def __init__(self, path: Path, handle: IO[bytes], clock: Callable[[], str], redact: Redactor) -> None:
        self.path = path
        self._handle = handle
        self._clock = clock
        self._redact = redact

    def append(self, event: dict[str, Any]) -> None:
        """Write one event (with a timestamp) and flush it to the OS."""
        if self._handle.closed:
            return
        record = self._redact({**event, "ts": self._clock()})
        self._handle.write(json_bytes(record, orjson.OPT_APPEND_NEWLINE))
        self._handle.flush()

    def close(self) -> None:
        """Release the lock and the file."""
        if not self._handle.closed:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()


class SessionStore:
    """The folder of session logs."""

    def __init__(self, root: Path, *, clock: Callable[[], str], redact: Redactor | None = None) -> None:
        self.root = root
        self.clock = clock
        self.redact = redact or Redactor()

    def _path(self, session_id: str) -> Path:
        if not _SAFE_ID.match(session_id):
            raise KeyError(session_id)
        return self.root / "sessions" / f"{session_id}.jsonl"

    def exists(self, session_id: str) -> bool:
        try:
            return self._path(session_id).is_file()
        except KeyError:
            return False

    def _lock(self, path: Path) -> IO[bytes]:
        handle = open(path, "ab")  # noqa: SIM115 - the log stays open (and locked) with its session
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise SessionBusy(f"session {path.stem} is open in another dsh-acp process") from None
        return handle

    def create(self, session_id: str, cwd: str, additional_directories: list[str]) -> SessionLog:
        """Start the log of a new session (private: mode 0600 in a 0700 folder)."""
        path = self._path(session_id)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        log = SessionLog(path, self._lock(path), self.clock, self.redact)
        log.append(
            {
                "type": "session",
                "version": FORMAT_VERSION,
                "session_id": session_id,
                "cwd": cwd,
                "additional_directories": additional_directories,
                "created": self.clock(),
            }
        )
        return log

    def open(self, session_id: str) -> SessionLog:
        """Reopen an existing session's log for appending (locks it)."""
        return SessionLog(self._path(session_id), self._lock(self._path(session_id)), self.clock, self.redact)

    def delete(self, session_id: str) -> None:
        """Remove a session's log; ``KeyError`` if there is none, ``SessionBusy`` while another
        process has it open (its lock is taken first, so a live session is never cut off)."""
        path = self._path(session_id)
        if not path.is_file():
            raise KeyError(session_id)
        handle = self._lock(path)
        try:
            path.unlink()
        finally:
            handle.close()

    def load(self, session_id: str) -> LoadedSession:
        """Read a session back; ``KeyError`` if there is none, ``ValueError`` for an unknown format."""
        path = self._path(session_id)
        if not path.is_file():
            raise KeyError(session_id)
        records = list(_records(path))
        if not records or records[0].get("type") != "session":
            raise ValueError(f"session {session_id}: the log has no header")
        header = records[0]
        if header.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"session {session_id}: log format {header.get('version')!r} is not supported "
                f"(this dsh-acp reads format {FORMAT_VERSION})"
            )
        return LoadedSession(header, records[1:])

    def list(self, cwd: str | None = None) -> list[StoredSession]:
        """Every stored session (optionally of one cwd), most recently updated first."""
        folder = self.root / "sessions"
        found = []
        for path in folder.glob("*.jsonl") if folder.is_dir() else ():
            try:
                loaded = self.load(path.stem)
            except (KeyError, ValueError):
                continue
            if cwd is not None and loaded.cwd != cwd:
                continue
            titles = [e["title"] for e in loaded.events if e.get("type") == "title"]
            updated = loaded.events[-1].get("ts") if loaded.events else loaded.header.get("ts")
            found.append(
                StoredSession(
                    session_id=loaded.session_id,
                    cwd=loaded.cwd,
                    additional_directories=list(loaded.header.get("additional_directories", [])),
                    title=titles[-1] if titles else None,
                    updated_at=str(updated or ""),
                )
            )
        found.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        return found


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as handle:
        lines = handle.read().split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            where = "its last line (torn by a crash?)" if number >= len(lines) - 1 else f"line {number}"
            _log.warning("session log %s: skipping %s: not JSON", path.name, where)
            continue
        if isinstance(record, dict):
            yield record
