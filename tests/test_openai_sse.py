"""The SSE decoder of the OpenAI-compatible model: every form of the event stream, and its fast
path (LF-only lines, nothing held from the last read) against the general one on random streams
cut at random points."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_acp import ModelError
from dsh_acp.models._openai_sse import SSEDecoder


def decode(*pieces: bytes) -> list[str]:
    decoder = SSEDecoder()
    out: list[str] = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    out.extend(decoder.close())
    return out


def test_sse_events_comments_and_fields() -> None:
    stream = (
        b": keep-alive\n\n"
        b"event: message\nid: 7\nretry: 100\ndata: one\n\n"
        b"data:two\n\n"  # no space after the colon
        b"data: multi\ndata: line\n\n"
        b"data: [DONE]\n\n"
    )
    assert decode(stream) == ["one", "two", "multi\nline", "[DONE]"]


def test_sse_line_endings() -> None:
    assert decode(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n") == ["a", "b", "c"]


def test_sse_crlf_split_between_feeds() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r") == ["a"]
    assert decoder.feed(b"\ndata: b\n\n") == ["b"]


def test_sse_last_event_without_blank_line() -> None:
    assert decode(b"data: tail") == ["tail"]


def test_sse_refuses_an_endless_line() -> None:
    decoder = SSEDecoder(max_line=10)
    with pytest.raises(ModelError, match="longer than 10 bytes"):
        decoder.feed(b"data: " + b"x" * 20)


def test_sse_refuses_an_endless_line_after_whole_events() -> None:
    decoder = SSEDecoder(max_line=10)
    with pytest.raises(ModelError, match="longer than 10 bytes"):
        decoder.feed(b"data: a\n\ndata: " + b"x" * 20)


def test_sse_one_event_per_read() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a": 1}\n\n') == ['{"a": 1}']
    assert decoder.feed(b"data:  two spaces\n\n") == [" two spaces"]
    assert decoder.feed(b"data: \n\n") == [""]
    assert decoder.feed(b"data: caf\xc3\xa9 \xff\n\n") == ["café \ufffd"]


def test_sse_an_event_ended_in_the_next_read() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"data: b\n") == []
    assert decoder.feed(b"\n") == ["a\nb"]
    assert decoder.feed(b"data: c\n\nda") == ["c"]
    assert decoder.feed(b"ta: d\n\n") == ["d"]


_PAYLOADS = st.lists(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=30),
    max_size=6,
)


@given(
    payloads=_PAYLOADS,
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    crlf=st.booleans(),
)
def test_sse_any_split_gives_the_same_events(payloads: list[str], cuts: list[int], crlf: bool) -> None:
    newline = "\r\n" if crlf else "\n"
    text = "".join(f": ping{newline}data: {payload}{newline}{newline}" for payload in payloads)
    raw = text.encode("utf-8")
    points = sorted({min(cut, len(raw)) for cut in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert decode(*pieces) == payloads


# -- the fast path against the general one ----------------------------------------------------

_VALUE = st.one_of(
    st.binary(max_size=12).map(lambda raw: raw.replace(b"\r", b"").replace(b"\n", b"")),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=12).map(str.encode),
)
_LINE = st.one_of(
    _VALUE.map(lambda value: b"data: " + value),
    _VALUE.map(lambda value: b"data:" + value),
    _VALUE.map(lambda value: b": " + value),  # a comment
    st.sampled_from([b"event", b"id", b"retry", b"data", b"other"]).flatmap(
        lambda name: _VALUE.map(lambda value: name + b": " + value)
    ),
    st.sampled_from([b"", b"", b"data", b"data:", b"data: ", b"event", b":"]),
)
_STREAMS = st.tuples(
    st.lists(st.tuples(_LINE, st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\r"])), max_size=30),
    st.booleans(),  # LF-only: the fast path's stream
).map(lambda drawn: b"".join(line + (b"\n" if drawn[1] else end) for line, end in drawn[0]))


def _pieces(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(raw)) for cut in cuts})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]


@settings(max_examples=400)
@given(raw=_STREAMS, cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=20), whole=st.booleans())
def test_sse_fast_path_decodes_as_the_general_path(raw: bytes, cuts: list[int], whole: bool) -> None:
    """Read by read, the same events and the same state left, whatever the stream and its cuts:
    at event boundaries (as a trickled stream reads) or anywhere."""
    if whole:  # cut only after blank lines, so reads hold whole events
        ends = [i + 2 for i in range(len(raw) - 1) if raw[i : i + 2] == b"\n\n"]
        cuts = [ends[cut % len(ends)] for cut in cuts] if ends else []
    fast, general = SSEDecoder(), SSEDecoder()
    for piece in _pieces(raw, cuts):
        assert fast.feed(piece) == general._feed_any(piece)
    assert fast.close() == general.close()


@settings(max_examples=200)
@given(raw=_STREAMS, cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=20))
def test_sse_fast_path_refuses_long_lines_as_the_general_path(raw: bytes, cuts: list[int]) -> None:
    fast, general = SSEDecoder(max_line=8), SSEDecoder(max_line=8)
    for piece in _pieces(raw, cuts):
        try:
            expected = general._feed_any(piece)
        except ModelError:
            with pytest.raises(ModelError, match="longer than 8 bytes"):
                fast.feed(piece)
            return
        assert fast.feed(piece) == expected
