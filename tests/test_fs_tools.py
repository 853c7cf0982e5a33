"""The file-system tools read, write and edit, and their policy, through ``ToolRegistry.execute``."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Hashable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from dsh_tools import (
    Allow,
    Ask,
    Deny,
    DiffCallView,
    DiffResultView,
    FileDiff,
    GenericCallView,
    GenericResultView,
    Location,
    PathSubject,
    PreNext,
    PreToolDecision,
    Services,
    TextBlock,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
    ToolResult,
    define_tool,
    filesystem,
)
from dsh_tools.filesystem import RACY_NS, FileSystem, LocalFileSystem
from reference_tools import _read_tracker
from reference_tools.fs import MAX_READ_LINES, ReadTracker, fs_policy, fs_tools, read_tool, register_fs_tools

pytestmark = pytest.mark.anyio


class Session:
    """One session's view of a registry with the fs tools: its cwd, services and call ids."""

    def __init__(self, cwd: Path, registry: ToolRegistry | None = None, **execution: Any) -> None:
        self.registry = registry or ToolRegistry()
        if registry is None:
            register_fs_tools(self.registry)
        self.cwd = str(cwd)
        self.services = Services()
        self.execution = execution
        self.calls = 0

    async def __call__(self, name: str, **arguments: Any) -> ToolExecutionResult:
        self.calls += 1
        call = ToolExecution(
            call_id=f"c{self.calls}",
            name=name,
            arguments=arguments,
            cwd=self.cwd,
            services=self.services,
            **self.execution,
        )
        return await self.registry.execute(call)

    async def ok(self, name: str, **arguments: Any) -> str:
        result = await self(name, **arguments)
        assert not result.is_error, out(result)
        return out(result)

    async def error(self, name: str, **arguments: Any) -> str:
        result = await self(name, **arguments)
        assert result.is_error, out(result)
        return out(result)

    def result_view(self, name: str, arguments: dict[str, Any], result: ToolExecutionResult) -> Any:
        definition = self.registry.get(name)
        assert definition is not None
        return definition.result_view(arguments, result.as_tool_result())


def names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def out(result: ToolExecutionResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextBlock))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    # realpath: on macOS the temp dir is behind the /var -> /private/var symlink.
    workspace = Path(os.path.realpath(tmp_path)) / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def session(ws: Path) -> Session:
    return Session(ws)


# -- read ---------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("one\ntwo\n\tthree\n")
    assert await session.ok("read", file_path="a.py") == "     1\tone\n     2\ttwo\n     3\t\tthree"


async def test_read_resolves_relative_paths_against_the_session_not_the_process(
    ws: Path, session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.txt").write_text("wrong\n")
    (ws / "a.txt").write_text("right\n")
    monkeypatch.chdir(elsewhere)
    result = await session("read", file_path="a.txt")
    assert "right" in out(result)
    assert result.meta["path"] == str(ws / "a.txt")


async def test_read_window_and_footer_say_how_to_continue(ws: Path, session: Session) -> None:
    (ws / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 51)))
    text = await session.ok("read", file_path="a.txt", offset=10, limit=5)
    assert text.splitlines()[:5] == [f"{n:>6}\tline {n}" for n in range(10, 15)]
    assert text.endswith("[Showing lines 10-14 of 50. To read on, use offset=15.]")
    assert (await session.ok("read", file_path="a.txt", offset=48)).splitlines() == [
        f"{n:>6}\tline {n}" for n in range(48, 51)
    ]


async def test_read_caps_lines_by_default(ws: Path, session: Session) -> None:
    (ws / "a.txt").write_text("x\n" * (MAX_READ_LINES + 10))
    text = await session.ok("read", file_path="a.txt")
    assert text.count("\tx") == MAX_READ_LINES
    assert text.endswith(f"of {MAX_READ_LINES + 10}. To read on, use offset={MAX_READ_LINES + 1}.]")


async def test_read_caps_bytes_and_says_so(ws: Path, session: Session) -> None:
    (ws / "a.txt").write_text(("y" * 1000 + "\n") * 500)
    text = await session.ok("read", file_path="a.txt")
    shown = text.count("\ty")
    assert 90 < shown < 110
    assert f"Showing lines 1-{shown} of 500 (the 100 KiB output limit was reached)" in text
    assert text.endswith(f"use offset={shown + 1}.]")


async def test_read_shortens_long_lines(ws: Path, session: Session) -> None:
    (ws / "a.txt").write_text("z" * 5000 + "\nshort\n")
    text = await session.ok("read", file_path="a.txt")
    assert "z" * 2000 + " [… 3000 more characters]" in text
    assert "     2\tshort" in text
    assert "[Lines longer than 2000 characters were shortened.]" in text


async def test_read_strips_bom_and_shows_crlf_as_lines(ws: Path, session: Session) -> None:
    (ws / "a.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo")
    assert await session.ok("read", file_path="a.txt") == "     1\tone\n     2\ttwo"


async def test_read_errors_are_clear(ws: Path, session: Session) -> None:
    (ws / "bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (ws / "latin").write_bytes("café".encode("latin-1"))
    (ws / "dir").mkdir()
    (ws / "a.txt").write_text("a\nb\n")
    assert "bin cannot be read as text: binary file" in await session.error("read", file_path="bin")
    assert "not UTF-8 text (invalid byte at offset 3)" in await session.error("read", file_path="latin")
    assert f"{ws / 'dir'} is a directory; use ls to list it" in await session.error("read", file_path="dir")
    assert f"{ws / 'nope'} does not exist" in await session.error("read", file_path="nope")
    past = await session.error("read", file_path="a.txt", offset=3)
    assert "offset 3 is past the end" in past
    assert "which has 2 lines" in past
    assert "at least 1" in await session.error("read", file_path="a.txt", offset=0)


async def test_read_of_an_empty_file(ws: Path, session: Session) -> None:
    (ws / "e.txt").write_text("")
    result = await session("read", file_path="e.txt")
    assert out(result) == f"{ws / 'e.txt'} is empty."
    assert session.result_view("read", {"file_path": "e.txt"}, result).title == f"Read {ws / 'e.txt'} (empty)"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
async def test_read_of_a_fifo_fails_instead_of_hanging(ws: Path, session: Session) -> None:
    os.mkfifo(ws / "pipe")
    assert "not a regular file" in await session.error("read", file_path="pipe")


def test_read_call_card() -> None:
    view = read_tool.call_view({"file_path": "/w/a.py", "offset": 10, "limit": 20})
    assert view == GenericCallView(
        title="Read /w/a.py (lines 10-29)",
        kind="read",
        raw_input={"file_path": "/w/a.py", "offset": 10, "limit": 20},
        locations=(Location(path="/w/a.py", line=10),),
    )
    assert read_tool.call_view({"file_path": "/w/a.py"}).title == "Read /w/a.py"  # type: ignore[union-attr]
    relative = read_tool.call_view({"file_path": "a.py"})
    assert isinstance(relative, GenericCallView)
    # Relative stays relative in the view: the bridge resolves it against the session cwd.
    assert relative.locations == (Location(path="a.py", line=1),)
    assert read_tool.call_view({"file_path": 3}) is None  # malformed: the generic card


async def test_read_result_card_is_fenced_with_the_real_window(ws: Path, session: Session) -> None:
    (ws / "a.md").write_text("# title\n```code```\n")
    result = await session("read", file_path="a.md", offset=1, limit=10)
    view = session.result_view("read", {"file_path": "a.md"}, result)
    assert view.title == f"Read {ws / 'a.md'} (lines 1-2)"
    assert view.content[0].text == f"````md\n{out(result)}\n````"


# -- write --------------------------------------------------------------------------------


async def test_write_creates_a_file_and_missing_parents(ws: Path, session: Session) -> None:
    arguments = {"file_path": "src/pkg/new.py", "content": "print(1)\n"}
    result = await session("write", **arguments)
    assert out(result) == f"Created {ws / 'src/pkg/new.py'}."
    assert (ws / "src/pkg/new.py").read_text() == "print(1)\n"
    path = str(ws / "src/pkg/new.py")
    assert session.result_view("write", arguments, result) == DiffResultView(
        title=f"Write {path}",
        diffs=(FileDiff(path=path, old_text=None, new_text="print(1)\n"),),
        locations=(Location(path=path, line=1),),
    )


def test_write_call_card_is_a_diff_of_a_new_text() -> None:
    write = next(tool for tool in fs_tools() if tool.name == "write")
    assert write.call_view({"file_path": "/w/a.py", "content": "x\n"}) == DiffCallView(
        title="Write /w/a.py",
        diffs=(FileDiff(path="/w/a.py", old_text=None, new_text="x\n"),),
        locations=(Location(path="/w/a.py"),),
    )
    assert write.call_view({"file_path": "a.py", "content": "x"}) == DiffCallView(
        title="Write a.py",
        diffs=(FileDiff(path="a.py", old_text=None, new_text="x"),),
        locations=(Location(path="a.py"),),
    )


async def test_write_over_a_file_needs_a_read_first(ws: Path, session: Session) -> None:
    (ws / "a.txt").write_text("old\n")
    message = await session.error("write", file_path="a.txt", content="new\n")
    assert f"{ws / 'a.txt'} has not been read in this session; read it before you write it" in message
    assert (ws / "a.txt").read_text() == "old\n"
    await session.ok("read", file_path="a.txt")
    await session.ok("write", file_path="a.txt", content="new\n")
    assert (ws / "a.txt").read_text() == "new\n"


async def test_write_result_shows_the_applied_hunks(ws: Path, session: Session) -> None:
    old = "".join(f"{n}\n" for n in range(1, 21))
    new = old.replace("\n5\n", "\nfive\n").replace("\n17\n", "\n")
    (ws / "a.txt").write_text(old)
    await session.ok("read", file_path="a.txt")
    arguments = {"file_path": "a.txt", "content": new}
    result = await session("write", **arguments)
    path = str(ws / "a.txt")
    view = session.result_view("write", arguments, result)
    assert view == DiffResultView(
        title=f"Write {path}",
        diffs=(
            FileDiff(path=path, old_text="2\n3\n4\n5\n6\n7\n8\n", new_text="2\n3\n4\nfive\n6\n7\n8\n"),
            FileDiff(path=path, old_text="14\n15\n16\n17\n18\n19\n20\n", new_text="14\n15\n16\n18\n19\n20\n"),
        ),
        locations=(Location(path=path, line=5),),
    )


async def test_write_keeps_crlf_and_bom_of_an_existing_file(ws: Path, session: Session) -> None:
    (ws / "a.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\n")
    await session.ok("read", file_path="a.txt")
    await session.ok("write", file_path="a.txt", content="uno\ntwo\nthree\n")
    assert (ws / "a.txt").read_bytes() == b"\xef\xbb\xbfuno\r\ntwo\r\nthree\r\n"


async def test_write_of_the_same_content_says_so(ws: Path, session: Session) -> None:
    (ws / "a.txt").write_text("same\n")
    await session.ok("read", file_path="a.txt")
    arguments = {"file_path": "a.txt", "content": "same\n"}
    result = await session("write", **arguments)
    assert out(result) == f"{ws / 'a.txt'} already had this content."
    assert session.result_view("write", arguments, result) == GenericResultView(
        title=f"Write {ws / 'a.txt'} (no changes)"
    )


async def test_write_refuses_a_directory(ws: Path, session: Session) -> None:
    (ws / "d").mkdir()
    assert "is a directory" in await session.error("write", file_path="d", content="x")


async def test_write_of_text_that_is_not_unicode(ws: Path, session: Session) -> None:
    message = await session.error("write", file_path="a.txt", content="bad \ud800")
    assert f"cannot write {ws / 'a.txt'}: the text is not valid Unicode (surrogates not allowed)" in message
    assert not (ws / "a.txt").exists()


async def test_write_keeps_the_file_mode(ws: Path, session: Session) -> None:
    script = ws / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o754)
    await session.ok("read", file_path="run.sh")
    await session.ok("write", file_path="run.sh", content="echo 2\n")
    assert script.stat().st_mode & 0o777 == 0o754
    assert names(ws) == ["run.sh"]  # no temporary file left behind


async def test_write_through_a_symlink_keeps_the_link(ws: Path, session: Session) -> None:
    (ws / "real.txt").write_text("a\n")
    (ws / "link.txt").symlink_to("real.txt")
    await session.ok("read", file_path="link.txt")
    await session.ok("write", file_path="link.txt", content="b\n")
    assert (ws / "link.txt").is_symlink()
    assert (ws / "real.txt").read_text() == "b\n"


# -- edit ---------------------------------------------------------------------------------


async def test_edit_needs_a_read_first(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("x = 1\n")
    message = await session.error("edit", file_path="a.py", old_string="1", new_string="2")
    assert f"{ws / 'a.py'} has not been read in this session; read it before you edit it" in message
    await session.ok("read", file_path="a.py", offset=1, limit=1)  # a partial read counts
    await session.ok("edit", file_path="a.py", old_string="1", new_string="2")
    await session.ok("edit", file_path="a.py", old_string="2", new_string="3")  # its own edit counts too
    assert (ws / "a.py").read_text() == "x = 3\n"


async def test_edit_not_found_and_ambiguous_are_clear(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("a = 1\nb = 1\nc = 1\n")
    await session.ok("read", file_path="a.py")
    missing = await session.error("edit", file_path="a.py", old_string="d = 1", new_string="d = 2")
    assert f"old_string was not found in {ws / 'a.py'}" in missing
    assert "whitespace and indentation included" in missing
    ambiguous = await session.error("edit", file_path="a.py", old_string="= 1", new_string="= 2")
    assert f"old_string occurs 3 times in {ws / 'a.py'}" in ambiguous
    assert "set replace_all to true" in ambiguous
    assert "more surrounding lines" in ambiguous
    same = await session.error("edit", file_path="a.py", old_string="a", new_string="a")
    assert "the same" in same
    assert "old_string is empty" in await session.error(
        "edit", file_path="a.py", old_string="", new_string="x"
    )
    assert (ws / "a.py").read_text() == "a = 1\nb = 1\nc = 1\n"


async def test_edit_replace_all(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("a = 1\nb = 1\n")
    await session.ok("read", file_path="a.py")
    text = await session.ok("edit", file_path="a.py", old_string="= 1", new_string="= 2", replace_all=True)
    assert text == f"Edited {ws / 'a.py'}: 2 replacements, the first at line 1."
    assert (ws / "a.py").read_text() == "a = 2\nb = 2\n"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"one\r\ntwo\r\nthree\r\n", b"one\r\nTWO\r\nthree\r\n"),
        (b"one\r\ntwo\r\nthree", b"one\r\nTWO\r\nthree"),
        (b"one\ntwo\nthree", b"one\nTWO\nthree"),
        (b"one\ntwo\nthree\n", b"one\nTWO\nthree\n"),
        (b"\xef\xbb\xbfone\ntwo\n", b"\xef\xbb\xbfone\nTWO\n"),
        (b"\xef\xbb\xbfone\r\ntwo", b"\xef\xbb\xbfone\r\nTWO"),
        ("caf\u00e9\ntwo\n".encode(), "caf\u00e9\nTWO\n".encode()),
    ],
    ids=["crlf", "crlf-no-final-newline", "lf-no-final-newline", "lf", "bom", "bom-crlf", "utf8"],
)
async def test_edit_keeps_line_endings_encoding_and_final_newline(
    ws: Path, session: Session, raw: bytes, expected: bytes
) -> None:
    (ws / "f.txt").write_bytes(raw)
    await session.ok("read", file_path="f.txt")
    await session.ok("edit", file_path="f.txt", old_string="two", new_string="TWO")
    assert (ws / "f.txt").read_bytes() == expected


async def test_edit_matches_multiline_text_on_lf_in_a_crlf_file(ws: Path, session: Session) -> None:
    (ws / "f.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    await session.ok("read", file_path="f.txt")
    await session.ok("edit", file_path="f.txt", old_string="a\nb\n", new_string="A\r\nB\n")
    assert (ws / "f.txt").read_bytes() == b"A\r\nB\r\nc\r\n"


async def test_edit_of_a_missing_file(ws: Path, session: Session) -> None:
    message = await session.error("edit", file_path="nope.py", old_string="a", new_string="b")
    assert f"{ws / 'nope.py'} does not exist" in message


async def test_edit_result_is_the_applied_hunks_with_context(ws: Path, session: Session) -> None:
    lines = [f"line {n}\n" for n in range(1, 31)]
    (ws / "a.py").write_text("".join(lines))
    await session.ok("read", file_path="a.py")
    arguments = {"file_path": "a.py", "old_string": "line 2\n", "new_string": "LINE 2\n"}
    result = await session("edit", **arguments)
    path = str(ws / "a.py")
    assert result.meta["replacements"] == 1
    view = session.result_view("edit", arguments, result)
    assert view == DiffResultView(
        title=f"Edit {path}",
        diffs=(
            FileDiff(
                path=path, old_text="".join(lines[0:5]), new_text="line 1\nLINE 2\n" + "".join(lines[2:5])
            ),
        ),
        locations=(Location(path=path, line=2),),
    )


async def test_edit_result_has_one_diff_per_edit_site(ws: Path, session: Session) -> None:
    lines = [f"v{n} = {n}\n" for n in range(1, 31)]
    lines[4] = lines[24] = "target = 0\n"
    (ws / "a.py").write_text("".join(lines))
    await session.ok("read", file_path="a.py")
    arguments = {
        "file_path": "a.py",
        "old_string": "target = 0",
        "new_string": "target = 1",
        "replace_all": True,
    }
    result = await session("edit", **arguments)
    view = session.result_view("edit", arguments, result)
    assert isinstance(view, DiffResultView)
    assert [d.old_text for d in view.diffs] == ["".join(lines[1:8]), "".join(lines[21:28])]
    assert [d.new_text for d in view.diffs] == [
        "".join(lines[1:4]) + "target = 1\n" + "".join(lines[5:8]),
        "".join(lines[21:24]) + "target = 1\n" + "".join(lines[25:28]),
    ]
    assert view.locations == (Location(path=str(ws / "a.py"), line=5),)
    assert [h["old_start"] for h in result.meta["hunks"]] == [2, 22]


def test_edit_call_card_is_the_requested_change() -> None:
    edit = next(tool for tool in fs_tools() if tool.name == "edit")
    assert edit.call_view({"file_path": "/w/a.py", "old_string": "a", "new_string": "b"}) == DiffCallView(
        title="Edit /w/a.py",
        diffs=(FileDiff(path="/w/a.py", old_text="a", new_text="b"),),
        locations=(Location(path="/w/a.py"),),
    )


# -- stale files --------------------------------------------------------------------------


async def test_edit_fails_when_the_file_changed_since_it_was_read(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    (ws / "a.py").write_text("x = 1\ny = 2\n")  # someone else
    message = await session.error("edit", file_path="a.py", old_string="x = 1", new_string="x = 3")
    assert f"{ws / 'a.py'} has changed since it was last read" in message
    assert "read it again" in message
    assert (ws / "a.py").read_text() == "x = 1\ny = 2\n"
    await session.ok("read", file_path="a.py")
    await session.ok("edit", file_path="a.py", old_string="x = 1", new_string="x = 3")


async def test_write_fails_when_the_file_changed_since_it_was_read(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    (ws / "a.py").write_text("x = 2\n")
    assert "has changed since it was last read" in await session.error("write", file_path="a.py", content="")
    assert (ws / "a.py").read_text() == "x = 2\n"


async def test_touching_a_file_is_not_a_change(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    os.utime(ws / "a.py", (1, 1))
    await session.ok("edit", file_path="a.py", old_string="1", new_string="2")


# The stat shortcut: a file whose stat proves it unchanged is not hashed again; whenever the
# stat proves nothing (times too recent, a touch, a new inode, no stat at all) the texts are.


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file looks last changed long ago (rather than waiting for it to)."""
    monkeypatch.setattr(filesystem, "_clock_ns", lambda: time.time_ns() + 10 * RACY_NS)


def change_in_place(path: Path, data: bytes) -> None:
    """Overwrite ``path`` with ``data`` of the same size, keeping its inode and mtime."""
    before = path.stat()
    with path.open("r+b") as file:
        file.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of text the fs tools hash: "text" (a file's text), "splice" (an edit's)."""
    kinds: list[str] = []
    text_print = _read_tracker.text_print

    def spy(content: Any, *args: Any, **kwargs: Any) -> Any:
        kinds.append("text" if isinstance(content, str) else "splice")
        return text_print(content, *args, **kwargs)

    monkeypatch.setattr(_read_tracker, "text_print", spy)
    return kinds


async def test_a_same_size_change_right_after_a_read_is_caught(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    change_in_place(ws / "a.py", b"x = 2\n")  # within the same clock tick, most likely
    assert "has changed since" in await session.error(
        "edit", file_path="a.py", old_string="x", new_string="y"
    )
    assert "has changed since" in await session.error("write", file_path="a.py", content="z\n")
    assert (ws / "a.py").read_text() == "x = 2\n"


async def test_a_stat_too_recent_at_the_read_never_becomes_a_proof(
    ws: Path, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The racy window: a change within one timestamp granule of the read can leave the stat
    # exactly as it was. Simulate that (times frozen, as on a coarse clock): the read happens
    # while the times are recent, so it records no stat, and the later check compares texts even
    # though the times look old by then and the stat has not moved.
    path = ws / "a.py"
    path.write_text("x = 1\n")
    frozen, real_stat = path.stat(), os.stat

    def coarse_stat(target: Any, *args: Any, **kwargs: Any) -> Any:
        info = real_stat(target, *args, **kwargs)
        if target != str(path):
            return info
        fields = {name: getattr(info, name) for name in dir(info) if name.startswith("st_")}
        return SimpleNamespace(
            **{**fields, "st_mtime_ns": frozen.st_mtime_ns, "st_ctime_ns": frozen.st_ctime_ns}
        )

    monkeypatch.setattr(os, "stat", coarse_stat)
    await session.ok("read", file_path="a.py")
    change_in_place(path, b"x = 2\n")
    monkeypatch.setattr(filesystem, "_clock_ns", lambda: time.time_ns() + 10 * RACY_NS)
    assert await LocalFileSystem().fingerprint(str(path)) is not None  # the stat looks like a proof now
    assert "has changed since" in await session.error(
        "edit", file_path="a.py", old_string="x", new_string="y"
    )


@pytest.mark.usefixtures("later")
async def test_the_stat_proof_spares_hashing_the_file(ws: Path, session: Session, hashed: list[str]) -> None:
    (ws / "a.py").write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    assert hashed == ["text"]  # the read's record
    await session.ok("edit", file_path="a.py", old_string="1", new_string="2")
    assert hashed == ["text", "splice"]  # no check of the file's text: only the edit's record
    # A stat taken after the tools' own write could already describe someone else's change, so
    # none is recorded, and the next edit compares the texts.
    await session.ok("edit", file_path="a.py", old_string="2", new_string="3")
    assert hashed == ["text", "splice", "text", "splice"]
    assert (ws / "a.py").read_text() == "x = 3\n"


@pytest.mark.usefixtures("later")
async def test_a_change_after_a_proven_read_is_caught(ws: Path, session: Session) -> None:
    path = ws / "a.py"
    path.write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    before = path.stat()
    change_in_place(path, b"x = 2\n")
    # Only the ctime tells, once the real clock has moved past the file's (a tick or a granule).
    while path.stat().st_ctime_ns == before.st_ctime_ns:
        await anyio.sleep(0.005)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert "has changed since" in await session.error(
        "edit", file_path="a.py", old_string="x", new_string="y"
    )


@pytest.mark.usefixtures("later")
async def test_a_touched_or_replaced_but_identical_file_is_still_editable(
    ws: Path, session: Session, hashed: list[str]
) -> None:
    path = ws / "a.py"
    path.write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    os.utime(path, ns=(1, 1))
    await session.ok("edit", file_path="a.py", old_string="1", new_string="2")
    assert hashed[1] == "text"  # the stat moved: the texts were compared
    await session.ok("read", file_path="a.py")
    shutil.copy2(path, ws / "copy.py")
    os.replace(ws / "copy.py", path)  # same text and times, new inode
    await session.ok("edit", file_path="a.py", old_string="2", new_string="3")
    assert path.read_text() == "x = 3\n"


async def test_the_stat_is_taken_before_a_read_and_after_a_check(ws: Path, session: Session) -> None:
    # Before the recorded read, so that a change during it shows; after the checked read, so
    # that an equal stat covers the text that read saw.
    calls: list[str] = []

    class Logged(LocalFileSystem):
        async def read_text(self, path: str) -> str:
            calls.append("read")
            return await super().read_text(path)

        async def write_text(self, path: str, text: str) -> None:
            calls.append("write")
            await super().write_text(path, text)

        async def write_chunks(self, path: str, chunks: Iterable[str]) -> None:
            calls.append("write")
            await super().write_chunks(path, chunks)

        async def fingerprint(self, path: str) -> Hashable | None:
            calls.append("stat")
            return await super().fingerprint(path)

    session.services.add(Logged(), as_type=FileSystem)
    (ws / "a.py").write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    assert calls == ["stat", "read"]
    await session.ok("edit", file_path="a.py", old_string="1", new_string="2")
    assert calls[2:] == ["read", "stat", "write"]
    await session.ok("write", file_path="a.py", content="y\n")
    assert calls[5:] == ["read", "stat", "write"]


def test_read_tracker_trusts_only_an_equal_recorded_stamp(tmp_path: Path) -> None:
    tracker, path = ReadTracker(), str(tmp_path / "a.py")
    assert not tracker.changed(path, "anything")  # never read: the policy's business
    tracker.record(path, "x = 1\n", stamp=("stat", 1))
    assert not tracker.changed(path, "x = 2\n", ("stat", 1))  # proven unchanged: not compared
    assert tracker.changed(path, "x = 2\n", ("stat", 2))
    assert not tracker.changed(path, "x = 1\r\n", ("stat", 2))  # touched, same text
    assert tracker.changed(path, "x = 2\n", None)
    tracker.record(path, "x = 1\n")  # no stamp: nothing is ever proven
    assert tracker.changed(path, "x = 2\n", None)
    assert tracker.changed(path, "x = 2\n", ("stat", 1))


async def test_sessions_track_reads_separately(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("x = 1\n")
    await session.ok("read", file_path="a.py")
    other = Session(ws, registry=session.registry)
    assert "has not been read" in await other.error("edit", file_path="a.py", old_string="1", new_string="2")
    assert session.services.get(ReadTracker) is not other.services.get(ReadTracker)


# -- the workspace policy -----------------------------------------------------------------


async def test_dotdot_escape_asks(ws: Path, session: Session) -> None:
    (ws.parent / "secret.txt").write_text("s\n")
    message = await session.error("read", file_path="../secret.txt")
    assert message == (
        f"Error: this call needs approval (read {ws.parent / 'secret.txt'}, which is outside the workspace) "
        "and nobody can approve it here"
    )


async def test_symlink_escape_asks(ws: Path, session: Session) -> None:
    outside = ws.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s\n")
    (ws / "link").symlink_to(outside)
    message = await session.error("read", file_path="link/secret.txt")
    assert f"read {ws / 'link/secret.txt'} (really {outside / 'secret.txt'}), which is outside" in message
    assert "needs approval" in message
    new_file = await session.error("write", file_path="link/new.txt", content="x")
    assert "needs approval" in new_file
    assert not (outside / "new.txt").exists()


async def test_additional_directories_are_inside(ws: Path, tmp_path: Path) -> None:
    extra = ws.parent / "extra"
    extra.mkdir()
    (extra / "notes.txt").write_text("n\n")
    session = Session(ws, additional_directories=(str(extra),))
    assert "n" in await session.ok("read", file_path=str(extra / "notes.txt"))
    await session.ok("write", file_path=str(extra / "new.txt"), content="x\n")
    assert "needs approval" in await session.error("read", file_path=str(tmp_path))


async def test_ask_goes_to_the_approver(ws: Path) -> None:
    (ws.parent / "o.txt").write_text("o\n")
    asked: list[Ask] = []

    async def approver(execution: ToolExecution, ask: Ask) -> Allow | Deny:
        asked.append(ask)
        return Allow()

    session = Session(ws, approver=approver)
    assert "o" in await session.ok("read", file_path=str(ws.parent / "o.txt"))
    outside = str(ws.parent / "o.txt")
    subject = PathSubject("read", outside, outside)  # what an "always" answer may cover
    assert asked == [Ask(f"read {outside}, which is outside the workspace", subject=subject)]


async def test_search_tools_outside_the_workspace_ask(ws: Path, session: Session) -> None:
    for name, arguments in [
        ("ls", {"path": ".."}),
        ("grep", {"pattern": "x", "path": "/"}),
        ("glob", {"pattern": "../*"}),
        ("glob", {"pattern": "/etc/*.conf"}),
    ]:
        assert "needs approval" in await session.error(name, **arguments), (name, arguments)
    await session.ok("glob", pattern="*", path=".")


async def test_policy_composes_a_later_deny_wins(ws: Path) -> None:
    registry = ToolRegistry()
    register_fs_tools(registry)

    async def deny_all(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        return Deny("read-only day")

    registry.on_pre_execute(deny_all)
    session = Session(ws, registry=registry)
    (ws.parent / "o.txt").write_text("o\n")
    assert await session.error("read", file_path=str(ws.parent / "o.txt")) == "Error: read-only day"
    (ws / "i.txt").write_text("i\n")
    assert await session.error("read", file_path="i.txt") == "Error: read-only day"


async def test_policy_keys_on_its_own_tools_not_on_names(ws: Path, tmp_path: Path) -> None:
    async def peek(arguments: dict[str, Any], execution: ToolExecution) -> str:
        return "peeked"

    impostor = define_tool(
        name="read",
        description="Not the fs read.",
        parameters={"file_path": {"type": "string", "required": True}},
        execute=peek,
    )
    registry = ToolRegistry()
    registry.register(impostor)
    registry.on_pre_execute(fs_policy(registry))
    session = Session(ws, registry=registry)
    assert await session.ok("read", file_path=str(tmp_path)) == "peeked"


async def test_register_fs_tools_disposer_removes_tools_and_policy(ws: Path) -> None:
    registry = ToolRegistry()
    dispose = register_fs_tools(registry)
    assert [s.name for s in registry.schemas()] == ["read", "write", "edit", "glob", "grep", "ls"]
    dispose()
    assert len(registry) == 0
    registry.register(read_tool)  # the policy went with the tools: nothing asks any more
    session = Session(ws, registry=registry)
    (ws.parent / "o.txt").write_text("o\n")
    await session.ok("read", file_path=str(ws.parent / "o.txt"))


def test_tool_kinds_and_read_only() -> None:
    assert {t.name: (t.kind, t.read_only) for t in fs_tools()} == {
        "read": ("read", True),
        "write": ("edit", False),
        "edit": ("edit", False),
        "glob": ("search", True),
        "grep": ("search", True),
        "ls": ("read", True),
    }


# -- the FileSystem seam ------------------------------------------------------------------


class MemoryFileSystem(FileSystem):
    """A client backend's stand-in: text lives in a dict, the way an editor holds buffers."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    async def read_text(self, path: str) -> str:
        if path not in self.files:
            raise FileNotFoundError(2, "No such file", path)
        return self.files[path]

    async def write_text(self, path: str, text: str) -> None:
        self.files[path] = text


async def test_tools_use_the_session_file_system(ws: Path, session: Session) -> None:
    path = str(ws / "buffer.py")
    (ws / "buffer.py").write_text("on disk\n")
    memory = MemoryFileSystem({path: "unsaved = 1\n"})
    session.services.add(memory, as_type=FileSystem)
    assert "unsaved = 1" in await session.ok("read", file_path="buffer.py")
    await session.ok("edit", file_path="buffer.py", old_string="1", new_string="2")
    assert memory.files[path] == "unsaved = 2\n"
    memory.files[path] = "typed in the editor\n"
    assert "has changed since" in await session.error("write", file_path="buffer.py", content="x")
    await session.ok("write", file_path="new.py", content="fresh\n")
    assert memory.files[str(ws / "new.py")] == "fresh\n"
    assert (ws / "buffer.py").read_text() == "on disk\n"
    assert not (ws / "new.py").exists()


# -- presenters are pure: a replay from the log gives the live card -----------------------


async def test_result_cards_replay_from_meta(ws: Path, session: Session) -> None:
    (ws / "a.py").write_text("".join(f"x{n}\n" for n in range(20)))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read", {"file_path": "a.py", "offset": 3, "limit": 4}),
        ("edit", {"file_path": "a.py", "old_string": "x5\n", "new_string": "five\n"}),
        ("write", {"file_path": "a.py", "content": "short\n"}),
        ("write", {"file_path": "b.py", "content": "new\n"}),
        ("glob", {"pattern": "*.py"}),
        ("grep", {"pattern": "new"}),
        ("ls", {}),
    ]
    log: list[tuple[str, str, Any]] = []
    for name, arguments in calls:
        result = await session(name, **arguments)
        assert not result.is_error, out(result)
        live = session.result_view(name, arguments, result)
        assert live is not None
        log.append((name, json.dumps({"content": out(result), "meta": result.meta, "args": arguments}), live))
    for name in names(ws):  # a replay reads the log, never the disk
        (ws / name).unlink()
    for name, line, live in log:
        logged = json.loads(line)
        replay = ToolResult(content=(TextBlock(text=logged["content"]),), meta=logged["meta"])
        definition = session.registry.get(name)
        assert definition is not None
        assert definition.result_view(logged["args"], replay) == live, name


async def test_failed_calls_and_old_meta_get_the_generic_card(ws: Path, session: Session) -> None:
    result = await session("read", file_path="missing")
    assert session.result_view("read", {"file_path": "missing"}, result) is None
    for tool in fs_tools():
        assert (
            tool.result_view({"file_path": "/a", "pattern": "x", "content": ""}, ToolResult(content=()))
            is None
        )
