"""The session log's events: one typed value per thing that happened, and its JSON line.

A session log is a header line, then one event per line (see ``_store``). Every event the agent
writes is one of the classes below (``SessionEvent``); ``event_json`` gives its line and
``parse_event`` reads one back. The same values feed ``SessionState.apply`` while the session runs
and when it is loaded, so what a reload restores is what the live session held.

Format 2 is format 1 with one change: a call that never got a result (the turn was cancelled, or
its log failed) is logged as ``tool_cancelled``, not as a result spelling out the cancelled text;
the text the model is then sent is ``CANCELLED_TEXT``, defined once. Format 1 logs still load (a
``tool_result`` marked ``cancelled`` is read as ``tool_cancelled``, a permission keyed by a string
as the rule it now means).

Reading is built for logs of 100,000 events: no validation library on the way (pydantic is only
met for content blocks other than text and, on replay, for the logged view of a tool that is no
longer registered); a line that does not have its event's fields is skipped like a torn one.
"""

from __future__ import annotations

import functools
import gc
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from dsh_acp.models._model import ToolCallRequest

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from dsh_tools import ContentBlock, ToolKind

__all__ = [
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "SUMMARY_PREFIX",
    "AssistantReply",
    "Compacted",
    "ConfigChanged",
    "ModeChanged",
    "PermissionAnswered",
    "PermissionRemoved",
    "SessionEvent",
    "TitleSet",
    "ToolCalled",
    "ToolCancelled",
    "ToolContext",
    "ToolFinished",
    "TurnStopped",
    "UsageReported",
    "UserPrompt",
    "blocks_from_wire",
    "collector_paused",
    "event_json",
    "parse_event",
]

_log = logging.getLogger("dsh_acp.events")

FORMAT_VERSION: Final = 2
"""The format this agent writes (the header's ``version``)."""
READABLE_VERSIONS: Final = (1, 2)
SUMMARY_PREFIX: Final = "Summary of the conversation so far:\n"
"""What a compaction's summary is preceded by in the conversation the model is sent."""

Rule = Literal["allow", "reject"]


@dataclass(slots=True)
class UserPrompt:
    """A prompt the user sent. A slash command is logged with its ``command`` (it is not part of
    the model's conversation, unless the command gave the model an instruction, ``model_content``,
    in place of what the user typed)."""

    content: tuple[ContentBlock, ...]
    message_id: str | None = None
    command: str | None = None
    model_content: tuple[ContentBlock, ...] | None = None


@dataclass(slots=True)
class AssistantReply:
    """What one model step said: its text, its reasoning and the tool calls it asked for. An
    ``aside`` is a message the agent showed outside the model (a command's answer)."""

    text: str = ""
    reasoning: str = ""
    text_id: str | None = None
    thought_id: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] = ()
    aside: bool = False


@dataclass(slots=True)
class ToolContext:
    """Context the tools of a step added for the model (sent as user content)."""

    text: str


@dataclass(slots=True)
class ToolCalled:
    """A tool call as the editor first heard of it; ``view`` is the card's render intent as JSON
    (what replay shows when the tool is no longer there to present it again)."""

    call_id: str
    name: str
    arguments: Any
    kind: ToolKind = "other"
    view: dict[str, Any] | None = None
    notice: str | None = None
    cwd: str | None = None


@dataclass(slots=True)
class ToolFinished:
    """A call's result: the content the model sees, the tool's ``meta`` (what its result
    presenter reads) and the result view as JSON (kept for replay when the tool is gone)."""

    call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    error: dict[str, Any] | None = None
    meta: Any = None
    view: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolCancelled:
    """A call that never got a result (the turn was cancelled first)."""

    call_id: str


@dataclass(slots=True)
class PermissionAnswered:
    """An "always" answer kept for the session: ``match`` is the rule as JSON."""

    rule: Rule
    match: dict[str, Any]


@dataclass(slots=True)
class PermissionRemoved:
    """An "always" answer the user removed (``/permissions remove``)."""

    rule: Rule
    match: dict[str, Any]


@dataclass(slots=True)
class ModeChanged:
    mode_id: str


@dataclass(slots=True)
class ConfigChanged:
    """One session setting changed (the others are ``None``)."""

    model_id: str | None = None
    show_reasoning: bool | None = None
    reasoning_effort: str | None = None


@dataclass(slots=True)
class Compacted:
    """The oldest part of the conversation was replaced by ``summary``; the newest ``kept``
    messages stay after it."""

    summary: str
    text_id: str | None = None
    compaction_id: str | None = None
    kept: int = 0


@dataclass(slots=True)
class UsageReported:
    """What the model's last request used of its window, and the session's cost so far (a
    decimal string, US dollars) when it is known."""

    used: int
    size: int
    cost: str | None = None


@dataclass(slots=True)
class TitleSet:
    title: str
    updated_at: str | None = None


@dataclass(slots=True)
class TurnStopped:
    """A prompt turn ended (its answer's ``stopReason``)."""

    reason: str


SessionEvent = (
    UserPrompt
    | AssistantReply
    | ToolContext
    | ToolCalled
    | ToolFinished
    | ToolCancelled
    | PermissionAnswered
    | PermissionRemoved
    | ModeChanged
    | ConfigChanged
    | Compacted
    | UsageReported
    | TitleSet
    | TurnStopped
)


# -- writing -------------------------------------------------------------------------------------


def _wire(blocks: Iterable[ContentBlock]) -> list[dict[str, Any]]:
    return [block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in blocks]


def event_json(event: SessionEvent) -> dict[str, Any]:
    """The log line of ``event`` (the store adds its timestamp)."""
    if type(event) is UserPrompt:
        out: dict[str, Any] = {
            "type": "user",
            "content": _wire(event.content),
            "message_id": event.message_id,
        }
        if event.command is not None:
            out["command"] = event.command
        if event.model_content is not None:
            out["model_content"] = _wire(event.model_content)
        return out
    if type(event) is AssistantReply:
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in event.tool_calls]
        if event.aside:
            return {
                "type": "assistant",
                "text": event.text,
                "text_id": event.text_id,
                "tool_calls": calls,
                "aside": True,
            }
        return {
            "type": "assistant",
            "text": event.text,
            "reasoning": event.reasoning,
            "text_id": event.text_id,
            "thought_id": event.thought_id,
            "tool_calls": calls,
        }
    if type(event) is ToolContext:
        return {"type": "context", "text": event.text}
    if type(event) is ToolCalled:
        out = {
            "type": "tool_call",
            "call_id": event.call_id,
            "name": event.name,
            "arguments": event.arguments,
            "kind": event.kind,
            "view": event.view,
        }
        if event.notice:
            out["notice"] = event.notice
        if event.cwd:
            out["cwd"] = event.cwd
        return out
    if type(event) is ToolFinished:
        return {
            "type": "tool_result",
            "call_id": event.call_id,
            "content": _wire(event.content),
            "is_error": event.is_error,
            "error": event.error,
            "meta": event.meta,
            "view": event.view,
        }
    if type(event) is ToolCancelled:
        return {"type": "tool_cancelled", "call_id": event.call_id}
    if type(event) is PermissionAnswered:
        return {"type": "permission", "rule": event.rule, "match": event.match}
    if type(event) is PermissionRemoved:
        return {"type": "permission_removed", "rule": event.rule, "match": event.match}
    if type(event) is ModeChanged:
        return {"type": "mode", "mode_id": event.mode_id}
    if type(event) is ConfigChanged:
        out = {"type": "config"}
        if event.model_id is not None:
            out["model_id"] = event.model_id
        if event.show_reasoning is not None:
            out["show_reasoning"] = event.show_reasoning
        if event.reasoning_effort is not None:
            out["reasoning_effort"] = event.reasoning_effort
        return out
    if type(event) is Compacted:
        return {
            "type": "compact",
            "summary": event.summary,
            "text_id": event.text_id,
            "compaction_id": event.compaction_id,
            "kept": event.kept,
        }
    if type(event) is UsageReported:
        out = {"type": "usage", "used": event.used, "size": event.size}
        if event.cost is not None:
            out["cost"] = event.cost
        return out
    if type(event) is TitleSet:
        return {"type": "title", "title": event.title, "updated_at": event.updated_at}
    assert type(event) is TurnStopped
    return {"type": "stop", "reason": event.reason}


# -- reading -------------------------------------------------------------------------------------


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a log is read, applied and replayed: that builds
    an object or more per event and frees none, and the collector would scan the growing heap
    over and over for nothing (most of the time of a large load)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class BadEvent(ValueError):
    """A log line that is JSON but not an event of its type."""


@functools.cache
def _block_adapter() -> TypeAdapter[ContentBlock]:
    from pydantic import TypeAdapter

    from dsh_tools import ContentBlock

    return TypeAdapter(ContentBlock)


@functools.cache
def _text_block() -> Any:
    from dsh_tools import TextBlock

    return TextBlock


def blocks_from_wire(raw: Any) -> tuple[ContentBlock, ...]:
    """Content blocks from their logged (ACP) form. A plain text block, nearly every block a log
    holds, is built by its own constructor (four times quicker than ``model_construct``, which
    resolves every default in Python, and than the union's adapter); a block that no longer
    validates is left out."""
    if not isinstance(raw, list):
        raise BadEvent("content is not a list")
    text_block = _text_block()
    out = []
    for item in raw:
        if (
            type(item) is dict
            and len(item) == 2
            and item.get("type") == "text"
            and type(item.get("text")) is str
        ):
            out.append(text_block(text=item["text"]))
            continue
        from pydantic import ValidationError

        try:
            out.append(_block_adapter().validate_python(item))
        except ValidationError:
            _log.warning("session log: skipping a content block that no longer validates")
    return tuple(out)


def _str(record: dict[str, Any], key: str) -> str:
    value = record[key]
    if type(value) is not str:
        raise BadEvent(f"{key} is not a string")
    return value


def _opt_str(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    return value if type(value) is str else None


def _opt_dict(record: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = record.get(key)
    return value if type(value) is dict else None


def _rule(record: dict[str, Any]) -> Rule:
    return "allow" if record.get("rule") == "allow" else "reject"


def _user(r: dict[str, Any]) -> UserPrompt:
    model_content = r.get("model_content")
    return UserPrompt(
        blocks_from_wire(r.get("content", [])),
        _opt_str(r, "message_id"),
        _opt_str(r, "command"),
        blocks_from_wire(model_content) if model_content else None,
    )


def _assistant(r: dict[str, Any]) -> AssistantReply:
    calls = r.get("tool_calls") or ()
    return AssistantReply(
        r.get("text") or "",
        r.get("reasoning") or "",
        _opt_str(r, "text_id"),
        _opt_str(r, "thought_id"),
        tuple(ToolCallRequest(_str(c, "id"), _str(c, "name"), _str(c, "arguments")) for c in calls),
        r.get("aside") is True,
    )


@functools.cache
def _tool_kinds() -> frozenset[str]:
    from typing import get_args

    from dsh_tools import ToolKind

    return frozenset(get_args(ToolKind))


def _tool_call(r: dict[str, Any]) -> ToolCalled:
    kind = r.get("kind")
    return ToolCalled(
        _str(r, "call_id"),
        _str(r, "name"),
        r.get("arguments"),
        kind if kind in _tool_kinds() else "other",
        _opt_dict(r, "view"),
        _opt_str(r, "notice"),
        _opt_str(r, "cwd"),
    )


def _tool_result(r: dict[str, Any]) -> ToolFinished | ToolCancelled:
    if r.get("cancelled"):  # format 1 spelled out the cancelled result
        return ToolCancelled(_str(r, "call_id"))
    return ToolFinished(
        _str(r, "call_id"),
        blocks_from_wire(r.get("content", [])),
        bool(r.get("is_error")),
        _opt_dict(r, "error"),
        r.get("meta"),
        _opt_dict(r, "view"),
    )


def _permission(r: dict[str, Any]) -> PermissionAnswered:
    match = r.get("match")
    if type(match) is not dict:
        # Format 1 logged early answers as a key string: the rule it now means, if any.
        from dsh_acp.permissions._approvals import migrate_key

        rule = migrate_key(r.get("key"))
        if rule is None:
            raise BadEvent("a permission answer with no rule")
        match = rule.to_json()
    return PermissionAnswered(_rule(r), match)


def _permission_removed(r: dict[str, Any]) -> PermissionRemoved:
    match = r.get("match")
    if type(match) is not dict:
        raise BadEvent("a removed permission with no rule")
    return PermissionRemoved(_rule(r), match)


def _config(r: dict[str, Any]) -> ConfigChanged:
    show = r.get("show_reasoning")
    return ConfigChanged(
        _opt_str(r, "model_id"), show if type(show) is bool else None, _opt_str(r, "reasoning_effort")
    )


def _compact(r: dict[str, Any]) -> Compacted:
    kept = r.get("kept")
    summary = r.get("summary")
    return Compacted(
        summary if type(summary) is str else "",
        _opt_str(r, "text_id"),
        _opt_str(r, "compaction_id"),
        kept if type(kept) is int and kept > 0 else 0,
    )


def _usage(r: dict[str, Any]) -> UsageReported:
    used, size, cost = r["used"], r["size"], r.get("cost")
    if type(used) is not int or type(size) is not int:
        raise BadEvent("usage without its counts")
    return UsageReported(used, size, None if cost is None else str(cost))


def _title(r: dict[str, Any]) -> TitleSet | None:
    title = r.get("title")
    return TitleSet(title, _opt_str(r, "updated_at")) if type(title) is str and title else None


_READERS: Final[dict[str, Callable[[dict[str, Any]], SessionEvent | None]]] = {
    "user": _user,
    "assistant": _assistant,
    "context": lambda r: ToolContext(r.get("text") or ""),
    "tool_call": _tool_call,
    "tool_result": _tool_result,
    "tool_cancelled": lambda r: ToolCancelled(_str(r, "call_id")),
    "permission": _permission,
    "permission_removed": _permission_removed,
    "mode": lambda r: ModeChanged(_str(r, "mode_id")),
    "config": _config,
    "compact": _compact,
    "usage": _usage,
    "title": _title,
    "stop": lambda r: TurnStopped(_str(r, "reason")),
}


def parse_event(record: dict[str, Any]) -> SessionEvent | None:
    """The event a log line holds; ``None`` for a kind this agent does not know (written by a
    later one: it is left out). ``BadEvent`` when the line lacks its kind's fields."""
    reader = _READERS.get(record.get("type"))  # type: ignore[arg-type]
    if reader is None:
        return None
    try:
        return reader(record)
    except (KeyError, TypeError, AttributeError) as error:
        raise BadEvent(f"{record.get('type')} event: {error!r}") from None
