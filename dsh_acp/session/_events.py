"""The session log's events: one typed value per thing that happened.

A session log is a header line, then one event per line (see ``_store``). Every event the agent
writes is one of the classes below (``SessionEvent``); ``_event_lines`` gives each its JSON line
and reads it back. The same values feed ``SessionState.apply`` while the session runs and when it
is loaded, so what a reload restores is what the live session held.

Format 2 is format 1 with one change: a call that never got a result (the turn was cancelled, or
its log failed) is logged as ``tool_cancelled``, not as a result spelling out the cancelled text;
the text the model is then sent is ``CANCELLED_TEXT``, defined once. Format 1 logs still load (a
``tool_result`` marked ``cancelled`` is read as ``tool_cancelled``, a permission keyed by a string
as the rule it now means).

A subagent's turn (the ``task`` tool) is logged in the session's log, each of its events wrapped
in a ``TaskEvent`` naming the task's call: it is the subagent's conversation, not the session's.
An agent that predates it skips these lines as events of a later kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

if TYPE_CHECKING:
    from dsh_acp.models._model import ToolCallRequest
    from dsh_tools import ContentBlock, ToolKind

__all__ = [
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "SUMMARY_PREFIX",
    "AssistantReply",
    "Compacted",
    "ConfigChanged",
    "CostReported",
    "FileChanged",
    "FilesRestored",
    "ModeChanged",
    "PermissionAnswered",
    "PermissionRemoved",
    "SessionEvent",
    "TaskEvent",
    "TitleSet",
    "ToolCalled",
    "ToolCancelled",
    "ToolContext",
    "ToolFinished",
    "TurnStopped",
    "UsageReported",
    "UserPrompt",
]

FORMAT_VERSION: Final = 2
"""The format this agent writes (the header's ``version``)."""
READABLE_VERSIONS: Final = (1, 2)
SUMMARY_PREFIX: Final = "Summary of the conversation so far:\n"
"""What a compaction's summary is preceded by in the conversation the model is sent."""

Rule = Literal["allow", "reject"]
"""Which list of "always" answers a permission event changes."""


@dataclass(slots=True)
class UserPrompt:
    """A prompt the user sent. A slash command is logged with its ``command`` (it is not part of
    the model's conversation, unless the command gave the model an instruction, ``model_content``,
    in place of what the user typed)."""

    tag: ClassVar[str] = "user"
    content: tuple[ContentBlock, ...]
    message_id: str | None = None
    command: str | None = None
    model_content: tuple[ContentBlock, ...] | None = None


@dataclass(slots=True)
class AssistantReply:
    """What one model step said: its text, its reasoning and the tool calls it asked for. An
    ``aside`` is a message the agent showed outside the model (a command's answer)."""

    tag: ClassVar[str] = "assistant"
    text: str = ""
    reasoning: str = ""
    text_id: str | None = None
    thought_id: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] = ()
    aside: bool = False


@dataclass(slots=True)
class ToolContext:
    """Context the tools of a step added for the model (sent as user content)."""

    tag: ClassVar[str] = "context"
    text: str


@dataclass(slots=True)
class ToolCalled:
    """A tool call as the editor first heard of it; ``view`` is the card's render intent as JSON
    (what replay shows when the tool is no longer there to present it again)."""

    tag: ClassVar[str] = "tool_call"
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

    tag: ClassVar[str] = "tool_result"
    call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    error: dict[str, Any] | None = None
    meta: Any = None
    view: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolCancelled:
    """A call that never got a result (the turn was cancelled first)."""

    tag: ClassVar[str] = "tool_cancelled"
    call_id: str


@dataclass(slots=True)
class PermissionAnswered:
    """An "always" answer kept for the session: ``match`` is the rule as JSON."""

    tag: ClassVar[str] = "permission"
    rule: Rule
    match: dict[str, Any]


@dataclass(slots=True)
class PermissionRemoved:
    """An "always" answer the user removed (``/permissions remove``)."""

    tag: ClassVar[str] = "permission_removed"
    rule: Rule
    match: dict[str, Any]


@dataclass(slots=True)
class ModeChanged:
    tag: ClassVar[str] = "mode"
    mode_id: str


@dataclass(slots=True)
class ConfigChanged:
    """One session setting changed (the others are ``None``)."""

    tag: ClassVar[str] = "config"
    model_id: str | None = None
    show_reasoning: bool | None = None
    reasoning_effort: str | None = None


@dataclass(slots=True)
class Compacted:
    """The oldest part of the conversation was replaced by ``summary``; the newest ``kept``
    messages stay after it."""

    tag: ClassVar[str] = "compact"
    summary: str
    text_id: str | None = None
    compaction_id: str | None = None
    kept: int = 0


@dataclass(slots=True)
class UsageReported:
    """What the model's last request used of its window, and the session's cost so far (a
    decimal string, US dollars) when it is known."""

    tag: ClassVar[str] = "usage"
    used: int
    size: int
    cost: str | None = None


@dataclass(slots=True)
class CostReported:
    """The session's cost so far (a decimal string, US dollars) after a request whose usage said
    nothing of the model's window (so no ``UsageReported`` carried it)."""

    tag: ClassVar[str] = "cost"
    cost: str


@dataclass(slots=True)
class TitleSet:
    tag: ClassVar[str] = "title"
    title: str
    updated_at: str | None = None


@dataclass(slots=True)
class TurnStopped:
    """A prompt turn ended (its answer's ``stopReason``)."""

    tag: ClassVar[str] = "stop"
    reason: str


@dataclass(slots=True)
class FileChanged:
    """A tool wrote a file through the session's file system (``_file_journal``): the digest of
    the bytes it held before (kept beside the log for ``/undo``; ``None``: there was no file) and
    of the bytes written (``""``: they cannot be told). ``not_kept`` says why what it held was
    not kept (too large, unreadable), which leaves this change out of reach of ``/undo``."""

    tag: ClassVar[str] = "file"
    path: str
    after: str
    before: str | None = None
    not_kept: str | None = None


@dataclass(slots=True)
class FilesRestored:
    """``/undo`` took back the file changes of turn ``turn`` (its 0-based prompt): the files it
    ``restored`` (to what they held before the turn), those it ``removed`` (the turn created
    them) and those it ``left`` as they are, each with why. ``view`` is its card (a render
    intent as JSON) and ``notice`` the card's first lines, replayed as they were."""

    tag: ClassVar[str] = "undo"
    turn: int
    call_id: str
    restored: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    left: tuple[tuple[str, str], ...] = ()
    view: dict[str, Any] | None = None
    notice: str | None = None


@dataclass(slots=True)
class TaskEvent:
    """What happened in the subagent of the task call ``task_id``: its conversation's events
    (model replies, its tool calls and their results, its compactions). The session's state keeps
    none of it; a replay draws the subagent's calls under or in the task's card."""

    tag: ClassVar[str] = "task"
    task_id: str
    event: SessionEvent


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
    | CostReported
    | TitleSet
    | TurnStopped
    | FileChanged
    | FilesRestored
    | TaskEvent
)
