"""A JSON-RPC 2.0 connection over any anyio byte stream pair, in both directions.

The read loop hands every incoming request and notification to a dispatcher synchronously, in
arrival order, and runs what the dispatcher returns in a task of its own: a notification therefore
always finds the requests that arrived before it registered, and a slow handler never stops the loop
from reading responses to our own requests.

All output goes through one queue drained by one writer task (``_output``), so messages leave in
exactly the order they were produced; the requests in flight both ways are kept in ``_requests``.
The connection composes the two with the read loop.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup

from dsh_acp._safe_text import brief

from ._errors import INVALID_REQUEST, REQUEST_CANCELLED, ConnectionClosed
from ._framing import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Frame,
    FrameDecoder,
    FrameError,
    encode_message,
    json_bytes,
)
from ._output import Output
from ._requests import (
    CANCEL_REQUEST_METHOD,
    Incoming,
    RequestId,
    Requests,
    discard_unstarted,
    error_bytes,
    error_response,
    invalid_bytes,
    is_id,
    log_notification_error,
    result_response,
)

__all__ = ["Connection", "Dispatcher", "Reply", "RequestId"]

logger = logging.getLogger("dsh_acp.connection")

_MISSING: Final[Any] = object()


@dataclass(frozen=True, slots=True)
class Reply:
    """A handler's result with work to do right after the response is written (ACP wants some
    notifications, such as a session's available commands, to follow the answer, never precede it)."""

    result: Any
    then: Callable[[], Awaitable[None]]


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


class Connection:
    """One JSON-RPC peer connection; run it with ``serve()``.

    ``serve()`` reads until end of input, then cancels every running handler, flushes what is already
    queued (waiting at most ``drain_timeout`` seconds), closes both streams and returns.
    ``max_pending_requests`` bounds the peer's requests handled at once (a network client's); the
    one over it is answered with an error at once.

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
        max_pending_requests: int | None = None,
    ) -> None:
        self._receive_stream = receive_stream
        self._send_stream = send_stream
        self._dispatcher = dispatcher
        self._decoder = FrameDecoder(max_message_bytes)
        self._drain_timeout = drain_timeout
        self._read_size = read_size
        self._output = Output(
            send_stream,
            self._output_failed,
            high_water=write_buffer_bytes,
            finish_line_timeout=finish_line_timeout,
            burst_gap=burst_gap,
        )
        self._requests = Requests()
        self._max_pending = max_pending_requests
        self._handlers: TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._started = False

    @property
    def closed(self) -> bool:
        """True once the connection stopped accepting output."""
        return self._output.closed

    @property
    def handling(self) -> int:
        """How many of the peer's requests are being handled (a running prompt is one)."""
        return self._requests.handling

    # -- outgoing ---------------------------------------------------------------------------------

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification.

        Returns as soon as the message is queued; waits only while the peer is not reading and more
        than ``write_buffer_bytes`` are queued. Once the connection is closed, notifications are
        dropped: raising would only disturb the cleanup code that typically sends them then.
        """
        output = self._output
        if output.closed:
            return
        if params is None:
            output.write(encode_message({"jsonrpc": "2.0", "method": method}), at_once=True)
        else:
            output.write(encode_message({"jsonrpc": "2.0", "method": method, "params": params}), at_once=True)
        if output.pending_bytes > output.high_water:
            await output.wait_drained()

    async def notify_each(self, method: str, params: Iterable[Any]) -> None:
        """``notify(method, p)`` for each ``p`` of ``params`` in turn, without a coroutine and a
        message dict each (a long session's replay sends one per card and message, and those were
        a tenth of its cost). Every item is drawn, also once the connection is closed (it is then
        dropped, as ``notify`` drops it): drawing one may do work the caller needs done."""
        output = self._output
        head = b'{"jsonrpc":"2.0","method":' + json_bytes(method) + b',"params":'
        join, write = b"".join, output.write
        for item in params:
            if output.closed:
                continue
            # The bytes encode_message gives the whole message: orjson writes a dict's items in turn.
            write(join((head, json_bytes(item), b"}\n")), at_once=True)
            if output.pending_bytes > output.high_water:
                await output.wait_drained()

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and return the response's result.

        Raises ``RpcError`` for an error response and ``ConnectionClosed`` if the connection ends
        first. No timeout: the peer may be a person. If the caller is cancelled, the peer is sent
        ``$/cancel_request`` and a late response is ignored.
        """
        output = self._output
        if output.closed:
            raise ConnectionClosed("connection closed")
        request_id, data, waiter = self._requests.send(method, params)
        try:
            output.write(data)
            await waiter.done.wait()
        except BaseException:
            if not waiter.done.is_set() and not output.closed:
                # Best effort: the peer may answer anyway; that late answer is then ignored.
                output.write(self._requests.withdraw(request_id))
            raise
        finally:
            self._requests.forget(request_id)
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _output_failed(self) -> None:
        self._requests.fail_outgoing()
        self.close()

    def _shut_output(self) -> None:
        self._output.shut()
        self._requests.fail_outgoing()

    # -- lifecycle --------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Read and dispatch until end of input (or ``close()``), then shut down as described above."""
        if self._started:
            raise RuntimeError("serve() can only run once")
        self._started = True
        output = self._output
        try:
            async with anyio.create_task_group() as outer:
                self._scope = outer.cancel_scope
                if output.closed:
                    outer.cancel_scope.cancel()
                output.use_fast_path()
                outer.start_soon(output.run, name="rpc writer")
                async with anyio.create_task_group() as handlers:
                    self._handlers = handlers
                    await self._read_loop()
                    # End of input: the peer is gone, so nothing new is written from here on.
                    output.closed = True
                    self._requests.fail_outgoing()
                    handlers.cancel_scope.cancel()
                # Let the writer flush what was queued before, but never wait long for a stalled peer.
                outer.cancel_scope.deadline = anyio.current_time() + self._drain_timeout
                output.wake_writer()
        finally:
            self._handlers = None
            rest = output.unfinished_line()
            self._shut_output()
            with anyio.CancelScope(shield=True):
                if rest:
                    await output.finish_line(rest)
                for stream in (self._send_stream, self._receive_stream):
                    try:
                        await stream.aclose()
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                        pass

    def close(self) -> None:
        """Stop at once: cancel handlers and the writer, and make ``serve()`` return."""
        self._output.closed = True
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
            self._on_broken(frame)
            return
        message = frame.value
        if type(message) is not dict:
            reason = "batches are not supported" if type(message) is list else "expected a JSON object"
            self._reply(invalid_bytes(None, reason))
            return
        method = message.get("method", _MISSING)
        if method is not _MISSING:
            self._on_call(message, method)
        elif "result" in message or "error" in message:
            invalid = self._requests.on_response(message)
            if invalid is not None:
                self._reply(invalid)
        else:
            self._reply_invalid(_usable_id(message), "not a request, notification or response")

    def _on_broken(self, frame: FrameError) -> None:
        """A line that could not be read whole: answered with the error, under its id when its
        start names a request of the peer's (not one already running: that id is taken); an
        answer to a request of ours fails that request at once, with the reason."""
        request_id = frame.request_id
        if frame.response:
            self._requests.refuse(request_id, frame.code, frame.message.removeprefix("Invalid request: "))
            request_id = None  # the peer's id on our error would read as the answer to its own request
        elif request_id is not None and self._requests.running(request_id):
            request_id = None
        self._reply(error_bytes(request_id, frame.code, frame.message))

    def _on_call(self, message: dict[str, Any], method: Any) -> None:
        request_id = message.get("id", _MISSING)
        has_id = request_id is not _MISSING
        usable = request_id if has_id and is_id(request_id) else None
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
        if self._requests.running(request_id):
            self._reply_invalid(request_id, f"request id {brief(request_id, 60)} is already in use")
            return
        limit = self._max_pending
        if limit is not None and self._requests.handling >= limit:
            message = f"too many requests in flight ({limit}): wait for an answer before sending more"
            self._reply(error_bytes(request_id, INVALID_REQUEST, message))
            return
        try:
            awaitable = self._dispatcher.on_request(method, params, request_id)
        except Exception as exc:
            self._reply(error_response(request_id, method, exc))
            return
        entry = self._requests.begin(request_id, method)
        assert self._handlers is not None
        name = f"rpc {method} {brief(request_id, 60)}"
        self._handlers.start_soon(self._run_request, entry, awaitable, name=name)

    async def _run_request(self, entry: Incoming, awaitable: Awaitable[Any]) -> None:
        response: bytes | None = None
        then: Callable[[], Awaitable[None]] | None = None
        try:
            with entry.scope:
                try:
                    result = await awaitable
                except Exception as exc:
                    response = error_response(entry.request_id, entry.method, exc)
                else:
                    if isinstance(result, Reply):
                        result, then = result.result, result.then
                    response = result_response(entry.request_id, entry.method, result)
        finally:
            discard_unstarted(awaitable)
            self._requests.end(entry)
        if response is None:  # our own scope caught the cancellation: $/cancel_request
            response = error_bytes(entry.request_id, REQUEST_CANCELLED, "Request cancelled")
        self._reply(response)
        if then is not None:
            try:
                await then()
            except Exception:
                logger.exception("the follow-up of %s failed", entry.method)

    def _on_notification(self, method: str, params: Any) -> None:
        if method == CANCEL_REQUEST_METHOD:
            self._requests.cancel(params)
            return
        try:
            awaitable = self._dispatcher.on_notification(method, params)
        except Exception as exc:
            log_notification_error(method, exc)
            return
        if awaitable is not None:
            assert self._handlers is not None
            self._handlers.start_soon(self._run_notification, method, awaitable, name=f"rpc {method}")

    async def _run_notification(self, method: str, awaitable: Awaitable[None]) -> None:
        try:
            await awaitable
        except Exception as exc:
            log_notification_error(method, exc)
        finally:
            discard_unstarted(awaitable)

    # -- replies ----------------------------------------------------------------------------------

    def _reply(self, data: bytes) -> None:
        if not self._output.closed:  # after shutdown, answers have nowhere to go
            self._output.write(data)

    def _reply_invalid(self, request_id: RequestId | None, reason: str) -> None:
        self._reply(invalid_bytes(request_id, reason))


def _frame_failed() -> None:
    # A bug in handling one message must not end the read loop (and so the agent): it is logged and
    # the next message is read. Even the logging is guarded, since the failure may be in logging.
    try:
        logger.exception("handling a message failed; the message is dropped")
    except Exception:
        pass


def _usable_id(message: dict[str, Any]) -> RequestId | None:
    request_id = message.get("id")
    return request_id if is_id(request_id) else None
