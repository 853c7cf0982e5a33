"""JSON-RPC errors: the codes, ``RpcError`` (raised by handlers to answer with it), the error
objects and invalid-params data every answer carries, and ``ConnectionClosed``, what a call on a
connection that has ended raises.

Nothing here needs anyio or pydantic: the first answer of a connection is made without either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypedDict

from dsh_acp._safe_text import brief, one_line

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "AUTH_REQUIRED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "ConnectionClosed",
    "FieldError",
    "InvalidParamsData",
    "RpcError",
    "error_object",
    "invalid_params",
    "validation_error",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
AUTH_REQUIRED: Final = -32000
RESOURCE_NOT_FOUND: Final = -32002
REQUEST_CANCELLED: Final = -32800


class ConnectionClosed(Exception):
    """The connection ended (end of input, ``close()``, or the peer stopped reading)."""


class RpcError(Exception):
    """A JSON-RPC error: raise it in a handler to answer with it; ``request()`` raises it too."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"RpcError({self.code}, {brief(self.message)}, {brief(self.data)})"

    def to_error_object(self) -> dict[str, Any]:
        """The ``error`` member of a response (the message folded to one line, and repeated as
        ``data.details``: see ``error_object``)."""
        return error_object(self.code, self.message, self.data)


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC ``error`` object whose human message is also ``data.details``.

    Some clients (Toad) show ``error.data`` and not ``error.message``; with the message in both,
    every client shows it. Object ``data`` keeps its keys (a ``details`` of its own wins); any
    other ``data`` moves under ``data.value``.
    """
    line = one_line(message)
    if data is None:
        details: dict[str, Any] = {"details": line}
    elif type(data) is dict:
        details = {"details": line, **data}
    else:
        details = {"details": line, "value": data}
    return {"code": code, "message": line, "data": details}


class FieldError(TypedDict):
    loc: list[str | int]
    """The field's path in the params (empty: the params as a whole)."""
    msg: str
    type: str
    """What was wrong, as pydantic names it (``missing``, ``string_type``, ``value_error``…)."""


class InvalidParamsData(TypedDict):
    """The ``data`` of every invalid-params error (-32602), besides ``details``."""

    errors: list[FieldError]


def invalid_params(message: str, *loc: str | int, kind: str = "value_error") -> RpcError:
    """-32602 about one field of the params (``loc``: its path), with the data a validation error
    has: ``Invalid params: <message>``."""
    data: InvalidParamsData = {"errors": [{"loc": list(loc), "msg": message, "type": kind}]}
    return RpcError(INVALID_PARAMS, f"Invalid params: {message}", data)


def validation_error(exc: ValidationError) -> RpcError:
    """-32602 for params a pydantic model refused: the first error in the message, all in the data."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    data: InvalidParamsData = {
        "errors": [
            {
                "loc": [part if isinstance(part, str | int) else str(part) for part in error["loc"]],
                "msg": error["msg"],
                "type": error["type"],
            }
            for error in errors
        ]
    }
    first = data["errors"][0]  # pydantic never raises a ValidationError without errors
    where = ".".join(str(part) for part in first["loc"])
    message = f"Invalid params: {where}: {first['msg']}" if where else f"Invalid params: {first['msg']}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return RpcError(INVALID_PARAMS, message, data)
