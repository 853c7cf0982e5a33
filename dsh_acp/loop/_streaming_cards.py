"""Cards for the tool calls of a response that is still streaming.

A call is shown (``pending``) as soon as its name streams in, because its arguments may take
seconds. While they come, the card is retitled by the tool's own presenter, the one that titles
the complete call, run on the part that has arrived: a write of a long file reads "Write
src/app.py" while its content streams rather than "write". When the response is complete, the
call's full card is sent as an update of the card already shown; a call that never completed is
closed as ``failed``.

A plan tool's call (its presenter gives a ``PlanView``) is never a card: its entries are shown as
the session's plan while they stream, each once it is whole (the next one has begun). The call's
result then sends the plan it keeps; a call that keeps none (it fails, is cut off, or the turn is
cancelled) gives the editor the plan it showed before back (``withdraw``).

The arguments are the model's, so anything goes: text that does not parse, values of the wrong
type, a presenter that raises. All of that leaves the card as it is. Retitling is throttled
(only on growth, at most every ``_INTERVAL``) so that a call streamed in thousands of tiny
pieces costs a few parses, not thousands.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

import anyio
from anyio.abc import TaskGroup
from pydantic_core import from_json

from dsh_acp.models._model import ToolCallArguments, ToolCallRequest, ToolCallStart
from dsh_acp.wire._bridge import CallInfo, relativize_title
from dsh_tools import DiffCallView, GenericCallView, PlanView, TerminalCallView, shown_text

from ._call_arguments import with_unique_id

if TYPE_CHECKING:
    from dsh_acp.session._session import Session
    from dsh_tools import ToolDefinition

__all__ = ["StreamingCards", "preview_plan", "preview_title"]

_log = logging.getLogger("dsh_acp.streaming")

_GROWTH: Final = 1.25
"""The arguments are parsed again once they are this many times as long as at the last parse."""

_INTERVAL: Final = 0.1
"""Seconds between two new titles of one card, at least."""

_TITLE_CHARS: Final = 200
"""A title previewed from streaming arguments is cut here (the complete card has the whole)."""

_NEXT_KEY: Final = re.compile(r'\s*(?:"[^"\\]*"?\s*:?\s*)?')
"""What may follow the comma after an object's last complete member: the next key, begun."""

_MISSING: Final = "\x00missing\x00"
"""Stands for a required string argument that has not arrived: a title that shows it needs it."""


def preview_title(definition: ToolDefinition, text: str, cwd: str) -> str | None:
    """The title the tool's presenter gives arguments that are still streaming (``text``, the
    start of their JSON), or ``None`` while it would need what has not arrived yet."""
    arguments = _complete_members(text)
    if arguments is None or not _fill_missing(definition.parameters, arguments):
        return None
    view = definition.streaming_view(arguments)
    if not isinstance(view, GenericCallView | DiffCallView) or _MISSING in view.title:
        return None
    title = shown_text(relativize_title(view.title, cwd))
    return title if len(title) <= _TITLE_CHARS else title[: _TITLE_CHARS - 1] + "…"


def preview_plan(definition: ToolDefinition, text: str) -> PlanView | None:
    """The plan the tool's presenter gives arguments that are still streaming (``text``), with
    only the entries that are whole: the last item of the list still arriving is left out, since
    the parser reads a half-written entry as complete (``{"content": "Fix the`` is an entry
    without its status, or with half its content)."""
    try:
        arguments = from_json(text, allow_partial=True, cache_strings="keys")
    except ValueError:
        return None
    if not isinstance(arguments, dict) or not arguments:
        return None
    key = next(reversed(arguments))
    if isinstance(arguments[key], list):
        arguments[key] = arguments[key][:-1]
    if not _fill_missing(definition.parameters, arguments):
        return None
    view = definition.streaming_view(arguments)
    if not isinstance(view, PlanView) or not view.entries:
        return None
    if any(_MISSING in entry.content for entry in view.entries):
        return None
    return view


def _complete_members(text: str) -> dict[str, Any] | None:
    """The members of the JSON object that ``text`` begins whose values are complete."""
    if text.rstrip().endswith("}"):  # perhaps complete (a failed parse costs, so only then)
        try:
            whole = from_json(text, cache_strings="keys")
            return whole if isinstance(whole, dict) else None
        except ValueError:
            pass
    try:
        arguments = from_json(text, allow_partial=True, cache_strings="keys")
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    if arguments:
        # The parser leaves an unfinished string out, but not an unfinished number, list or
        # object (``12`` may become ``123``): such a last value counts once a comma follows it.
        key = next(reversed(arguments))
        value = arguments[key]
        if not isinstance(value, str) and not _followed_by_comma(text, key, value):
            del arguments[key]
    return arguments


def _followed_by_comma(text: str, key: str, value: Any) -> bool:
    comma = text.rfind(",")
    if comma < 0 or not _NEXT_KEY.fullmatch(text, comma + 1):
        return False
    try:
        before = from_json(text[:comma] + "}", cache_strings="keys")
    except ValueError:
        return False  # the comma is inside the value
    return isinstance(before, dict) and key in before and before[key] == value


def _fill_missing(schema: dict[str, Any], arguments: dict[str, Any], probe: bool = False) -> bool:
    """Put the placeholder in for every required string argument not there yet; False if a
    required argument of another type is missing (no placeholder can stand for it in a title).
    A ``probe`` (which kind of card the tool shows, before any argument came) also stands in
    empty lists and objects for those."""
    required = schema.get("required")
    if not isinstance(required, list):
        return True
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    for name in required:
        if name in arguments:
            continue
        kind = properties.get(name, {}).get("type") if isinstance(properties.get(name), dict) else None
        if kind == "string":
            arguments[name] = _MISSING
        elif probe and kind in _EMPTY:
            arguments[name] = _EMPTY[kind]()
        else:
            return False
    return True


_EMPTY: Final[dict[str, Any]] = {"array": list, "object": dict}


@dataclass(eq=False, slots=True)
class _Preview:
    """What a streaming call shows of its arguments (a card's title, a plan), and the throttle of
    the partial parses that remake it."""

    definition: ToolDefinition
    parsed: int = 0
    """Length of the arguments at the last parse."""
    changed: float = 0.0
    """When what it shows last changed (``time.monotonic``)."""
    held: str | None = None
    """Arguments the throttle held back (parsed when the interval is over, if no piece came)."""

    def due(self, text: str) -> float | None:
        """The time now if ``text`` is to be parsed again (it grew enough, and what it shows
        changed at least ``_INTERVAL`` ago), which counts as its parse; else ``None`` (and the
        text is held when only the interval stands in the way)."""
        if len(text) < self.parsed * _GROWTH:
            if self.held is not None:
                self.held = text  # the timer parses the newest
            return None
        now = time.monotonic()
        if self.changed and now - self.changed < _INTERVAL:
            self.held = text
            return None
        self.parsed = len(text)
        self.held = None
        return now


@dataclass(eq=False, slots=True)
class _Card(_Preview):
    call_id: str = ""
    title: str = ""
    """The title the editor shows now."""


@dataclass(eq=False, slots=True)
class _Plan(_Preview):
    shown: tuple[tuple[str, str, str], ...] | None = None
    """The entries last shown while the call streamed (``None``: none yet)."""


class StreamingCards:
    """The cards of the calls announced while they streamed, until each gets its full card.

    ``call_ids`` is every tool-call id of the turn, shared with the turn: each card has its own.
    """

    def __init__(self, session: Session, call_ids: set[str]) -> None:
        self._session = session
        self._call_ids = call_ids
        self._ids: dict[str, str] = {}
        """The ids the model gave the calls of this response, to the unique ids they were given."""
        self._cards: dict[str, _Card] = {}
        self._plans: dict[str, _Plan] = {}
        """The streaming calls of plan tools, by unique id, until their call is taken."""
        self._timers: TaskGroup | None = None
        self._waiting: set[_Card | _Plan] = set()
        """The previews a timer will parse again."""

    async def started(self, start: ToolCallStart) -> None:
        """A ``pending`` card for a call whose arguments are still streaming (titled by its tool
        until they say more). Not for calls shown otherwise: a plan, a terminal."""
        if start.id in self._ids:
            return
        call_id = with_unique_id(ToolCallRequest(start.id, start.name, ""), self._call_ids).id
        self._ids[start.id] = call_id
        definition = self._session.registry.get(start.name)
        if definition is None or definition.kind == "execute":
            return
        # A plan or a terminal is shown as such once complete, never as a card: the presenter
        # says which on stand-ins for the arguments (none it can judge by: a card).
        probe: dict[str, Any] = {}
        view = (
            definition.streaming_view(probe)
            if _fill_missing(definition.parameters, probe, probe=True)
            else None
        )
        if isinstance(view, PlanView):
            self._plans[call_id] = _Plan(definition)
            return
        if isinstance(view, TerminalCallView):
            return
        info = CallInfo(call_id=call_id, name=start.name, arguments={}, view=None, kind=definition.kind)
        self._cards[call_id] = _Card(definition, call_id=call_id, title=start.name)
        session = self._session
        for update in session.dialect.early_card(info, session.render):
            await session.send(update)

    @asynccontextmanager
    async def timers(self) -> AsyncIterator[None]:
        """While a response streams: a preview the throttle held back is shown when its interval
        is over, though no piece comes after it (a model may pause for seconds mid-call)."""
        failed: Exception | None = None
        async with anyio.create_task_group() as group:
            self._timers = group
            try:
                yield
            except Exception as error:  # the response's own (the model's): raised as it is, below
                failed = error
            finally:
                self._timers = None
                group.cancel_scope.cancel()
        if failed is not None:
            raise failed

    async def grew(self, event: ToolCallArguments) -> None:
        """The call's arguments grew: retitle its card if the presenter now says more."""
        call_id = self._ids.get(event.id)
        if call_id is None:
            return
        card = self._cards.get(call_id)
        if card is not None:
            await self._card_grew(card, event.text)
        elif call_id in self._plans:
            await self._plan_grew(self._plans[call_id], event.text)

    async def _card_grew(self, card: _Card, text: str) -> None:
        if card.definition.present_call is None:
            return
        if (now := card.due(text)) is None:
            self._hold(card)
            return
        title = preview_title(card.definition, text, self._session.cwd)
        if title is None or title == card.title:
            return
        card.title, card.changed = title, now
        await self._session.send(self._session.dialect.retitled(card.call_id, title))

    async def _plan_grew(self, stream: _Plan, text: str) -> None:
        """Show the entries of a streaming plan that are whole, when there are more of them (on
        growth, at most every ``_INTERVAL``, as a card's title)."""
        if (now := stream.due(text)) is None:
            self._hold(stream)
            return
        view = preview_plan(stream.definition, text)
        if view is None:
            return
        entries = tuple((e.content, e.priority, e.status) for e in view.entries)
        if entries == stream.shown:
            return
        stream.shown, stream.changed = entries, now
        await self._session.send(self._session.dialect.plan(view))

    def _hold(self, preview: _Card | _Plan) -> None:
        """Parse the held arguments once the interval is over (once per preview and interval)."""
        if preview.held is None or self._timers is None or preview in self._waiting:
            return
        self._waiting.add(preview)
        self._timers.start_soon(self._when_due, preview)

    async def _when_due(self, preview: _Card | _Plan) -> None:
        try:
            await anyio.sleep(max(preview.changed + _INTERVAL - time.monotonic(), 0.0))
        finally:
            self._waiting.discard(preview)
        text = preview.held
        if text is None:
            return  # a later piece was parsed meanwhile
        try:
            if isinstance(preview, _Card):
                if self._cards.get(preview.call_id) is preview:
                    await self._card_grew(preview, text)
            elif preview in self._plans.values():
                await self._plan_grew(preview, text)
        except Exception:  # the connection is gone: the response's next update says so
            _log.debug("a held preview could not be shown", exc_info=True)

    def take_plan(self, call_id: str) -> bool:
        """Whether a plan was shown while the call streamed (its result must then replace it:
        with the plan it keeps, else by ``withdraw``)."""
        stream = self._plans.pop(call_id, None)
        return stream is not None and stream.shown is not None

    async def withdraw(self) -> None:
        """Show the session's plan again in place of one shown while a call streamed."""
        await self._session.send(self._session.dialect.logged_plan(self._session.plan))

    def complete(self, request: ToolCallRequest) -> ToolCallRequest:
        """The complete call, under the unique id its card has (a call that did not stream
        gets its unique id now)."""
        call_id = self._ids.pop(request.id, None)
        if call_id is None:
            return with_unique_id(request, self._call_ids)
        return request if call_id == request.id else replace(request, id=call_id)

    def take(self, call_id: str) -> bool:
        """Whether the call has a card shown since it streamed (then its full card is sent as an
        update of it, and it is no longer retitled)."""
        return self._cards.pop(call_id, None) is not None

    async def response_ended(self, complete: set[str]) -> None:
        """The response is over (also when it failed or was cancelled): the cards of calls that
        never completed are closed as ``failed``."""
        self._ids.clear()
        for call_id in [call_id for call_id in self._cards if call_id not in complete]:
            del self._cards[call_id]
            await self._session.send(self._session.dialect.status(call_id, "failed"))
        shown = False
        for call_id in [call_id for call_id in self._plans if call_id not in complete]:
            shown = self.take_plan(call_id) or shown
        if shown:
            await self.withdraw()

    async def close_all(self) -> None:
        """After a cancel: every card still waiting for its full card is closed as ``failed``."""
        await self.response_ended(set())
