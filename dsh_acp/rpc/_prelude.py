"""The first requests of a connection, answered on the bare asyncio loop before anyio is imported.

An editor shows nothing until the agent answers its first request, and importing anyio and the
full ``Connection`` costs about as much as everything else on the way to that answer. So the first
lines are read here, with asyncio alone, and each well-formed request among them is offered to a
synchronous ``answer``. The first line that is anything else (a request ``answer`` declines, a
notification, a response, a line that does not parse, is too long, or is not JSON-RPC), and every
byte after it, is left to the full connection, which is given those bytes as already read
(``FdReceiveStream(already_read=...)``): it reads exactly the stream it would have read from the
start, so error answers, the line cap, cancellation and end of input stay its business alone.

Once a line was answered and no complete line is left, the prelude ends: what follows (the rest of
the agent's imports) should not wait for the client's next request.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from ._framing import encode_message

__all__ = ["PreludeEnd", "answer_first_requests"]

_READ_SIZE: Final = 64 * 1024
_MAX_HELD: Final = 64 * 1024
"""An unfinished line longer than this is left to the full connection: the prelude only answers
small requests, and never holds much of the client's input."""


@dataclass(frozen=True, slots=True)
class PreludeEnd:
    """Where the prelude stopped."""

    rest: bytes
    """What was read and not answered, from the start of its first line: the full connection
    reads it first."""
    ended: bool
    """End of input was read (a terminal reports it only once)."""
    answered: int
    """How many requests were answered."""


async def answer_first_requests(
    read_fd: int,
    write_fd: int,
    answer: Callable[[str, Any], dict[str, Any] | None],
    *,
    max_line_bytes: int,
) -> PreludeEnd:
    """Answer requests read from ``read_fd`` on ``write_fd`` while ``answer`` takes them.

    ``answer(method, params)`` returns the result object, or ``None`` to leave that request (and
    all after it) to the full connection; it must be safe to call again for the same request,
    which is what happens when the answer cannot be written. ``max_line_bytes`` is the full
    connection's line cap: a longer line is its to refuse.
    """
    loop = asyncio.get_running_loop()
    held = b""
    answered = 0
    while True:
        try:
            data = await _read(loop, read_fd)
        except OSError:  # the connection reports a broken input as its end, as here
            data = b""
        if not data:
            return PreludeEnd(held, True, answered)
        held += data
        while (end := held.find(b"\n")) >= 0:
            line = held[:end]
            if not line or line.isspace():
                held = held[end + 1 :]  # blank lines between messages mean nothing
                continue
            response = _answer_line(line, answer) if end <= max_line_bytes else None
            if response is None:
                return PreludeEnd(held, False, answered)
            try:
                await _write_all(loop, write_fd, response)
            except OSError:  # the reader is gone: the connection finds that out on its own
                return PreludeEnd(held, False, answered)
            answered += 1
            held = held[end + 1 :]
        if answered or len(held) > _MAX_HELD:
            return PreludeEnd(held, False, answered)


def _answer_line(line: bytes, answer: Callable[[str, Any], dict[str, Any] | None]) -> bytes | None:
    """The response to ``line`` if it is a request ``answer`` takes (the checks the full connection
    makes before it dispatches a request), else ``None``."""
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(message) is not dict or message.get("jsonrpc") != "2.0":
        return None
    request_id = message.get("id")
    method = message.get("method")
    params = message.get("params")
    # bool is an int subclass: true is not a usable id (nor is 1.0), as for the connection.
    if type(request_id) is not int and type(request_id) is not str:
        return None
    if type(method) is not str or not (params is None or type(params) is dict or type(params) is list):
        return None
    result = answer(method, params)
    if result is None:
        return None
    try:
        return encode_message({"jsonrpc": "2.0", "id": request_id, "result": result})
    except TypeError:
        return None  # the connection answers it (with its error) instead


async def _read(loop: asyncio.AbstractEventLoop, fd: int) -> bytes:
    """One read of what is there, waiting for readiness first. The descriptor's blocking mode is
    left as it is (it is the full connection's to set): a readable pipe or terminal does not block,
    and a regular file (which epoll refuses to watch) never blocks for long."""
    while True:
        if not await _wait(loop, fd, readable=True):
            return os.read(fd, _READ_SIZE)
        try:
            return os.read(fd, _READ_SIZE)
        except BlockingIOError:  # the parent left the pipe non-blocking, and it was a false alarm
            continue


async def _write_all(loop: asyncio.AbstractEventLoop, fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:  # a non-blocking pipe that is full
            await _wait(loop, fd, readable=False)
            continue
        view = view[written:]


async def _wait(loop: asyncio.AbstractEventLoop, fd: int, *, readable: bool) -> bool:
    """Wait until ``fd`` is ready; ``False`` (at once) if it cannot be watched."""
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add, remove = (loop.add_reader, loop.remove_reader) if readable else (loop.add_writer, loop.remove_writer)
    try:
        add(fd, wake)
    except PermissionError:  # a regular file or /dev/null: always ready
        return False
    try:
        await ready
    finally:
        remove(fd)
    return True
