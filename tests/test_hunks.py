"""Applied hunks: applying them to the old text gives the new text, whatever the texts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_tools._hunks import (
    CONTEXT,
    Hunk,
    Splice,
    apply_hunks,
    diff_hunks,
    edit_hunks,
    find_sites,
    first_changed_line,
    line_start,
)
from reference_tools._read_tracker import text_print

# Few distinct lines and pieces, so that texts repeat and edits find several sites.
pieces = st.sampled_from(["a", "b", "\n", "a\n", "b\n", "\n\n", "é", "\r\n"])
texts = st.lists(pieces, max_size=40).map("".join)
needles = st.lists(pieces, min_size=1, max_size=3).map("".join)


def check_hunks(old: str, new: str, hunks: list[Hunk]) -> None:
    assert apply_hunks(old, hunks) == new
    for hunk in hunks:  # each hunk also says truly where its new text is
        at = line_start(new, hunk["new_start"])
        assert at >= 0
        assert new.startswith(hunk["new_text"], at)
        assert hunk["old_text"] != hunk["new_text"]
    starts = [hunk["old_start"] for hunk in hunks]
    assert starts == sorted(starts)
    if hunks:  # the lines before the first changed one are the same in both texts
        line = first_changed_line(hunks)
        assert old.split("\n")[: line - 1] == new.split("\n")[: line - 1]


@given(texts, texts)
def test_diff_hunks_apply(old: str, new: str) -> None:
    check_hunks(old, new, diff_hunks(old, new))


@given(texts, texts)
def test_diff_hunks_over_the_limit_are_one_region_that_applies(old: str, new: str) -> None:
    hunks = diff_hunks(old, new, max_lines=0)
    check_hunks(old, new, hunks)
    assert len(hunks) == (old != new)


@given(texts, needles, texts)
def test_edit_hunks_apply(text: str, old: str, new: str) -> None:
    sites = find_sites(text, old)
    if not sites or old == new:
        return
    first = text.count("\n", 0, sites[0]) + 1
    hunks, omitted = edit_hunks(text, sites, old, new, first_line=first)
    assert omitted == 0
    check_hunks(text, text.replace(old, new), hunks)
    single, _ = edit_hunks(text, sites[:1], old, new, first_line=first)
    check_hunks(text, text.replace(old, new, 1), single)


def test_edit_hunks_have_three_lines_of_context_and_merge_close_sites() -> None:
    lines = [f"{n}\n" for n in range(1, 21)]
    lines[4] = lines[7] = lines[17] = "x\n"  # lines 5, 8 and 18
    text = "".join(lines)
    hunks, _ = edit_hunks(text, find_sites(text, "x"), "x", "V", first_line=5)
    assert hunks == [
        Hunk(
            old_start=2,
            new_start=2,
            old_text="".join(lines[1:11]),
            new_text="2\n3\n4\nV\n6\n7\nV\n9\n10\n11\n",
        ),
        Hunk(old_start=15, new_start=15, old_text="".join(lines[14:]), new_text="15\n16\n17\nV\n19\n20\n"),
    ]
    hunks, _ = edit_hunks(text, find_sites(text, "x"), "x", "two\nlines", first_line=5)
    assert [(h["old_start"], h["new_start"]) for h in hunks] == [(2, 2), (15, 17)]
    assert CONTEXT == 3


def test_edit_hunks_are_bounded() -> None:
    text = "x\n\n\n\n\n\n\n\n" * 10
    sites = find_sites(text, "x")
    hunks, omitted = edit_hunks(text, sites, "x", "y", first_line=1, max_hunks=4)
    assert (len(hunks), omitted) == (4, 6)
    every_line = "x\n" * 100_000
    hunks, omitted = edit_hunks(
        every_line, find_sites(every_line, "x"), "x", "y", first_line=1, max_chars=1000
    )
    assert len(hunks) == 1
    assert len(hunks[0]["old_text"]) < 1100
    assert omitted == 100_000 - hunks[0]["new_text"].count("y")


def test_diff_hunks_of_equal_texts_are_empty() -> None:
    assert diff_hunks("same\n", "same\n") == []
    assert first_changed_line([]) == 1


def test_diff_hunks_of_a_large_file_look_only_at_the_change() -> None:
    old = "".join(f"line {n}\n" for n in range(200_000))
    new = old.replace("line 100000\n", "changed\n")
    assert diff_hunks(old, new) == [
        Hunk(
            old_start=99_998,
            new_start=99_998,
            old_text="".join(f"line {n}\n" for n in range(99_997, 100_004)),
            new_text="".join(f"line {n}\n" if n != 100_000 else "changed\n" for n in range(99_997, 100_004)),
        )
    ]


@given(texts, st.integers(min_value=1, max_value=50))
def test_line_start(text: str, line: int) -> None:
    lines = text.split("\n")
    expected = len("\n".join(lines[: line - 1])) + 1 if line <= len(lines) else -1
    assert line_start(text, line) == (0 if line == 1 else expected)


def test_line_start_crosses_blocks() -> None:
    text = "x" * 100_000 + "\n" + "y\n" * 70_000
    assert line_start(text, 2) == 100_001
    assert line_start(text, 70_001) == 100_001 + 2 * 69_999
    assert line_start(text, 70_003) == -1


# -- Splice: an edit's new text, handed out in chunks ------------------------------------

sizes = st.integers(min_value=1, max_value=7)


@given(texts, needles, texts, st.integers(min_value=0, max_value=3), sizes, st.data())
def test_splice_spells_the_replaced_text(
    text: str, old: str, new: str, limit: int, size: int, data: st.DataObject
) -> None:
    sites = find_sites(text, old, limit=limit or None)
    splice = Splice(text, sites, old, new)
    built = text.replace(old, new, len(sites))
    assert str(splice) == built
    assert len(splice) == len(built)
    assert "".join(splice.chunks(size)) == built
    # Chunks sit at multiples of size from the start, whatever part of the text is asked for.
    start = data.draw(st.integers(min_value=0, max_value=len(built) // size)) * size
    stop = data.draw(st.integers(min_value=start, max_value=len(built) + 2))
    expected = [built[at : min(at + size, stop)] for at in range(start, min(stop, len(built)), size)]
    assert list(splice.chunks(size, start, stop)) == expected
    assert built[: splice.head] == text[: splice.head]
    assert built[len(built) - splice.tail :] == text[len(text) - splice.tail :]
    for char in "ab\r\né":
        assert (char in splice) == (char in built)


def test_splice_builds_the_text_once_past_many_sites() -> None:
    text = "x," * (Splice.MAX_PIECES + 1)
    splice = Splice(text, find_sites(text, "x"), "x", "yy")
    assert str(splice) == "".join(splice.chunks(5)) == "yy," * (Splice.MAX_PIECES + 1)
    assert (splice.head, splice.tail) == (0, 1)
    with pytest.raises(ValueError, match="one character"):
        assert "yy" in splice


@given(texts, needles, texts, st.integers(min_value=0, max_value=3), sizes)
def test_a_splice_print_reuses_its_base_and_equals_the_built_texts(
    text: str, old: str, new: str, limit: int, size: int
) -> None:
    # The print of the edited text must not depend on whether it was built: the stale check
    # compares it with the print of the file read back later.
    sites = find_sites(text, old, limit=limit or None)
    splice = Splice(text, sites, old, new)
    built = text_print(str(splice), size=size)
    assert text_print(splice, size=size) == built
    assert text_print(splice, text_print(text, size=size), size=size) == built
