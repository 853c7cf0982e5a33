"""Render intents: how a tool wants its calls and results shown in a UI.

A tool returns one of these from ``present_call`` / ``present_result``; a UI bridge switches on
``card`` and never on the tool's name. They are provider-neutral: nothing here knows ACP.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._content import ContentBlock
from ._kinds import TOOL_KINDS, ToolKind

__all__ = [
    "TOOL_KINDS",
    "DiffCallView",
    "DiffResultView",
    "FileDiff",
    "GenericCallView",
    "GenericResultView",
    "Location",
    "PlanEntry",
    "PlanView",
    "TerminalCallView",
    "TerminalResultView",
    "ToolCallView",
    "ToolKind",
    "ToolResultView",
]

_CONFIG = ConfigDict(frozen=True, defer_build=True, extra="forbid")


class _View(BaseModel):
    model_config = _CONFIG


class Location(_View):
    """A file a call reads or changes, so a UI can follow along. ``line`` is 1-based."""

    path: str
    line: Annotated[int, Field(ge=1)] | None = None


class FileDiff(_View):
    """One file's change. ``old_text=None`` means the file is new."""

    path: str
    old_text: str | None
    new_text: str


class GenericCallView(_View):
    """The default card: a title, an icon kind, the salient input, extra content, locations."""

    card: Literal["generic"] = "generic"
    title: str
    kind: ToolKind = "other"
    raw_input: Any = None
    content: tuple[ContentBlock, ...] = ()
    locations: tuple[Location, ...] = ()


class TerminalCallView(_View):
    """A shell command: the command is the title, ``description`` shows above it, ``cwd`` heads it."""

    card: Literal["terminal"] = "terminal"
    title: str
    description: str | None = None
    cwd: str | None = None
    """Where it runs: absolute, or relative to the session's folder (the UI resolves it); ``None``: there."""


class DiffCallView(_View):
    """A file create/modify shown as an inline diff before it runs."""

    card: Literal["diff"] = "diff"
    title: str
    diffs: tuple[FileDiff, ...]
    locations: tuple[Location, ...] = ()


class PlanEntry(_View):
    """One item of a plan."""

    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


class PlanView(_View):
    """The agent's whole plan (every entry, every time): a UI shows it as a plan, not a tool card."""

    card: Literal["plan"] = "plan"
    entries: tuple[PlanEntry, ...]


ToolCallView = Annotated[
    GenericCallView | TerminalCallView | DiffCallView | PlanView, Field(discriminator="card")
]
"""What ``present_call`` returns: the pending state of one call."""


class GenericResultView(_View):
    """A finished call: an optional new title and the content to show (default: the raw result)."""

    card: Literal["generic"] = "generic"
    title: str | None = None
    content: tuple[ContentBlock, ...] | None = None


class TerminalResultView(_View):
    """A finished command: its captured output and exit status."""

    card: Literal["terminal"] = "terminal"
    title: str | None = None
    output: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    error: str | None = None
    """Why the command failed (timed out, cancelled, could not start): a UI shows it as the
    terminal's last line rather than replacing the terminal."""
    note: str | None = None
    """A line about the run shown after its output (what the sandbox refused it)."""


class DiffResultView(_View):
    """A finished file change: the applied hunks (they replace the call-time diff)."""

    card: Literal["diff"] = "diff"
    title: str | None = None
    diffs: tuple[FileDiff, ...]
    locations: tuple[Location, ...] | None = None


ToolResultView = Annotated[
    GenericResultView | TerminalResultView | DiffResultView | PlanView, Field(discriminator="card")
]
"""What ``present_result`` returns: the completed state of one call."""
