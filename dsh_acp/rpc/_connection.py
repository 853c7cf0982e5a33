"""A JSON-RPC 2.0 connection over any anyio byte stream pair, in both directions.

The read loop hands every incoming request and notification to a dispatcher synchronously, in
arrival order, and runs what the dispatcher returns in a task of its own: a notification therefore
always finds the requests that arrived before it registered, and a slow handler never stops the loop
from reading responses to our own requests.

All output goes through one buffer drained by one writer task, so messages leave in exactly the order
they were produced, a burst of notifications becomes a few large writes, and producers wait
(backpressure) only when the peer stops reading.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from inspect import CORO_CREATED, getcoroutinestate, iscoroutine
from time import monotonic_ns
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeGuard

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup

from dsh_acp._brief import brief

from ._errors import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    FieldError,
    InvalidParamsData,
    RpcError,
    error_object,
    invalid_params,
    validation_error,
)
from ._framing import DEFAULT_MAX_MESSAGE_BYTES, Frame, FrameDecoder, FrameError, encode_message

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "AUTH_REQUIRED",
    "CANCEL_REQUEST_METHOD",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "Connection",
    "ConnectionClosed",
    "Dispatcher",
    "FieldError",
    "InvalidParamsData",
    "Reply",
    "RequestId",
    "RpcError",
    "error_object",
    "invalid_params",
    "validation_error",
]

logger = logging.getLogger("dsh_acp.connection")

CANCEL_REQUEST_METHOD: Final = "$/cancel_request"
_WITHDRAWN_KEPT: Final = 1024
"""Withdrawn requests remembered, so that their late answers are told from stray ones."""

RequestId = int | str


@dataclass(frozen=True, slots=True)
class Reply:
    """A handler's result with work to do right after the response is written (ACP wants some
    notifications, such as a session's available commands, to follow the answer, never precede it)."""

    result: Any
    then: Callable[[], Awaitable[None]]


class ConnectionClosed(Exception):
    """The connection ended (end of input, ``close()``, or the peer stopped reading)."""


class Dispatcher(Protocol):
    """What the connection calls for incoming messages, synchronously on the read loop.

    Both may raise ``RpcError`` at once; what they return is awaited in a task of its own. Code that
    must happen before the next message is read (registering a prompt turn so that a cancel right
    behind it finds it) belongs in the synchronous part.
    """

    def on_request(self, method: str, params: Any, request_id: RequestId) -> Awaitable[Any]:
        """Start handling a request; the awaitable's result is the response's ``result``."""
        ...

    def on_notification(self, method: str, params: Any) -> Awaitable[None] | None:
        """Handle a notification; errors are logged, never answered."""
        ...


class _Incoming:
    """A request of the peer's that is being handled."""

    __slots__ = ("method", "request_id", "scope")

    def __init__(self, request_id: RequestId, method: str) -> None:
        self.request_id = request_id
        self.method = method
        self.scope = anyio.CancelScope()


class _Outgoing:
    """A request of ours awaiting the peer's response."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: Exception | None = None


_MISSING: Final[Any] = object()
_NEWLINE: Final = 10  # b"\n"[0]
# The unit of progress when finishing a line at shutdown (see Connection._finish_line).
_FINISH_PIECE: Final = 64 * 1024


class Connection:
    """One JSON-RPC peer connection; run it with ``serve()``.

    ``serve()`` reads until end of input, then cancels every running handler, flushes what is already
    queued (waiting at most ``drain_timeout`` seconds), closes both streams and returns.

    Output is queued synchronously and written in call order. When the send stream also offers
    ``write_nowait(data) -> int`` (write what fits now, without waiting; see ``FdSendStream``) and the
    loop is asyncio, each loop turn's output is written from a loop callback in one system call
    (a message more than ``burst_gap`` seconds after the previous write, the trickle of a model's
    tokens, is written at once instead: no output of that turn can be ahead of it); otherwise, and
    whenever the peer falls behind, a writer task does the writing.
    """

    def __init__(
        self,
        receive_stream: ByteReceiveStream,
        send_stream: ByteSendStream,
        dispatcher: Dispatcher,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        write_buffer_bytes: int = 256 * 1024,
        drain_timeout: float = 0.25,
        finish_line_timeout: float = 2.0,
        read_size: int = 256 * 1024,
        burst_gap: float = 0.001,
    ) -> None:
        self._receive_stream = receive_stream
        self._send_stream = send_stream
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_message_bytes)
        self._high_water = write_buffer_bytes
        self._drain_timeout = drain_timeout
        self._finish_line_timeout = finish_line_timeout
        self._read_size = read_size

        # Output not yet handed to the stream, in production order.
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        # Set while the writer task is idle (nothing in flight); setting it wakes the writer.
        self._writer_wakeup: anyio.Event | None = None
        self._drained: anyio.Event | None = None  # wakes producers held by backpressure
        # The fast path (see _write): a synchronous write from a loop callback, when available.
        self._write_nowait: Callable[[bytes], int] | None = None
        self._call_soon: Callable[[Callable[[], None]], object] | None = None
        self._flush_scheduled = False
        self._burst_gap_ns = burst_gap_ns = int(burst_gap * 1e9)
        self._flushed_at = -burst_gap_ns  # when output last left by the fast path
        # What the writer task is sending, and whether the bytes written so far end mid-line: on
        # shutdown the line being written is finished (never half a message), nothing after it.
        self._sending: bytes | None = None
        self._line_open = False

        self._incoming: dict[RequestId, _Incoming] = {}
        self._outgoing: dict[int, _Outgoing] = {}
        self._withdrawn: dict[int, None] = {}
        """Requests given up on (``$/cancel_request`` sent), oldest first: a peer may still
        answer them, and that late answer is expected, not a fault."""
        self._next_id = 0

        self._handlers: TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._started = False
        self._closed = False  # no new output is accepted once set

    @property
    def closed(self) -> bool:
        """True once the connection stopped accepting output."""
        return self._closed

    # -- outgoing ---------------------------------------------------------------------------------

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification.

        Returns as soon as the message is queued; waits only while the peer is not reading and more
        than ``write_buffer_bytes`` are queued. Once the connection is closed, notifications are
        dropped: raising would only disturb the cleanup code that typically sends them then.
        """
        if self._closed:
            return
        if params is None:
            self._write(encode_message({"jsonrpc": "2.0", "method": method}), at_once=True)
        else:
            self._write(encode_message({"jsonrpc": "2.0", "method": method, "params": params}), at_once=True)
        if self._pending_bytes > self._high_water:
            await self._wait_drained()

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and return the response's result.

        Raises ``RpcError`` for an error response and ``ConnectionClosed`` if the connection ends
        first. No timeout: the peer may be a person. If the caller is cancelled, the peer is sent
        ``$/cancel_request`` and a late response is ignored.
        """
        if self._closed:
            raise ConnectionClosed("connection closed")
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        data = encode_message(message)  # before taking the id, so an unencodable request leaves no trace
        self._next_id += 1
        waiter = _Outgoing()
        self._outgoing[request_id] = waiter
        try:
            self._write(data)
            await waiter.done.wait()
        except BaseException:
            if not waiter.done.is_set() and not self._closed:
                # Best effort: the peer may answer anyway; that late answer is then ignored.
                self._write(_cancel_request_bytes(request_id))
                self._withdrawn[request_id] = None
                if len(self._withdrawn) > _WITHDRAWN_KEPT:  # a peer that never answers them
                    del self._withdrawn[next(iter(self._withdrawn))]
            raise
        finally:
            self._outgoing.pop(request_id, None)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _write(self, data: bytes, at_once: bool = False) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._writer_wakeup is None or self._flush_scheduled:
            return  # the writer is busy and takes the queue next, or a flush is already due
        if self._call_soon is None:
            self._wake_writer()
        elif at_once and monotonic_ns() - self._flushed_at >= self._burst_gap_ns:
            # A notification after a quiet spell (a model's next token from the network) is
            # written now: a flush scheduled for it alone would cost a loop turn of its own, as
            # much CPU again as relaying the token. Answers keep the end of the turn, so the
            # notifications that follow one (a session's commands) leave in the same write.
            self._flush_now()
        else:
            # Inside a burst: write from a plain callback at the end of this loop turn, so all that
            # is queued by then goes out in one system call, without switching to the writer task
            # (that switch costs as much as the rest of a notification).
            self._flush_scheduled = True
            self._call_soon(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_scheduled = False
        self._flushed_at = monotonic_ns()
        if self._writer_wakeup is None or not self._pending:
            return  # the writer has data in flight: writing here would reorder
        assert self._write_nowait is not None
        data = self._take_pending()
        try:
            written = self._write_nowait(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._writer_failed(exc)
            return
        if written < len(data):  # the pipe is full: the writer waits until it can take the rest
            if written:
                self._line_open = data[written - 1] != _NEWLINE
            self._pending.insert(0, data[written:])
            self._pending_bytes += len(data) - written
            self._wake_writer()

    def _take_pending(self) -> bytes:
        pending = self._pending
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        pending.clear()
        self._pending_bytes = 0
        self._release_producers()
        return data

    async def _wait_drained(self) -> None:
        while self._pending_bytes > self._high_water and not self._closed:
            if self._drained is None:
                self._drained = anyio.Event()
            await self._drained.wait()

    def _release_producers(self) -> None:
        drained = self._drained
        if drained is not None:
            self._drained = None
            drained.set()

    async def _write_loop(self) -> None:
        send = self._send_stream.send
        # anyio.Event() looks the backend up on every call (about 2.5 µs, as much as the rest of a
        # notification); the backend's own class it returns can be constructed directly.
        new_event = type(anyio.Event())
        try:
            while True:
                if not self._pending:
                    if self._closed:
                        return  # everything queued before the close has been written
                    wakeup = self._writer_wakeup = new_event()
                    await wakeup.wait()
                    continue
                self._sending = data = self._take_pending()
                try:
                    await send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self._writer_failed(exc)
                    return
                self._sending = None
                self._line_open = False  # every message ends with its newline
        finally:
            self._writer_wakeup = None  # no writer: nothing may be written from a callback either

    def _writer_failed(self, exc: BaseException) -> None:
        logger.info("peer stopped reading (%r): closing the connection", exc.__cause__ or exc)
        self._sending = None
        self._line_open = False  # nobody to finish it for
        self._shut_output()
        self.close()

    def _wake_writer(self) -> None:
        wakeup = self._writer_wakeup
        if wakeup is not None:
            self._writer_wakeup = None
            wakeup.set()

    def _fail_outgoing(self) -> None:
        for waiter in self._outgoing.values():
            waiter.error = ConnectionClosed("connection closed before the response arrived")
            waiter.done.set()
        self._outgoing.clear()

    def _shut_output(self) -> None:
        self._closed = True
        self._pending.clear()
        self._pending_bytes = 0
        self._release_producers()
        self._fail_outgoing()

    # -- lifecycle --------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Read and dispatch until end of input (or ``close()``), then shut down as described above."""
        if self._started:
            raise RuntimeError("serve() can only run once")
        self._started = True
        try:
            async with anyio.create_task_group() as outer:
                self._scope = outer.cancel_scope
                if self._closed:
                    outer.cancel_scope.cancel()
                self._write_nowait = getattr(self._send_stream, "write_nowait", None)
                if self._write_nowait is not None:
                    self._call_soon = _loop_call_soon()
                outer.start_soon(self._write_loop, name="rpc writer")
                async with anyio.create_task_group() as handlers:
                    self._handlers = handlers
                    await self._read_loop()
                    # End of input: the peer is gone, so nothing new is written from here on.
                    self._closed = True
                    self._fail_outgoing()
                    handlers.cancel_scope.cancel()
                # Let the writer flush what was queued before, but never wait long for a stalled peer.
                outer.cancel_scope.deadline = anyio.current_time() + self._drain_timeout
                self._wake_writer()
        finally:
            self._handlers = None
            rest = self._unfinished_line()
            self._shut_output()
            with anyio.CancelScope(shield=True):
                if rest:
                    await self._finish_line(rest)
                for stream in (self._send_stream, self._receive_stream):
                    try:
                        await stream.aclose()
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        pass

    def _unfinished_line(self) -> bytes:
        """The rest of the message whose start is already on the wire (``b""`` if none)."""
        data, unsent = self._sending, getattr(self._send_stream, "unsent", None)
        if data is not None and unsent is not None:  # the writer was stopped inside send()
            written = len(data) - len(unsent)
            # Nothing of ``data`` written yet: the line is open only if a write from a loop callback
            # (``_flush_now``) left part of it on the wire before ``data`` was queued.
            line_open = data[written - 1] != _NEWLINE if written else self._line_open
            if not line_open:
                return b""
            rest = bytes(unsent)
        elif self._line_open and self._pending:
            rest = b"".join(self._pending)
        else:
            return b""
        end = rest.find(b"\n")
        return rest if end < 0 else rest[: end + 1]

    async def _finish_line(self, rest: bytes) -> None:
        """Write the rest of a started line, giving up only on a reader that stopped reading.

        The limit is on time without progress, not on the whole write: a slow but live reader (a busy
        editor, a loaded machine) gets the line whole, while a reader that never reads again costs at
        most ``finish_line_timeout`` seconds of shutdown.
        """
        try:
            for start in range(0, len(rest), _FINISH_PIECE):
                with anyio.move_on_after(self._finish_line_timeout) as stalled:
                    await self._send_stream.send(rest[start : start + _FINISH_PIECE])
                if stalled.cancelled_caught:
                    return
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the reader is gone: nobody will see the half line either

    def close(self) -> None:
        """Stop at once: cancel handlers and the writer, and make ``serve()`` return."""
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()
        else:
            self._shut_output()

    async def _read_loop(self) -> None:
        receive = self._receive_stream.receive
        feed = self._decoder.feed
        read_size = self._read_size
        while True:
            try:
                data = await receive(read_size)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                for frame in self._decoder.close():
                    self._on_frame_guarded(frame)
                logger.debug("end of input")
                return
            for frame in feed(data):
                try:
                    self._on_frame(frame)
                except Exception:
                    _frame_failed()

    # -- incoming ---------------------------------------------------------------------------------

    def _on_frame_guarded(self, frame: Frame) -> None:
        try:
            self._on_frame(frame)
        except Exception:
            _frame_failed()

    def _on_frame(self, frame: Frame) -> None:
        if isinstance(frame, FrameError):
            self._reply_error(None, frame.code, frame.message)
            return
        message = frame.value
        if type(message) is not dict:
            reason = "batches are not supported" if type(message) is list else "expected a JSON object"
            self._reply_error(None, INVALID_REQUEST, "Invalid request: " + reason)
            return
        method = message.get("method", _MISSING)
        if method is not _MISSING:
            self._on_call(message, method)
        elif "result" in message or "error" in message:
            self._on_response(message)
        else:
            self._reply_invalid(_usable_id(message), "not a request, notification or response")

    def _on_call(self, message: dict[str, Any], method: Any) -> None:
        request_id = message.get("id", _MISSING)
        has_id = request_id is not _MISSING
        usable = request_id if has_id and _is_id(request_id) else None
        if message.get("jsonrpc") != "2.0":
            self._reply_invalid(usable, '"jsonrpc" must be "2.0"')
            return
        if has_id and usable is None:
            self._reply_invalid(None, '"id" must be an integer or a string')
            return
        if type(method) is not str:
            self._reply_invalid(usable, '"method" must be a string')
            return
        params = message.get("params")
        if params is not None and type(params) is not dict and type(params) is not list:
            self._reply_invalid(usable, '"params" must be an object or an array')
            return
        if usable is None:
            self._on_notification(method, params)
        else:
            self._on_request(usable, method, params)

    def _on_request(self, request_id: RequestId, method: str, params: Any) -> None:
        if request_id in self._incoming:
            self._reply_invalid(request_id, f"request id {brief(request_id, 60)} is already in use")
            return
        try:
            awaitable = self._dispatcher.on_request(method, params, request_id)
        except Exception as exc:
            self._reply(self._error_response(request_id, method, exc))
            return
        entry = _Incoming(request_id, method)
        self._incoming[request_id] = entry
        assert self._handlers is not None
        name = f"rpc {method} {brief(request_id, 60)}"
        self._handlers.start_soon(self._run_request, entry, awaitable, name=name)

    async def _run_request(self, entry: _Incoming, awaitable: Awaitable[Any]) -> None:
        response: bytes | None = None
        then: Callable[[], Awaitable[None]] | None = None
        try:
            with entry.scope:
                try:
                    result = await awaitable
                except Exception as exc:
                    response = self._error_response(entry.request_id, entry.method, exc)
                else:
                    if isinstance(result, Reply):
                        result, then = result.result, result.then
                    response = self._result_response(entry.request_id, entry.method, result)
        finally:
            _discard_unstarted(awaitable)
            if self._incoming.get(entry.request_id) is entry:
                del self._incoming[entry.request_id]
        if response is None:  # our own scope caught the cancellation: $/cancel_request
            response = _error_bytes(entry.request_id, REQUEST_CANCELLED, "Request cancelled")
        self._reply(response)
        if then is not None:
            try:
                await then()
            except Exception:
                logger.exception("the follow-up of %s failed", entry.method)

    def _on_notification(self, method: str, params: Any) -> None:
        if method == CANCEL_REQUEST_METHOD:
            self._cancel_incoming(params)
            return
        try:
            awaitable = self._dispatcher.on_notification(method, params)
        except Exception as exc:
            _log_notification_error(method, exc)
            return
        if awaitable is not None:
            assert self._handlers is not None
            self._handlers.start_soon(self._run_notification, method, awaitable, name=f"rpc {method}")

    async def _run_notification(self, method: str, awaitable: Awaitable[None]) -> None:
        try:
            await awaitable
        except Exception as exc:
            _log_notification_error(method, exc)
        finally:
            _discard_unstarted(awaitable)

    def _cancel_incoming(self, params: Any) -> None:
        request_id = params.get("requestId") if type(params) is dict else None
        entry = self._incoming.get(request_id) if type(request_id) is int or type(request_id) is str else None
        if entry is None:
            logger.debug("%s for no running request: %s", CANCEL_REQUEST_METHOD, brief(params))
            return
        entry.scope.cancel()

    def _on_response(self, message: dict[str, Any]) -> None:
        request_id = message.get("id", _MISSING)
        if message.get("jsonrpc") != "2.0":
            # Never answered with the peer's id: that would read as the answer to its own request.
            self._reply_invalid(None, '"jsonrpc" must be "2.0"')
            return
        if "result" in message and "error" in message:
            self._reply_invalid(None, 'a response has either "result" or "error"')
            return
        error = message.get("error")
        if "error" in message and not _is_error_object(error):
            self._reply_invalid(None, '"error" must be an object with integer "code" and string "message"')
            return
        if request_id is None and error is not None:
            logger.warning("peer reported an error: %s", brief(error))
            return
        if not _is_id(request_id):
            self._reply_invalid(None, '"id" must be an integer or a string')
            return
        waiter = self._outgoing.pop(request_id, None) if type(request_id) is int else None
        if waiter is None:
            if type(request_id) is int and request_id in self._withdrawn:
                del self._withdrawn[request_id]
                logger.debug("late response to withdrawn request %s ignored", request_id)
            else:
                logger.warning("response to no pending request: id %s", brief(request_id))
            return
        if error is not None:
            waiter.error = RpcError(error["code"], error["message"], error.get("data"))
        else:
            waiter.result = message["result"]
        waiter.done.set()

    # -- replies ----------------------------------------------------------------------------------

    def _reply(self, data: bytes) -> None:
        if not self._closed:  # after shutdown, answers have nowhere to go
            self._write(data)

    def _reply_error(self, request_id: RequestId | None, code: int, message: str) -> None:
        self._reply(_error_bytes(request_id, code, message))

    def _reply_invalid(self, request_id: RequestId | None, reason: str) -> None:
        self._reply_error(request_id, INVALID_REQUEST, "Invalid request: " + reason)

    def _result_response(self, request_id: RequestId, method: str, result: Any) -> bytes:
        try:
            return encode_message({"jsonrpc": "2.0", "id": request_id, "result": result})
        except TypeError as exc:
            logger.error(
                "result of %s (id %s) is not JSON-serializable", method, brief(request_id), exc_info=exc
            )
            return _error_bytes(request_id, INTERNAL_ERROR, "Internal error")

    def _error_response(self, request_id: RequestId, method: str, exc: Exception) -> bytes:
        if isinstance(exc, RpcError):
            error = exc.to_error_object()
        elif _is_validation_error(exc):
            error = _invalid_params(exc)
        else:
            if not isinstance(exc, ConnectionClosed):  # shutting down: nobody to answer anyway
                logger.error("%s (id %s) failed", method, brief(request_id), exc_info=exc)
            return _error_bytes(request_id, INTERNAL_ERROR, "Internal error")
        try:
            return encode_message({"jsonrpc": "2.0", "id": request_id, "error": error})
        except TypeError as unencodable:
            logger.error(
                "error data of %s (id %s) is not JSON", method, brief(request_id), exc_info=unencodable
            )
            return _error_bytes(request_id, error["code"], error["message"])


def _frame_failed() -> None:
    # A bug in handling one message must not end the read loop (and so the agent): it is logged and
    # the next message is read. Even the logging is guarded, since the failure may be in logging.
    try:
        logger.exception("handling a message failed; the message is dropped")
    except Exception:
        pass


def _error_bytes(request_id: RequestId | None, code: int, message: str) -> bytes:
    return encode_message({"jsonrpc": "2.0", "id": request_id, "error": error_object(code, message)})


def _loop_call_soon() -> Callable[[Callable[[], None]], object] | None:
    """``call_soon`` of the running asyncio loop; None on other backends (they use the writer task)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        call_soon: Callable[[Callable[[], None]], object] = asyncio.get_running_loop().call_soon
    except RuntimeError:
        return None
    return call_soon


def _cancel_request_bytes(request_id: RequestId) -> bytes:
    params = {"requestId": request_id}
    return encode_message({"jsonrpc": "2.0", "method": CANCEL_REQUEST_METHOD, "params": params})


def _is_id(value: Any) -> bool:
    # bool is an int subclass and 1.0 == 1 hashes alike: both would match integer ids by accident.
    return type(value) is int or type(value) is str


def _usable_id(message: dict[str, Any]) -> RequestId | None:
    request_id = message.get("id")
    return request_id if _is_id(request_id) else None


def _is_error_object(error: Any) -> bool:
    return type(error) is dict and type(error.get("code")) is int and type(error.get("message")) is str


def _discard_unstarted(awaitable: Awaitable[Any]) -> None:
    # A coroutine cancelled before its first step would warn "never awaited" when collected.
    if iscoroutine(awaitable) and getcoroutinestate(awaitable) == CORO_CREATED:
        awaitable.close()


def _log_notification_error(method: str, exc: Exception) -> None:
    if isinstance(exc, RpcError | ConnectionClosed):
        logger.debug("notification %s: %s", brief(method), brief(exc))
    elif _is_validation_error(exc):  # the peer's mistake, not ours: no traceback
        logger.warning("notification %s: %s", brief(method), brief(_invalid_params(exc)["message"]))
    else:
        logger.error("notification %s failed", brief(method), exc_info=exc)


def _is_validation_error(exc: Exception) -> TypeGuard[ValidationError]:
    # pydantic is slow to import, so it is never imported here: if it is not loaded yet, no handler
    # can have raised one of its errors.
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)


def _invalid_params(exc: ValidationError) -> dict[str, Any]:
    return validation_error(exc).to_error_object()
