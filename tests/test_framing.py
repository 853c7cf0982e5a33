"""Sans-IO framing: bytes in, frames out, whatever way the bytes are chunked."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_acp.rpc._framing import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Frame,
    FrameDecoder,
    FrameError,
    Message,
    encode_message,
)

PARSE = -32700
INVALID = -32600


def decode_all(chunks: list[bytes], max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[Frame]:
    decoder = FrameDecoder(max_message_bytes)
    frames: list[Frame] = []
    for chunk in chunks:
        frames += decoder.feed(chunk)
    return frames + decoder.close()


def values(frames: list[Frame]) -> list[Any]:
    """Message values, and errors with orjson's wording (which varies by version) masked."""
    return [f.value if isinstance(f, Message) else _mask(f) for f in frames]


def _mask(error: FrameError) -> FrameError:
    if error.code == PARSE and error.message != "Parse error: invalid UTF-8":
        return FrameError(PARSE, "Parse error: *")
    return error


MULTI = (
    b'{"jsonrpc":"2.0","id":1,"method":"a","params":{"text":"h\\u00e9 \\n x"}}\n'
    b"\n"
    b"   \t \r\n"
    b'{"jsonrpc":"2.0","method":"b"}\r\n'
    b"{broken\n"
    b"[1,2,3]\n"
    b'"caf\xc3\xa9"\n'
    b"\xff\xfe\n"
    b"42"
)
MULTI_EXPECTED: list[Any] = [
    {"jsonrpc": "2.0", "id": 1, "method": "a", "params": {"text": "hé \n x"}},
    {"jsonrpc": "2.0", "method": "b"},
    FrameError(PARSE, "Parse error: *"),
    [1, 2, 3],
    "café",
    FrameError(PARSE, "Parse error: invalid UTF-8"),
    42,
]


def test_one_read_many_messages() -> None:
    assert values(decode_all([MULTI])) == MULTI_EXPECTED


def test_byte_by_byte() -> None:
    assert values(decode_all([MULTI[i : i + 1] for i in range(len(MULTI))])) == MULTI_EXPECTED


@pytest.mark.parametrize("cut", range(len(MULTI) + 1))
def test_split_at_every_position(cut: int) -> None:
    assert values(decode_all([MULTI[:cut], MULTI[cut:]])) == MULTI_EXPECTED


def test_split_at_every_pair_of_positions() -> None:
    for i in range(len(MULTI) + 1):
        for j in range(i, len(MULTI) + 1):
            assert values(decode_all([MULTI[:i], MULTI[i:j], MULTI[j:]])) == MULTI_EXPECTED, (i, j)


def test_frames_come_out_as_soon_as_the_line_ends() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b'{"a"') == []
    assert decoder.feed(b":1}") == []
    assert decoder.feed(b"\n{") == [Message({"a": 1})]
    assert decoder.feed(b"}\n") == [Message({})]
    assert decoder.close() == []


def test_close_parses_a_final_line_without_newline() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b'{"a":1}\n{"b":') == [Message({"a": 1})]
    assert decoder.feed(b"2}") == []
    assert decoder.close() == [Message({"b": 2})]
    assert decoder.close() == []


def test_close_reports_a_truncated_final_line() -> None:
    decoder = FrameDecoder()
    decoder.feed(b'{"b":')
    assert values(decoder.close()) == [FrameError(PARSE, "Parse error: *")]


def test_close_ignores_trailing_whitespace() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(b"{}\n  \r") == [Message({})]
    assert decoder.close() == []


def test_crlf() -> None:
    assert values(decode_all([b'{"a":1}\r\n{"b":2}\r\n'])) == [{"a": 1}, {"b": 2}]
    assert values(decode_all([b'{"a":1}\r', b'\n{"b":2}\r'])) == [{"a": 1}, {"b": 2}]


def test_invalid_utf8_in_a_string_and_surrogates() -> None:
    frames = decode_all([b'{"a":"\xc3"}\n', b'"\xed\xa0\x80"\n', b"{}\n"])
    assert frames == [
        FrameError(PARSE, "Parse error: invalid UTF-8"),
        FrameError(PARSE, "Parse error: invalid UTF-8"),
        Message({}),
    ]


def test_invalid_json_messages_are_one_line() -> None:
    for bad in [b"{", b"nul", b"[1,]", b"1e400", b"{} {}", b"\x00"]:
        [frame] = decode_all([bad + b"\n"])
        assert isinstance(frame, FrameError)
        assert frame.code == PARSE
        assert frame.message.startswith("Parse error: ")
        assert "\n" not in frame.message


def oversize(limit: int) -> FrameError:
    return FrameError(INVALID, f"Invalid request: message exceeds {limit} bytes")


def test_default_limit_message() -> None:
    assert oversize(DEFAULT_MAX_MESSAGE_BYTES).message == "Invalid request: message exceeds 33554432 bytes"


def test_limit_is_inclusive() -> None:
    fits = b'"' + b"x" * 8 + b'"'  # 10 bytes
    assert decode_all([fits + b"\n"], max_message_bytes=10) == [Message("x" * 8)]
    assert decode_all([fits + b" \n"], max_message_bytes=10) == [oversize(10)]
    # Same when the line is assembled from pieces.
    assert decode_all([fits[:3], fits[3:], b"\n"], max_message_bytes=10) == [Message("x" * 8)]
    assert decode_all([fits[:3], fits[3:], b" \n"], max_message_bytes=10) == [oversize(10)]


def test_oversize_then_valid_in_one_read() -> None:
    data = b'"' + b"x" * 100 + b'"\n{"ok":true}\n'
    assert decode_all([data], max_message_bytes=50) == [oversize(50), Message({"ok": True})]


def test_oversize_at_every_split_position() -> None:
    data = b'{"a":1}\n"' + b"x" * 30 + b'"\n{"ok":true}\n'
    expected = [Message({"a": 1}), oversize(20), Message({"ok": True})]
    for cut in range(len(data) + 1):
        assert decode_all([data[:cut], data[cut:]], max_message_bytes=20) == expected, cut
    assert decode_all([data[i : i + 1] for i in range(len(data))], max_message_bytes=20) == expected


def test_oversize_across_many_feeds_reports_once_and_stays_bounded() -> None:
    limit = 1024
    decoder = FrameDecoder(limit)
    assert decoder.feed(b'{"first":1}\n"') == [Message({"first": 1})]
    frames: list[Frame] = []
    for _ in range(10_000):  # 10 MB in 1 KB pieces
        frames += decoder.feed(b"y" * 1000)
        assert len(decoder._buffer) <= limit  # memory stays bounded while the line streams past
    assert frames == [oversize(limit)]
    assert decoder.feed(b'y"\n{"after":2}\n') == [Message({"after": 2})]
    assert decoder.close() == []


def test_oversize_unterminated_at_eof() -> None:
    decoder = FrameDecoder(10)
    assert decoder.feed(b"x" * 11) == [oversize(10)]
    assert decoder.close() == []
    # The decoder is usable again after close.
    assert decoder.feed(b"{}\n") == [Message({})]


def test_oversize_detected_from_buffered_prefix() -> None:
    decoder = FrameDecoder(10)
    assert decoder.feed(b"123456") == []
    assert decoder.feed(b"78901") == [oversize(10)]
    assert decoder.feed(b"2345\n7\n") == [Message(7)]


def test_invalid_limit() -> None:
    with pytest.raises(ValueError, match="positive"):
        FrameDecoder(0)


def test_encode_message_is_one_line() -> None:
    encoded = encode_message({"jsonrpc": "2.0", "method": "x", "params": {"t": "a\nb\r\u2028"}})
    assert encoded.endswith(b"\n")
    assert encoded.count(b"\n") == 1
    assert orjson.loads(encoded) == {"jsonrpc": "2.0", "method": "x", "params": {"t": "a\nb\r\u2028"}}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(
    messages=st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=4), min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=0), max_size=12),
)
def test_roundtrip_any_chunking(messages: list[dict[str, Any]], cuts: list[int]) -> None:
    data = b"".join(encode_message(m) for m in messages)
    positions = sorted({c % (len(data) + 1) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *positions], [*positions, len(data)], strict=True)]
    assert values(decode_all(chunks)) == messages
