"""What a scripted model streams for one step of its script (see ``_scripted``).

A module of its own so that the model's event classes are imported when a scripted model first
streams: the CLI reads and checks a script before the agent answers ``initialize``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import orjson

from ._model import (
    ARGUMENTS_SHOWN,
    Finish,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallRequest,
    ToolCallStart,
    Usage,
)

__all__ = ["step_events"]


async def step_events(step_of: Callable[[], Any]) -> AsyncIterator[ModelEvent]:
    """The events of the step ``step_of`` gives (called when the stream is first read): its
    thought, its text, its tool calls (arguments given as a list stream piece by piece), its
    usage and its finish."""
    step = step_of()
    if step.get("delay_ms"):
        await anyio.sleep(step["delay_ms"] / 1000)
    if step.get("hang"):
        await anyio.sleep_forever()
    if "thought" in step:
        yield ReasoningDelta(step["thought"])
    text = step.get("text")
    for chunk in [text] if isinstance(text, str) else text or ():
        yield TextDelta(chunk)
    calls = step.get("tool_calls") or ()
    for call in calls:
        pieces = call.get("arguments")
        if isinstance(pieces, list):
            yield ToolCallStart(call["id"], call["name"])
            streamed = ""
            for piece in pieces:
                if call.get("pause_ms"):
                    await anyio.sleep(call["pause_ms"] / 1000)
                streamed += piece
                yield ToolCallArguments(call["id"], streamed[:ARGUMENTS_SHOWN])
    for call in calls:
        yield ToolCallRequest(id=call["id"], name=call["name"], arguments=_arguments(call))
    if "usage" in step:
        usage = step["usage"]
        yield Usage(usage["input"], usage["output"], usage.get("context_window"))
    # The script's finish was checked when it was read (``_scripted._FINISH``).
    yield Finish("tool_calls" if calls else step.get("finish", "stop"))


def _arguments(call: dict[str, Any]) -> str:
    """A call's arguments as the model sends them: a JSON text (given as one, in pieces, or as
    the value)."""
    arguments = call.get("arguments", {})
    if isinstance(arguments, list):
        return "".join(arguments)
    if isinstance(arguments, str):
        return arguments
    return orjson.dumps(arguments).decode()
