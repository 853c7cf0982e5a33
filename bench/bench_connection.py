"""CPU cost of one streamed notification through ``Connection``, in µs (medians of several runs).

    .venv/bin/python bench/bench_connection.py [--count N] [--runs R]

Scenarios, each over a real pipe drained by a child process (so its reading is not counted) and
over an in-memory pipe (where the reading task is counted):

- burst:   a handler sends N notifications back to back (the writer coalesces them);
- trickle: one notification per event-loop turn, as when each model chunk arrives from the network.
           The cost of the turn itself (an empty ``checkpoint()``) is measured and subtracted.

For scale, "bare" is the floor for the same pipe: ``orjson.dumps`` + one ``os.write`` per notification.
Runs of all scenarios are interleaved, so that drift in the machine's speed hits them alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import anyio
import orjson
from anyio.abc import ByteSendStream
from anyio.lowlevel import checkpoint

from dsh_acp.rpc._connection import Connection
from dsh_acp.rpc._memory import memory_pipe
from dsh_acp.rpc._stdio import FdSendStream

PARAMS = {
    "sessionId": "sess_0123456789",
    "update": {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "a token or two of model output, "},
    },
}


class NoDispatch:
    def on_request(self, method: str, params: Any, request_id: int | str) -> Any:
        raise NotImplementedError

    def on_notification(self, method: str, params: Any) -> None:
        return None


async def _measure(count: int, trickle: bool, send: ByteSendStream) -> float:
    """CPU µs per notification, from the first notify until serve() has flushed and returned."""
    (receive, _), (_, peer_send) = memory_pipe()  # our input: ends when we close peer_send
    conn = Connection(receive, send, NoDispatch(), drain_timeout=60)
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.serve)
        await checkpoint()
        start = time.process_time()
        for _ in range(count):
            await conn.notify("session/update", PARAMS)
            if trickle:
                await checkpoint()
        await peer_send.aclose()  # end of input: serve() flushes, closes `send` and returns
    return (time.process_time() - start) / count * 1e6


COUNT_LINES = (
    "import sys; print(sum(c.count(b'\\n') for c in iter(lambda: sys.stdin.buffer.read1(1 << 20), b'')))"
)


async def over_os_pipe(count: int, trickle: bool) -> float:
    read_fd, write_fd = os.pipe()
    # A plain child, so that none of its I/O runs (and is counted) in our event loop.
    child = subprocess.Popen([sys.executable, "-c", COUNT_LINES], stdin=read_fd, stdout=subprocess.PIPE)  # noqa: ASYNC220
    os.close(read_fd)
    elapsed = await _measure(count, trickle, FdSendStream(write_fd, close_fd=True))
    out, _ = child.communicate(timeout=60)
    assert int(out) == count, (out, count)
    return elapsed


async def bare_os_pipe(count: int, trickle: bool) -> float:
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", COUNT_LINES], stdin=read_fd, stdout=subprocess.PIPE)  # noqa: ASYNC220
    os.close(read_fd)
    message = {"jsonrpc": "2.0", "method": "session/update", "params": PARAMS}
    start = time.process_time()
    for _ in range(count):
        os.write(write_fd, orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE))
        if trickle:
            await checkpoint()
    elapsed = time.process_time() - start
    os.close(write_fd)
    out, _ = child.communicate(timeout=60)
    assert int(out) == count, (out, count)
    return elapsed / count * 1e6


async def over_memory(count: int, trickle: bool) -> float:
    (_, send), (peer_receive, _) = memory_pipe()
    received = 0

    async def drain() -> None:
        nonlocal received
        try:
            while True:
                received += (await peer_receive.receive(1 << 20)).count(b"\n")
        except anyio.EndOfStream:
            pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        elapsed = await _measure(count, trickle, send)
    assert received == count, (received, count)
    return elapsed


async def loop_turn(count: int) -> float:
    start = time.process_time()
    for _ in range(count):
        await checkpoint()
    return (time.process_time() - start) / count * 1e6


async def main(count: int, runs: int) -> None:
    scenarios = [("bare   ", bare_os_pipe), ("os pipe", over_os_pipe), ("memory ", over_memory)]
    turns: list[float] = []
    results: dict[tuple[str, bool], list[float]] = {}
    for _ in range(runs):
        turns.append(await loop_turn(count))
        for name, scenario in scenarios:
            for trickle in (False, True):
                results.setdefault((name, trickle), []).append(await scenario(count, trickle))
    turn = statistics.median(turns)
    print(f"one event-loop turn (checkpoint): {turn:.2f} µs")
    for (name, trickle), values in results.items():
        median = statistics.median(values)
        label = "trickle" if trickle else "burst  "
        extra = f"  (minus the loop turn: {median - turn:.2f} µs)" if trickle else ""
        print(f"{name} {label}: {median:.2f} µs per notification{extra}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    anyio.run(main, args.count, args.runs)
