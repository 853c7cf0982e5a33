"""The bounded capture behind ``bash``: windows cut only on character boundaries, and an elided
window says exactly how much it left out. (Private module; the tool tests cover it end to end, these
cover every way bytes can be chunked and read.)"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from reference_tools._capture import StreamCapture, incomplete_suffix

# Text with multi-byte characters, plus raw bytes that are not UTF-8 at all.
chunks_of_bytes = st.lists(st.one_of(st.text(max_size=8).map(str.encode), st.binary(max_size=6)), max_size=20)


def capture(path: Path | None, head: int, tail: int) -> StreamCapture:
    def spill_path() -> str:
        assert path is not None, "this stream should never have spilled"
        return str(path)

    return StreamCapture("stdout", head=head, tail=tail, spill_path=spill_path)


@given(chunks=chunks_of_bytes, reads=st.lists(st.booleans(), max_size=20))
def test_windows_concatenate_to_the_decoded_stream(chunks: list[bytes], reads: list[bool]) -> None:
    stream = capture(None, head=10_000, tail=10_000)  # never elides here
    taken = []
    for index, chunk in enumerate(chunks):
        stream.feed(chunk)
        if index < len(reads) and reads[index]:
            taken.append(stream.take(final=False))
    taken.append(stream.take(final=True))
    assert "".join(taken) == b"".join(chunks).decode("utf-8", "backslashreplace")
    assert stream.path is None  # small outputs never touch the disk


@given(
    data=st.text(min_size=1, max_size=400).map(str.encode), head=st.integers(1, 40), tail=st.integers(1, 40)
)
def test_an_elided_window_names_what_it_dropped(data: bytes, head: int, tail: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        spill = Path(directory) / "out"
        stream = capture(spill, head, tail)
        for start in range(0, len(data), 7):
            stream.feed(data[start : start + 7])
        text = stream.take(final=True)
        stream.close()
        if len(data) <= head + tail:
            assert text == data.decode()
            return
        marker = re.search(r"\n\[\.\.\. (\d+) bytes omitted; full stdout saved to (\S+) \.\.\.\]\n", text)
        assert marker is not None
        kept_head, kept_tail = text[: marker.start()].encode(), text[marker.end() :].encode()
        assert data.startswith(kept_head)
        assert data.endswith(kept_tail)
        assert len(kept_head) <= head
        assert len(kept_tail) <= tail
        assert int(marker[1]) == len(data) - len(kept_head) - len(kept_tail)
        assert spill.read_bytes() == data


def test_incomplete_suffix() -> None:
    euro = "€".encode()  # e2 82 ac
    assert [incomplete_suffix(b"a" + euro[:n]) for n in range(4)] == [0, 1, 2, 0]
    assert incomplete_suffix(b"\x80\x80\x80\x80") == 0  # no lead byte: invalid, not incomplete
    assert incomplete_suffix(b"") == 0
