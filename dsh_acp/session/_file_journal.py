"""The session's file system, keeping what ``/undo`` needs: every write through it is logged as
a ``FileChanged`` event, and what the file held before is kept beside the log.

It wraps the backend the tools use (the local disk, or the editor's buffers through
``fs/write_text_file``), so whatever tool writes through the ``FileSystem`` seam is covered —
``write``, ``edit``, a third-party tool. Commands are not: what ``bash`` (or a tool writing to
the disk itself) changes never passes here.

Before a write, the file's bytes are read exactly as stored (``snapshot``) and kept, one file
per distinct content, named by its digest (``KeptFiles``). After it, the event names the digest
of the bytes the backend wrote. Those are not read back (a user's save in between would be taken
for the agent's): they follow from the text and the one rule every backend keeps, that a file
keeps its byte-order mark and the line ending of its first line (``TextFormat``); a prediction
that missed would only make an undo leave the file as it is, never overwrite it.

Files over ``UNDO_LIMIT`` are written as before and logged as not kept: their undo is refused,
and an edit of a large file costs no copy of it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Hashable, Iterable

from dsh_tools.filesystem import FileSystem, FileTooLargeError, TextFormat, content_digest

from ._events import FileChanged, SessionEvent

__all__ = ["UNDO_LIMIT", "FileJournal", "KeptFiles"]

UNDO_LIMIT = 16 * 1024 * 1024
"""The largest file whose content is kept for ``/undo``."""


class KeptFiles:
    """What files held before the agent wrote them: one file per content, named by its digest,
    in a private folder (beside the session's log; a temporary one, removed with the session,
    when the agent keeps no logs)."""

    def __init__(self, folder: str | None) -> None:
        self._folder = folder
        self._temporary = folder is None

    def _made(self) -> str:
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="dsh-undo-")
        os.makedirs(self._folder, mode=0o700, exist_ok=True)
        return self._folder

    def keep(self, data: bytes) -> str:
        """Keep ``data``; its digest names it (``OSError`` when it cannot be written)."""
        digest = content_digest(data)
        path = os.path.join(self._made(), digest)
        if os.path.exists(path):
            return digest
        temporary = f"{path}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            with open(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, path)  # never half a copy under the digest's name
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return digest

    def read(self, digest: str) -> bytes | None:
        """What was kept under ``digest``, if it still is (and is what the digest says)."""
        if self._folder is None:
            return None
        try:
            with open(os.path.join(self._folder, os.path.basename(digest)), "rb") as file:
                data = file.read()
        except OSError:
            return None
        return data if content_digest(data) == digest else None

    def close(self) -> None:
        if self._temporary and self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


class FileJournal(FileSystem):
    """``inner`` (the session's file system), logging each write for ``/undo``."""

    def __init__(
        self,
        inner: FileSystem,
        kept: KeptFiles,
        record: Callable[[SessionEvent], object],
        turn: Callable[[], int],
    ) -> None:
        self.inner = inner
        self.kept = kept
        self._record = record
        self._turn = turn
        self._kept_in_turn: tuple[int, set[str]] = (-1, set())
        """The files already kept this turn: a turn's undo puts back what they held before its
        first write, so later writes keep nothing more."""

    async def read_text(self, path: str) -> str:
        return await self.inner.read_text(path)

    async def fingerprint(self, path: str) -> Hashable | None:
        return await self.inner.fingerprint(path)

    async def snapshot(self, path: str, *, limit: int) -> bytes | None:
        return await self.inner.snapshot(path, limit=limit)

    async def put_back(self, path: str, content: bytes | None, *, expected: str) -> str | None:
        return await self.inner.put_back(path, content, expected=expected)

    async def write_text(self, path: str, text: str) -> None:
        before, digest, problem = await self._before(path)
        await self.inner.write_text(path, text)
        self._logged(path, before, digest, problem, text)

    async def write_chunks(self, path: str, chunks: Iterable[str]) -> None:
        before, digest, problem = await self._before(path)
        if problem is not None:  # a file too large to keep is written as it comes, and not kept
            await self.inner.write_chunks(path, chunks)
            self._logged(path, before, digest, problem, None)
            return
        text = "".join(chunks)  # at most UNDO_LIMIT's worth: the file was small enough to keep
        await self.inner.write_text(path, text)
        self._logged(path, before, digest, problem, text)

    async def _before(self, path: str) -> tuple[bytes | None, str | None, str | None]:
        """What the file holds (``None``: no file), its digest once kept, or why it is not kept."""
        try:
            before = await self.inner.snapshot(path, limit=UNDO_LIMIT)
        except NotImplementedError:
            return None, None, "this file system cannot keep it"
        except FileTooLargeError:
            return None, None, f"it is larger than {UNDO_LIMIT // (1024 * 1024)} MiB"
        except OSError as error:
            return None, None, f"it could not be read ({error.strerror or error})"
        if before is None:
            return None, None, None
        turn, done = self._kept_in_turn
        if turn != self._turn():
            done = set()
            self._kept_in_turn = (self._turn(), done)
        try:
            digest = content_digest(before) if path in done else self.kept.keep(before)
        except OSError as error:
            return before, None, f"it could not be kept ({error.strerror or error})"
        done.add(path)
        return before, digest, None

    def _logged(
        self, path: str, before: bytes | None, digest: str | None, problem: str | None, text: str | None
    ) -> None:
        self._record(FileChanged(path, _written(before, text), digest, problem))

    def close(self) -> None:
        self.kept.close()


def _written(before: bytes | None, text: str | None) -> str:
    """The digest of what a backend writes for ``text`` over ``before`` (``""``: not known)."""
    if text is None:
        return ""
    try:
        form = TextFormat() if before is None else TextFormat.of(before.decode("utf-8"))
        return content_digest(form.apply(text).encode("utf-8"))
    except UnicodeError:  # not UTF-8 before, or text a file cannot hold: nothing to compare with
        return ""
