"""LocalFileSystem: the disk backend of the FileSystem seam."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reference_tools.filesystem import FileSystem, FileTooLargeError, LocalFileSystem, NotTextError

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

    def fail(source: str, target: str) -> None:
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
