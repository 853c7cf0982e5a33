"""Byte streams that also hand every complete line to an observer: how the testing kit records a
transcript and the demo shows the wire, without touching the connection itself."""

from __future__ import annotations

from collections.abc import Callable

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

__all__ = ["LineTapReceive", "LineTapSend"]


class LineTapReceive(ByteReceiveStream):
    """``inner``, with each complete line received also given to ``on_line`` (without its newline)."""

    def __init__(self, inner: ByteReceiveStream, on_line: Callable[[bytes], None]) -> None:
        self._inner = inner
        self._on_line = on_line
        self._buffer = bytearray()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self._inner.receive(max_bytes)
        self._buffer += data
        while (end := self._buffer.find(b"\n")) >= 0:
            self._on_line(bytes(self._buffer[:end]))
            del self._buffer[: end + 1]
        return data

    async def aclose(self) -> None:
        await self._inner.aclose()


class LineTapSend(ByteSendStream):
    """``inner``, with each non-blank line sent also given to ``on_line``."""

    def __init__(self, inner: ByteSendStream, on_line: Callable[[bytes], None]) -> None:
        self._inner = inner
        self._on_line = on_line

    async def send(self, item: bytes) -> None:
        for line in bytes(item).split(b"\n"):
            if line.strip():
                self._on_line(line)
        await self._inner.send(item)

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the peer is already gone; how it ended is reported elsewhere
