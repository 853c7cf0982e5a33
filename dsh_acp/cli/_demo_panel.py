"""What the demo's editor keeps from the agent's ``session/update``s: the panel's state (messages,
tool-call cards, the plan, the title), folded in as an editor does, with a note of every update
an editor would trip over; and how a replayed panel differs from the live one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

__all__ = ["Card", "Entry", "Message", "PanelState", "Plan", "differences"]


@dataclass
class Message:
    """A run of ``user_message_chunk``, ``agent_message_chunk`` or ``agent_thought_chunk``."""

    kind: str
    message_id: str | None
    text: str = ""


@dataclass
class Card:
    """A tool call as the editor holds it: the last value of every field the agent sent."""

    call_id: str
    title: str = ""
    kind: str = "other"
    status: str = "pending"
    content: list[dict[str, Any]] = field(default_factory=list)
    locations: list[dict[str, Any]] = field(default_factory=list)
    terminal: bool = False  # announced with _meta.terminal_info
    output: str = ""  # the terminal's text: every _meta.terminal_output chunk, appended
    exit_code: int | None = None
    signal: str | None = None
    exited: bool = False
    permission: tuple[str, str] | None = None  # (what was asked, the answer)
    asking: list[dict[str, Any]] | None = None  # the options, while the question is open
    file_access: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed")


@dataclass
class Plan:
    """One ``plan`` update (each replaces the whole plan)."""

    entries: list[dict[str, Any]]


Entry = Message | Card | Plan
_STATUS_ORDER = {"pending": 0, "in_progress": 1, "completed": 2, "failed": 2}


class PanelState:
    """Applies ``session/update``s as an editor does, and notes what an editor would trip over."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.timeline: list[Entry] = []
        self.plan: Plan | None = None
        """The session's plan: each update replaces it, as an editor's plan panel does."""
        self.cards: dict[str, Card] = {}
        self.title: str | None = None
        self.usage: tuple[int, int] | None = None
        self.commands: list[str] = []
        self.problems: list[str] = []

    def add_user_text(self, text: str) -> None:
        self.timeline.append(Message("user_message_chunk", None, text))

    def apply(self, update: dict[str, Any]) -> None:
        """Fold one update in."""
        kind = update.get("sessionUpdate")
        if kind in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk"):
            self._chunk(kind, update)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool_call(kind, update)
        elif kind == "plan":
            self.plan = Plan(list(update.get("entries") or []))
        elif kind == "session_info_update" and isinstance(update.get("title"), str):
            self.title = update["title"]
        elif kind == "usage_update":
            self.usage = (int(update.get("used", 0)), int(update.get("size", 0)))
        elif kind == "available_commands_update":
            self.commands = [str(c.get("name")) for c in update.get("availableCommands") or []]

    def _chunk(self, kind: str, update: dict[str, Any]) -> None:
        content = update.get("content") or {}
        text = content.get("text", "") if content.get("type") == "text" else f"[{content.get('type')}]"
        message_id = update.get("messageId")
        last = self.timeline[-1] if self.timeline else None
        # Chunks of one message share a messageId (or, without ids, simply follow each other).
        if isinstance(last, Message) and last.kind == kind and last.message_id == message_id:
            last.text += text
        else:
            self.timeline.append(Message(kind, message_id, text))

    def _tool_call(self, kind: str, update: dict[str, Any]) -> None:
        card = self._card(kind, str(update.get("toolCallId")))
        if "title" in update:
            card.title = str(update["title"])
        if "kind" in update:
            card.kind = str(update["kind"])
        if "status" in update:
            self._status(card, str(update["status"]))
        if "content" in update:  # content and locations replace the whole collection
            card.content = list(update["content"] or [])
        if "locations" in update:
            self._locations(card, list(update["locations"] or []))
        self._terminal(card, update.get("_meta") or {})

    def _card(self, kind: str, call_id: str) -> Card:
        """The call's card; a new one at the end of the timeline when the call is new."""
        card = self.cards.get(call_id)
        if card is None:
            if kind == "tool_call_update":
                self.problems.append(f"tool_call_update for {call_id}, which was never announced")
            card = self.cards[call_id] = Card(call_id)
            self.timeline.append(card)
        return card

    def _status(self, card: Card, status: str) -> None:
        backwards = _STATUS_ORDER.get(status, 0) < _STATUS_ORDER.get(card.status, 0)
        if backwards or (card.finished and status != card.status):
            self.problems.append(f"{card.call_id}: status went from {card.status} to {status}")
        card.status = status

    def _locations(self, card: Card, locations: list[Any]) -> None:
        card.locations = locations
        for location in locations:
            if not Path(str(location.get("path", ""))).is_absolute():
                self.problems.append(
                    f"{card.call_id}: location path {location.get('path')!r} is not absolute"
                )

    def _terminal(self, card: Card, meta: dict[str, Any]) -> None:
        """The live terminal an editor draws from the update's ``_meta``."""
        if "terminal_info" in meta:
            card.terminal = True
        if "terminal_output" in meta:
            if not card.terminal:
                self.problems.append(f"{card.call_id}: terminal output for a card without terminal_info")
            card.output += str(meta["terminal_output"].get("data", ""))
        if "terminal_exit" in meta:
            card.exited = True
            card.exit_code = meta["terminal_exit"].get("exit_code")
            card.signal = meta["terminal_exit"].get("signal")

    def open_cards(self) -> list[Card]:
        return [card for card in self.cards.values() if not card.finished]

    def snapshot(self) -> dict[str, Any]:
        """What the panel shows in the end, for comparing a replay with the live run. Live output
        may replay as one chunk and a message as one chunk: only the assembled text counts."""
        return {
            "title": self.title,
            "messages": [(m.kind, m.text) for m in self.timeline if isinstance(m, Message)],
            "plan": self.plan.entries if self.plan else None,
            **{
                f"card {card.call_id}": {
                    "title": card.title,
                    "kind": card.kind,
                    "status": card.status,
                    "content": card.content,
                    "locations": card.locations,
                    "terminal output": card.output,
                    "exit code": (card.exit_code, card.signal) if card.exited else None,
                }
                for card in self.cards.values()
            },
        }


def differences(live: dict[str, Any], replay: dict[str, Any]) -> list[str]:
    """Human-readable differences between two snapshots, one line each."""
    found = []
    for key in dict.fromkeys([*live, *replay]):
        a, b = live.get(key), replay.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += [f"{key}: {d}" for d in differences(a, b)]
        elif a != b:
            found.append(f"{key}: {_first_difference(a, b)}")
    return found


def _first_difference(live: Any, replay: Any) -> str:
    if isinstance(live, str) and isinstance(replay, str):
        a, b = live.splitlines(), replay.splitlines()
        for number, (x, y) in enumerate(zip(a, b, strict=False), start=1):
            if x != y:
                return f"line {number} is {x!r} live but {y!r} in the replay"
        return f"{len(a)} lines live, {len(b)} in the replay"
    return f"{_short(live)} live, {_short(replay)} in the replay"


def _short(value: Any) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= 100 else text[:97] + "..."
