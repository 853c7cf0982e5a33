"""The text helpers: bound_text (head and tail kept, a marker for the middle, cuts on character
boundaries), fenced, text_of, and one_line (for the messages that must stay one line)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh_acp._safe_text import one_line
from dsh_tools import ImageBlock, bound_text, fenced, text, text_of


def test_short_text_is_unchanged() -> None:
    assert bound_text("hello", head=5, tail=0) == "hello"


def test_marker_names_dropped_bytes_and_note() -> None:
    out = bound_text("a" * 10 + "b" * 10 + "c" * 10, head=10, tail=10, note="full output in /tmp/x")
    assert out == "a" * 10 + "\n[... 10 bytes omitted; full output in /tmp/x ...]\n" + "c" * 10


def test_cuts_on_character_boundaries() -> None:
    out = bound_text("é" * 10, head=3, tail=3)  # 2 bytes each: 3 bytes hold one whole character
    assert out == "é\n[... 16 bytes omitted ...]\né"


@given(st.text(), st.integers(0, 50), st.integers(0, 50))
def test_bound_text_property(value: str, head: int, tail: int) -> None:
    out = bound_text(value, head=head, tail=tail)
    if len(value.encode()) <= head + tail:
        assert out == value
    else:
        start, _, rest = out.partition("\n[... ")
        assert value.startswith(start)
        assert len(start.encode()) <= head
        end = rest.split(" ...]\n", 1)[1]
        assert value.endswith(end)
        assert len(end.encode()) <= tail


def test_fenced_blocks_close_on_their_own_line_and_outlast_inner_backticks() -> None:
    assert fenced("") == "```\n```"
    assert fenced("a", "console") == "```console\na\n```"
    assert fenced("a\n", "console") == "```console\na\n```"
    assert fenced("``````", "console") == "```````console\n``````\n```````"
    assert fenced('{"a": 1}', "json") == '```json\n{"a": 1}\n```'


def test_text_of_puts_each_text_block_on_its_own_line() -> None:
    image = ImageBlock(data="", mime_type="image/png")
    assert text_of([text("a"), image, text("b")]) == "a\nb"
    assert text_of([image]) == ""


def test_one_line_folds_line_breaks_and_keeps_a_line_as_it_is() -> None:
    assert one_line("a\n  b\r\nc ") == "a b c"
    assert one_line("a  b\tc") == "a  b\tc"  # already one line: a name with two spaces stays whole


def test_one_line_cuts_at_the_end_or_in_the_middle() -> None:
    assert one_line("abcdef", 4) == "abc…"
    assert one_line("abcdef", 6) == "abcdef"
    assert one_line("x" * 10 + "y" * 20, 12, cut="middle") == "xxxx [… 18 characters …] " + "y" * 8


@given(st.text(), st.integers(2, 50))
def test_one_line_is_one_line_within_its_limit(value: str, limit: int) -> None:
    out = one_line(value, limit)
    assert "\n" not in out
    assert "\r" not in out
    assert len(out) <= limit
