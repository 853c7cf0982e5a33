"""LocalFileSystem: the disk backend of the FileSystem seam."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import filesystem
from dsh_tools.filesystem import RACY_NS, FileSystem, FileTooLargeError, LocalFileSystem, NotTextError

pytestmark = pytest.mark.anyio


def names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


@pytest.fixture
def fs() -> LocalFileSystem:
    return LocalFileSystem()


async def test_reads_lf_text_without_bom(tmp_path: Path, fs: LocalFileSystem) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\rthree\n")
    assert await fs.read_text(str(path)) == "one\ntwo\rthree\n"  # a lone CR is content, not a line end


@pytest.mark.parametrize(
    ("existing", "text", "written"),
    [
        (None, "a\nb", b"a\nb"),
        (None, "a\r\nb\n", b"a\r\nb\n"),  # a new file gets the text as given
        (b"x\r\ny\r\n", "a\nb\n", b"a\r\nb\r\n"),
        (b"x\r\ny\r\n", "a\r\nb\n", b"a\r\nb\r\n"),  # no \r\r\n
        (b"x\ny\n", "a\nb\n", b"a\nb\n"),
        (b"\xef\xbb\xbfx\n", "a\n", b"\xef\xbb\xbfa\n"),
        (b"\xef\xbb\xbfx\r\n", "a\nb", b"\xef\xbb\xbfa\r\nb"),
        (b"x\r\ny\nz\n", "a\nb\n", b"a\r\nb\r\n"),  # mixed: the first line ending decides
        (b"single line, no newline", "a\nb\n", b"a\nb\n"),
        (b"y" * 100_000 + b"\r\nz", "a\nb", b"a\r\nb"),  # the first line ending is past 64 KiB
        (b"", "a\n", b"a\n"),
    ],
)
async def test_writes_keep_the_files_format(
    tmp_path: Path, fs: LocalFileSystem, existing: bytes | None, text: str, written: bytes
) -> None:
    path = tmp_path / "f.txt"
    if existing is not None:
        path.write_bytes(existing)
    await fs.write_text(str(path), text)
    assert path.read_bytes() == written


@pytest.mark.parametrize("read_first", [True, False])
@pytest.mark.parametrize(
    ("existing", "text", "written"),
    [
        (None, "a\nb", b"a\nb"),
        (None, "a\r\nb\n", b"a\r\nb\n"),
        (b"x\r\ny\r\n", "a\nb\n", b"a\r\nb\r\n"),
        (b"x\r\ny\r\n", "a\r\nb\n", b"a\r\nb\r\n"),
        (b"x\ny\n", "a\nb\n", b"a\nb\n"),
        (b"\xef\xbb\xbfx\n", "a\n", b"\xef\xbb\xbfa\n"),
        (b"\xef\xbb\xbfx\r\n", "a\nb", b"\xef\xbb\xbfa\r\nb"),
        (b"x\r\ny\nz\n", "a\nb\n", b"a\r\nb\r\n"),
        (b"single line, no newline", "a\nb\n", b"a\nb\n"),
        (b"y" * 100_000 + b"\r\nz", "a\nb", b"a\r\nb"),
        (b"", "a\n", b"a\n"),
    ],
)
async def test_one_format_rule_for_the_disk_and_a_client(
    tmp_path: Path, existing: bytes | None, text: str, written: bytes, read_first: bool
) -> None:
    # The same table for both backends: an editor that serves its files byte for byte through
    # fs/read_text_file gets its line endings and BOM back as the disk does.
    from dsh_acp import RpcError
    from dsh_acp.acp._client_fs import ClientFileSystem
    from dsh_acp.rpc._errors import RESOURCE_NOT_FOUND

    target = tmp_path / "f.txt"
    path = str(target)
    buffers = {path: existing.decode()} if existing is not None else {}

    async def client(method: str, params: Any) -> Any:
        if method == "fs/read_text_file":
            if params["path"] not in buffers:
                raise RpcError(RESOURCE_NOT_FOUND, "Resource not found")
            return {"content": buffers[params["path"]]}
        buffers[params["path"]] = params["content"]
        return {}

    local = LocalFileSystem()
    if existing is not None:
        target.write_bytes(existing)
    for backend in (local, ClientFileSystem(client, "s", can_read=True, can_write=True)):
        if read_first and existing is not None:
            assert await backend.read_text(path) == filesystem.lf_text(existing.decode())
        await backend.write_text(path, text)
    assert target.read_bytes() == written
    assert buffers[path].encode() == written


async def test_write_creates_parents_with_the_umask_mode(tmp_path: Path, fs: LocalFileSystem) -> None:
    path = tmp_path / "a" / "b" / "c.txt"
    await fs.write_text(str(path), "x")
    reference = tmp_path / "plain.txt"
    reference.write_text("")  # what a plain open() gives a new file under this umask
    assert path.read_text() == "x"
    assert path.stat().st_mode & 0o777 == reference.stat().st_mode & 0o777


async def test_a_failed_write_leaves_the_file_and_no_temporary(
    tmp_path: Path, fs: LocalFileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.txt"
    path.write_text("before")

    def fail(source: str, target: str, **dir_fds: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="No space left"):
        await fs.write_text(str(path), "after")
    assert path.read_text() == "before"
    assert names(tmp_path) == ["f.txt"]


async def test_read_errors(tmp_path: Path) -> None:
    fs = LocalFileSystem(max_bytes=10)
    (tmp_path / "big").write_text("x" * 11)
    (tmp_path / "nul").write_bytes(b"text\x00more")
    (tmp_path / "bad").write_bytes(b"\xff\xfe")
    with pytest.raises(FileTooLargeError, match="11 bytes, over the 10-byte limit"):
        await fs.read_text(str(tmp_path / "big"))
    with pytest.raises(NotTextError, match="binary file"):
        await fs.read_text(str(tmp_path / "nul"))
    with pytest.raises(NotTextError, match="not UTF-8 text"):
        await fs.read_text(str(tmp_path / "bad"))
    with pytest.raises(IsADirectoryError):
        await fs.read_text(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        await fs.read_text(str(tmp_path / "missing"))


def test_a_backend_must_implement_both_methods() -> None:
    class Half(FileSystem):
        async def read_text(self, path: str) -> str:
            return ""

    with pytest.raises(TypeError, match="write_text"):
        Half()  # type: ignore[abstract]


# -- writing in blocks --------------------------------------------------------------------

pieces = st.sampled_from(["a", "\n", "\r", "\r\n", "é", "\r\r"])
chunkings = st.lists(st.lists(pieces, max_size=6).map("".join), max_size=6)


@given(chunkings, st.integers(min_value=1, max_value=5), st.booleans())
def test_blocks_are_encoded_as_the_whole_text_would_be(chunks: list[str], size: int, crlf: bool) -> None:
    # A "\r\n" split across two chunks or blocks is still one line ending.
    text = "".join(chunks)
    whole = (text.replace("\r\n", "\n").replace("\n", "\r\n") if crlf else text).encode()
    assert b"".join(filesystem._encoded(chunks, crlf=crlf, size=size)) == whole


async def test_write_chunks_keeps_the_files_format(tmp_path: Path, fs: LocalFileSystem) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"\xef\xbb\xbfx\r\ny\r\n")
    await fs.write_chunks(str(path), iter(["a\nb", "\r", "\nc"]))
    assert path.read_bytes() == b"\xef\xbb\xbfa\r\nb\r\nc"


async def test_a_write_that_fails_midway_leaves_the_file_and_no_temporary(
    tmp_path: Path, fs: LocalFileSystem
) -> None:
    path = tmp_path / "f.txt"
    path.write_text("before")

    def chunks() -> Iterator[str]:
        yield "x" * 200_000  # several blocks reach the temporary file first
        yield "\ud800"  # a lone surrogate: JSON can carry it, UTF-8 cannot

    with pytest.raises(UnicodeEncodeError):
        await fs.write_chunks(str(path), chunks())
    assert path.read_text() == "before"
    assert names(tmp_path) == ["f.txt"]


async def test_the_optional_methods_have_defaults() -> None:
    class Memory(FileSystem):
        def __init__(self) -> None:
            self.files: dict[str, str] = {}

        async def read_text(self, path: str) -> str:
            return self.files[path]

        async def write_text(self, path: str, text: str) -> None:
            self.files[path] = text

    memory = Memory()
    await memory.write_chunks("/f", iter(["a", "b\n"]))
    assert memory.files == {"/f": "ab\n"}
    assert await memory.fingerprint("/f") is None  # no proof: the tools compare texts


# -- the fingerprint: a stat, when it proves something ------------------------------------


def newest(path: Path) -> int:
    info = path.stat()
    return max(info.st_mtime_ns, info.st_ctime_ns)


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file looks last changed long ago (rather than waiting for it to)."""
    monkeypatch.setattr(filesystem, "_clock_ns", lambda: time.time_ns() + 10 * RACY_NS)


def change_in_place(path: Path, data: bytes) -> None:
    """Overwrite ``path`` with ``data`` of the same size, keeping its inode and its mtime: only the
    ctime can tell, once the clock has moved past the file's (a tick, or a coarse granule)."""
    before = path.stat()
    with path.open("r+b") as file:
        file.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    while path.stat().st_ctime_ns == before.st_ctime_ns:
        time.sleep(0.005)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # sets the ctime to now


async def test_fingerprint_is_none_while_the_times_are_recent(
    tmp_path: Path, fs: LocalFileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.txt"
    path.write_text("x")
    assert await fs.fingerprint(str(path)) is None  # just written
    edge = newest(path) + RACY_NS
    monkeypatch.setattr(filesystem, "_clock_ns", lambda: edge - 1)
    assert await fs.fingerprint(str(path)) is None
    monkeypatch.setattr(filesystem, "_clock_ns", lambda: edge)
    assert await fs.fingerprint(str(path)) is not None
    future = time.time_ns() + 100 * RACY_NS  # an archive's dates, a clock set back
    os.utime(path, ns=(future, future))
    assert await fs.fingerprint(str(path)) is None
    assert await fs.fingerprint(str(tmp_path / "missing")) is None


@pytest.mark.usefixtures("later")
async def test_fingerprint_changes_with_any_change(tmp_path: Path, fs: LocalFileSystem) -> None:
    path, copy = tmp_path / "f.txt", tmp_path / "copy.txt"
    path.write_text("x = 1\n")
    first = await fs.fingerprint(str(path))
    assert first is not None
    assert await fs.fingerprint(str(path)) == first
    seen = {first}
    change_in_place(path, b"x = 2\n")  # same size, same inode, same mtime
    seen.add(await fs.fingerprint(str(path)))
    os.utime(path, ns=(1, 1))  # touched
    seen.add(await fs.fingerprint(str(path)))
    shutil.copy2(path, copy)
    os.replace(copy, path)  # replaced by an identical copy with the same times
    seen.add(await fs.fingerprint(str(path)))
    assert len(seen) == 4


@pytest.mark.usefixtures("later")
async def test_fingerprint_tells_a_replaced_file_by_its_inode(
    tmp_path: Path, fs: LocalFileSystem, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a coarse clock, a file renamed over another within one granule can have the same size
    # and times as the one it replaced: simulate that with times frozen.
    path, other = tmp_path / "f.txt", tmp_path / "g.txt"
    path.write_text("x = 1\n")
    other.write_text("x = 2\n")
    frozen, real_stat = path.stat(), os.stat

    def coarse_stat(target: Any, *args: Any, **kwargs: Any) -> Any:
        info = real_stat(target, *args, **kwargs)
        fields = {name: getattr(info, name) for name in dir(info) if name.startswith("st_")}
        return SimpleNamespace(
            **{**fields, "st_mtime_ns": frozen.st_mtime_ns, "st_ctime_ns": frozen.st_ctime_ns}
        )

    monkeypatch.setattr(os, "stat", coarse_stat)
    first = await fs.fingerprint(str(path))
    os.replace(other, path)
    assert first is not None
    assert await fs.fingerprint(str(path)) not in (first, None)
