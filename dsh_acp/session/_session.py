"""A session's state: where it works, its tools, its conversation, its running turn."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

import anyio

from dsh_acp.models._model import Usage
from dsh_acp.models._protocol import Model
from dsh_acp.wire._updates import SessionUpdate, agent_message

from ._events import AssistantReply, SessionEvent
from ._state import SessionState
from ._store import SessionLog, StoreError

if TYPE_CHECKING:
    from dsh_acp.wire._dialect import Dialect
    from dsh_acp.wire._render_context import RenderContext
    from dsh_tools import Services, ToolRegistry

__all__ = ["Session", "SessionIO", "Turn"]


class TurnState(Enum):
    QUEUED = "queued"
    """Waiting for the turn before it to end (a prompt sent while another ran)."""
    RUNNING = "running"
    """Its prompt runs (or answers at once: it was cancelled while queued)."""
    ENDED = "ended"
    """Answered: the session has handed itself to the next queued turn."""


_TURN_MOVES: dict[TurnState, frozenset[TurnState]] = {
    TurnState.QUEUED: frozenset({TurnState.RUNNING, TurnState.ENDED}),
    TurnState.RUNNING: frozenset({TurnState.ENDED}),
    TurnState.ENDED: frozenset(),
}


class Turn:
    """One prompt turn, from its prompt's arrival to its answer: a state (``QUEUED`` →
    ``RUNNING`` → ``ENDED``; a queued turn whose request was itself cancelled ends unrun) and
    whether a cancel was asked. ``cancel`` is synchronous so that ``session/cancel`` acts on a
    turn registered by the ``session/prompt`` read just before it."""

    def __init__(self, *, queued: bool) -> None:
        self.state = TurnState.QUEUED if queued else TurnState.RUNNING
        self.scope = anyio.CancelScope()
        self.cancel_requested = False
        """A cancel was asked: a queued turn never runs, a running one stops."""
        self.running = anyio.Event()
        self.ended = anyio.Event()
        self.log_error: StoreError | None = None
        """The session log failed during the turn: the turn stopped, and the prompt answers this."""
        if not queued:
            self.running.set()

    def _move(self, state: TurnState) -> None:
        if state not in _TURN_MOVES[self.state]:
            raise AssertionError(f"turn: {self.state.value} -> {state.value}")
        self.state = state

    def run(self) -> None:
        """The turn before it ended: this one may run."""
        self._move(TurnState.RUNNING)
        self.running.set()

    def end(self) -> None:
        self._move(TurnState.ENDED)
        self.ended.set()

    def cancel(self) -> None:
        """Stop the turn: the prompt will answer ``cancelled`` (a queued one without running)."""
        self.cancel_requested = True
        self.scope.cancel()


@dataclass(eq=False)
class SessionIO:
    """How a session talks to its client: updates out, requests out."""

    notify: Callable[[str, Any], Awaitable[None]]
    notify_each: Callable[[str, Iterable[Any]], Awaitable[None]]
    """``notify`` for each of many params (a replay's updates), in one call."""
    request: Callable[[str, Any], Awaitable[Any]]


@dataclass(eq=False, slots=True, kw_only=True)  # slots: thousands of idle sessions, no __dict__ each
class Session(SessionState):
    """Everything one ACP session owns: its durable state (``SessionState``, changed only by the
    events it records) and what it runs with."""

    session_id: str
    cwd: str
    model: Model | None
    tool_side: Callable[[Session], tuple[ToolRegistry, Services]]
    """Makes the session's tools and services (see ``registry``) when something first needs them."""
    render: RenderContext
    io: SessionIO
    additional_directories: tuple[str, ...] = ()
    mcp_servers: tuple[dict[str, Any], ...] = ()
    turn: Turn | None = None
    """The running turn."""
    queue: list[Turn] = field(default_factory=list)
    """Prompts sent while a turn runs, in arrival order: each runs when the one before it ends."""
    log: SessionLog | None = None
    """The durable event log (``None`` when the agent keeps no state)."""
    usage: Usage | None = None
    """The last usage the model reported for this conversation."""
    usage_mark: int = -1
    """How much of ``history`` that usage counted (-1: it no longer describes the history)."""
    chars_per_token: float | None = None
    """What the model's reported counts showed for the last request (``None``: no count yet)."""
    titling: bool = False
    """A title is being written for the session (a quick second turn does not ask for another)."""
    _tools: tuple[ToolRegistry, Services] | None = None

    @property
    def registry(self) -> ToolRegistry:
        """The session's layer over the process-wide tools (MCP tools live here). Made on first
        use, with ``services``: an idle session (opened, never prompted) holds neither."""
        if self._tools is None:
            self._tools = self.tool_side(self)
        return self._tools[0]

    @property
    def services(self) -> Services:
        """What the session's tools reach (the client's file system and terminals, its mode)."""
        if self._tools is None:
            self._tools = self.tool_side(self)
        return self._tools[1]

    def cancel_turns(self) -> None:
        """Cancel the running turn and every queued one (``session/cancel``)."""
        for turn in (*([self.turn] if self.turn is not None else []), *self.queue):
            turn.cancel()

    def record(self, event: SessionEvent) -> bool:
        """Append an event to the session log, if the session has one, and apply it to the
        session's state; False if it could not be written during a turn (it is then not applied:
        the state stays what a reload of the log gives).

        Outside a turn a failure raises ``StoreError`` (the request answers it). During a turn it
        stops the turn instead, as a crash at that point would have: calls not logged as finished
        close as failed, the conversation gets what a reload would rebuild from the log, and the
        prompt answers with the error.
        """
        if self.log is not None:
            try:
                self.log.append(event)
            except StoreError as error:
                turn = self.turn
                if turn is None:
                    raise
                if turn.log_error is None:
                    turn.log_error = error
                    turn.cancel()
                return False
        self.apply(event)
        return True

    @property
    def dialect(self) -> Dialect:
        """The wire shapes of the ACP version the session's client speaks (they draw views: the
        first card a session sends loads them, not its making)."""
        from dsh_acp.wire._dialect_of import dialect_of

        return dialect_of(self.render)

    def send(self, update: SessionUpdate | Mapping[str, Any]) -> Awaitable[None]:
        """Send one ``session/update`` of this session (await it).

        The connection's own awaitable, not a coroutine awaiting it: a model's every token is sent
        here, and a coroutine more would be one more frame to run for each."""
        return self.io.notify("session/update", {"sessionId": self.session_id, "update": update})

    async def say(self, text: str, message_id: str) -> None:
        """An agent message outside the model (command answers, configuration hints), logged as
        an aside: the model's conversation does not hold it."""
        await self.send(agent_message(text, message_id))
        self.record(AssistantReply(text, text_id=message_id, aside=True))

    async def set_model(self, model: Model | None) -> None:
        """Switch models (the next model request uses the new one); the old one is closed. The
        model's id is the session's state: a ``ConfigChanged`` event changes it."""
        old, self.model = self.model, model
        await _close_model(old)

    async def aclose(self) -> None:
        """Stop the running turn and the queued ones, and release what the session's tools and
        model hold."""
        self.cancel_turns()
        tools, self._tools = self._tools, None
        if tools is not None:
            tools[0].close()
        with anyio.CancelScope(shield=True):
            if tools is not None:
                await tools[1].aclose()
            await _close_model(self.model)
        if self.log is not None:
            self.log.close()


async def _close_model(model: Model | None) -> None:
    if model is not None:
        await model.aclose()
