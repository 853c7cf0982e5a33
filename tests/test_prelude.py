"""``initialize`` answered before anyio is imported, and the full connection taking over without a
byte lost or reordered: the prelude over real pipes, then the real ``dsh-acp`` process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_acp.rpc._prelude import PreludeEnd, answer_first_requests

DSH = [sys.executable, "-m", "dsh_acp"]


def line(message: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", **message}) + b"\n"


def init(request_id: Any = 0, **params: Any) -> bytes:
    return line({"id": request_id, "method": "initialize", "params": {"protocolVersion": 1, **params}})


def ping_answer(method: str, params: Any) -> dict[str, Any] | None:
    return {"pong": params} if method == "ping" else None


def run_prelude(
    *writes: bytes, close: bool = False, max_line_bytes: int = 1 << 20
) -> tuple[PreludeEnd, bytes]:
    """The prelude over real pipes, fed ``writes`` by a thread (then end of input with ``close``);
    what it returned and what it wrote."""
    to_read, to_write = os.pipe()
    out_read, out_write = os.pipe()

    def feed() -> None:
        try:
            for data in writes:
                os.write(to_write, data)
        except BrokenPipeError:  # the prelude stopped reading before the end: what it left is checked
            pass
        if close:
            os.close(to_write)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        end = asyncio.run(
            asyncio.wait_for(
                answer_first_requests(to_read, out_write, ping_answer, max_line_bytes=max_line_bytes), 10
            )
        )
        os.close(out_write)
        with os.fdopen(out_read, "rb") as reader:
            written = reader.read()
        return end, written
    finally:
        os.close(to_read)  # a feeder still writing gets EPIPE
        feeder.join(10)
        if not close:
            os.close(to_write)


PING = line({"id": 1, "method": "ping", "params": {"a": 1}})
PONG = b'{"jsonrpc":"2.0","id":1,"result":{"pong":{"a":1}}}\n'


def test_it_answers_what_it_takes_and_leaves_the_rest_byte_for_byte() -> None:
    later = line({"id": 2, "method": "other"}) + PING + b'{"partial'
    end, written = run_prelude(b"\n \r\n" + PING + later)
    assert written == PONG
    assert end == PreludeEnd(later, False, 1)


def test_a_line_split_across_reads_is_answered_once_whole() -> None:
    to_read, to_write = os.pipe()
    out_read, out_write = os.pipe()

    async def main() -> PreludeEnd:
        loop = asyncio.get_running_loop()

        async def trickle() -> None:
            for byte in PING[:-1]:
                os.write(to_write, bytes([byte]))
                await asyncio.sleep(0.001)
            os.write(to_write, b'\n{"jsonrpc"')

        task = loop.create_task(trickle())
        end = await asyncio.wait_for(
            answer_first_requests(to_read, out_write, ping_answer, max_line_bytes=100), 10
        )
        await task
        return end

    try:
        end = asyncio.run(main())
        assert os.read(out_read, 1000) == PONG
        # Whatever the reads' boundaries, the rest starts where the answered line ended.
        assert b'{"jsonrpc"'.startswith(end.rest) or end.rest.startswith(b'{"jsonrpc"')
        assert end.answered == 1
    finally:
        for fd in (to_read, to_write, out_read, out_write):
            os.close(fd)


@pytest.mark.parametrize(
    "first",
    [
        b"not json\n",
        b"[1, 2]\n",
        line({"method": "ping"}),  # a notification
        line({"id": True, "method": "ping"}),
        line({"id": 1.0, "method": "ping"}),
        line({"id": 1, "method": 5}),
        line({"id": 1, "method": "ping", "params": "x"}),
        b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}\n',
        line({"id": 1, "result": "a response"}),
        line({"id": 1, "method": "declined"}),
    ],
)
def test_anything_but_a_request_it_takes_is_left_whole_to_the_connection(first: bytes) -> None:
    end, written = run_prelude(first + PING)
    assert written == b""
    assert end == PreludeEnd(first + PING, False, 0)


def test_a_line_over_the_cap_is_the_connections_to_refuse() -> None:
    long_ping = line({"id": 1, "method": "ping", "params": {"pad": "x" * 100}})
    end, written = run_prelude(long_ping + PING, max_line_bytes=len(long_ping) - 2)
    assert (end.rest, written) == (long_ping + PING, b"")
    end, written = run_prelude(long_ping, max_line_bytes=len(long_ping) - 1)  # the cap itself fits
    assert end.answered == 1


def test_a_long_unfinished_line_is_handed_over_without_waiting_for_its_end() -> None:
    start = b'{"jsonrpc": "2.0", "params": "' + b"y" * 200_000
    end, written = run_prelude(start)
    assert start.startswith(end.rest)
    assert len(end.rest) > 64 * 1024
    assert (end.ended, end.answered, written) == (False, 0, b"")


def test_end_of_input_is_reported_with_what_was_left() -> None:
    end, written = run_prelude(b"\n", b'{"id": 2', close=True)
    assert (end, written) == (PreludeEnd(b'{"id": 2', True, 0), b"")
    end, written = run_prelude(close=True)
    assert (end, written) == (PreludeEnd(b"", True, 0), b"")


def test_stdin_from_a_regular_file_is_read_directly(tmp_path: Path) -> None:
    requests = tmp_path / "in.jsonl"
    requests.write_bytes(PING + b"tail")
    out_read, out_write = os.pipe()
    with requests.open("rb") as stdin:
        end = asyncio.run(answer_first_requests(stdin.fileno(), out_write, ping_answer, max_line_bytes=100))
    os.close(out_write)
    assert os.read(out_read, 1000) == PONG
    os.close(out_read)
    assert end == PreludeEnd(b"tail", False, 1)


# -- the real agent -------------------------------------------------------------------------------


def agent(tmp_path: Path, *args: str, stderr: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*DSH, "--state-dir", str(tmp_path / "state"), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        cwd=tmp_path,
    )


def answers(process: subprocess.Popen[bytes], data: bytes) -> list[dict[str, Any]]:
    """Write ``data``, close stdin, and every line the agent wrote before it exited (status 0)."""
    out, _ = process.communicate(data, timeout=30)
    assert process.returncode == 0
    return [orjson.loads(raw) for raw in out.splitlines()]


def session_new(request_id: int, cwd: Path) -> bytes:
    return line({"id": request_id, "method": "session/new", "params": {"cwd": str(cwd), "mcpServers": []}})


def test_everything_sent_at_once_is_answered_once_each(tmp_path: Path) -> None:
    data = (
        b"\n" + init(0) + session_new(1, tmp_path) + b"garbage\n" + init(2) + line({"id": 3, "method": "x"})
    )
    got = answers(agent(tmp_path), data)
    assert got[0]["id"] == 0  # the prelude's
    replies = sorted(
        ((m["id"] if m["id"] is not None else -1), m.get("error", {}).get("code")) for m in got if "id" in m
    )
    assert replies == [(-1, -32700), (0, None), (1, None), (2, None), (3, -32601)]
    assert [m["params"]["update"]["sessionUpdate"] for m in got if "method" in m] == [
        "available_commands_update"
    ]


def test_the_first_answer_is_byte_for_byte_the_connections(tmp_path: Path) -> None:
    """The same request twice, the second after the first was answered: the prelude answers the
    first, the full connection the second, and they write the same bytes."""
    process = agent(tmp_path)
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(init("same", clientInfo={"name": "x", "version": "1"}))
    process.stdin.flush()
    first = process.stdout.readline()
    process.stdin.write(init("same", clientInfo={"name": "x", "version": "1"}))
    process.stdin.flush()
    second = process.stdout.readline()
    process.communicate(timeout=30)
    assert first == second
    assert orjson.loads(first)["result"]["agentInfo"]["name"] == "dsh-acp"


def test_initialize_answers_alike_whoever_answers_it(tmp_path: Path) -> None:
    """A second ``initialize`` asking for another version is refused (a connection speaks one),
    whether it came with the first (the prelude reads both) or after it (the connection's)."""
    at_once = answers(agent(tmp_path), init(1) + init(2, protocolVersion=2))
    process = agent(tmp_path)
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(init(1))
    process.stdin.flush()
    first = orjson.loads(process.stdout.readline())
    later = [first, *answers(process, init(2, protocolVersion=2))]
    assert at_once == later
    assert [m["id"] for m in later] == [1, 2]
    assert later[0]["result"]["protocolVersion"] == 1
    assert later[1]["error"]["code"] == -32600
    assert "speaks ACP version 1" in later[1]["error"]["message"]


def test_a_first_line_trickled_a_byte_at_a_time_then_a_burst(tmp_path: Path) -> None:
    process = agent(tmp_path)
    assert process.stdin is not None
    first = init(7)
    for byte in first[:-1]:
        process.stdin.write(bytes([byte]))
        process.stdin.flush()
        time.sleep(0.002)
    rest = b"\n" + session_new(8, tmp_path)[:10]
    process.stdin.write(rest)
    process.stdin.flush()
    time.sleep(0.05)
    got = answers(process, session_new(8, tmp_path)[10:])
    assert [m.get("id") for m in got[:2]] == [7, 8]
    assert "sessionId" in got[1]["result"]


def test_errors_before_the_first_initialize_are_the_connections(tmp_path: Path) -> None:
    over = init(1, _meta={"pad": "x" * 300})
    data = over + init(2, protocolVersion=-1) + init(3)
    got = answers(agent(tmp_path, "--max-message-bytes", "200"), data)
    assert [(m["id"], m.get("error", {}).get("code")) for m in got] == [
        (1, -32600),  # over the limit, but its id could be read: the error is its answer
        (2, -32602),
        (3, None),
    ]
    assert got[0]["error"]["message"] == "Invalid request: message exceeds 200 bytes"
    assert got[1]["error"]["message"].startswith("Invalid params: protocolVersion")


def test_end_of_input_ends_the_agent_as_the_connection_does(tmp_path: Path) -> None:
    """A line cut short by the end of input reaches the connection, which cancels what is still
    running at that point (an answer included) and exits 0."""
    lone = agent(tmp_path)
    out, err = lone.communicate(init(5)[:-1], timeout=30)
    assert (lone.returncode, out, err) == (0, b"", b"")
    got = answers(agent(tmp_path), init(5) + session_new(6, tmp_path)[:-1])
    assert [m.get("id") for m in got] == [5]
    assert answers(agent(tmp_path), b"") == []


HOOKED = """
import sys

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "anyio":
            sys.stderr.write("IMPORTING anyio\\n")
            sys.stderr.flush()
            sys.meta_path.remove(self)
        return None

sys.meta_path.insert(0, Watch())
from dsh_acp.cli._main import main
sys.exit(main(sys.argv[1:]))
"""


def test_initialize_is_answered_before_anyio_is_imported(tmp_path: Path) -> None:
    """stderr and stdout are one pipe here, so the order of the lines is the order of the writes."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOOKED, "--state-dir", str(tmp_path / "state")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(init(1))
    process.stdin.flush()
    assert b'"id":1,"result"' in process.stdout.readline()
    process.stdin.write(session_new(2, tmp_path))
    process.stdin.close()
    with process.stdout:
        lines = process.stdout.read().splitlines()  # what readline() buffered too
    assert process.wait(timeout=30) == 0
    assert lines[0] == b"IMPORTING anyio"  # the full connection, after the answer
    assert b'"id":2,"result"' in lines[1]
