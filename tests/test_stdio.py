"""stdio guarded at the fd level: real subprocesses, real pipes, files and /dev/null."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import orjson
import pytest

from dsh_acp.rpc._connection import Connection, RequestId
from dsh_acp.rpc._framing import encode_message
from dsh_acp.rpc._stdio import FdReceiveStream, FdSendStream

pytestmark = pytest.mark.anyio

# The agent side: serves over protocol_stdio(); its handlers misbehave in every way they can.
AGENT = r"""
import os, subprocess, sys
import anyio
from dsh_acp.rpc._connection import Connection
from dsh_acp.rpc._stdio import protocol_stdio

class Dispatch:
    def on_request(self, method, params, request_id):
        async def noisy():
            print("print() from a handler")
            os.system("echo echo from a child shell")
            os.write(1, b"raw write to fd 1\n")
            sys.stdout.write("no newline, flushed at exit")
            # A child that reads stdin gets /dev/null, not the client's next message.
            child = subprocess.run(["cat"], capture_output=True)
            try:
                input()
                got_input = True
            except EOFError:
                got_input = False
            return {"cat": child.stdout.decode(), "input": got_input}

        async def ping():
            return "pong"

        return {"noisy": noisy, "ping": ping}[method]()

    def on_notification(self, method, params):
        return None

async def main():
    with protocol_stdio() as (receive, send):
        await Connection(receive, send, Dispatch()).serve()
    print("restored")  # fd 1 and sys.stdout are the real stdout again

anyio.run(main)
"""


def request(request_id: RequestId, method: str) -> bytes:
    return encode_message({"jsonrpc": "2.0", "id": request_id, "method": method})


async def test_handlers_cannot_write_to_the_protocol_stdout() -> None:
    async with await anyio.open_process(
        [sys.executable, "-c", AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        stdout = b""
        stderr = b""

        async def read_stderr() -> None:
            nonlocal stderr
            assert process.stderr is not None
            async for chunk in process.stderr:
                stderr += chunk

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read_stderr)
                await process.stdin.send(request(1, "noisy"))
                while stdout.count(b"\n") < 1:
                    stdout += await process.stdout.receive()
                # The next message reaches the agent intact: nobody consumed it.
                await process.stdin.send(request(2, "ping"))
                while stdout.count(b"\n") < 2:
                    stdout += await process.stdout.receive()
                await process.stdin.aclose()  # the client ends the agent by closing stdin
                async for chunk in process.stdout:
                    stdout += chunk
            assert await process.wait() == 0

    lines = stdout.splitlines()
    assert [orjson.loads(line) for line in lines[:2]] == [
        {"jsonrpc": "2.0", "id": 1, "result": {"cat": "", "input": False}},
        {"jsonrpc": "2.0", "id": 2, "result": "pong"},
    ]
    assert lines[2:] == [b"restored"]
    for text in [b"print() from a handler", b"echo from a child shell", b"raw write to fd 1", b"no newline"]:
        assert text in stderr


def run_agent(stdin: Any, stdout: Any) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-c", AGENT]
    return subprocess.run(command, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, timeout=20, check=True)


def test_stdin_from_a_regular_file_and_stdout_to_a_file(tmp_path: Path) -> None:
    requests = tmp_path / "in.jsonl"
    requests.write_bytes(request(1, "ping") + request(2, "ping"))
    output = tmp_path / "out.jsonl"
    with requests.open("rb") as stdin, output.open("wb") as stdout:
        run_agent(stdin, stdout)
    assert output.read_bytes().splitlines() == [
        b'{"jsonrpc":"2.0","id":1,"result":"pong"}',
        b'{"jsonrpc":"2.0","id":2,"result":"pong"}',
        b"restored",
    ]


def test_stdin_from_dev_null_ends_at_once() -> None:
    result = run_agent(subprocess.DEVNULL, subprocess.PIPE)
    assert result.stdout == b"restored\n"


class Silent:
    def on_request(self, method: str, params: Any, request_id: RequestId) -> Any:
        raise NotImplementedError

    def on_notification(self, method: str, params: Any) -> None:
        return None


async def test_burst_larger_than_the_pipe_arrives_in_order() -> None:
    """Writes that fill the pipe go out partly at once and the rest when the reader catches up."""
    to_agent_read, to_agent_write = os.pipe()
    from_agent_read, from_agent_write = os.pipe()
    connection = Connection(
        FdReceiveStream(to_agent_read, close_fd=True),
        FdSendStream(from_agent_write, close_fd=True),
        Silent(),
        write_buffer_bytes=100_000,
    )
    reader = FdReceiveStream(from_agent_read, close_fd=True)
    count = 2000
    received = b""

    async def produce() -> None:
        for n in range(count):
            await connection.notify("n", {"n": n, "pad": "x" * 300})

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            tg.start_soon(produce)
            while received.count(b"\n") < count:
                received += await reader.receive(1 << 20)
            os.close(to_agent_write)  # end of input
        with pytest.raises(anyio.EndOfStream):
            await reader.receive()
    await reader.aclose()
    assert [orjson.loads(line)["params"]["n"] for line in received.splitlines()] == list(range(count))


async def test_writes_from_the_loop_callback_keep_order() -> None:
    """The fast path: notifications written straight from a loop callback while the writer idles,
    including one turn's worth that overflows the pipe and is finished by the writer task."""
    to_agent_read, to_agent_write = os.pipe()
    from_agent_read, from_agent_write = os.pipe()
    send = FdSendStream(from_agent_write, close_fd=True)
    direct_writes: list[int] = []
    write_nowait = send.write_nowait

    def counting_write_nowait(data: bytes) -> int:
        direct_writes.append(len(data))
        return write_nowait(data)

    send.write_nowait = counting_write_nowait  # type: ignore[method-assign]
    connection = Connection(
        FdReceiveStream(to_agent_read, close_fd=True), send, Silent(), write_buffer_bytes=10_000_000
    )
    reader = FdReceiveStream(from_agent_read, close_fd=True)
    trickle, burst = 50, 1000
    received = b""

    async def produce() -> None:
        for n in range(trickle):  # one per loop turn, as model chunks arrive
            await connection.notify("n", {"n": n})
            await anyio.lowlevel.checkpoint()
        for n in range(trickle, trickle + burst):  # ~300 KB in one turn: more than a pipe holds
            await connection.notify("n", {"n": n, "pad": "x" * 300})

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            await anyio.wait_all_tasks_blocked()  # the writer is idle
            tg.start_soon(produce)
            while received.count(b"\n") < trickle + burst:
                received += await reader.receive(1 << 20)
            os.close(to_agent_write)
    await reader.aclose()
    numbers = [orjson.loads(line)["params"]["n"] for line in received.splitlines()]
    assert numbers == list(range(trickle + burst))
    assert len(direct_writes) >= trickle
    assert max(direct_writes) > 300 * burst  # the burst was offered in one write, and only part fit


async def test_reader_gone_ends_the_connection() -> None:
    to_agent_read, to_agent_write = os.pipe()
    from_agent_read, from_agent_write = os.pipe()
    os.close(from_agent_read)
    connection = Connection(
        FdReceiveStream(to_agent_read, close_fd=True), FdSendStream(from_agent_write, close_fd=True), Silent()
    )
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            await connection.notify("n")
    assert connection.closed
    os.close(to_agent_write)


async def test_streams_restore_blocking_mode_and_close() -> None:
    read_fd, write_fd = os.pipe()
    receive, send = FdReceiveStream(read_fd), FdSendStream(write_fd)
    assert not os.get_blocking(read_fd)
    await send.send(b"abc")
    assert send.write_nowait(b"def") == 3
    assert await receive.receive(4) == b"abcd"
    assert await receive.receive() == b"ef"
    await send.aclose()
    await receive.aclose()
    assert os.get_blocking(read_fd)  # the fds were not ours to close: left as found
    with pytest.raises(anyio.ClosedResourceError):
        await receive.receive()
    with pytest.raises(anyio.ClosedResourceError):
        await send.send(b"x")
    os.close(read_fd)
    os.close(write_fd)


@pytest.mark.parametrize("fast_path", [True, False])
async def test_end_of_input_finishes_the_line_being_written(fast_path: bool) -> None:
    """Input ends while a burst much larger than the pipe is going out and the reader is slow:
    the reader gets whole lines only, and the connection stops soon after."""
    to_agent_read, to_agent_write = os.pipe()
    from_agent_read, from_agent_write = os.pipe()
    send = FdSendStream(from_agent_write, close_fd=True)
    if not fast_path:
        send.write_nowait = None  # type: ignore[assignment,method-assign]  # only the writer task
    connection = Connection(
        FdReceiveStream(to_agent_read, close_fd=True), send, Silent(), write_buffer_bytes=1 << 30
    )
    reader = FdReceiveStream(from_agent_read, close_fd=True)
    received = bytearray()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            await anyio.lowlevel.checkpoint()
            for n in range(300):  # 300 lines of ~40 KB: the pipe holds one or two
                await connection.notify("n", {"n": n, "pad": "é" * 20_000})
            os.close(to_agent_write)  # end of input, with megabytes still to write
            await anyio.sleep(0.4)  # past the drain budget: the writer is stopped mid-line
            with pytest.raises(anyio.EndOfStream):  # noqa: PT012 - read until the connection closes
                while True:
                    received += await reader.receive(1 << 20)
    await reader.aclose()
    assert received.endswith(b"\n")
    numbers = [orjson.loads(line)["params"]["n"] for line in bytes(received).splitlines()]
    assert numbers == list(range(len(numbers)))
    assert 0 < len(numbers) < 300


async def test_a_message_after_a_quiet_spell_is_written_by_notify_itself() -> None:
    """A trickle (a model's tokens from the network) is written by notify() at once, without the
    loop turn a scheduled flush costs: the line is in the pipe before the producer yields."""
    to_agent_read, to_agent_write = os.pipe()
    from_agent_read, from_agent_write = os.pipe()
    os.set_blocking(from_agent_read, False)  # a line not written yet raises instead of waiting
    connection = Connection(
        FdReceiveStream(to_agent_read, close_fd=True),
        FdSendStream(from_agent_write, close_fd=True),
        Silent(),
        burst_gap=0.001,
    )
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            await anyio.wait_all_tasks_blocked()  # the writer is idle
            for n in range(5):
                await anyio.sleep(0.01)  # longer than burst_gap
                await connection.notify("n", {"n": n})
                assert os.read(from_agent_read, 1000) == encode_message(
                    {"jsonrpc": "2.0", "method": "n", "params": {"n": n}}
                )
            os.close(to_agent_write)
    os.close(from_agent_read)


async def test_a_burst_right_behind_a_write_leaves_at_the_end_of_the_turn_in_one_write() -> None:
    to_agent_read, to_agent_write = os.pipe()
    from_agent_read, from_agent_write = os.pipe()
    send = FdSendStream(from_agent_write, close_fd=True)
    writes: list[bytes] = []
    write_nowait = send.write_nowait

    def counting_write_nowait(data: bytes) -> int:
        writes.append(data)
        return write_nowait(data)

    send.write_nowait = counting_write_nowait  # type: ignore[method-assign]
    # A gap of a minute: everything after the first write is inside the burst.
    connection = Connection(FdReceiveStream(to_agent_read, close_fd=True), send, Silent(), burst_gap=60)
    lines = [encode_message({"jsonrpc": "2.0", "method": "n", "params": {"n": n}}) for n in range(10)]
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            await anyio.wait_all_tasks_blocked()
            for n in range(10):
                await connection.notify("n", {"n": n})
            assert writes == [lines[0]]  # the first at once; the rest wait for the turn's end
            await anyio.lowlevel.checkpoint()
            assert writes == [lines[0], b"".join(lines[1:])]
            os.close(to_agent_write)
    assert os.read(from_agent_read, 10000) == b"".join(lines)
    os.close(from_agent_read)
