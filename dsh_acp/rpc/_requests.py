"""A connection's request/response bookkeeping: the peer's requests being handled, ours awaiting
the peer's answers (and those given up on), and the bytes of every answer.

Nothing here reads or writes: the connection hands in what arrived and writes what comes back.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Awaitable
from inspect import CORO_CREATED, getcoroutinestate, iscoroutine
from typing import TYPE_CHECKING, Any, Final, TypeGuard

import anyio

from dsh_acp._safe_text import brief, one_line

from ._errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ConnectionClosed,
    RpcError,
    error_object,
    validation_error,
)
from ._framing import encode_message

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "CANCEL_REQUEST_METHOD",
    "Incoming",
    "Outgoing",
    "RequestId",
    "Requests",
    "discard_unstarted",
    "error_bytes",
    "error_response",
    "invalid_bytes",
    "is_id",
    "log_notification_error",
    "result_response",
]

logger = logging.getLogger("dsh_acp.connection")

CANCEL_REQUEST_METHOD: Final = "$/cancel_request"
_WITHDRAWN_KEPT: Final = 1024
"""Withdrawn requests remembered, so that their late answers are told from stray ones."""
_MISSING: Final[Any] = object()
_PEER_MESSAGE_CHARS: Final = 2000
"""Characters of a peer's error message kept: it reaches cards and the model, one line, its
middle cut with a marker saying how much went."""

RequestId = int | str


class Incoming:
    """A request of the peer's that is being handled."""

    __slots__ = ("method", "request_id", "scope")

    def __init__(self, request_id: RequestId, method: str) -> None:
        self.request_id = request_id
        self.method = method
        self.scope = anyio.CancelScope()


class Outgoing:
    """A request of ours awaiting the peer's response."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: Exception | None = None


class Requests:
    """The requests in flight both ways on one connection."""

    def __init__(self) -> None:
        self._incoming: dict[RequestId, Incoming] = {}
        self._outgoing: dict[int, Outgoing] = {}
        self._withdrawn: dict[int, None] = {}
        """Requests given up on (``$/cancel_request`` sent), oldest first: a peer may still
        answer them, and that late answer is expected, not a fault."""
        self._next_id = 0

    # -- ours -------------------------------------------------------------------------------------

    def send(self, method: str, params: Any) -> tuple[int, bytes, Outgoing]:
        """A new request of ours: its id, its bytes and what its answer will be delivered to."""
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        data = encode_message(message)  # before taking the id, so an unencodable request leaves no trace
        self._next_id += 1
        waiter = Outgoing()
        self._outgoing[request_id] = waiter
        return request_id, data, waiter

    def withdraw(self, request_id: int) -> bytes:
        """Give up on a request of ours: the ``$/cancel_request`` to send; a late answer is ignored."""
        self._withdrawn[request_id] = None
        if len(self._withdrawn) > _WITHDRAWN_KEPT:  # a peer that never answers them
            del self._withdrawn[next(iter(self._withdrawn))]
        params = {"requestId": request_id}
        return encode_message({"jsonrpc": "2.0", "method": CANCEL_REQUEST_METHOD, "params": params})

    def forget(self, request_id: int) -> None:
        """The request is over (answered, withdrawn or failed)."""
        self._outgoing.pop(request_id, None)

    def fail_outgoing(self) -> None:
        """The connection ended: every request of ours still waiting raises ``ConnectionClosed``."""
        for waiter in self._outgoing.values():
            waiter.error = ConnectionClosed("connection closed before the response arrived")
            waiter.done.set()
        self._outgoing.clear()

    def refuse(self, request_id: Any, code: int, reason: str) -> None:
        """The peer answered a request of ours with what cannot be accepted (``reason``): if the
        id names one still waiting, it fails at once with ``RpcError(code)`` saying why; it
        would otherwise wait for an answer that will not come."""
        waiter = self._outgoing.pop(request_id, None) if type(request_id) is int else None
        if waiter is None:
            if type(request_id) is int:
                self._withdrawn.pop(request_id, None)
            return
        waiter.error = RpcError(code, f"the answer could not be accepted ({reason})")
        waiter.done.set()

    def on_response(self, message: dict[str, Any]) -> bytes | None:
        """Deliver a response to the request it answers; the error to reply with if it is invalid."""
        request_id = message.get("id", _MISSING)
        invalid = _invalid_response(message)
        if invalid is not None:
            self.refuse(request_id, INVALID_REQUEST, invalid)
            # Never answered with the peer's id: that would read as the answer to its own request.
            return invalid_bytes(None, invalid)
        error = message.get("error")
        if request_id is None and error is not None:
            logger.warning("peer reported an error: %s", brief(error))
            return None
        if not is_id(request_id):
            return invalid_bytes(None, '"id" must be an integer or a string')
        waiter = self._outgoing.pop(request_id, None) if type(request_id) is int else None
        if waiter is None:
            if type(request_id) is int and request_id in self._withdrawn:
                del self._withdrawn[request_id]
                logger.debug("late response to withdrawn request %s ignored", request_id)
            else:
                logger.warning("response to no pending request: id %s", brief(request_id))
            return None
        if error is not None:
            said = one_line(error["message"], _PEER_MESSAGE_CHARS, cut="middle")
            waiter.error = RpcError(error["code"], said, error.get("data"))
        else:
            waiter.result = message["result"]
        waiter.done.set()
        return None

    # -- the peer's -------------------------------------------------------------------------------

    @property
    def handling(self) -> int:
        """How many requests of the peer's are being handled."""
        return len(self._incoming)

    def running(self, request_id: RequestId) -> bool:
        """Whether a request of the peer's with this id is being handled (its id is in use)."""
        return request_id in self._incoming

    def begin(self, request_id: RequestId, method: str) -> Incoming:
        """Register a request of the peer's whose handler is starting."""
        entry = self._incoming[request_id] = Incoming(request_id, method)
        return entry

    def end(self, entry: Incoming) -> None:
        if self._incoming.get(entry.request_id) is entry:
            del self._incoming[entry.request_id]

    def cancel(self, params: Any) -> None:
        """The peer's ``$/cancel_request``: cancel the handler of the request it names."""
        request_id = params.get("requestId") if type(params) is dict else None
        entry = self._incoming.get(request_id) if type(request_id) is int or type(request_id) is str else None
        if entry is None:
            logger.debug("%s for no running request: %s", CANCEL_REQUEST_METHOD, brief(params))
            return
        entry.scope.cancel()


# -- answers --------------------------------------------------------------------------------------


def result_response(request_id: RequestId, method: str, result: Any) -> bytes:
    try:
        return encode_message({"jsonrpc": "2.0", "id": request_id, "result": result})
    except TypeError as exc:
        logger.error("result of %s (id %s) is not JSON-serializable", method, brief(request_id), exc_info=exc)
        return error_bytes(request_id, INTERNAL_ERROR, "Internal error")


def error_response(request_id: RequestId, method: str, exc: Exception) -> bytes:
    if isinstance(exc, RpcError):
        error = exc.to_error_object()
    elif _is_validation_error(exc):
        error = _invalid_params(exc)
    else:
        if not isinstance(exc, ConnectionClosed):  # shutting down: nobody to answer anyway
            logger.error("%s (id %s) failed", method, brief(request_id), exc_info=exc)
        return error_bytes(request_id, INTERNAL_ERROR, "Internal error")
    try:
        return encode_message({"jsonrpc": "2.0", "id": request_id, "error": error})
    except TypeError as unencodable:
        logger.error("error data of %s (id %s) is not JSON", method, brief(request_id), exc_info=unencodable)
        return error_bytes(request_id, error["code"], error["message"])


def error_bytes(request_id: RequestId | None, code: int, message: str) -> bytes:
    return encode_message({"jsonrpc": "2.0", "id": request_id, "error": error_object(code, message)})


def invalid_bytes(request_id: RequestId | None, reason: str) -> bytes:
    return error_bytes(request_id, INVALID_REQUEST, "Invalid request: " + reason)


def log_notification_error(method: str, exc: Exception) -> None:
    if isinstance(exc, RpcError | ConnectionClosed):
        logger.debug("notification %s: %s", brief(method), brief(exc))
    elif _is_validation_error(exc):  # the peer's mistake, not ours: no traceback
        logger.warning("notification %s: %s", brief(method), brief(_invalid_params(exc)["message"]))
    else:
        logger.error("notification %s failed", brief(method), exc_info=exc)


def is_id(value: Any) -> bool:
    # bool is an int subclass and 1.0 == 1 hashes alike: both would match integer ids by accident.
    return type(value) is int or type(value) is str


def discard_unstarted(awaitable: Awaitable[Any]) -> None:
    # A coroutine cancelled before its first step would warn "never awaited" when collected.
    if iscoroutine(awaitable) and getcoroutinestate(awaitable) == CORO_CREATED:
        awaitable.close()


def _invalid_response(message: dict[str, Any]) -> str | None:
    """Why a response cannot be accepted, or ``None``."""
    if message.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if "result" in message and "error" in message:
        return 'a response has either "result" or "error"'
    if "error" in message and not _is_error_object(message["error"]):
        return '"error" must be an object with integer "code" and string "message"'
    return None


def _is_error_object(error: Any) -> bool:
    return type(error) is dict and type(error.get("code")) is int and type(error.get("message")) is str


def _is_validation_error(exc: Exception) -> TypeGuard[ValidationError]:
    # pydantic is slow to import, so it is never imported here: if it is not loaded yet, no handler
    # can have raised one of its errors.
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)


def _invalid_params(exc: ValidationError) -> dict[str, Any]:
    return validation_error(exc).to_error_object()
