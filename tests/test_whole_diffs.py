"""The approval card's diff in whole-file form, and when it keeps the fragment form."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_acp.loop._whole_diffs import WHOLE_FILE_LIMIT, widened
from dsh_tools import DiffCallView, FileDiff, Services


async def _widen(tmp_path: Path, *diffs: FileDiff) -> tuple[FileDiff, ...]:
    view = DiffCallView(title="Edit", diffs=diffs)
    return (await widened(view, str(tmp_path), Services())).diffs


@pytest.mark.anyio
async def test_an_edit_of_a_small_file_is_shown_whole(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("one\ntwo\r\nthree\n", newline="")
    (diff,) = await _widen(tmp_path, FileDiff(path="a.py", old_text="two", new_text="2"))
    assert (diff.path, diff.old_text, diff.new_text) == ("a.py", "one\ntwo\nthree\n", "one\n2\nthree\n")


@pytest.mark.anyio
async def test_a_write_over_an_existing_file_shows_what_it_replaces(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    (diff,) = await _widen(tmp_path, FileDiff(path=str(tmp_path / "a.txt"), old_text=None, new_text="new\n"))
    assert (diff.old_text, diff.new_text) == ("old\n", "new\n")


@pytest.mark.anyio
async def test_what_cannot_be_placed_for_sure_keeps_its_fragment(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x\n" * (WHOLE_FILE_LIMIT // 2) + "tail\n")
    (tmp_path / "twice.txt").write_text("a\na\n")
    (tmp_path / "bin.dat").write_bytes(b"\x00\xff\x00")
    kept = [
        FileDiff(path="big.txt", old_text="tail", new_text="end"),  # over the bound
        FileDiff(path="twice.txt", old_text="a", new_text="b"),  # found twice
        FileDiff(path="missing.txt", old_text="a", new_text="b"),
        FileDiff(path="bin.dat", old_text="a", new_text="b"),  # not text
        FileDiff(path="new.txt", old_text=None, new_text="hi\n"),  # a new file is whole already
    ]
    assert await _widen(tmp_path, *kept) == tuple(kept)
    both = (
        FileDiff(path="twice.txt", old_text="a\na", new_text="b"),
        FileDiff(path="twice.txt", old_text="x", new_text="y"),
    )
    assert await _widen(tmp_path, *both) == both  # two fragments of one file stay fragments
