"""Durable sessions: one append-only JSONL event log per session.

The first line is a header (format version, session id, cwd, created); every later line is one
event, written with a single ``write`` as the turn runs, so a killed agent loses at most the event
it was writing. A line torn that way (or by a full disk) is fenced off with a newline before the
next event is appended, so it never swallows that event; a load skips it and says so. When a turn
ends its log is ``fsync``ed: a power cut can lose the events of the turn that was running (and
sessions never prompted since), never a finished turn.

Beside each log, ``<id>.listing.json`` keeps what ``session/list`` shows (cwd, title, when the
session was last updated) and how long the log was when it was written: the agent replaces it
(write, then rename) when the session starts, gets a title and ends a turn. The list trusts it
for the log up to that length and reads only what was appended since, so a listing lost or left
behind by a crash costs a longer read, never a wrong answer, and the listing of a session never
means reading its whole log.

A session is claimed (``_claims``) while a process has it open, so two agents never write the same
session. Logs are opened per write through a small cache of descriptors, so an idle session holds
none. Strings that look like secrets are redacted before they reach the disk. A failure of the disk
(full, read-only, no permission, no descriptor left) is a ``StoreError`` naming the cause and path.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from dsh_acp._config import default_state_dir
from dsh_acp.rpc._errors import INTERNAL_ERROR, RpcError
from dsh_acp.rpc._framing import json_bytes
from dsh_tools import KnownSecrets, secret_values

from ._claims import Claims, SessionBusy
from ._event_lines import event_json
from ._events import FORMAT_VERSION, SessionEvent, TitleSet, TurnStopped, UserPrompt
from ._listing import Listing
from ._memory import collector_paused
from ._reading import LoadedSession, LogStream, check_header, header_of

__all__ = [
    "FORMAT_VERSION",
    "LoadedSession",
    "LogStream",
    "Redactor",
    "SessionBusy",
    "SessionLog",
    "SessionStore",
    "StoreError",
    "StoredSession",
    "default_state_dir",
]

_log = logging.getLogger("dsh_acp.store")

_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


_NOT_WRITABLE: Final = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""Why a claim's lock file cannot be made in a folder that can still be read."""

_OPEN_LOGS: Final = 16
"""Log descriptors a store keeps open between writes (the sessions written most recently)."""
_WRITE_PIECE: Final = 256 * 1024
"""The most bytes one ``write`` appends. A long record (a turn's message of megabytes) goes in
pieces of this size: on the Linux VM of the benches one ``write`` of a 4 MiB record took 1.1-8.1
ms of the agent's CPU (median 3.3), the same record in 256 KiB pieces 1.3-1.7 ms (median 1.5),
12 turns each, interleaved. The line is whole once its last piece lands, and a line torn by a
crash between pieces is fenced like any other."""


class StoreError(RpcError):
    """The state folder failed us: answered as an internal error that names the cause and path."""

    def __init__(self, doing: str, error: OSError, path: Path | str) -> None:
        super().__init__(INTERNAL_ERROR, f"{doing}: {describe_os_error(error, path)}")
        self.os_error = error


def describe_os_error(error: OSError, path: Path | str) -> str:
    """``no space left on device (/state/sessions/x.jsonl)``: the cause in words, then the path."""
    reason = error.strerror or type(error).__name__
    reason = reason[:1].lower() + reason[1:]
    if error.errno == errno.EMFILE:
        reason += ", the agent's limit (ulimit -n)"
    return f"{reason} ({error.filename or path})"


class Redactor:
    """Replaces secrets in strings: known values (API keys, the secrets of the agent's environment
    as ``dsh_tools.secret_values`` finds them) and tokens of a known shape wherever they appear
    (``dsh_tools.redact_secret_shapes``: the same definition that keeps them from commands)."""

    def __init__(self, secrets: Iterable[str] = (), environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._values = {s for s in secrets if s and len(s) >= 6}
        self._values |= secret_values(env)
        self._known = KnownSecrets(self._values)

    def add(self, secret: str | None) -> None:
        """Also redact ``secret`` from now on (a key stored by ``dsh-acp login`` after start-up)."""
        if secret and len(secret) >= 6 and secret not in self._values:
            self._values.add(secret)
            self._known = KnownSecrets(self._values)

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._known.redact(value)
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


class SessionLog:
    """The claimed log of one session: ``append`` writes one event."""

    __slots__ = ("_closed", "_store", "fence", "listing", "read_only", "session_id")

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        listing: Listing,
        *,
        fresh: bool = False,
        read_only: OSError | None = None,
    ) -> None:
        self.session_id = session_id
        self._store = store
        self._closed = False
        self.read_only = read_only
        """Why the log can be read but not written (its folder is read-only), or ``None``."""
        # Before the first write, and after a failed one, the end of the file is checked: a line
        # torn by a crash or a full disk gets its newline, so the next event is a line of its own.
        self.fence = not fresh
        self.listing = listing
        """What ``session/list`` shows of the session, as of the last event written."""

    def append(self, event: SessionEvent) -> None:
        """Write one event (with a timestamp) in one ``write``; a turn's ``stop`` is also synced
        to the disk. ``StoreError`` if it cannot be written (the log is then fenced again)."""
        if self._closed:
            return
        if self.read_only is not None:
            raise StoreError("the session log could not be written", self.read_only, self.path)
        ts = self._store.clock()
        record = self._store.redact({**event_json(event), "ts": ts})
        self.write_record(record, sync=type(event) is TurnStopped)
        self.listing.updated_at = ts
        if type(event) is UserPrompt:
            self.listing.prompted = True
        if type(event) is TitleSet:
            self.listing.title = record["title"]
        if type(event) is TitleSet or type(event) is TurnStopped:
            self._store.write_listing(self)

    def write_record(self, record: dict[str, Any], *, sync: bool = False) -> None:
        """Write one line (already redacted) in one ``write``."""
        self._store.write(self, json_bytes(record, orjson.OPT_APPEND_NEWLINE), sync=sync)

    @property
    def file(self) -> str:
        """The log's path (made when needed: thousands of idle sessions would each keep one)."""
        return self._store.file(self.session_id)

    @property
    def path(self) -> Path:
        return Path(self.file)

    def close(self) -> None:
        """Release the claim and the descriptor."""
        if not self._closed:
            self._closed = True
            self._store.release(self)


class SessionStore:
    """The folder of session logs."""

    def __init__(self, root: Path, *, clock: Callable[[], str], redact: Redactor | None = None) -> None:
        self.root = root
        self.clock = clock
        self.redact = redact or Redactor()
        self._folder = os.path.join(root, "sessions")
        self._claims = Claims(root / "sessions")
        self._fds: OrderedDict[str, int] = OrderedDict()  # most recently written last

    def _path(self, session_id: str) -> str:
        # A string, never a Path: pathlib interns every part of a path it parses, so a Path per
        # session id would keep each id's string alive for the life of the agent.
        if not _SAFE_ID.match(session_id):
            raise KeyError(session_id)
        return self.file(session_id)

    def file(self, session_id: str) -> str:
        """The path of a (valid) session id's log, as a string."""
        return f"{self._folder}/{session_id}.jsonl"

    def kept_folder(self, session_id: str) -> str:
        """Where a session keeps what files held before the agent wrote them (for ``/undo``)."""
        return f"{self._folder}/{session_id}.files"

    def exists(self, session_id: str) -> bool:
        try:
            return os.path.isfile(self._path(session_id))
        except KeyError:
            return False

    def create(self, session_id: str, cwd: str, additional_directories: list[str]) -> SessionLog:
        """Start the log of a new session (private: mode 0600 in a 0700 folder)."""
        path = self._path(session_id)
        try:
            os.makedirs(self._folder, mode=0o700, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except OSError as error:
            raise StoreError("the session log could not be created", error, path) from error
        try:
            now = self.clock()
            log = self._claim(
                session_id, path, Listing(cwd, list(additional_directories), None, now), fresh=True
            )
            header = {
                "type": "session",
                "version": FORMAT_VERSION,
                "session_id": session_id,
                "cwd": cwd,
                "additional_directories": additional_directories,
                "created": now,
                "ts": now,
            }
            log.write_record(self.redact(header))
            self.write_listing(log)
        except BaseException:
            self._release_path(session_id, path)
            for leftover in (path, self._listing_path(session_id)):
                try:
                    os.unlink(leftover)  # a session that could not start leaves nothing behind
                except OSError:
                    pass
            raise
        return log

    def fork(self, source_id: str, session_id: str, cwd: str, additional_directories: list[str]) -> None:
        """Start ``session_id``'s log as a copy of ``source_id``'s history: every complete event
        of its log as it is now, under a header of its own (its id, cwd and directories, the
        source's format, and ``forked_from``). The source is only read (it may be open here or
        in another agent, even running a turn: its log is append-only, and a line being written
        is left out). The copy appears whole or not at all. ``KeyError`` if there is no source,
        ``ValueError`` if its log has no header of a format this agent reads."""
        source = self._path(source_id)
        path = self._path(session_id)
        data = self._read(source_id, source)
        header, events = header_of(data)
        check_header(source_id, header)
        assert header is not None
        events = events[: events.rfind(b"\n") + 1]  # only whole lines: the last may be half written
        now = self.clock()
        record = {
            "type": "session",
            "version": header["version"],  # the events keep the format they were written in
            "session_id": session_id,
            "cwd": cwd,
            "additional_directories": additional_directories,
            "created": now,
            "forked_from": source_id,
            "ts": now,
        }
        first = json_bytes(self.redact(record), orjson.OPT_APPEND_NEWLINE)
        temporary = f"{self._folder}/.{session_id}.fork.tmp"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                for piece in (first, events):
                    view = memoryview(piece)
                    while view:
                        view = view[os.write(fd, view[:_WRITE_PIECE]) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(temporary, path)  # never over an existing log
        except OSError as error:
            raise StoreError("the forked session could not be written", error, path) from error
        finally:
            try:
                os.unlink(temporary)
            except OSError:
                pass
        self._link_kept(source_id, session_id)
        listing = Listing(cwd, list(additional_directories), None, now)
        listing.catch_up(events)  # the source's title comes with its history
        listing.updated_at = now  # and the fork was made now
        self._write_listing_of(session_id, listing)

    def _link_kept(self, source_id: str, session_id: str) -> None:
        """A fork's ``/undo`` reaches the files its history changed: it gets the source's kept
        copies (hard links, so no copy is made; best effort: a copy missing makes that file's
        undo refused, never wrong)."""
        source, target = self.kept_folder(source_id), self.kept_folder(session_id)
        try:
            names = os.listdir(source)
        except OSError:
            return  # nothing was kept
        try:
            os.makedirs(target, mode=0o700, exist_ok=True)
            for name in names:
                with contextlib.suppress(FileExistsError):
                    os.link(f"{source}/{name}", f"{target}/{name}")
        except OSError as error:
            _log.warning("session fork: the kept copies of %s were not all linked: %s", source_id, error)

    def open(self, session_id: str) -> SessionLog:
        """Claim an existing session's log for appending; ``SessionBusy`` if it is open elsewhere.

        In a folder this process cannot write (a read-only disk, a backup mounted for viewing) the
        claim's lock file cannot be made: the log is then opened read-only (``read_only`` says
        why), so the session can be loaded and viewed, and any write fails naming the cause."""
        path = self._path(session_id)
        current = False
        try:
            listing, current = self._listing_and_whether_current(session_id)
        except (OSError, ValueError):
            listing = None  # the next load says what is wrong with the log
        try:
            log = self._claim(session_id, path, listing or Listing("", [], None, ""))
        except StoreError as error:
            if error.os_error.errno not in _NOT_WRITABLE or not os.path.isfile(path):
                raise
            cause = OSError(error.os_error.errno, error.os_error.strerror)  # named with the log's path
            return SessionLog(self, session_id, listing or Listing("", [], None, ""), read_only=cause)
        if listing is not None and not current:
            # A log of an earlier format, or one its listing lags behind, gets its listing (one
            # that is current is not written again: a load waited for that write).
            self.write_listing(log)
        return log

    def _claim(self, session_id: str, path: str, listing: Listing, *, fresh: bool = False) -> SessionLog:
        try:
            self._claims.claim(session_id, path, fresh=fresh)
        except OSError as error:
            raise StoreError("the session could not be opened", error, path) from error
        return SessionLog(self, session_id, listing, fresh=fresh)

    def release(self, log: SessionLog) -> None:
        """Let another process open ``log``'s session; its descriptor is closed."""
        if log.read_only is None:  # a read-only log was never claimed
            self._release_path(log.session_id, log.file)

    def _release_path(self, session_id: str, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)
        self._claims.release(session_id)

    def close(self) -> None:
        """Close every descriptor and release every claim."""
        while self._fds:
            os.close(self._fds.popitem()[1])
        self._claims.close()

    def write(self, log: SessionLog, data: bytes, *, sync: bool = False) -> None:
        """Append ``data`` to ``log`` (fencing a torn last line first); ``StoreError`` on failure."""
        try:
            fd = self._fd(log.file)
            if log.fence:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    _log.warning("session log %s: its last line was torn; fenced off", log.path.name)
                    data = b"\n" + data
                log.fence = False
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view[:_WRITE_PIECE]) :]
            if sync:
                os.fsync(fd)
        except OSError as error:
            log.fence = True  # a partial write may have torn the line
            stale = self._fds.pop(log.file, None)
            if stale is not None:
                os.close(stale)
            raise StoreError("the session log could not be written", error, log.path) from error

    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        self._fds[path] = fd
        if len(self._fds) > _OPEN_LOGS:
            os.close(self._fds.popitem(last=False)[1])
        return fd

    def delete(self, session_id: str) -> None:
        """Remove a session's log; ``KeyError`` if there is none, ``SessionBusy`` while another
        process has it open (it is claimed first, so a live session is never cut off)."""
        path = self._path(session_id)
        if not os.path.isfile(path):
            raise KeyError(session_id)
        try:
            self._claims.claim(session_id, path)
        except OSError as error:
            raise StoreError("the session could not be deleted", error, path) from error
        try:
            os.unlink(path)
        except OSError as error:
            raise StoreError("the session could not be deleted", error, path) from error
        finally:
            self._claims.release(session_id)
        try:
            os.unlink(self._listing_path(session_id))
        except OSError:
            pass  # none was written, or it goes with the folder
        import shutil  # not at the top: with its archive modules it weighs on an idle agent

        shutil.rmtree(self.kept_folder(session_id), ignore_errors=True)

    def read(self, session_id: str) -> LogStream:
        """A session's log to read back, event by event; ``KeyError`` if there is none,
        ``ValueError`` for an unknown format, ``StoreError`` if it cannot be read."""
        path = self._path(session_id)
        return LogStream(session_id, os.path.basename(path), self._read(session_id, path))

    def load(self, session_id: str) -> LoadedSession:
        """A session's header and all its events (``read`` gives them one at a time)."""
        stream = self.read(session_id)
        with collector_paused():
            events = list(stream)
        return LoadedSession(stream.header, events, stream.skipped)

    def _read(self, session_id: str, path: str, offset: int = 0) -> bytes:
        try:
            with open(path, "rb") as handle:
                if offset:
                    handle.seek(offset)
                return handle.read()
        except (FileNotFoundError, IsADirectoryError):
            raise KeyError(session_id) from None
        except OSError as error:
            raise StoreError("the session log could not be read", error, path) from error

    def _listing_path(self, session_id: str) -> str:
        return f"{self._folder}/{session_id}.listing.json"

    def write_listing(self, log: SessionLog) -> None:
        """Replace ``log``'s listing with what it shows now (best effort: without one, or with
        a stale one, ``list`` reads more of the log)."""
        self._write_listing_of(log.session_id, log.listing)

    def _write_listing_of(self, session_id: str, listing: Listing) -> None:
        path = self._listing_path(session_id)
        try:
            listing.size = os.stat(self.file(session_id)).st_size
            temporary = f"{self._folder}/.{session_id}.listing.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, orjson.dumps(listing.to_json()))
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except OSError as error:
            _log.debug("session listing %s not written: %s", path, error)

    def _listing(self, session_id: str) -> Listing:
        """What ``session/list`` shows of a session: its listing, brought up to date with what
        the log gained since it was written (the whole log when there is no usable listing)."""
        return self._listing_and_whether_current(session_id)[0]

    def _listing_and_whether_current(self, session_id: str) -> tuple[Listing, bool]:
        """``_listing``, and whether the listing file already said all of it."""
        path = self._path(session_id)
        listing: Listing | None = None
        try:
            with open(self._listing_path(session_id), "rb") as handle:
                listing = Listing.from_json(orjson.loads(handle.read()))
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            listing = None
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            raise KeyError(session_id) from None
        except OSError as error:
            raise StoreError("the session log could not be read", error, path) from error
        if listing is not None and listing.size == size:
            return listing, True
        if listing is None or listing.size > size:
            data = self._read(session_id, path)
            header, records = header_of(data)
            check_header(session_id, header)
            assert header is not None
            listing = Listing(
                str(header["cwd"]),
                [d for d in header.get("additional_directories", ()) if isinstance(d, str)],
                None,
                str(header.get("ts") or ""),
            )
        else:
            records = self._read(session_id, path, listing.size)
        listing.catch_up(records)
        listing.size = size
        return listing, False

    def list(self, cwd: str | None = None) -> list[StoredSession]:
        """Every stored session (optionally of one cwd), most recently updated first. A log that
        cannot be read is left out (and logged); ``StoreError`` if the folder cannot be read."""
        try:
            names = os.listdir(self._folder) if os.path.isdir(self._folder) else []
        except OSError as error:
            raise StoreError("the sessions could not be listed", error, self._folder) from error
        found = []
        for name in names:
            if not name.endswith(".jsonl"):
                continue
            session_id = name[: -len(".jsonl")]
            try:
                listing = self._listing(session_id)
            except (KeyError, ValueError):
                continue
            except StoreError as error:
                _log.warning("session/list: %s", error.message)
                continue
            if (cwd is not None and listing.cwd != cwd) or not listing.prompted:
                continue
            found.append(
                StoredSession(
                    session_id=session_id,
                    cwd=listing.cwd,
                    additional_directories=list(listing.additional_directories),
                    title=listing.title,
                    updated_at=listing.updated_at,
                )
            )
        found.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        return found
