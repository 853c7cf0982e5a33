"""Server-sent events, sans I/O: the bytes of an event stream in, the ``data`` of each event out."""

from __future__ import annotations

from typing import Final

from ._model import ModelError

__all__ = ["SSEDecoder"]

_MAX_LINE: Final = 16 * 1024 * 1024


class SSEDecoder:
    """Sans-IO server-sent-events decoder: bytes in, the ``data`` of each event out.

    Lines may end in CRLF, LF or CR and may be split anywhere across ``feed`` calls (UTF-8
    sequences too: a line is decoded only once complete). Comments (``: keep-alive``) and the
    ``event``/``id``/``retry`` fields are skipped; several ``data`` lines of one event are joined
    with newlines, as the SSE spec says.
    """

    def __init__(self, max_line: int = _MAX_LINE) -> None:
        self._buffer = bytearray()
        self._data: list[str] = []
        self._max_line = max_line
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[str]:
        """Consume bytes; return the data of every event they complete."""
        out: list[str] = []
        buffer = self._buffer
        buffer += chunk
        start = 0
        length = len(buffer)
        while start < length:
            if self._skip_lf:
                self._skip_lf = False
                if buffer[start] == 0x0A:  # the LF of a CRLF split across two chunks
                    start += 1
                    continue
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            end = min(i for i in (cr, lf) if i != -1)
            self._line(bytes(buffer[start:end]), out)
            if buffer[end] == 0x0D:
                if end + 1 < length:
                    start = end + 2 if buffer[end + 1] == 0x0A else end + 1
                else:
                    start = end + 1
                    self._skip_lf = True
            else:
                start = end + 1
        del buffer[:start]
        if len(buffer) > self._max_line:
            raise ModelError(f"the event stream sent a line longer than {self._max_line} bytes")
        return out

    def close(self) -> list[str]:
        """The end of the stream: a last event not followed by a blank line still counts."""
        out: list[str] = []
        if self._buffer:
            self._line(bytes(self._buffer), out)
            self._buffer.clear()
        self._line(b"", out)
        return out

    def _line(self, raw: bytes, out: list[str]) -> None:
        if not raw:
            if self._data:
                out.append("\n".join(self._data))
                self._data = []
            return
        if raw[:1] == b":":
            return
        name, colon, value = raw.partition(b":")
        if not colon:
            return  # a field with no value: "data" alone would add "", nothing we use
        if name == b"data":
            if value[:1] == b" ":
                value = value[1:]
            self._data.append(value.decode("utf-8", errors="replace"))
