"""``Connection.notify_each``: many notifications in one call (a session's replay), the same bytes
in the same order as ``notify`` one at a time, held by the same back-pressure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from dsh_acp.rpc._connection import Connection
from dsh_acp.rpc._memory import memory_pipe

pytestmark = pytest.mark.anyio

PARAMS: list[Any] = [
    {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": "a\nb"}}},
    {"n": 1, "nested": [1.5, None, True, {"é": "ü"}]},
    {"text": "\udcff lone surrogate"},  # escaped as notify escapes it, not refused
    [1, 2],
    "bare string",
]


class _NoCalls:
    def on_request(self, *args: Any) -> Any:
        raise AssertionError("no requests expected")

    def on_notification(self, *args: Any) -> Any:
        raise AssertionError("no notifications expected")


async def _written(send_all: Any, lines: int) -> bytes:
    (receive, send), (peer_receive, peer_send) = memory_pipe()
    connection = Connection(receive, send, _NoCalls())
    data = b""
    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.serve)
        await send_all(connection)
        with anyio.fail_after(5):
            while data.count(b"\n") < lines:
                data += await peer_receive.receive()
        await peer_send.aclose()
    await peer_receive.aclose()
    return data


async def test_the_same_bytes_as_one_notify_each() -> None:
    async def one_by_one(connection: Connection) -> None:
        for params in PARAMS:
            await connection.notify("session/update", params)
        await connection.notify("after", 0)

    async def all_at_once(connection: Connection) -> None:
        await connection.notify_each("session/update", iter(PARAMS))
        await connection.notify("after", 0)

    expected = await _written(one_by_one, len(PARAMS) + 1)
    assert await _written(all_at_once, len(PARAMS) + 1) == expected
    assert expected.count(b"\n") == len(PARAMS) + 1


async def test_held_while_the_peer_does_not_read_and_every_item_drawn_after_a_close() -> None:
    (receive, send), (peer_receive, peer_send) = memory_pipe(max_buffer_chunks=1)
    connection = Connection(receive, send, _NoCalls(), write_buffer_bytes=1000)
    drawn = 0

    def items() -> Iterator[dict[str, Any]]:
        nonlocal drawn
        for n in range(200):
            drawn += 1
            yield {"n": n, "pad": "x" * 50}

    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.serve)
        tg.start_soon(connection.notify_each, "n", items())
        await wait_all_tasks_blocked()
        assert 0 < drawn < 100  # held: about one buffer plus what the pipe holds
        first = await peer_receive.receive()
        assert first.startswith(b'{"jsonrpc":"2.0","method":"n","params":{"n":0,')
        connection.close()
        await wait_all_tasks_blocked()
        assert drawn == 200  # the rest dropped, as notify drops them, but drawn
        await peer_send.aclose()
    await peer_receive.aclose()
