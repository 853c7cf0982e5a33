"""The ``FileSystem`` seam: where the file-system tools read and write text files.

Tools look the backend up per session with ``execution.services.get(FileSystem)`` and fall back
to ``LocalFileSystem``. A host that talks to an ACP client which advertises
``fs.readTextFile``/``fs.writeTextFile`` registers a client backend instead, so that reads see
the editor's unsaved buffers and writes enter the editor's review flow.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import os
import secrets
import stat
import time
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass

import anyio.to_thread

__all__ = [
    "RACY_NS",
    "FileSystem",
    "FileTooLargeError",
    "LocalFileSystem",
    "NotTextError",
    "TextFormat",
    "content_digest",
    "file_format",
    "lf_text",
    "refuse_binary",
]

_BOM = codecs.BOM_UTF8
_SNIFF = 8192  # like git: a NUL byte in the first 8 KiB means binary
_WRITE_BLOCK = 1 << 16
"""Characters encoded and written at a time: small enough to stay in the CPU cache and in
malloc's reused memory, where encoding a large text whole costs a fresh allocation that the
kernel must fault in page by page (measured: 64 KiB blocks write 100 MB in about two thirds
of the time)."""
RACY_NS = 3_000_000_000
"""How recent a file's timestamps may be for its stat to prove nothing (the "racy git" rule).

A change sets the file's mtime and ctime from the kernel's coarse clock, truncated to the file
system's granularity: two changes within one tick (up to 10 ms) or one granule (ns on ext4,
xfs, btrfs, tmpfs, APFS; 1 s on ext3 and HFS+; 2 s on FAT) get the same times. So a stat only
proves "unchanged since" when the times it shows were already older than a tick plus a granule
at the moment it was taken: then any later change must move them. Three seconds covers the
coarsest granule and a tick, with room for a network file server whose clock is a little
behind ours."""

# Looked up at each call so that tests can move the clock.
_clock_ns = time.time_ns


@dataclass(frozen=True, slots=True)
class TextFormat:
    """How a file stores the text the tools see (LF line endings, no byte-order mark).

    One rule for every backend: a file keeps the BOM it had, and the line-ending style of its
    first line ending (a file that mixes styles is written in that one style); a new file gets
    the text as given.
    """

    bom: bool = False
    crlf: bool = False

    @classmethod
    def of(cls, text: str) -> TextFormat:
        """The format of a file's text as it is stored (before ``lf_text``)."""
        newline = text.find("\n")
        return cls(bom=text.startswith("\ufeff"), crlf=newline > 0 and text[newline - 1] == "\r")

    def apply(self, text: str) -> str:
        """LF ``text`` as the file stores it (a ``"\\r\\n"`` already in it stays one line end)."""
        if self.crlf:
            text = _crlf(text)
        return "\ufeff" + text if self.bom else text


def lf_text(text: str) -> str:
    """A file's stored text as the tools see it: without a BOM, CRLF turned into LF (a lone CR
    is content, not a line end)."""
    text = text.removeprefix("\ufeff")
    # The "\r" scan runs at memchr speed; the replace only runs for text that needs it.
    return text.replace("\r\n", "\n") if "\r" in text else text


def _crlf(text: str) -> str:
    return (text.replace("\r\n", "\n") if "\r" in text else text).replace("\n", "\r\n")


class NotTextError(ValueError):
    """The file is not text the tools can edit: binary, not UTF-8, or not a regular file."""


def refuse_binary(content: bytes | str) -> None:
    """Raise ``NotTextError`` for binary content, by every backend's one rule (git's): a NUL byte
    in the first 8 KiB. Text an editor served is judged by its UTF-8 bytes, as the file on disk."""
    head = content[:_SNIFF]
    if isinstance(head, str):
        head = head.encode("utf-8", "surrogatepass")[:_SNIFF]
    if b"\0" in head:
        raise NotTextError("binary file")


class FileTooLargeError(ValueError):
    """The file is larger than the backend is willing to hold in memory."""


class FileSystem(ABC):
    """Reads and writes whole text files by absolute path.

    The contract every backend keeps (the tools rely on nothing else):

    - ``read_text(path)`` returns the file's text with ``"\\n"`` line endings and without a
      byte-order mark. Missing files raise ``FileNotFoundError``, directories
      ``IsADirectoryError``, other access problems ``OSError``; binary or undecodable content
      raises ``NotTextError``.
    - ``write_text(path, text)`` replaces the file's content with ``text`` (given with ``"\\n"``
      line endings), creating missing parent directories. An existing file keeps its encoding
      and line-ending style: that is the backend's business, because only it knows them. It
      never leaves a half-written file behind.

    Two optional methods have defaults built on those two, so a backend needs neither:

    - ``write_chunks(path, chunks)`` writes the concatenation of ``chunks``, which lets a backend
      write a large text without ever holding it whole.
    - ``fingerprint(path)`` returns a cheap proof that the file has not changed, or ``None``
      (the default) when it has none. Its contract: if a fingerprint taken at time T1 is not
      ``None`` and one taken later at T2 is equal to it, the file's content did not change
      between T1 and T2. (So a backend must return ``None`` when equality would prove nothing:
      for a file whose timestamps are too recent, see ``RACY_NS``.) The tools use it to skip
      comparing a large file's text when it is conclusive, and compare the text otherwise.

    An ACP client backend maps these to ``fs/read_text_file`` and ``fs/write_text_file`` (the
    editor then owns encoding and line endings) and raises ``FileNotFoundError`` when the client
    answers "resource not found". Those requests may take as long as the user takes: no timeout.
    It keeps the default ``fingerprint``: the editor's buffer has no modification time, and the
    tools' stale-file check then compares the text read earlier with the text read now through
    the same backend.
    """

    @abstractmethod
    async def read_text(self, path: str) -> str:
        """The whole text of the file at ``path``, with ``"\\n"`` line endings and no BOM."""

    @abstractmethod
    async def write_text(self, path: str, text: str) -> None:
        """Replace the file at ``path`` with ``text``, keeping an existing file's format."""

    async def write_chunks(self, path: str, chunks: Iterable[str]) -> None:
        """``write_text`` of the concatenation of ``chunks`` (consumed once, in order)."""
        await self.write_text(path, "".join(chunks))

    async def fingerprint(self, path: str) -> Hashable | None:
        """A value whose equality at two times proves that the file did not change in between,
        or ``None`` when the backend cannot give that proof (see the class docstring)."""
        return None

    async def snapshot(self, path: str, *, limit: int) -> bytes | None:
        """The bytes the file holds, exactly as stored (``None``: there is no file), so that
        ``put_back`` can restore them. ``FileTooLargeError`` above ``limit`` bytes, ``OSError``
        when it cannot be read (a directory, a link on the way). The default raises
        ``NotImplementedError``: a backend without it cannot have its writes undone."""
        raise NotImplementedError

    async def put_back(self, path: str, content: bytes | None, *, expected: str) -> str | None:
        """Make the file hold exactly ``content`` (``None``: remove it), but only while it holds
        what ``expected`` is the ``content_digest`` of (``""``: no file): nothing is overwritten
        that changed since. Returns ``None`` when done, else why the file was left as it is (a
        few words: "it changed since"). The default raises ``NotImplementedError``."""
        raise NotImplementedError


def content_digest(data: bytes | None) -> str:
    """What ``put_back`` compares a file's bytes by: a SHA-256 in hex, ``""`` for no file."""
    return "" if data is None else hashlib.sha256(data).hexdigest()


class LocalFileSystem(FileSystem):
    """The local disk: UTF-8 text, with or without a BOM, with LF or CRLF line endings.

    Reads strip the BOM and turn CRLF into LF. Writes put both back as the file had them: the
    style is the file's first line ending (a file that mixes styles is written in that one
    style); a new file gets the text as given, without a BOM. Writes go to a temporary file in
    the same directory that is renamed over the target, so readers never see a partial file;
    the file keeps its permission bits. A hard-linked file gets a new inode, and a file owned
    by someone else becomes the agent's. There is no fsync (as in most editors), so a
    system crash soon after a write may lose it.

    ``fingerprint`` is the file's device, inode, size, mtime and ctime, or ``None`` while those
    times are within ``RACY_NS`` of now. The ctime is what makes it a proof: any write, even one
    that restores the mtime, sets it to the current time, and no ordinary program can set it
    back; the inode tells a file renamed over the old one. (Windows has no such time, so there
    it is always ``None``.) A subclass that reads from somewhere else than the disk must
    override ``fingerprint`` too.

    Paths are taken as real paths (absolute, no symlinks: the tools pass the path their policy
    resolved and checked) and acted on exactly: on POSIX each directory is opened in turn without
    following links, and the file relative to the last one, so a symlink swapped in after the
    check makes the call fail instead of reading or writing elsewhere.
    """

    def __init__(self, *, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        """Larger files raise ``FileTooLargeError`` rather than fill memory."""

    async def read_text(self, path: str) -> str:
        return await anyio.to_thread.run_sync(self._read, path)

    async def write_text(self, path: str, text: str) -> None:
        await anyio.to_thread.run_sync(self._write, path, (text,))

    async def write_chunks(self, path: str, chunks: Iterable[str]) -> None:
        await anyio.to_thread.run_sync(self._write, path, chunks)

    async def fingerprint(self, path: str) -> Hashable | None:
        if os.name != "posix":
            return None
        try:
            # A stat costs microseconds, less than a hop to a worker thread: it runs on the loop.
            info = os.stat(path)
        except OSError:
            return None
        # A time in the future (a clock step, an archive's dates) is no proof either.
        if max(info.st_mtime_ns, info.st_ctime_ns) > _clock_ns() - RACY_NS:
            return None
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)

    async def snapshot(self, path: str, *, limit: int) -> bytes | None:
        return await anyio.to_thread.run_sync(self._snapshot, path, limit)

    async def put_back(self, path: str, content: bytes | None, *, expected: str) -> str | None:
        return await anyio.to_thread.run_sync(self._put_back, path, content, expected)

    def _snapshot(self, path: str, limit: int) -> bytes | None:
        try:
            fd = _open_anchored(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file", path)
        with open(fd, "rb") as file:
            if info.st_size > limit:
                raise FileTooLargeError(f"{info.st_size} bytes, over the {limit}-byte limit")
            return file.read()

    def _put_back(self, path: str, content: bytes | None, expected: str) -> str | None:
        directory, name = os.path.split(os.path.normpath(path))
        try:
            dir_fd = _open_dir(directory) if _ANCHORED else None
        except FileNotFoundError:
            return None if not expected else "it was deleted since"
        except OSError as error:
            return f"its folder cannot be reached ({error.strerror or error})"
        try:
            return _swap(dir_fd, name if dir_fd is not None else os.path.realpath(path), content, expected)
        finally:
            if dir_fd is not None:
                os.close(dir_fd)

    def _read(self, path: str) -> str:
        # O_NONBLOCK: opening a FIFO must not hang the call; fstat then rejects it.
        fd = _open_anchored(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as file:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(21, "Is a directory", path)
            if not stat.S_ISREG(info.st_mode):
                raise NotTextError("not a regular file")
            if info.st_size > self.max_bytes:
                raise FileTooLargeError(f"{info.st_size} bytes, over the {self.max_bytes}-byte limit")
            data = file.read()
        refuse_binary(data)
        try:
            # utf-8-sig drops a leading BOM without copying the data first.
            text = codecs.decode(data, "utf-8-sig") if data.startswith(_BOM) else data.decode()
        except UnicodeDecodeError as error:
            raise NotTextError(f"not UTF-8 text (invalid byte at offset {error.start})") from None
        return lf_text(text)

    def _write(self, path: str, chunks: Iterable[str]) -> None:
        if not _ANCHORED:
            self._write_in(None, os.path.realpath(path), chunks)
            return
        directory, name = os.path.split(os.path.normpath(path))
        dir_fd = _open_dir(directory, create=True)
        try:
            self._write_in(dir_fd, name, chunks)
        finally:
            os.close(dir_fd)

    def _write_in(self, dir_fd: int | None, target: str, chunks: Iterable[str]) -> None:
        """Write ``target`` (a name in ``dir_fd``, or a real path) through a renamed temporary."""
        form, mode = TextFormat(), None
        try:
            info = os.stat(target, dir_fd=dir_fd, follow_symlinks=dir_fd is None)
            if stat.S_ISLNK(info.st_mode):
                raise _link_error(target)
            mode = stat.S_IMODE(info.st_mode)
            form = file_format(target, dir_fd)
        except FileNotFoundError:
            if dir_fd is None:
                os.makedirs(os.path.dirname(target), exist_ok=True)
        directory, name = os.path.split(target)
        temp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        # 0o666 through the umask is what a plain open() would give a new file.
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=dir_fd)
        try:
            with open(fd, "wb") as file:
                if form.bom:
                    file.write(_BOM)
                for block in _encoded(chunks, crlf=form.crlf):
                    file.write(block)
                if mode is not None:
                    if hasattr(os, "fchmod"):
                        os.fchmod(file.fileno(), mode)
                    else:
                        os.chmod(temp, mode)
            # The rename replaces the name in the directory that was checked, never a link's target.
            os.replace(temp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):  # the original error is the one to report
                os.unlink(temp, dir_fd=dir_fd)
            raise


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_ANCHORED = bool(_NOFOLLOW and _DIRECTORY) and {os.open, os.stat, os.mkdir} <= os.supports_dir_fd
"""Whether paths can be walked one directory at a time without following links (POSIX)."""


def _link_error(path: str) -> OSError:
    return OSError(
        errno.ELOOP,
        "a symbolic link is on the way (it may have been swapped in since the path was checked)",
        path,
    )


def _open_dir(path: str, *, create: bool = False) -> int:
    """A descriptor of the directory ``path`` (absolute, with no symlinks), reached one name at a
    time without following any link: a link swapped in after the path was checked fails the
    call instead of leading elsewhere. ``create`` makes missing directories on the way."""
    fd = os.open(os.sep, os.O_RDONLY | _DIRECTORY)
    try:
        for part in [part for part in path.split(os.sep) if part]:
            flags = os.O_RDONLY | _DIRECTORY | _NOFOLLOW
            try:
                next_fd = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                next_fd = os.open(part, flags, dir_fd=fd)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(part, fd):
                    raise _link_error(path) from None
                raise
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_anchored(path: str, flags: int) -> int:
    """``os.open`` of ``path`` (absolute, with no symlinks) without following a link anywhere."""
    if not _ANCHORED:
        return os.open(os.path.realpath(path), flags)
    directory, name = os.path.split(os.path.normpath(path))
    dir_fd = _open_dir(directory)
    try:
        return os.open(name, flags | _NOFOLLOW, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _link_error(path) from None
        raise
    finally:
        os.close(dir_fd)


def _held(dir_fd: int | None, name: str) -> tuple[bytes | None, os.stat_result | None, str | None]:
    """What ``name`` holds now (``None``: no file) and its stat, or why it is not a file."""
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=dir_fd)
    except FileNotFoundError:
        return None, None, None
    except OSError as error:
        if error.errno == errno.ELOOP:
            return None, None, "it is a symbolic link now"
        return None, None, f"it cannot be read ({error.strerror or error})"
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None, None, "it is no longer a regular file"
    with open(fd, "rb") as file:
        return file.read(), info, None


def _identity(info: os.stat_result | None) -> tuple[int, ...] | None:
    if info is None:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _swap(dir_fd: int | None, name: str, content: bytes | None, expected: str) -> str | None:
    """``put_back`` in one directory: compare, then replace, refusing if the file moved in
    between (the stat taken when it was read must still hold just before the rename)."""
    data, info, problem = _held(dir_fd, name)
    if problem is not None:
        return problem
    if content_digest(data) != expected:
        return "it was deleted since" if data is None else "it changed since"
    if content is None and data is None:
        return None
    temp = None
    if content is not None:
        directory, base = os.path.split(name)
        temp = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=dir_fd)
        with open(fd, "wb") as file:
            file.write(content)
            if info is not None:  # the file keeps its permission bits, as a write does
                os.fchmod(file.fileno(), stat.S_IMODE(info.st_mode))
    try:
        try:
            now: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        if _identity(now) != _identity(info):  # written between the read and now: theirs wins
            return "it changed since"
        if temp is None:
            os.unlink(name, dir_fd=dir_fd)
        else:
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            temp = None
        return None
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)


def _encoded(chunks: Iterable[str], *, crlf: bool, size: int = _WRITE_BLOCK) -> Iterator[bytes]:
    """``chunks`` as UTF-8, ``size`` characters at a time, with CRLF line endings if ``crlf``
    (a ``"\\r\\n"`` already in the text stays one line ending)."""
    carry = ""
    for chunk in chunks:
        for start in range(0, len(chunk), size):
            # A slice that spans the whole chunk is the chunk itself, not a copy.
            block = chunk[start : start + size]
            if crlf:
                # A "\r\n" may straddle two blocks: a trailing "\r" waits for the next one.
                block = carry + block
                carry = "\r" if block.endswith("\r") else ""
                block = block[: len(block) - len(carry)]
                block = _crlf(block)
            yield block.encode()
    if carry:
        yield carry.encode()


def file_format(path: str, dir_fd: int | None = None) -> TextFormat:
    """The ``TextFormat`` of an existing file on disk (``path`` relative to ``dir_fd`` if one is
    given, never through a final symlink), read up to its first line ending."""
    with open(os.open(path, os.O_RDONLY | _NOFOLLOW, dir_fd=dir_fd), "rb") as file:
        head = file.read(65536)
        bom = head.startswith(_BOM)
        previous = b""
        while head:
            newline = head.find(b"\n")
            if newline >= 0:
                before = head[newline - 1 : newline] if newline else previous
                return TextFormat(bom=bom, crlf=before == b"\r")
            previous, head = head[-1:], file.read(65536)
    return TextFormat(bom=bom)
