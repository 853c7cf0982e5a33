"""bound_text: head and tail kept, a marker for the middle, cuts on character boundaries."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import bound_text


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
