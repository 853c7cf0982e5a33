"""JSON-RPC connection: in-memory pipes, a scripted dispatcher and a peer that speaks raw lines."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from anyio.abc import ByteReceiveStream, ByteSendStream
from pydantic import BaseModel

from dsh_acp.rpc._connection import Connection, RequestId
from dsh_acp.rpc._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    ConnectionClosed,
    RpcError,
)
from dsh_acp.rpc._framing import Frame, FrameDecoder, Message, encode_message
from dsh_acp.rpc._memory import memory_pipe

RequestHandler = Callable[[Any, RequestId], Awaitable[Any]]
NotificationHandler = Callable[[Any], Awaitable[None] | None]


async def _value(value: Any) -> Any:
    return value


class Dispatch:
    """A dispatcher scripted per test; every request table has ``ping`` → ``"pong"``."""

    def __init__(
        self,
        requests: dict[str, RequestHandler] | None = None,
        notifications: dict[str, NotificationHandler] | None = None,
    ) -> None:
        self.requests: dict[str, RequestHandler] = {"ping": lambda params, rid: _value("pong")}
        self.requests.update(requests or {})
        self.notifications = notifications or {}
        self.notified: list[tuple[str, Any]] = []

    def on_request(self, method: str, params: Any, request_id: RequestId) -> Awaitable[Any]:
        handler = self.requests.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return handler(params, request_id)

    def on_notification(self, method: str, params: Any) -> Awaitable[None] | None:
        self.notified.append((method, params))
        handler = self.notifications.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return handler(params)


class Peer:
    """The other end of the pipe, reading and writing raw lines."""

    def __init__(self, receive: ByteReceiveStream, send: ByteSendStream) -> None:
        self._receive = receive
        self._send = send
        self._decoder = FrameDecoder()
        self._frames: deque[Frame] = deque()

    async def send_raw(self, data: bytes) -> None:
        await self._send.send(data)

    async def send(self, message: dict[str, Any]) -> None:
        await self._send.send(encode_message(message))

    async def receive(self) -> Any:
        with anyio.fail_after(5):
            while not self._frames:
                self._frames.extend(self._decoder.feed(await self._receive.receive()))
        frame = self._frames.popleft()
        assert isinstance(frame, Message), frame
        return frame.value

    async def expect_end(self) -> None:
        """No further message: the connection closed its output."""
        with anyio.fail_after(5):
            while not self._frames:
                try:
                    self._frames.extend(self._decoder.feed(await self._receive.receive()))
                except anyio.EndOfStream:
                    return
        raise AssertionError(f"unexpected message: {self._frames[0]}")

    async def close(self) -> None:
        """End of input for the connection."""
        await self._send.aclose()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


@asynccontextmanager
async def serving(dispatch: Dispatch, **options: Any) -> AsyncIterator[tuple[Connection, Peer]]:
    """A connection serving over a memory pipe; leaving closes the peer's output (end of input)."""
    (receive, send), (peer_receive, peer_send) = memory_pipe()
    connection = Connection(receive, send, dispatch, **options)
    peer = Peer(peer_receive, peer_send)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            yield connection, peer
            await peer.close()
    finally:
        await peer.aclose()


def ok(request_id: RequestId | None, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def err(request_id: RequestId | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    # Every error repeats its message as data.details (clients that show only data show it);
    # validation errors (a list) are under data.errors.
    extra = {"errors": data} if isinstance(data, list) else data or {}
    error: dict[str, Any] = {"code": code, "message": message, "data": {"details": message, **extra}}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


PING = b'{"jsonrpc":"2.0","id":"after","method":"ping"}\n'
PONG = ok("after", "pong")

pytestmark = pytest.mark.anyio


# -- requests and responses ---------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [0, 7, -3, 2**63 - 1, 2**64 - 1, "abc", "", "1"])
async def test_request_id_is_echoed(request_id: RequestId) -> None:
    async def echo(params: Any, rid: RequestId) -> Any:
        return {"params": params, "id": rid}

    async with serving(Dispatch({"echo": echo})) as (_, peer):
        await peer.send({"jsonrpc": "2.0", "id": request_id, "method": "echo", "params": {"x": [1]}})
        assert await peer.receive() == ok(request_id, {"params": {"x": [1]}, "id": request_id})


async def test_params_may_be_absent_or_an_array() -> None:
    async def echo(params: Any, rid: RequestId) -> Any:
        return params

    async with serving(Dispatch({"echo": echo})) as (_, peer):
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "echo"})
        assert await peer.receive() == ok(1, None)
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": [1, 2]})
        assert await peer.receive() == ok(2, [1, 2])


async def test_our_request_gets_the_peers_result() -> None:
    async with serving(Dispatch()) as (connection, peer):
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def ask() -> None:
                results.append(await connection.request("fs/read_text_file", {"path": "/a"}))

            tg.start_soon(ask)
            assert await peer.receive() == {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "fs/read_text_file",
                "params": {"path": "/a"},
            }
            await peer.send(ok(0, {"content": "hi"}))
        assert results == [{"content": "hi"}]


async def test_request_without_params_omits_them() -> None:
    async with serving(Dispatch()) as (connection, peer), anyio.create_task_group() as tg:
        tg.start_soon(connection.request, "x")
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 0, "method": "x"}
        await peer.send(ok(0, None))


async def test_error_response_raises_rpc_error() -> None:
    async with serving(Dispatch()) as (connection, peer), anyio.create_task_group() as tg:

        async def ask() -> None:
            with pytest.raises(RpcError) as caught:
                await connection.request("fs/read_text_file", {"path": "/missing"})
            assert (caught.value.code, caught.value.message, caught.value.data) == (
                RESOURCE_NOT_FOUND,
                "Resource not found",
                {"uri": "/missing"},
            )

        tg.start_soon(ask)
        assert (await peer.receive())["id"] == 0
        error = {"code": RESOURCE_NOT_FOUND, "message": "Resource not found", "data": {"uri": "/missing"}}
        await peer.send({"jsonrpc": "2.0", "id": 0, "error": error})


async def test_out_of_order_responses_reach_their_callers() -> None:
    async with serving(Dispatch()) as (connection, peer):
        results: dict[int, Any] = {}
        async with anyio.create_task_group() as tg:
            for n in range(3):

                async def ask(n: int = n) -> None:
                    results[n] = await connection.request("m", {"n": n})

                tg.start_soon(ask)
            requests = [await peer.receive() for _ in range(3)]
            assert sorted(r["id"] for r in requests) == [0, 1, 2]
            for request in reversed(requests):
                await peer.send(ok(request["id"], request["params"]["n"] * 10))
        assert results == {0: 0, 1: 10, 2: 20}


async def test_requests_both_ways_between_two_connections() -> None:
    """A handler may call back into the peer while the peer awaits it: no head-of-line blocking."""
    (a_receive, a_send), (b_receive, b_send) = memory_pipe()

    async def ask_back(params: Any, rid: RequestId) -> Any:
        answer = await b.request("double", {"n": params["n"]})
        return {"got": answer}

    async def double(params: Any, rid: RequestId) -> Any:
        return params["n"] * 2

    a = Connection(a_receive, a_send, Dispatch({"double": double}))
    b = Connection(b_receive, b_send, Dispatch({"ask_back": ask_back}))
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.serve)
        tg.start_soon(b.serve)
        with anyio.fail_after(5):
            assert await a.request("ask_back", {"n": 21}) == {"got": 42}
            assert await b.request("double", {"n": 1}) == 2
        a.close()
        b.close()


async def test_notifications_in_order_both_ways() -> None:
    seen: list[Any] = []

    def record(params: Any) -> None:
        seen.append(params)

    async with serving(Dispatch(notifications={"note": record})) as (connection, peer):
        for n in range(3):
            await connection.notify("session/update", {"n": n})
        await connection.notify("bare")
        assert [await peer.receive() for _ in range(4)] == [
            {"jsonrpc": "2.0", "method": "session/update", "params": {"n": 0}},
            {"jsonrpc": "2.0", "method": "session/update", "params": {"n": 1}},
            {"jsonrpc": "2.0", "method": "session/update", "params": {"n": 2}},
            {"jsonrpc": "2.0", "method": "bare"},
        ]
        notes = [encode_message({"jsonrpc": "2.0", "method": "note", "params": [n]}) for n in range(3)]
        await peer.send_raw(b"".join(notes) + PING)
        assert await peer.receive() == PONG
        assert seen == [[0], [1], [2]]


async def test_output_keeps_call_order_across_kinds() -> None:
    async with serving(Dispatch()) as (connection, peer), anyio.create_task_group() as tg:
        await connection.notify("n", 1)
        tg.start_soon(connection.request, "r", 2)
        await wait_all_tasks_blocked()
        await connection.notify("n", 3)
        assert [await peer.receive() for _ in range(3)] == [
            {"jsonrpc": "2.0", "method": "n", "params": 1},
            {"jsonrpc": "2.0", "id": 0, "method": "r", "params": 2},
            {"jsonrpc": "2.0", "method": "n", "params": 3},
        ]
        await peer.send(ok(0, None))


# -- cancellation ---------------------------------------------------------------------------------


async def test_cancel_request_answers_request_cancelled() -> None:
    started = anyio.Event()
    cancelled: list[bool] = []

    async def wait_forever(params: Any, rid: RequestId) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append(True)

    async with serving(Dispatch({"wait": wait_forever})) as (_, peer):
        await peer.send({"jsonrpc": "2.0", "id": "w", "method": "wait"})
        with anyio.fail_after(5):
            await started.wait()
        await peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "w"}})
        assert await peer.receive() == err("w", REQUEST_CANCELLED, "Request cancelled")
        assert cancelled == [True]
        # The id is free again, and a cancel for it now does nothing.
        await peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "w"}})
        await peer.send_raw(PING)
        assert await peer.receive() == PONG


async def test_cancel_request_right_behind_the_request() -> None:
    async def wait_forever(params: Any, rid: RequestId) -> Any:
        await anyio.sleep_forever()

    async with serving(Dispatch({"wait": wait_forever})) as (_, peer):
        await peer.send_raw(
            encode_message({"jsonrpc": "2.0", "id": 5, "method": "wait"})
            + encode_message({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 5}})
        )
        assert await peer.receive() == err(5, REQUEST_CANCELLED, "Request cancelled")


async def test_handler_that_finishes_despite_cancel_sends_its_result() -> None:
    started = anyio.Event()
    release = anyio.Event()

    async def stubborn(params: Any, rid: RequestId) -> Any:
        with anyio.CancelScope(shield=True):
            started.set()
            await release.wait()
        return "done anyway"

    async with serving(Dispatch({"stubborn": stubborn})) as (_, peer):
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "stubborn"})
        with anyio.fail_after(5):
            await started.wait()
        await peer.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}})
        await peer.send_raw(PING)
        assert await peer.receive() == PONG  # the cancel was read and acted on
        release.set()
        assert await peer.receive() == ok(1, "done anyway")


async def test_cancelling_our_request_sends_cancel_request(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "dsh_acp.connection")
    async with serving(Dispatch()) as (connection, peer):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    await connection.request("session/request_permission", {"x": 1})

                tg.start_soon(ask)
                assert (await peer.receive())["id"] == 0
                scope.cancel()
        assert await peer.receive() == {
            "jsonrpc": "2.0",
            "method": "$/cancel_request",
            "params": {"requestId": 0},
        }
        # A late answer is ignored, as expected rather than as a fault; the next request gets
        # the next id.
        await peer.send(ok(0, "late"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.request, "next")
            assert (await peer.receive())["id"] == 1
            await peer.send(ok(1, None))
    late = [r for r in caplog.records if "request 0" in r.getMessage() or "id 0" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in late] == [
        (logging.DEBUG, "late response to withdrawn request 0 ignored")
    ]


# -- ordering: a notification acts on the requests before it ---------------------------------------


class Turns:
    """Mimics the ACP layer: a prompt registers its turn synchronously; a cancel finds it."""

    def __init__(self) -> None:
        self.turns: dict[str, anyio.Event] = {}
        self.unmatched: list[str] = []

    def dispatch(self) -> Dispatch:
        return Dispatch({"prompt": self.prompt}, {"cancel": self.cancel})

    def prompt(self, params: Any, rid: RequestId) -> Awaitable[Any]:
        cancelled = self.turns[params["session"]] = anyio.Event()

        async def run() -> Any:
            await cancelled.wait()
            return {"stopReason": "cancelled"}

        return run()

    def cancel(self, params: Any) -> None:
        turn = self.turns.get(params["session"])
        if turn is None:
            self.unmatched.append(params["session"])
        else:
            turn.set()


async def test_notification_finds_the_request_sent_in_the_same_read() -> None:
    turns = Turns()
    async with serving(turns.dispatch()) as (_, peer):
        await peer.send_raw(
            encode_message({"jsonrpc": "2.0", "id": 1, "method": "prompt", "params": {"session": "s"}})
            + encode_message({"jsonrpc": "2.0", "method": "cancel", "params": {"session": "s"}})
        )
        assert await peer.receive() == ok(1, {"stopReason": "cancelled"})
    assert turns.unmatched == []


async def test_notification_finds_the_request_sent_in_the_previous_read() -> None:
    turns = Turns()
    async with serving(turns.dispatch()) as (_, peer):
        for n in range(20):
            await peer.send({"jsonrpc": "2.0", "id": n, "method": "prompt", "params": {"session": f"s{n}"}})
            await peer.send({"jsonrpc": "2.0", "method": "cancel", "params": {"session": f"s{n}"}})
        answers = [await peer.receive() for _ in range(20)]
        assert sorted(a["id"] for a in answers) == list(range(20))
        assert all(a["result"] == {"stopReason": "cancelled"} for a in answers)
    assert turns.unmatched == []


# -- malformed input ------------------------------------------------------------------------------


class ParseErrorResponse:
    """Matches a -32700 response with this id (null by default); orjson's wording of the detail
    is not pinned."""

    def __init__(self, request_id: RequestId | None = None) -> None:
        self.request_id = request_id

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, dict)
            and other.get("id", ...) == self.request_id
            and other.get("error", {}).get("code") == PARSE_ERROR
            and other["error"]["message"].startswith("Parse error: ")
            and "\n" not in other["error"]["message"]
        )

    def __repr__(self) -> str:
        return "<parse error response>"


def invalid(request_id: RequestId | None, reason: str) -> dict[str, Any]:
    return err(request_id, INVALID_REQUEST, f"Invalid request: {reason}")


NOT_OBJECT = invalid(None, "expected a JSON object")
BATCH = invalid(None, "batches are not supported")
NEITHER = "not a request, notification or response"
JSONRPC = '"jsonrpc" must be "2.0"'
BAD_ID = '"id" must be an integer or a string'
BAD_METHOD = '"method" must be a string'
BAD_PARAMS = '"params" must be an object or an array'
BAD_ERROR = '"error" must be an object with integer "code" and string "message"'

MALFORMED: list[tuple[str, bytes, Any]] = [
    ("invalid json", b"{not json\n", ParseErrorResponse()),
    ("truncated json", b'{"jsonrpc":"2.0","id":1,\n', ParseErrorResponse()),
    ("two values on a line", b"{} {}\n", ParseErrorResponse()),
    (
        "invalid utf-8",
        b'{"jsonrpc":"2.0","id":1,"method":"\xff"}\n',
        err(1, PARSE_ERROR, "Parse error: invalid UTF-8"),  # the id is read all the same
    ),
    (
        "invalid utf-8 before the id",
        b'{"jsonrpc":"2.0","method":"\xff","id":1}\n',
        err(1, PARSE_ERROR, "Parse error: invalid UTF-8"),
    ),
    ("broken after the id", b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{}\n', ParseErrorResponse(2)),
    ("broken before the method", b'{"jsonrpc":"2.0","id":2,"params":{]\n', ParseErrorResponse()),
    ("oversize", b'"' + b"x" * 2000 + b'"\n', invalid(None, "message exceeds 1024 bytes")),
    (
        "oversize request",
        b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":"' + b"x" * 2000 + b'"}}\n',
        invalid(4, "message exceeds 1024 bytes"),
    ),
    (
        "oversize with the id past what is read of it",
        b'{"jsonrpc":"2.0","method":"ping","params":{"x":"' + b"x" * 70_000 + b'"},"id":4}\n',
        invalid(None, "message exceeds 1024 bytes"),
    ),
    ("empty batch", b"[]\n", BATCH),
    (
        "batch",
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]\n',
        BATCH,
    ),
    ("number", b"42\n", NOT_OBJECT),
    ("string", b'"ping"\n', NOT_OBJECT),
    ("null", b"null\n", NOT_OBJECT),
    ("true", b"true\n", NOT_OBJECT),
    ("empty object", b"{}\n", invalid(None, NEITHER)),
    ("only jsonrpc", b'{"jsonrpc":"2.0"}\n', invalid(None, NEITHER)),
    ("only an id", b'{"jsonrpc":"2.0","id":7}\n', invalid(7, NEITHER)),
    ("params without method", b'{"jsonrpc":"2.0","id":"p","params":{}}\n', invalid("p", NEITHER)),
    ("missing jsonrpc", b'{"id":1,"method":"ping"}\n', invalid(1, JSONRPC)),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":"a","method":"ping"}\n', invalid("a", JSONRPC)),
    ("jsonrpc as number", b'{"jsonrpc":2.0,"id":1,"method":"ping"}\n', invalid(1, JSONRPC)),
    ("notification without jsonrpc", b'{"method":"note"}\n', invalid(None, JSONRPC)),
    ("jsonrpc wrong and id unusable", b'{"id":1.5,"method":"ping"}\n', invalid(None, JSONRPC)),
    ("float id", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}\n', invalid(None, BAD_ID)),
    ("integral float id", b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}\n', invalid(None, BAD_ID)),
    ("bool id", b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', invalid(None, BAD_ID)),
    ("null id", b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n', invalid(None, BAD_ID)),
    ("object id", b'{"jsonrpc":"2.0","id":{},"method":"ping"}\n', invalid(None, BAD_ID)),
    ("array id", b'{"jsonrpc":"2.0","id":[1],"method":"ping"}\n', invalid(None, BAD_ID)),
    ("huge id", b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}\n', invalid(None, BAD_ID)),
    ("method number", b'{"jsonrpc":"2.0","id":2,"method":5}\n', invalid(2, BAD_METHOD)),
    ("method null", b'{"jsonrpc":"2.0","id":3,"method":null}\n', invalid(3, BAD_METHOD)),
    ("notification method number", b'{"jsonrpc":"2.0","method":[]}\n', invalid(None, BAD_METHOD)),
    ("params string", b'{"jsonrpc":"2.0","id":5,"method":"ping","params":"x"}\n', invalid(5, BAD_PARAMS)),
    (
        "notification params number",
        b'{"jsonrpc":"2.0","method":"note","params":3}\n',
        invalid(None, BAD_PARAMS),
    ),
    (
        "unknown method",
        b'{"jsonrpc":"2.0","id":8,"method":"nope"}\n',
        err(8, METHOD_NOT_FOUND, "Method not found: nope"),
    ),
    ("response without jsonrpc", b'{"id":99,"result":1}\n', invalid(None, JSONRPC)),
    (
        "result and error",
        b'{"jsonrpc":"2.0","id":99,"result":1,"error":{"code":1,"message":"m"}}\n',
        invalid(None, 'a response has either "result" or "error"'),
    ),
    ("error not an object", b'{"jsonrpc":"2.0","id":99,"error":"boom"}\n', invalid(None, BAD_ERROR)),
    (
        "error code a string",
        b'{"jsonrpc":"2.0","id":99,"error":{"code":"x","message":"m"}}\n',
        invalid(None, BAD_ERROR),
    ),
    ("error without message", b'{"jsonrpc":"2.0","id":99,"error":{"code":1}}\n', invalid(None, BAD_ERROR)),
    ("result without id", b'{"jsonrpc":"2.0","result":1}\n', invalid(None, BAD_ID)),
    ("result with null id", b'{"jsonrpc":"2.0","id":null,"result":1}\n', invalid(None, BAD_ID)),
    ("result with bool id", b'{"jsonrpc":"2.0","id":false,"result":1}\n', invalid(None, BAD_ID)),
    # Not answered:
    ("blank lines", b"\n \r\n\t\n", None),
    ("response to nothing", b'{"jsonrpc":"2.0","id":99,"result":1}\n', None),
    ("error response to nothing", b'{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}\n', None),
    ("peer's parse error", b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}\n', None),
    ("unknown notification", b'{"jsonrpc":"2.0","method":"_unknown/thing","params":{}}\n', None),
    (
        "cancel of nothing",
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":12345}}\n',
        None,
    ),
    ("cancel with bad params", b'{"jsonrpc":"2.0","method":"$/cancel_request","params":[1]}\n', None),
    ("cancel without params", b'{"jsonrpc":"2.0","method":"$/cancel_request"}\n', None),
    # Answered normally (lenient where JSON-RPC allows):
    ("extra keys", b'{"jsonrpc":"2.0","id":9,"method":"ping","x":1}\n', ok(9, "pong")),
    ("params null", b'{"jsonrpc":"2.0","id":6,"method":"ping","params":null}\n', ok(6, "pong")),
    ("crlf", b'{"jsonrpc":"2.0","id":10,"method":"ping"}\r\n', ok(10, "pong")),
    ("empty string id", b'{"jsonrpc":"2.0","id":"","method":"ping"}\n', ok("", "pong")),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
async def test_malformed_input(data: bytes, expected: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "dsh_acp.connection")
    async with serving(Dispatch(), max_message_bytes=1024) as (_, peer):
        await peer.send_raw(data + PING)
        if expected is not None:
            assert await peer.receive() == expected
        assert await peer.receive() == PONG
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_malformed_split_into_bytes() -> None:
    async with serving(Dispatch(), max_message_bytes=1024) as (_, peer):
        data = b"{x\n" + b'"' + b"y" * 3000 + b'"\n' + PING
        for i in range(len(data)):
            await peer.send_raw(data[i : i + 1])
        assert await peer.receive() == ParseErrorResponse()
        assert await peer.receive() == invalid(None, "message exceeds 1024 bytes")
        assert await peer.receive() == PONG


UNACCEPTABLE_ANSWERS = {
    "jsonrpc 1.0": (b'{"jsonrpc":"1.0","id":0,"result":1}\n', JSONRPC),
    "result and error": (
        b'{"jsonrpc":"2.0","id":0,"result":1,"error":{"code":1,"message":"m"}}\n',
        'a response has either "result" or "error"',
    ),
    "error code a string": (b'{"jsonrpc":"2.0","id":0,"error":{"code":"x","message":"m"}}\n', BAD_ERROR),
    "lone surrogate": (b'{"jsonrpc":"2.0","id":0,"result":"\\ud800"}\n', "Parse error: "),
    "invalid utf-8": (b'{"jsonrpc":"2.0","id":0,"result":"\xff"}\n', "Parse error: invalid UTF-8"),
    "broken json": (b'{"jsonrpc":"2.0","id":0,"result":{"a":}}\n', "Parse error: "),
    "oversize": (
        b'{"jsonrpc":"2.0","id":0,"result":"' + b"x" * 3000 + b'"}\n',
        "message exceeds 1024 bytes",
    ),
    "oversize error": (
        b'{"id":0,"jsonrpc":"2.0","error":{"code":1,"message":"' + b"x" * 3000 + b'"}}\n',
        "message exceeds 1024 bytes",
    ),
}


@pytest.mark.parametrize("case", list(UNACCEPTABLE_ANSWERS))
async def test_an_answer_that_cannot_be_accepted_fails_our_request_at_once(case: str) -> None:
    line, reason = UNACCEPTABLE_ANSWERS[case]
    async with serving(Dispatch(), max_message_bytes=1024) as (connection, peer):

        async def ask() -> None:
            with pytest.raises(RpcError) as caught:
                await connection.request("fs/read_text_file", {"path": "/a"})
            assert caught.value.message.startswith("the answer could not be accepted (")
            assert reason in caught.value.message

        with anyio.fail_after(5):  # not failed, the request would wait for ever
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                assert (await peer.receive())["id"] == 0
                for i in range(0, len(line), 700):  # an oversize line is seen before its end
                    await peer.send_raw(line[i : i + 700])
            answer = await peer.receive()  # the peer is told, under no id
        assert answer["id"] is None
        assert answer["error"]["code"] in (INVALID_REQUEST, PARSE_ERROR)


async def test_a_request_of_the_peers_with_our_id_never_fails_ours() -> None:
    async with serving(Dispatch(), max_message_bytes=1024) as (connection, peer):

        async def ask() -> None:
            assert await connection.request("fs/read_text_file", {"path": "/a"}) == {"content": "a"}

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                assert (await peer.receive())["id"] == 0
                # The peer's own request 0, over the limit, with a result member: still a request.
                request = b'{"jsonrpc":"2.0","id":0,"method":"x","result":"' + b"x" * 3000 + b'"}\n'
                await peer.send_raw(request)
                assert await peer.receive() == invalid(0, "message exceeds 1024 bytes")
                await peer.send({"jsonrpc": "2.0", "id": 0, "result": {"content": "a"}})


async def test_a_peers_error_message_is_one_line_cut_in_the_middle() -> None:
    said = "first line\n" + "E" * 100_000 + "\nthe cause"
    async with serving(Dispatch()) as (connection, peer):

        async def ask() -> None:
            with pytest.raises(RpcError) as caught:
                await connection.request("fs/read_text_file", {"path": "/a"})
            message = caught.value.message
            assert message.startswith("first line EEE")
            assert message.endswith("EEE the cause")
            assert f"[… {len(said) - 2000} characters …]" in message
            assert len(message) < 2100

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                assert (await peer.receive())["id"] == 0
                await peer.send({"jsonrpc": "2.0", "id": 0, "error": {"code": -32603, "message": said}})


async def test_duplicate_id_in_flight_is_rejected() -> None:
    release = anyio.Event()

    async def slow(params: Any, rid: RequestId) -> Any:
        await release.wait()
        return "first"

    async with serving(Dispatch({"slow": slow})) as (_, peer):
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "slow"})
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert await peer.receive() == invalid(1, "request id 1 is already in use")
        release.set()
        assert await peer.receive() == ok(1, "first")
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})  # free again
        assert await peer.receive() == ok(1, "pong")


# -- handler errors -------------------------------------------------------------------------------


class Params(BaseModel):
    cwd: str
    count: int


async def test_handler_errors_map_to_json_rpc_errors(caplog: pytest.LogCaptureFixture) -> None:
    async def rpc_error(params: Any, rid: RequestId) -> Any:
        raise RpcError(RESOURCE_NOT_FOUND, "Session not found:\n  s1", {"sessionId": "s1"})

    async def crash(params: Any, rid: RequestId) -> Any:
        raise ValueError("secret internals\nsecond line")

    async def validate(params: Any, rid: RequestId) -> Any:
        return Params.model_validate(params)

    async def unencodable(params: Any, rid: RequestId) -> Any:
        return {1, 2}

    async def bad_error_data(params: Any, rid: RequestId) -> Any:
        raise RpcError(INVALID_PARAMS, "Bad", data=object())

    def sync_crash(params: Any, rid: RequestId) -> Awaitable[Any]:
        raise KeyError("sync")

    def sync_rpc_error(params: Any, rid: RequestId) -> Awaitable[Any]:
        raise RpcError(-32000, "Authentication required")

    handlers: dict[str, RequestHandler] = {
        "rpc_error": rpc_error,
        "crash": crash,
        "validate": validate,
        "unencodable": unencodable,
        "bad_error_data": bad_error_data,
        "sync_crash": sync_crash,
        "sync_rpc_error": sync_rpc_error,
    }
    expected = {
        "rpc_error": err(0, RESOURCE_NOT_FOUND, "Session not found: s1", {"sessionId": "s1"}),
        "crash": err(0, INTERNAL_ERROR, "Internal error"),
        "validate": err(
            0,
            INVALID_PARAMS,
            "Invalid params: cwd: Field required (and 1 more)",
            [
                {"loc": ["cwd"], "msg": "Field required", "type": "missing"},
                {
                    "loc": ["count"],
                    "msg": "Input should be a valid integer, unable to parse string as an integer",
                    "type": "int_parsing",
                },
            ],
        ),
        "unencodable": err(0, INTERNAL_ERROR, "Internal error"),
        "bad_error_data": err(0, INVALID_PARAMS, "Bad"),
        "sync_crash": err(0, INTERNAL_ERROR, "Internal error"),
        "sync_rpc_error": err(0, -32000, "Authentication required"),
    }
    async with serving(Dispatch(handlers)) as (_, peer):
        for method in handlers:
            caplog.clear()
            await peer.send({"jsonrpc": "2.0", "id": 0, "method": method, "params": {"count": "many"}})
            assert await peer.receive() == expected[method], method
            logged = [
                r for r in caplog.records if r.name == "dsh_acp.connection" and r.levelno >= logging.ERROR
            ]
            if expected[method]["error"]["code"] == INTERNAL_ERROR or method == "bad_error_data":
                assert len(logged) == 1, method
                assert logged[0].exc_info is not None, method  # the traceback goes to stderr
            else:
                assert logged == [], method


async def test_nested_validation_error_location() -> None:
    class Outer(BaseModel):
        items: list[Params]

    async def validate(params: Any, rid: RequestId) -> Any:
        return Outer.model_validate(params)

    async with serving(Dispatch({"v": validate})) as (_, peer):
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "v",
                "params": {"items": [{"cwd": "/", "count": 1}, {"cwd": 3, "count": 1}]},
            }
        )
        assert await peer.receive() == err(
            1,
            INVALID_PARAMS,
            "Invalid params: items.1.cwd: Input should be a valid string",
            [{"loc": ["items", 1, "cwd"], "msg": "Input should be a valid string", "type": "string_type"}],
        )


async def test_notification_errors_are_never_answered(caplog: pytest.LogCaptureFixture) -> None:
    async def async_crash(params: Any) -> None:
        raise ValueError("async")

    def sync_crash(params: Any) -> None:
        raise ValueError("sync")

    def sync_rpc(params: Any) -> None:
        raise RpcError(INVALID_PARAMS, "nope")

    async def async_rpc(params: Any) -> None:
        raise RpcError(INVALID_PARAMS, "nope")

    def validation(params: Any) -> None:
        Params.model_validate(params)

    notifications: dict[str, NotificationHandler] = {
        "async_crash": async_crash,
        "sync_crash": sync_crash,
        "sync_rpc": sync_rpc,
        "async_rpc": async_rpc,
        "validation": validation,
    }
    dispatch = Dispatch(notifications=notifications)
    async with serving(dispatch) as (_, peer):
        for method in [*notifications, "unknown"]:
            await peer.send({"jsonrpc": "2.0", "method": method, "params": {}})
        await peer.send_raw(PING)
        assert await peer.receive() == PONG
        await wait_all_tasks_blocked()  # the async handlers have run
        await peer.close()
        await peer.expect_end()
    assert [m for m, _ in dispatch.notified] == [*notifications, "unknown"]
    crashes = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert sorted(r.exc_info[1].args[0] for r in crashes if r.exc_info and r.exc_info[1]) == ["async", "sync"]


# -- output -----------------------------------------------------------------------------------------


async def test_backpressure_holds_producers_until_the_peer_reads() -> None:
    (receive, send), (peer_receive, peer_send) = memory_pipe(max_buffer_chunks=1)
    connection = Connection(receive, send, Dispatch(), write_buffer_bytes=1000)
    peer = Peer(peer_receive, peer_send)
    sent = 0

    async def produce() -> None:
        nonlocal sent
        for n in range(200):
            await connection.notify("n", {"n": n, "pad": "x" * 50})
            sent += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.serve)
        tg.start_soon(produce)
        await wait_all_tasks_blocked()
        assert 0 < sent < 100  # held: at most about one buffer plus what the pipe holds
        assert [(await peer.receive())["params"]["n"] for _ in range(200)] == list(range(200))
        assert sent == 200
        await peer.aclose()


async def test_end_of_input_cancels_handlers_and_serve_returns_promptly() -> None:
    started = anyio.Event()
    cancelled: list[str] = []

    async def wait_forever(params: Any, rid: RequestId) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append("request")

    async def note(params: Any) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.append("notification")

    (receive, send), (peer_receive, peer_send) = memory_pipe()
    connection = Connection(receive, send, Dispatch({"wait": wait_forever}, {"note": note}))
    peer = Peer(peer_receive, peer_send)
    outcome: list[BaseException] = []

    async def ask() -> None:
        try:
            await connection.request("never/answered")
        except ConnectionClosed as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(connection.serve)
        tg.start_soon(ask)
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "wait"})
        await peer.send({"jsonrpc": "2.0", "method": "note"})
        await peer.send_raw(PING)
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 0, "method": "never/answered"}
        assert await peer.receive() == PONG
        await started.wait()
        start = anyio.current_time()
        with anyio.fail_after(1):
            await peer.close()
            await peer.expect_end()  # handlers cancelled by shutdown are not answered
    assert anyio.current_time() - start < 0.5
    await peer.aclose()
    assert sorted(cancelled) == ["notification", "request"]
    assert len(outcome) == 1
    assert connection.closed
    with pytest.raises(ConnectionClosed):
        await connection.request("after")
    await connection.notify("after")  # dropped, not raised


async def test_final_line_without_newline_is_handled_before_shutdown() -> None:
    turns = Turns()
    async with serving(turns.dispatch()) as (_, peer):
        await peer.send_raw(b'{"jsonrpc":"2.0","method":"cancel","params":{"session":"none"}}')
        await peer.close()
        await peer.expect_end()
    assert turns.unmatched == ["none"]


async def test_responses_queued_before_end_of_input_are_flushed() -> None:
    pings = [encode_message({"jsonrpc": "2.0", "id": n, "method": "ping"}) for n in range(3)]
    async with serving(Dispatch()) as (_, peer):
        await peer.send_raw(b"".join(pings))
        await wait_all_tasks_blocked()
        await peer.close()
        assert [await peer.receive() for _ in range(3)] == [ok(n, "pong") for n in range(3)]
        await peer.expect_end()


async def test_close_stops_serving() -> None:
    async def wait_forever(params: Any, rid: RequestId) -> Any:
        await anyio.sleep_forever()

    async with serving(Dispatch({"wait": wait_forever})) as (connection, peer):
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "wait"})
        await wait_all_tasks_blocked()
        connection.close()
        await peer.expect_end()
    assert connection.closed


async def test_close_before_serve() -> None:
    (receive, send), (peer_receive, peer_send) = memory_pipe()
    connection = Connection(receive, send, Dispatch())
    connection.close()
    with anyio.fail_after(1):
        await connection.serve()
    await Peer(peer_receive, peer_send).aclose()
    with pytest.raises(RuntimeError, match="once"):
        await connection.serve()


async def test_peer_that_stops_reading_ends_the_connection(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "dsh_acp.connection")
    (receive, send), (peer_receive, peer_send) = memory_pipe()
    connection = Connection(receive, send, Dispatch())
    await peer_receive.aclose()
    with anyio.fail_after(1):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            await connection.notify("n")
    assert connection.closed
    assert any("stopped reading" in r.getMessage() for r in caplog.records)
    await peer_send.aclose()


async def test_unencodable_request_raises_and_keeps_ids() -> None:
    async with serving(Dispatch()) as (connection, peer):
        with pytest.raises(TypeError):
            await connection.request("bad", {"x": object()})
        with pytest.raises(TypeError):
            await connection.notify("bad", {"x": object()})
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.request, "good")
            assert await peer.receive() == {"jsonrpc": "2.0", "id": 0, "method": "good"}
            await peer.send(ok(0, None))


async def test_late_response_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async with serving(Dispatch()) as (_, peer):
        await peer.send(ok(41, "nobody asked"))
        await peer.send_raw(PING)
        assert await peer.receive() == PONG
    assert any("no pending request" in r.getMessage() for r in caplog.records)


class _RaisingHandler(logging.Handler):
    """A log handler that fails the way a recursing ``repr`` does inside logging (which re-raises
    ``RecursionError`` to the caller instead of reporting it)."""

    def emit(self, record: logging.LogRecord) -> None:
        raise RecursionError("maximum recursion depth exceeded")


async def test_a_failure_while_logging_never_ends_the_read_loop() -> None:
    handler = _RaisingHandler()
    log = logging.getLogger("dsh_acp.connection")
    log.addHandler(handler)
    try:
        async with serving(Dispatch()) as (_, peer):
            await peer.send(ok(41, "nobody asked"))  # logged as a warning, which raises
            await peer.send_raw(b'{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}\n')
            await peer.send_raw(PING)
            assert await peer.receive() == PONG
    finally:
        log.removeHandler(handler)


async def test_peer_values_in_log_lines_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "dsh_acp.connection")
    deep = b"[" * 1000 + b"]" * 1000
    async with serving(Dispatch()) as (_, peer):
        await peer.send_raw(b'{"jsonrpc":"2.0","id":"' + b"i" * 1_000_000 + b'","result":{}}\n')
        error = b'{"code":1,"message":"x","data":' + deep + b"}"
        await peer.send_raw(b'{"jsonrpc":"2.0","id":null,"error":' + error + b"}\n")
        await peer.send_raw(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":' + deep + b"}\n")
        await peer.send_raw(PING)
        assert await peer.receive() == PONG
    messages = [r.getMessage() for r in caplog.records]
    assert any("no pending request" in m for m in messages)
    assert any("peer reported an error" in m for m in messages)
    assert max(len(m) for m in messages) < 500


async def test_requests_over_the_pending_limit_are_answered_at_once() -> None:
    # A network client's requests in flight are bounded: the one over the limit gets an error at
    # once, the others run on, and a request is admitted again once one is answered.
    release = anyio.Event()

    async def wait(params: Any, rid: RequestId) -> Any:
        await release.wait()
        return rid

    async with serving(Dispatch({"wait": wait}), max_pending_requests=2) as (connection, peer):
        for request_id in (1, 2, 3):
            await peer.send({"jsonrpc": "2.0", "id": request_id, "method": "wait"})
        message = "too many requests in flight (2): wait for an answer before sending more"
        assert await peer.receive() == err(3, INVALID_REQUEST, message)
        assert connection.handling == 2
        release.set()
        assert {(await peer.receive())["id"] for _ in range(2)} == {1, 2}
        await peer.send_raw(PING)
        assert await peer.receive() == PONG
