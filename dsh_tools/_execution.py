"""One tool call on its way through the pipeline, its outcome, and the gate decisions."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ._tasks import SessionTasks

if TYPE_CHECKING:  # pydantic models: the execution types themselves work without pydantic
    from ._content import ContentBlock

__all__ = [
    "Accept",
    "Allow",
    "ApprovalSubject",
    "Approver",
    "Ask",
    "Block",
    "CommandSubject",
    "Deny",
    "DispatchObserver",
    "PathSubject",
    "PostToolDecision",
    "PreToolDecision",
    "ProgressEvent",
    "ProgressSink",
    "Services",
    "TerminalAttached",
    "TerminalOutput",
    "ToolErrorInfo",
    "ToolExecution",
    "ToolExecutionResult",
    "ToolResult",
]

T = TypeVar("T")
_log = logging.getLogger("dsh_tools")


@dataclass(frozen=True, slots=True)
class TerminalOutput:
    """A chunk of a running command's output (decoded text, in order, never repeated)."""

    data: str
    kind: Literal["terminal_output"] = "terminal_output"


@dataclass(frozen=True, slots=True)
class TerminalAttached:
    """The command now runs in the host's own terminal ``terminal_id`` (an ACP client's, created
    with ``terminal/create``): the client shows its output, so no ``TerminalOutput`` follows."""

    terminal_id: str
    kind: Literal["terminal_attached"] = "terminal_attached"


ProgressEvent = TerminalOutput | TerminalAttached
"""What a running tool can report to whoever called ``execute``."""

ProgressSink = Callable[[ProgressEvent], Awaitable[None]]
"""Receives progress events; awaiting it is the tool's backpressure."""


class Services:
    """A type-keyed map of per-session services a tool may use (a file system, a task table...).

    The harness stays ignorant of what they are: a host registers them, tools look them up by
    type and fall back to a default when absent.
    """

    __slots__ = ("_hidden", "_items", "_parent")

    def __init__(self, *items: object) -> None:
        self._items: dict[type[Any], object] = {}
        self._parent: Services | None = None
        self._hidden: tuple[type[Any], ...] = ()
        for item in items:
            self.add(item)

    def layer(self, without: Iterable[type[Any]] = ()) -> Services:
        """These services as a subagent's tools see them: without the types in ``without`` (its
        commands must not run in the client's terminals, where a client shows them as the
        session's own). What the layer adds is its own; what a tool keeps with ``setdefault``
        (files read, background tasks) is still these services'."""
        view = Services()
        view._parent = self
        view._hidden = tuple(without)
        return view

    def add(self, item: object, *, as_type: type[Any] | None = None) -> None:
        """Register ``item`` under its own type (or ``as_type``), replacing an earlier one."""
        self._items[as_type or type(item)] = item

    def get(self, type_: type[T]) -> T | None:
        """The service registered as ``type_`` (or as a subclass of it), else ``None``."""
        item = self._items.get(type_)
        if item is None:
            for registered in self._items.values():
                if isinstance(registered, type_):
                    return registered
            if self._parent is None:
                return None
            found = self._parent.get(type_)
            return None if found is None or isinstance(found, self._hidden) else found
        assert isinstance(item, type_)
        return item

    def setdefault(self, type_: type[T], factory: Callable[[], T]) -> T:
        """The service registered as ``type_``, created with ``factory`` on first use.

        This is how a tool keeps per-session state (files read, background tasks) without the
        host knowing about it: the host owns one ``Services`` per session and closes it.
        """
        if self._parent is not None and not issubclass(type_, self._hidden):
            return self._parent.setdefault(type_, factory)
        item = self.get(type_)
        if item is None:
            item = factory()
            self._items[type_] = item
        return item

    def __iter__(self) -> Iterator[object]:
        """The services this one holds (a layer's own, then those it shows of the one below)."""
        yield from self._items.values()
        if self._parent is not None:
            yield from (item for item in self._parent if not isinstance(item, self._hidden))

    async def aclose(self) -> None:
        """Close every service that has ``aclose()`` or ``close()`` (last added, first closed);
        a layer closes only its own.

        A failing close is logged and does not stop the others.
        """
        for item in reversed(list(self._items.values())):
            try:
                aclose = getattr(item, "aclose", None)
                if aclose is not None:
                    await aclose()
                    continue
                close = getattr(item, "close", None)
                if close is not None:
                    close()
            except Exception:
                _log.exception("closing session service %r failed", item)


@dataclass(frozen=True, slots=True)
class ToolErrorInfo:
    """The machine-routable class of a failure: the ``HarnessError``'s ``name`` and ``code``."""

    name: str
    code: str


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the call run."""

    kind: Literal["allow"] = "allow"


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the call; the model reads ``Error: <reason>``."""

    reason: str
    kind: Literal["deny"] = "deny"


@dataclass(frozen=True, slots=True)
class CommandSubject:
    """What a call asks about: it runs the shell command line ``command`` in ``cwd`` (a real
    path), with the sandbox widened by ``widen`` (``dsh_tools.sandbox.Widening`` tokens). A
    remembered answer then covers commands, never the whole tool, and a widened command only
    with that very widening."""

    command: str
    cwd: str | None = None
    widen: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PathSubject:
    """What a call asks about: it would ``verb`` (read, write, edit...) the file or folder whose
    real path (symlinks resolved) is ``path``; ``shown`` is how the call named it."""

    verb: str
    path: str
    shown: str


ApprovalSubject = CommandSubject | PathSubject
"""What exactly a person is asked to allow, so that "always" means that and nothing wider."""


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask a person (through the execution's ``approver``); without one this is a deny.

    ``subject`` says what the question is about when that is narrower than the tool (a path
    outside the workspace); without it the tool's declared ``approval_subject`` is used.
    """

    reason: str | None = None
    subject: ApprovalSubject | None = None
    kind: Literal["ask"] = "ask"


PreToolDecision = Allow | Deny | Ask


@dataclass(frozen=True, slots=True)
class Accept:
    """Keep the result, optionally replacing its content and attaching model context."""

    content: tuple[ContentBlock, ...] | None = None
    additional_context: str | None = None
    kind: Literal["accept"] = "accept"


@dataclass(frozen=True, slots=True)
class Block:
    """Turn the result into an error whose content is ``feedback``."""

    feedback: str
    additional_context: str | None = None
    kind: Literal["block"] = "block"


PostToolDecision = Accept | Block

Approver = Callable[["ToolExecution", Ask], Awaitable[Allow | Deny]]
"""Decides an ``ask``: typically announces the call as pending and waits for a person."""

DispatchObserver = Callable[["ToolExecution"], Awaitable[None]]
"""Called once the gate let a call through, just before the tool body runs."""


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """One pending tool call and the context it runs in.

    Cancellation is structured: cancelling the task that awaits ``ToolRegistry.execute`` cancels
    the tool body, which must clean up in ``finally`` (or ``except`` + re-raise).
    """

    call_id: str
    name: str
    arguments: Any
    """The parsed JSON arguments, or the raw string when the model's JSON did not parse."""
    cwd: str | None = None
    """The session's working directory: relative paths resolve against it, never the process cwd."""
    session_id: str | None = None
    additional_directories: tuple[str, ...] = ()
    services: Services = field(default_factory=Services)
    progress: ProgressSink | None = None
    approver: Approver | None = None
    on_dispatch: DispatchObserver | None = None

    async def report(self, event: ProgressEvent) -> None:
        """Send a progress event to the caller (a no-op when nobody listens)."""
        if self.progress is not None:
            await self.progress(event)

    @property
    def tasks(self) -> SessionTasks | None:
        """Where work that outlives this call runs (as long as the session), or ``None`` when
        the host registered no ``SessionTasks`` for the session."""
        return self.services.get(SessionTasks)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a result presenter sees: the model-facing content, the error flag, the tool's meta."""

    content: tuple[ContentBlock, ...]
    is_error: bool = False
    meta: Any = None


@dataclass(frozen=True, slots=True)
class ToolExecutionResult:
    """The outcome of one call after the whole pipeline."""

    call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    error: ToolErrorInfo | None = None
    additional_context: str | None = None
    meta: Any = None
    """The tool's opaque, JSON-serializable presentation payload (successful calls only)."""

    def as_tool_result(self) -> ToolResult:
        """The view of this outcome that ``present_result`` receives."""
        return ToolResult(content=self.content, is_error=self.is_error, meta=self.meta)
