"""Which sessions a store has open, so that two agents never write one session's log.

A session is claimed with a lock on one byte of a single lock file (``sessions/.locks``), at an
offset derived from the session id. The locks are open-file-description locks (Linux
``F_OFD_SETLK``): they conflict between two stores even inside one process, the kernel drops them
when the agent dies however it dies (no stale lock to clean up), and all of a store's claims cost
one file descriptor, not one per open session. Two ids that hash to the same byte (about one chance
in 10^11 with 10,000 sessions open) would only make the second one busy.

Where those locks do not exist, each claim holds its log open with ``flock``: the same guarantee
at one descriptor per open session.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import struct
from pathlib import Path
from typing import Final

__all__ = ["Claims", "SessionBusy"]

_OFD: Final = hasattr(fcntl, "F_OFD_SETLK") and struct.calcsize("P") == 8
_FLOCK_FORMAT: Final = "@hhqqi"  # struct flock: l_type, l_whence, l_start, l_len, l_pid
_FLOCK_SIZE: Final = -(-struct.calcsize(_FLOCK_FORMAT) // 8) * 8  # with the tail padding


class SessionBusy(RuntimeError):
    """Another process (or another store in this one) has this session open."""


def _offset(session_id: str) -> int:
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2  # below 2**62: any off_t holds it, and start + 1 too


def _ofd_lock(fd: int, kind: int, offset: int) -> None:
    request = struct.pack(_FLOCK_FORMAT, kind, os.SEEK_SET, offset, 1, 0).ljust(_FLOCK_SIZE, b"\0")
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, request)


class Claims:
    """The claims of one store on the sessions in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._fd: int | None = None  # the lock file, opened on the first claim
        self._held: dict[str, int | None] = {}  # claimed ids (and, without OFD locks, their fds)

    def claim(self, session_id: str, log_path: Path | str, *, fresh: bool = False) -> None:
        """Claim a session; ``SessionBusy`` if it is open elsewhere, ``OSError`` if the lock file
        cannot be opened (a read-only folder, no descriptor left). ``fresh``: the log was just
        created by us, so no older agent can hold it."""
        if session_id in self._held:
            raise _busy(session_id)
        if not _OFD:
            self._held[session_id] = _flock_log(session_id, log_path)
            return
        if self._fd is None:
            self._fd = os.open(self._folder / ".locks", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        offset = _offset(session_id)
        try:
            _ofd_lock(self._fd, fcntl.F_WRLCK, offset)
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                raise _busy(session_id) from None
            raise
        if fresh:
            self._held[session_id] = None
            return
        # A dsh-acp from before these claims locks the log itself with flock: respect that too.
        try:
            os.close(_flock_log(session_id, log_path))
        except BaseException:
            _ofd_lock(self._fd, fcntl.F_UNLCK, offset)
            raise
        self._held[session_id] = None

    def release(self, session_id: str) -> None:
        """Give up a claim (nothing if it is not held)."""
        if session_id not in self._held:
            return
        fd = self._held.pop(session_id)
        if fd is not None:
            os.close(fd)  # closing drops the flock
        elif self._fd is not None:
            try:
                _ofd_lock(self._fd, fcntl.F_UNLCK, _offset(session_id))
            except OSError:
                pass  # unlocking cannot fail on a valid descriptor; the lock dies with it anyway

    def close(self) -> None:
        """Release every claim."""
        for session_id in list(self._held):
            self.release(session_id)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _flock_log(session_id: str, log_path: Path | str) -> int:
    """The log opened and locked with ``flock``; ``SessionBusy`` if another holds that lock."""
    fd = os.open(log_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise _busy(session_id) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _busy(session_id: str) -> SessionBusy:
    return SessionBusy(f"session {session_id} is open in another dsh-acp process")
