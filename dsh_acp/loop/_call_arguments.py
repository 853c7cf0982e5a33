"""The model's tool calls checked before the editor hears of them.

A model can send anything: arguments nested deeper than the wire encoder allows (JSON encoders stop
at a few hundred levels, and a card that cannot be encoded is a card the editor never sees, followed
by updates for it), arguments of many megabytes, or two calls with the same id (whose updates would
land on one card). Each call gets a unique id here, and a call whose arguments cannot be shown or
run is named with the reason, so it becomes a ``failed`` card of its own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

import orjson

from dsh_acp.models._model import ToolCallRequest
from dsh_tools import bound_text

__all__ = ["MAX_ARGUMENT_BYTES", "MAX_ARGUMENT_DEPTH", "parse_arguments", "with_unique_id"]

MAX_ARGUMENT_DEPTH: Final = 64
"""Nesting levels of one call's arguments (tool schemas need a handful; encoders stop at ~255)."""

MAX_ARGUMENT_BYTES: Final = 1024 * 1024
"""UTF-8 bytes of one call's argument text (a model's whole answer is rarely a tenth of this)."""

_SHOWN_BYTES: Final = 2048  # of rejected arguments, shown on the card as the raw text


def with_unique_id(call: ToolCallRequest, taken: set[str]) -> ToolCallRequest:
    """``call``, renamed ``<id>-2``, ``<id>-3``… if an earlier call of the turn has its id; the id
    is then taken."""
    call_id = call.id
    if call_id in taken:
        number = 2
        while f"{call.id}-{number}" in taken:
            number += 1
        call_id = f"{call.id}-{number}"
        call = replace(call, id=call_id)
    taken.add(call_id)
    return call


def parse_arguments(text: str) -> tuple[Any, str | None]:
    """The arguments of a call and, if they cannot be run, why (then the arguments returned are
    the raw text, cut to a size a card can show).

    Text that is not JSON is returned as is, without a problem: the tool's own validation tells
    the model what was wrong, as for any other wrong arguments.
    """
    size = len(text) if len(text) <= MAX_ARGUMENT_BYTES // 4 else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_ARGUMENT_BYTES:
        return _shown(text), (
            f"invalid arguments: {size} bytes, more than the {MAX_ARGUMENT_BYTES} a call may have"
        )
    if not text.strip():
        return {}, None
    try:
        arguments = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        if str(error).startswith("depth limit exceeded"):
            return _shown(text), _too_deep()
        return text, None
    if _depth_exceeds(arguments, MAX_ARGUMENT_DEPTH):
        return _shown(text), _too_deep()
    return arguments, None


def _too_deep() -> str:
    return f"invalid arguments: nested deeper than {MAX_ARGUMENT_DEPTH} levels"


def _shown(text: str) -> str:
    return bound_text(text, head=_SHOWN_BYTES, tail=0)


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children: Any = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
