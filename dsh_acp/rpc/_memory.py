"""In-memory byte pipes, so a connection and its peer can talk inside one test without fds."""

from __future__ import annotations

import math

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.lowlevel import checkpoint
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["MemoryByteReceiveStream", "MemoryByteSendStream", "PipeEnd", "memory_pipe"]

PipeEnd = tuple[ByteReceiveStream, ByteSendStream]


class MemoryByteReceiveStream(ByteReceiveStream):
    """The reading end of a memory pipe; honours ``max_bytes`` by keeping the excess for later."""

    def __init__(self, chunks: MemoryObjectReceiveStream[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Return up to ``max_bytes`` bytes; raise ``anyio.EndOfStream`` once the writer closed."""
        if self._rest:
            await checkpoint()
            data = self._rest
        else:
            data = await self._chunks.receive()
        self._rest = data[max_bytes:]
        return data[:max_bytes]

    async def aclose(self) -> None:
        """Close this end; the writer then gets ``anyio.BrokenResourceError``."""
        await self._chunks.aclose()


class MemoryByteSendStream(ByteSendStream):
    """The writing end of a memory pipe; closing it is the reader's end of stream."""

    def __init__(self, chunks: MemoryObjectSendStream[bytes]) -> None:
        self._chunks = chunks

    async def send(self, item: bytes) -> None:
        """Queue ``item``; waits while the pipe already holds its maximum number of chunks."""
        if item:  # an empty chunk would read as nothing, not as end of stream
            await self._chunks.send(bytes(item))
        else:
            await checkpoint()

    async def aclose(self) -> None:
        """Signal end of stream to the reader."""
        await self._chunks.aclose()


def memory_pipe(max_buffer_chunks: float = math.inf) -> tuple[PipeEnd, PipeEnd]:
    """Two connected ends, each ``(receive, send)``: what one end sends, the other receives.

    ``max_buffer_chunks`` bounds each direction (in ``send()`` calls) to test backpressure.
    """
    a_send, b_receive = anyio.create_memory_object_stream[bytes](max_buffer_chunks)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](max_buffer_chunks)
    return (
        (MemoryByteReceiveStream(a_receive), MemoryByteSendStream(a_send)),
        (MemoryByteReceiveStream(b_receive), MemoryByteSendStream(b_send)),
    )
