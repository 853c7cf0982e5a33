"""A session event's JSON line: ``event_json`` writes it, ``parse_event`` reads it back.

Reading is built for logs of 100,000 events: no validation library on the way (pydantic is only
met for content blocks other than text and, on replay, for the logged view of a tool that is no
longer registered); a line that does not have its event's fields is skipped like a torn one.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Final, get_args

from dsh_acp.models._model import ToolCallRequest
from dsh_acp.permissions._rules import migrate_key
from dsh_tools import ToolKind

from ._events import (
    AssistantReply,
    Compacted,
    ConfigChanged,
    CostReported,
    FileChanged,
    FilesRestored,
    ModeChanged,
    PermissionAnswered,
    PermissionRemoved,
    Rule,
    SessionEvent,
    TaskEvent,
    TitleSet,
    ToolCalled,
    ToolCancelled,
    ToolContext,
    ToolFinished,
    TurnStopped,
    UsageReported,
    UserPrompt,
)

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from dsh_tools import ContentBlock

__all__ = ["BadEvent", "blocks_from_wire", "event_json", "parse_event"]

_log = logging.getLogger("dsh_acp.events")


# -- writing -------------------------------------------------------------------------------------


def _wire(blocks: Iterable[ContentBlock]) -> list[dict[str, Any]]:
    return [block.model_dump(by_alias=True, exclude_none=True, mode="json") for block in blocks]


def _calls(calls: Iterable[ToolCallRequest]) -> list[dict[str, Any]]:
    return [{"id": call.id, "name": call.name, "arguments": call.arguments} for call in calls]


_MISSING: Final = object()


_Field = tuple[str, Any, Callable[[Any], Any] | None]
_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(kind: type) -> tuple[_Field, ...]:
    """Each field of an event class: its name, its default (``_MISSING``: none) and what turns its
    value into JSON (``None``: it is JSON already). Fields are read from the dataclass, so a new
    field is logged without code here; the types that need converting are named by their
    annotation."""
    out = []
    for field in dataclasses.fields(kind):
        annotation = str(field.type)
        encode: Callable[[Any], Any] | None = None
        if "ContentBlock" in annotation:
            encode = _wire
        elif "ToolCallRequest" in annotation:
            encode = _calls
        elif "SessionEvent" in annotation:  # a subagent's event, inside its task's
            encode = event_json
        default = field.default if field.default is not dataclasses.MISSING else _MISSING
        out.append((field.name, default, encode))
    return tuple(out)


def event_json(event: SessionEvent) -> dict[str, Any]:
    """The log line of ``event`` (the store adds its timestamp): its ``tag`` as the type, then
    each field under its own name, left out while it holds its default."""
    out: dict[str, Any] = {"type": event.tag}
    for name, default, encode in _fields(type(event)):
        value = getattr(event, name)
        if value is default or (default is not _MISSING and value == default):
            continue
        out[name] = value if encode is None or value is None else encode(value)
    return out


# -- reading -------------------------------------------------------------------------------------


class BadEvent(ValueError):
    """A log line that is JSON but not an event of its type."""


@functools.cache
def _block_adapter() -> TypeAdapter[ContentBlock]:
    # pydantic and the content blocks: with the first line that needs them, not for an idle session
    from pydantic import TypeAdapter

    from dsh_tools import ContentBlock

    return TypeAdapter(ContentBlock)


@functools.cache
def _text_block() -> Any:
    from dsh_tools import TextBlock

    return TextBlock


def blocks_from_wire(raw: Any) -> tuple[ContentBlock, ...]:
    """Content blocks from their logged (ACP) form. A plain text block, nearly every block a log
    holds, is built by its own constructor (``model_construct`` resolves every default in Python,
    and the union's adapter tries each kind); a block that no longer validates is left out."""
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
        tuple(ToolCallRequest(_str(c, "id"), _str(c, "name"), _str(c, "arguments")) for c in calls)
        if calls
        else (),
        r.get("aside") is True,
    )


@functools.cache
def _tool_kinds() -> frozenset[str]:
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


def _file(r: dict[str, Any]) -> FileChanged:
    return FileChanged(_str(r, "path"), _str(r, "after"), _opt_str(r, "before"), _opt_str(r, "not_kept"))


def _paths(r: dict[str, Any], key: str) -> tuple[str, ...]:
    value = r.get(key) or ()
    return tuple(item for item in value if type(item) is str)


def _undo(r: dict[str, Any]) -> FilesRestored:
    turn = r["turn"]
    if type(turn) is not int:
        raise BadEvent("an undo of no turn")
    left = tuple(
        (item[0], item[1])
        for item in r.get("left") or ()
        if type(item) is list and len(item) == 2 and all(type(part) is str for part in item)
    )
    return FilesRestored(
        turn,
        _str(r, "call_id"),
        _paths(r, "restored"),
        _paths(r, "removed"),
        left,
        _opt_dict(r, "view"),
        _opt_str(r, "notice"),
    )


def _task(r: dict[str, Any]) -> TaskEvent | None:
    inner = r.get("event")
    if type(inner) is not dict or inner.get("type") == TaskEvent.tag:
        raise BadEvent("a task event without its event")
    event = parse_event(inner)
    return TaskEvent(_str(r, "task_id"), event) if event is not None else None


_Reader = Callable[[dict[str, Any]], SessionEvent | None]
_READERS: Final[dict[type, _Reader]] = {
    UserPrompt: _user,
    AssistantReply: _assistant,
    ToolContext: lambda r: ToolContext(r.get("text") or ""),
    ToolCalled: _tool_call,
    ToolFinished: _tool_result,
    ToolCancelled: lambda r: ToolCancelled(_str(r, "call_id")),
    PermissionAnswered: _permission,
    PermissionRemoved: _permission_removed,
    ModeChanged: lambda r: ModeChanged(_str(r, "mode_id")),
    ConfigChanged: _config,
    Compacted: _compact,
    UsageReported: _usage,
    CostReported: lambda r: CostReported(str(Decimal(_str(r, "cost")))),
    TitleSet: _title,
    TurnStopped: lambda r: TurnStopped(_str(r, "reason")),
    FileChanged: _file,
    FilesRestored: _undo,
    TaskEvent: _task,
}
# Every event of the union, read back by its tag: an event class without a reader stops the
# import here, before any log is read.
_BY_TAG: Final[dict[str, _Reader]] = {kind.tag: _READERS[kind] for kind in get_args(SessionEvent)}


def parse_event(record: dict[str, Any]) -> SessionEvent | None:
    """The event a log line holds; ``None`` for a kind this agent does not know (written by a
    later one: it is left out). ``BadEvent`` when the line lacks its kind's fields."""
    reader = _BY_TAG.get(record.get("type"))  # type: ignore[arg-type]
    if reader is None:
        return None
    try:
        return reader(record)
    except (KeyError, TypeError, AttributeError, InvalidOperation) as error:
        raise BadEvent(f"{record.get('type')} event: {error!r}") from None
