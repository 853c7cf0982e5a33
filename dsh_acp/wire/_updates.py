"""Every ``session/update`` payload the agent sends (its requests to the client are in
``_client_requests``; the ``data`` of its errors is written where every error is, in ``_connection``).

Pure builders over typed dicts, so that a key is spelled once and a field an editor needs cannot
be forgotten in one of the places that send it. Key order is part of the wire (the goldens pin
every byte), so each builder writes its keys in one fixed order.

Text a person reads as a line (a card's title, a plan entry, a session's title, a notice) is
made ``visible`` here, the one place every such field passes, so that a control character, an
escape sequence or a bidirectional override in it cannot make it show something else
(``rawInput`` and a command's output are left exact).

``session/update`` payloads are the ``update`` object of a ``SessionNotification``; the session
adds its ``sessionId`` when it sends one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NotRequired, TypedDict

from dsh_acp._safe_text import visible

__all__ = [
    "STEP_BREAK",
    "AgentMessageChunk",
    "AgentThoughtChunk",
    "AvailableCommand",
    "AvailableCommandsUpdate",
    "BooleanOption",
    "CompactionStatus",
    "CompactionSummaryChunk",
    "CompactionUpdate",
    "ConfigOption",
    "ConfigOptionUpdate",
    "CurrentModeUpdate",
    "Location",
    "ModeInfo",
    "Notice",
    "NoticeSeverity",
    "Plan",
    "PlanEntry",
    "SelectChoice",
    "SelectOption",
    "SessionInfoUpdate",
    "SessionModeState",
    "SessionUpdate",
    "TextContent",
    "ToolCall",
    "ToolCallCard",
    "ToolCallFields",
    "ToolCallStatus",
    "ToolCallUpdate",
    "UsageUpdate",
    "UserMessageChunk",
    "WireBlock",
    "agent_message",
    "agent_thought",
    "available_commands_update",
    "card_details",
    "compaction_summary_chunk",
    "compaction_update",
    "config_option_update",
    "current_mode_update",
    "notice",
    "plan",
    "session_info_update",
    "text_content",
    "tool_call",
    "tool_call_card",
    "tool_call_update",
    "usage_update",
    "user_message_chunk",
]

WireBlock = dict[str, Any]
"""One ACP ``ContentBlock`` (or a tool call's content item) as JSON: camelCase keys, no nulls."""

ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]
NoticeSeverity = Literal["info", "warning", "error"]
CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]


# -- messages --------------------------------------------------------------------------------


class TextContent(TypedDict):
    type: Literal["text"]
    text: str


def text_content(text: str) -> TextContent:
    """A text ``ContentBlock``."""
    return {"type": "text", "text": text}


class AgentMessageChunk(TypedDict):
    sessionUpdate: Literal["agent_message_chunk"]
    content: TextContent
    messageId: NotRequired[str]


class AgentThoughtChunk(TypedDict):
    sessionUpdate: Literal["agent_thought_chunk"]
    content: TextContent
    messageId: NotRequired[str]


class UserMessageChunk(TypedDict):
    sessionUpdate: Literal["user_message_chunk"]
    content: WireBlock
    messageId: NotRequired[str]


def agent_message(text: str, message_id: str | None = None) -> AgentMessageChunk:
    """A piece of the agent's answer (``messageId`` groups the pieces of one message)."""
    # The content built here, not by text_content: this is the update of a model's every token.
    content: TextContent = {"type": "text", "text": text}
    update: AgentMessageChunk = {"sessionUpdate": "agent_message_chunk", "content": content}
    if message_id:
        update["messageId"] = message_id
    return update


STEP_BREAK = "\n\n"
"""What starts the text of a model step that follows an earlier step's text in the same turn (a
tool call came between). Clients that group chunks by ``messageId`` draw the steps apart anyway
and Markdown drops a leading blank line; a client that ignores ``messageId`` (CodeCompanion)
would otherwise glue "I'll make a plan." to "Running the app…"."""


def agent_thought(text: str, message_id: str | None = None) -> AgentThoughtChunk:
    """A piece of the model's reasoning, shown as a thought."""
    update: AgentThoughtChunk = {"sessionUpdate": "agent_thought_chunk", "content": text_content(text)}
    if message_id:
        update["messageId"] = message_id
    return update


def user_message_chunk(block: WireBlock, message_id: str | None = None) -> UserMessageChunk:
    """One block of what the user sent (a replay shows the prompts again)."""
    update: UserMessageChunk = {"sessionUpdate": "user_message_chunk", "content": block}
    if message_id:
        update["messageId"] = message_id
    return update


# -- tool calls ------------------------------------------------------------------------------


class Location(TypedDict):
    path: str
    """Absolute."""
    line: NotRequired[int]


class ToolCallFields(TypedDict, total=False):
    """What a tool card shows, announced or updated (the bridge draws these from the views)."""

    toolCallId: str
    title: str
    name: str
    kind: str
    content: list[WireBlock]
    locations: list[Location]
    rawInput: dict[str, Any]
    _meta: dict[str, Any]


class ToolCallCard(ToolCallFields):
    """A card with its status: the ``toolCall`` of a permission request."""

    status: ToolCallStatus


class ToolCall(ToolCallCard):
    sessionUpdate: Literal["tool_call"]


class ToolCallUpdate(TypedDict):
    sessionUpdate: Literal["tool_call_update"]
    toolCallId: str
    status: NotRequired[ToolCallStatus]
    title: NotRequired[str]
    name: NotRequired[str]
    kind: NotRequired[str]
    content: NotRequired[list[WireBlock]]
    locations: NotRequired[list[Location]]
    rawInput: NotRequired[dict[str, Any]]
    rawOutput: NotRequired[dict[str, Any]]
    _meta: NotRequired[dict[str, Any]]


def tool_call(fields: ToolCallFields, status: ToolCallStatus) -> ToolCall:
    """The ``tool_call`` that announces a card."""
    card: ToolCall = {"sessionUpdate": "tool_call", **fields, "status": status}
    if "title" in card:
        card["title"] = visible(card["title"])
    return card


def tool_call_card(fields: ToolCallFields, status: ToolCallStatus) -> ToolCallCard:
    """A card as a permission request carries it."""
    card: ToolCallCard = {**fields, "status": status}
    if "title" in card:
        card["title"] = visible(card["title"])
    return card


def tool_call_update(
    call_id: str,
    status: ToolCallStatus | None = None,
    *,
    title: str | None = None,
    content: list[WireBlock] | None = None,
    locations: list[Location] | None = None,
    raw_output: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> ToolCallUpdate:
    """A change to a card: only the fields given change (a ``content`` replaces all of it)."""
    update: ToolCallUpdate = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
    if status is not None:
        update["status"] = status
    if title is not None:
        update["title"] = visible(title)
    if content is not None:
        update["content"] = content
    if locations is not None:
        update["locations"] = locations
    if raw_output is not None:
        update["rawOutput"] = raw_output
    if meta is not None:
        update["_meta"] = meta
    return update


def card_details(card: ToolCall) -> ToolCallUpdate:
    """A card's announcement sent as an update of a card the client already shows (one that
    appeared while its arguments were streaming)."""
    return {**card, "sessionUpdate": "tool_call_update"}  # type: ignore[typeddict-item]


class PlanEntry(TypedDict):
    content: str
    priority: str
    status: str


class Plan(TypedDict):
    sessionUpdate: Literal["plan"]
    entries: list[PlanEntry]


def plan(entries: Iterable[PlanEntry]) -> Plan:
    """The session's plan: the complete list of entries, every time."""
    shown: list[PlanEntry] = [{**entry, "content": visible(entry["content"])} for entry in entries]
    return {"sessionUpdate": "plan", "entries": shown}


# -- the session around the conversation ----------------------------------------------------


class AvailableCommand(TypedDict):
    name: str
    description: str
    input: NotRequired[dict[str, str]]


class AvailableCommandsUpdate(TypedDict):
    sessionUpdate: Literal["available_commands_update"]
    availableCommands: list[AvailableCommand]


def available_commands_update(commands: Iterable[tuple[str, str, str | None]]) -> AvailableCommandsUpdate:
    """The slash commands the client may offer: ``(name, description, input hint)`` each."""
    return {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {"name": name, "description": description, **({"input": {"hint": hint}} if hint else {})}  # type: ignore[typeddict-item]
            for name, description, hint in commands
        ],
    }


class CurrentModeUpdate(TypedDict):
    sessionUpdate: Literal["current_mode_update"]
    currentModeId: str


def current_mode_update(mode_id: str) -> CurrentModeUpdate:
    """The session's permission mode changed."""
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode_id}


class SelectChoice(TypedDict):
    value: str
    name: str
    description: NotRequired[str]


class SelectOption(TypedDict):
    """A picker of one value among ``options`` (the model, the mode, the reasoning effort)."""

    id: str
    name: str
    description: NotRequired[str]
    category: str
    type: Literal["select"]
    currentValue: str
    options: list[SelectChoice]


class BooleanOption(TypedDict):
    """A switch (only for clients that advertised ``session.configOptions.boolean``)."""

    id: str
    name: str
    description: str
    type: Literal["boolean"]
    currentValue: bool


ConfigOption = SelectOption | BooleanOption


class ModeInfo(TypedDict):
    id: str
    name: str
    description: str


class SessionModeState(TypedDict):
    """The ``modes`` of a session's answer: the current mode and every mode there is."""

    currentModeId: str
    availableModes: list[ModeInfo]


class ConfigOptionUpdate(TypedDict):
    sessionUpdate: Literal["config_option_update"]
    configOptions: list[ConfigOption]


def config_option_update(options: list[ConfigOption]) -> ConfigOptionUpdate:
    """The complete list of the session's config options, after one of them changed."""
    return {"sessionUpdate": "config_option_update", "configOptions": options}


class SessionInfoUpdate(TypedDict):
    sessionUpdate: Literal["session_info_update"]
    title: str
    updatedAt: NotRequired[str]


def session_info_update(title: str, updated_at: str | None = None) -> SessionInfoUpdate:
    """The session's title (and when it last changed)."""
    update: SessionInfoUpdate = {"sessionUpdate": "session_info_update", "title": visible(title)}
    if updated_at:
        update["updatedAt"] = updated_at
    return update


class Cost(TypedDict):
    amount: float
    currency: Literal["USD"]


class UsageUpdate(TypedDict):
    sessionUpdate: Literal["usage_update"]
    used: int
    size: int
    cost: NotRequired[Cost]


def usage_update(used: int, size: int, cost: float | None = None) -> UsageUpdate:
    """How full the context window is, and what the session cost so far (US dollars)."""
    update: UsageUpdate = {"sessionUpdate": "usage_update", "used": used, "size": size}
    if cost is not None:
        update["cost"] = {"amount": cost, "currency": "USD"}
    return update


class Notice(TypedDict):
    sessionUpdate: Literal["notice"]
    severity: NoticeSeverity
    title: str
    description: NotRequired[str]


def notice(severity: NoticeSeverity, title: str, description: str | None = None) -> Notice:
    """Something that happened around the conversation (only for clients that advertised
    ``session.notices``): a live event, never part of the session's history."""
    update: Notice = {"sessionUpdate": "notice", "severity": severity, "title": visible(title or severity)}
    if description:
        update["description"] = visible(description, lines=True)
    return update


class CompactionUpdate(TypedDict):
    sessionUpdate: Literal["compaction_update"]
    compactionId: str
    status: CompactionStatus
    summary: NotRequired[list[TextContent]]


def compaction_update(
    compaction_id: str, status: CompactionStatus, summary: str | None = None
) -> CompactionUpdate:
    """A compaction's state (only for clients that advertised ``session.compaction``)."""
    update: CompactionUpdate = {
        "sessionUpdate": "compaction_update",
        "compactionId": compaction_id,
        "status": status,
    }
    if summary is not None:
        update["summary"] = [text_content(summary)]
    return update


class CompactionSummaryChunk(TypedDict):
    sessionUpdate: Literal["compaction_summary_chunk"]
    compactionId: str
    content: TextContent


def compaction_summary_chunk(compaction_id: str, text: str) -> CompactionSummaryChunk:
    """A piece of a compaction's summary, for clients that show compactions."""
    return {
        "sessionUpdate": "compaction_summary_chunk",
        "compactionId": compaction_id,
        "content": text_content(text),
    }


SessionUpdate = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCall
    | ToolCallUpdate
    | Plan
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | SessionInfoUpdate
    | UsageUpdate
    | Notice
    | CompactionUpdate
    | CompactionSummaryChunk
)
"""Any ``update`` of a ``session/update`` notification the agent sends."""
