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
        if self._buffer or self._skip_lf or 0x0D in chunk:  # (an int: a plain memchr)
            return self._feed_any(chunk)
        # The common read, LF-only lines with nothing held from the last one: one split into
        # lines, instead of searching for both line ends and copying out each line (3-4x less
        # CPU per event, which a model's stream pays for every token). The same lines go the
        # same way as in the general path below; only the splitting differs.
        lines = chunk.split(b"\n")
        tail = lines.pop()
        data = self._data
        if len(lines) == 2 and not tail and not lines[1] and not data and lines[0][:6] == b"data: ":
            return [lines[0][6:].decode("utf-8", "replace")]  # one event, one line: a token's read
        out: list[str] = []
        for line in lines:
            if line[:6] == b"data: ":
                data.append(line[6:].decode("utf-8", "replace"))
            elif line:
                self._line(line, out)  # comments, other fields, "data:" without its space
            elif data:
                out.append(data[0] if len(data) == 1 else "\n".join(data))
                data.clear()
        if tail:
            self._buffer += tail  # a line cut by the read: the general path takes it next time
            if len(tail) > self._max_line:
                raise ModelError(f"the event stream sent a line longer than {self._max_line} bytes")
        return out

    def _feed_any(self, chunk: bytes) -> list[str]:
        """``feed`` for every form: CR and CRLF line ends, a line held from the last read."""
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
