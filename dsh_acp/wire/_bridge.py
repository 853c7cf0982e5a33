"""The render bridge: tools' render intents → ACP ``session/update`` payloads.

Pure functions of ``(call | result | output, RenderContext)``: the live run and a replay of the
session log go through the same code, so a replay leaves the editor exactly where the live run
left it. The bridge switches on card kinds, never on tool names.

Each function returns the ``update`` object of a ``SessionNotification`` (the caller adds the
``sessionId``). Text a person reads on a card (the notice, a description, a presenter's call
content, a failure's reason) is made ``visible`` where it leaves here, and titles where every
update is built (``_updates``); what a tool reads or runs (``rawInput``, output, diffs, paths) is
left exact. Wire conventions (what editors implement): paths in ``locations`` and ``diff.path`` are
absolute (a view's relative path is resolved against the session cwd); titles show paths inside
the session cwd relative to it; a terminal card on a capable
client carries its output in ``_meta`` and never ``content`` (which would wipe the terminal).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from dsh_acp._safe_text import visible
from dsh_tools import (
    ContentBlock,
    DiffCallView,
    DiffResultView,
    FileDiff,
    GenericCallView,
    GenericResultView,
    Location,
    PlanView,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolCallView,
    ToolKind,
    ToolResult,
    ToolResultView,
    bound_text,
    fenced,
    text_of,
)

from ._client_profile import TerminalKey
from ._render_context import RenderContext
from ._steps import StepList, nested
from ._updates import (
    AgentMessageChunk,
    CompactionSummaryChunk,
    Plan,
    ToolCall,
    ToolCallCard,
    ToolCallFields,
    ToolCallStatus,
    ToolCallUpdate,
    WireBlock,
    agent_message,
    card_details,
    compaction_summary_chunk,
    plan,
    tool_call,
    tool_call_card,
    tool_call_update,
)
from ._updates import Location as WireLocation

__all__ = [
    "CallInfo",
    "RenderContext",
    "ToolCallStatus",
    "absolute",
    "announce_call",
    "attach_terminal",
    "cancelled_call",
    "child_question",
    "finish_call",
    "logged_plan_update",
    "output_chunk",
    "permission_tool_call",
    "plan_update",
    "raw_input",
    "relativize_title",
    "steps_card",
    "steps_update",
    "summary_chunk",
    "wire_block",
]


@dataclass(slots=True)
class CallInfo:
    """One tool call as the bridge sees it (nothing changes one once it is made: it is not frozen
    because a frozen dataclass sets each field through ``object.__setattr__``, which made its
    construction a tenth of a replayed card's bookkeeping)."""

    call_id: str
    name: str
    arguments: Any
    """Parsed JSON arguments, or the model's raw string when they did not parse."""
    view: ToolCallView | None = None
    kind: ToolKind = "other"
    """The tool's declared kind, used by the generic card when the tool has no presenter."""
    notice: str | None = None
    """Why the user is asked and what the call really reaches (a real path, the directory a
    command runs in), shown on the card above what the tool presents."""
    cwd: str | None = None
    """The real directory a command runs in, when the agent resolved it."""

    @property
    def is_terminal(self) -> bool:
        """Whether the call renders as a terminal."""
        return isinstance(self.view, TerminalCallView)


# -- small pieces ---------------------------------------------------------------------------

_ABS_PATH = re.compile(r"(?<![\w.~/-])/[^\s'\"`()\[\]{}<>,;:]*")


# Titles and paths repeat across a session's cards (the same file read, edited, read again), and a
# long session's replay draws every card again: the two pure string functions keep their last
# answers (bounded, so a session of many distinct paths costs a miss, never memory).
@functools.lru_cache(maxsize=1024)
def relativize_title(title: str, cwd: str) -> str:
    """Show absolute paths inside ``cwd`` relative to it; anything else stays as it is.

    ``/w/src/a.py`` with cwd ``/w`` becomes ``src/a.py``; ``/w`` itself becomes ``.``; a sibling
    such as ``/w2/x`` (which would relativize to ``../w2/x``) stays absolute.
    """
    if "/" not in title:
        return title  # no path in it (most call titles: ``Read notes.txt``)
    root = cwd.rstrip("/") or "/"
    # ``relpath`` normalises both paths again on every call; for a normalised root the path
    # under it is just the rest of the string.
    quick = root != "/" and os.path.normpath(root) == root

    def replace(match: re.Match[str]) -> str:
        path = match.group(0)
        trail = ""
        while path.endswith((".", "/")) and len(path) > 1 and path != root:
            # A sentence's full stop or a directory's slash is not part of the comparison.
            if path.endswith("/") and os.path.normpath(path) == root:
                break
            trail, path = path[-1] + trail, path[:-1]
        normal = os.path.normpath(path)
        if normal == root:
            return "." + trail
        if root == "/" or normal.startswith(root + "/"):
            if quick:
                return normal[len(root) + 1 :] + trail
            return os.path.relpath(normal, root) + trail
        return match.group(0)

    return _ABS_PATH.sub(replace, title)


def wire_block(block: ContentBlock) -> WireBlock:
    """A content block as an ACP ``ContentBlock`` (camelCase keys, no nulls)."""
    if type(block) is TextBlock and block.annotations is None:
        return {"type": "text", "text": block.text}  # what model_dump gives, at a tenth of the cost
    return block.model_dump(by_alias=True, exclude_none=True, mode="json")


def _content(blocks: Iterable[ContentBlock]) -> list[WireBlock]:
    return [{"type": "content", "content": wire_block(block)} for block in blocks]


def _shown(blocks: Iterable[ContentBlock]) -> list[WireBlock]:
    """``_content`` of blocks a person reads as the card's text: their text made ``visible``."""
    return _content(
        TextBlock(text=visible(block.text, lines=True), annotations=block.annotations)
        if isinstance(block, TextBlock)
        else block
        for block in blocks
    )


def _shown_text(*texts: str | None) -> list[WireBlock]:
    return _shown(TextBlock(text=text) for text in texts if text)


@functools.lru_cache(maxsize=1024)
def absolute(path: str, cwd: str) -> str:
    """A view's path as the wire wants it: absolute, a relative one resolved against the
    session cwd (a presenter sees only the arguments, which may be relative)."""
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(cwd, path))


def _diff_blocks(diffs: Iterable[FileDiff], cwd: str) -> list[WireBlock]:
    return [
        {"type": "diff", "path": absolute(d.path, cwd), "oldText": d.old_text, "newText": d.new_text}
        for d in diffs
    ]


def _locations(locations: Iterable[Location], cwd: str) -> list[WireLocation]:
    out: list[WireLocation] = []
    for loc in locations:
        path = absolute(loc.path, cwd)
        out.append({"path": path} if loc.line is None else {"path": path, "line": loc.line})
    return out


def _diff_locations(diffs: Sequence[FileDiff], cwd: str) -> list[WireLocation]:
    return [{"path": path} for path in dict.fromkeys(absolute(d.path, cwd) for d in diffs)]


def _exit_line(exit_code: int | None, signal: str | None) -> str | None:
    if signal:
        return f"Killed by {signal}"
    if exit_code not in (None, 0):
        return f"Exit code {exit_code}"
    return None


def raw_input(info: CallInfo, presented: Any = None) -> dict[str, Any]:
    """The call's ``rawInput``: always a JSON object, because typed clients (Toad) reject a call
    whose ``rawInput`` is anything else, although the schema allows any value.

    A presenter's object wins; else the model's arguments when they are an object; arguments
    that did not parse go under ``"arguments"`` as the text the model sent, and a presenter's
    non-object value under ``"input"``.
    """
    for value in (presented, info.arguments):
        if type(value) is dict or isinstance(value, Mapping):  # the ABC check is slow; JSON is dicts
            return dict(value)
    if presented is not None:
        return {"input": presented}
    return {"arguments": info.arguments}


def summary_chunk(
    text: str, message_id: str, compaction_id: str, ctx: RenderContext
) -> CompactionSummaryChunk | AgentMessageChunk:
    """A piece of a ``/compact`` summary: part of the compaction for clients that show them,
    else an agent message."""
    if ctx.compaction:
        return compaction_summary_chunk(compaction_id, text)
    return agent_message(text, message_id)


def plan_update(view: PlanView) -> Plan:
    """A plan view as an ACP ``plan`` update: the complete list of entries, every time."""
    return plan({"content": e.content, "priority": e.priority, "status": e.status} for e in view.entries)


def logged_plan_update(entries: Sequence[Any]) -> Plan:
    """``plan_update`` of a plan view's entries as the session log keeps them (JSON). The log is
    ours, but a hand-edited one must not stop a session: what is not an entry is left out."""
    return plan(
        {
            "content": str(e.get("content", "")),
            "priority": str(e.get("priority", "medium")),
            "status": str(e.get("status", "pending")),
        }
        for e in entries
        if isinstance(e, dict)
    )


# -- the call ------------------------------------------------------------------------------


def _terminal_input(info: CallInfo, view: TerminalCallView) -> dict[str, Any]:
    """A terminal card's ``rawInput``: the model's arguments (the command, its description…),
    or, when they are not an object, the command the card shows."""
    if isinstance(info.arguments, Mapping):
        return dict(info.arguments)
    described = {"description": view.description} if view.description else {}
    return {"command": view.title, **described}


def _call_fields(info: CallInfo, ctx: RenderContext) -> ToolCallFields:
    fields = _view_fields(info, ctx)
    if info.notice:
        fields["content"] = [*_shown_text(info.notice), *fields.get("content", ())]
    return fields


def _view_fields(info: CallInfo, ctx: RenderContext) -> ToolCallFields:
    view = info.view
    fields: ToolCallFields = {"toolCallId": info.call_id}
    if isinstance(view, TerminalCallView):
        fields.update({"title": view.title, "name": info.name, "kind": "execute"})
        _terminal_cards(ctx).announce(fields, info, view, ctx)
    elif isinstance(view, DiffCallView):
        fields.update(
            {
                "title": relativize_title(view.title, ctx.cwd),
                "name": info.name,
                "kind": "edit",
                "content": _diff_blocks(view.diffs, ctx.cwd),
                "locations": _locations(view.locations, ctx.cwd)
                if view.locations
                else _diff_locations(view.diffs, ctx.cwd),
            }
        )
    elif isinstance(view, GenericCallView):
        fields.update({"title": relativize_title(view.title, ctx.cwd), "name": info.name, "kind": view.kind})
        if view.raw_input is not None:
            fields["rawInput"] = raw_input(info, view.raw_input)
        fields["content"] = _shown(view.content)
        fields["locations"] = _locations(view.locations, ctx.cwd)
    else:  # no presenter, or it declined: the default generic card
        fields.update({"title": info.name, "name": info.name, "kind": info.kind, "rawInput": raw_input(info)})
    return fields


def announce_call(info: CallInfo, status: ToolCallStatus, ctx: RenderContext) -> ToolCall:
    """The ``tool_call`` that announces a call (``pending`` while a person decides)."""
    return tool_call(_call_fields(info, ctx), status)


def permission_tool_call(info: CallInfo, ctx: RenderContext) -> ToolCallCard:
    """The ``toolCall`` of ``session/request_permission``: the call's card, so the editor can
    attach its buttons to what it already shows."""
    return tool_call_card(_call_fields(info, ctx), "pending")


def _attached_content(info: CallInfo, terminal_id: str, note: str | None = None) -> list[WireBlock]:
    # The same blocks the call was announced with (a content update replaces them all), the
    # client's terminal in place of nothing.
    description = info.view.description if isinstance(info.view, TerminalCallView) else None
    return [
        *_shown_text(info.notice, description),
        {"type": "terminal", "terminalId": terminal_id},
        *_shown_text(note),
    ]


def attach_terminal(info: CallInfo, terminal_id: str) -> ToolCallUpdate:
    """The card once its command runs in the client's own terminal ``terminal_id``: the client
    shows the live output there."""
    return tool_call_update(info.call_id, content=_attached_content(info, terminal_id))


# -- a call's own calls (a subagent's) ------------------------------------------------------


def _with_steps(info: CallInfo, steps: StepList, ctx: RenderContext) -> ToolCallFields:
    """The card's title and content while it lists its own calls: the newest one still going
    after its title (a collapsed card shows that much), the lines after its content."""
    fields = _call_fields(info, ctx)
    title = fields.get("title", info.name)
    current = steps.current()
    return {
        "title": f"{title} · {current}" if current else title,
        "content": [*fields.get("content", ()), *_content([TextBlock(text=steps.text())])],
    }


def steps_update(info: CallInfo, steps: StepList, ctx: RenderContext) -> ToolCallUpdate | None:
    """The card of a call whose own calls changed, for a client that does not nest them: its
    title says which one is going, its content lists them (``None`` for a client that shows
    them as cards of their own)."""
    if ctx.nested_calls:
        return None
    shown = _with_steps(info, steps, ctx)
    return tool_call_update(info.call_id, title=shown["title"], content=shown["content"])


def steps_card(info: CallInfo, steps: StepList, ctx: RenderContext, status: ToolCallStatus) -> ToolCallUpdate:
    """The whole card of a call that lists its own calls, for a client that does not nest
    them: after a child's permission question was shown on it (the question carries the child's
    card), and when it is cancelled."""
    card = card_details(announce_call(info, status, ctx))
    shown = _with_steps(info, steps, ctx)
    card["title"], card["content"] = shown["title"], shown["content"]
    return card


def child_question(card: ToolCallCard, parent: CallInfo, ctx: RenderContext) -> ToolCallCard:
    """A child call's card as its permission request carries it: marked with its parent for a
    client that nests them; else on the parent's card, the one such a client shows (it shows the
    child's card there until ``steps_card`` gives the parent's back), titled with both, as the
    parent's title is while the child goes: a client that shows a question by its title alone
    (acpx) names the task too."""
    if ctx.nested_calls:
        marked: ToolCallCard = nested(card, parent.call_id)
        return marked
    title = _call_fields(parent, ctx).get("title", parent.name)
    return {**card, "toolCallId": parent.call_id, "title": f"{title} · {card.get('title', '')}"}


def output_chunk(info: CallInfo, data: str, ctx: RenderContext) -> ToolCallUpdate | None:
    """Live terminal output (appended by the client), or ``None`` when it has no terminal."""
    if not info.is_terminal or not data:
        return None
    return _terminal_cards(ctx).output(info, data)


# -- the result ----------------------------------------------------------------------------


def _failed_exit(view: ToolResultView | None) -> bool:
    """Whether a command's result says it failed: a non-zero exit or a signal."""
    return isinstance(view, TerminalResultView) and (
        view.exit_code not in (None, 0) or view.signal is not None
    )


@dataclass(frozen=True, slots=True)
class _Ending:
    """What a command's closing card tells, read once from its result."""

    output: str | None
    """What it printed, when the card shows it here (``None``: nothing, or it streamed)."""
    reason: str | None
    """Why it failed, when it did other than by its exit status (a timeout, a refusal...)."""
    exit_line: str | None
    """``Exit code N`` or the signal that killed it."""
    title: str | None
    after: str | None
    """A last line (the sandbox's reading of a refusal), after everything else."""
    exit_code: int | None
    signal: str | None


def _ending(result: ToolResult, view: ToolResultView | None) -> _Ending:
    if not isinstance(view, TerminalResultView):
        reason = text_of(result.content).removeprefix("Error: ") if result.is_error else None
        output = None if result.is_error else text_of(result.content)
        return _Ending(output, _visible_lines(reason), None, None, None, None, None)
    output = view.output
    if output is None and not result.is_error:
        output = text_of(result.content)
    reason = None
    if result.is_error:
        reason = view.error or (
            None if view.output is not None else text_of(result.content).removeprefix("Error: ")
        )
    return _Ending(
        output=output,
        reason=_visible_lines(reason),  # it may quote the command
        exit_line=_exit_line(view.exit_code, view.signal),
        title=view.title or None,
        after=_visible_lines(view.note),  # it quotes paths
        exit_code=view.exit_code,
        signal=view.signal,
    )


def _visible_lines(text: str | None) -> str | None:
    return visible(text, lines=True) if text else text


def _one_line_title(info: CallInfo, end: _Ending) -> str | None:
    """The closing title for a client that may show a card as one line (its title, or the start
    of its text): the exit status is in it."""
    if end.exit_line is None:
        return end.title
    line = end.exit_line
    return f"{end.title or _shown_title(info)} ({line[0].lower()}{line[1:]})"


class _LiveTerminal:
    """A client that draws the agent's terminal from ``_meta`` (Zed, JetBrains): the card holds
    a terminal, the output streams into it under the client's key, the exit goes in ``_meta``."""

    __slots__ = ("key",)

    def __init__(self, key: TerminalKey) -> None:
        self.key = key

    def announce(
        self, fields: ToolCallFields, info: CallInfo, view: TerminalCallView, ctx: RenderContext
    ) -> None:
        fields["content"] = [*_shown_text(view.description), {"type": "terminal", "terminalId": info.call_id}]
        fields["rawInput"] = _terminal_input(info, view)
        cwd = info.cwd or (absolute(view.cwd, ctx.cwd) if view.cwd else ctx.cwd)
        fields["_meta"] = {"terminal_info": {"terminal_id": info.call_id, "cwd": cwd}}

    def output(self, info: CallInfo, data: str) -> ToolCallUpdate:
        return tool_call_update(info.call_id, meta={self.key: {"terminal_id": info.call_id, "data": data}})

    def finish(
        self, info: CallInfo, end: _Ending, status: ToolCallStatus, streamed: bool
    ) -> list[ToolCallUpdate]:
        """The client draws the exit itself: the terminal's last lines, then the exit in ``_meta``."""
        updates: list[ToolCallUpdate] = []
        output = end.output
        tail = "" if streamed or not output else output
        if end.reason:
            separator = "\n" if tail and not tail.endswith("\n") else ""
            tail += f"{separator}[{end.reason}]\n"
        if end.after:  # after what the terminal shows last: this tail, else what streamed
            shown = tail or (output if streamed else None) or ""
            tail += ("\n" if shown and not shown.endswith("\n") else "") + f"{end.after}\n"
        if tail:
            updates.append(self.output(info, tail))
        exit_meta = {
            "terminal_exit": {"terminal_id": info.call_id, "exit_code": end.exit_code, "signal": end.signal}
        }
        updates.append(tool_call_update(info.call_id, status, title=end.title, meta=exit_meta))
        return updates


class _PlainTerminal:
    """A client that draws no terminal: the command's card shows its output once, at the end,
    fenced, with the exit status first."""

    __slots__ = ()

    def announce(
        self, fields: ToolCallFields, info: CallInfo, view: TerminalCallView, ctx: RenderContext
    ) -> None:
        fields["content"] = _shown_text(view.description)
        fields["rawInput"] = _terminal_input(info, view)

    def output(self, info: CallInfo, data: str) -> None:
        return None

    def finish(
        self, info: CallInfo, end: _Ending, status: ToolCallStatus, ctx: RenderContext
    ) -> list[ToolCallUpdate]:
        parts: list[str] = [end.exit_line] if end.exit_line else []
        if end.output:
            parts.append(
                fenced(bound_text(end.output, head=ctx.fallback_head, tail=ctx.fallback_tail), "console")
            )
        elif not end.reason:
            parts.append("(no output)")
        parts.extend(part for part in (end.reason, end.after) if part)
        content = _content([TextBlock(text="\n\n".join(parts))])
        return [tool_call_update(info.call_id, status, title=_one_line_title(info, end), content=content)]


def _client_terminal_finish(
    info: CallInfo, end: _Ending, status: ToolCallStatus, ctx: RenderContext, terminal_id: str
) -> list[ToolCallUpdate]:
    """A command that ran in the client's own terminal: the card keeps showing it, the exit
    status and why it failed beneath."""
    note = "\n\n".join(part for part in (end.exit_line, end.reason, end.after) if part)
    content = _attached_content(info, terminal_id, note or None)
    update = tool_call_update(info.call_id, status, title=_one_line_title(info, end), content=content)
    if end.output:  # for clients that list a call's raw output rather than draw its terminal (acpx)
        update["rawOutput"] = {
            "output": bound_text(end.output, head=ctx.fallback_head, tail=ctx.fallback_tail)
        }
    return [update]


_PLAIN = _PlainTerminal()
_LIVE = {key: _LiveTerminal(key) for key in get_args(TerminalKey)}


def _terminal_cards(ctx: RenderContext) -> _LiveTerminal | _PlainTerminal:
    """How the client shows a command's card, from its profile: a terminal it draws, or none."""
    return _PLAIN if ctx.terminal_key is None else _LIVE[ctx.terminal_key]


def _terminal_finish(
    info: CallInfo,
    result: ToolResult,
    view: ToolResultView | None,
    ctx: RenderContext,
    status: ToolCallStatus,
    streamed: bool,
    attached: str | None = None,
) -> list[ToolCallUpdate]:
    end = _ending(result, view)
    if attached is not None:
        return _client_terminal_finish(info, end, status, ctx, attached)
    cards = _terminal_cards(ctx)
    if isinstance(cards, _LiveTerminal):
        return cards.finish(info, end, status, streamed)
    return cards.finish(info, end, status, ctx)


def _shown_title(info: CallInfo) -> str:
    """The title the call was announced with (a terminal card's is its command)."""
    view = info.view
    if isinstance(view, TerminalCallView | GenericCallView | DiffCallView):
        return view.title
    return info.name


def finish_call(
    info: CallInfo,
    result: ToolResult,
    view: ToolResultView | None,
    ctx: RenderContext,
    *,
    streamed: bool = False,
    attached: str | None = None,
    steps: StepList | None = None,
) -> list[Plan | ToolCallUpdate]:
    """The updates that close a call: ``completed`` or ``failed``, with the result's card.

    ``streamed`` says whether live output already reached the client's terminal (a replay and a
    tool that does not stream send the output once, here). ``attached`` is the client's own
    terminal the command ran in, if it did (the card keeps showing it; a replay, which has no
    live terminal, shows the captured output instead). ``steps`` are the call's own calls (a
    subagent's): a client that does not nest them sees them listed above the result.
    """
    # A command that exited non-zero (or was killed) failed, whatever the tool told the model:
    # clients draw ``completed`` as success.
    status: ToolCallStatus = "failed" if result.is_error or _failed_exit(view) else "completed"
    if isinstance(info.view, PlanView):  # never announced as a card: only the plan changes
        return [plan_update(view)] if isinstance(view, PlanView) and not result.is_error else []
    if isinstance(view, PlanView):
        return [plan_update(view), tool_call_update(info.call_id, status)]
    if info.is_terminal or attached is not None:
        return [*_terminal_finish(info, result, view, ctx, status, streamed, attached)]
    if isinstance(view, TerminalResultView):  # no terminal was announced: the fenced fallback
        plain = RenderContext(ctx.cwd, None, ctx.fallback_head, ctx.fallback_tail)
        return [*_terminal_finish(info, result, view, plain, status, streamed)]
    return [_card_finish(info, result, view, ctx, status, steps)]


def _card_finish(
    info: CallInfo,
    result: ToolResult,
    view: GenericResultView | TerminalResultView | DiffResultView | None,
    ctx: RenderContext,
    status: ToolCallStatus,
    steps: StepList | None,
) -> ToolCallUpdate:
    """The closing update of a call that is not a command: the result's card."""
    update = tool_call_update(info.call_id, status)
    if isinstance(view, DiffResultView):
        update["content"] = _diff_blocks(view.diffs, ctx.cwd)
        if view.locations is not None:
            update["locations"] = _locations(view.locations, ctx.cwd)
    elif isinstance(view, GenericResultView) and view.content is not None:
        update["content"] = _content(view.content)
    else:  # a failure's text is the error line a person reads
        update["content"] = _shown(result.content) if result.is_error else _content(result.content)
    if steps and not ctx.nested_calls:
        update["content"] = [*_content([TextBlock(text=steps.text())]), *update["content"]]
    if view is not None and view.title:  # after the content: the key order is part of the wire
        update["title"] = relativize_title(view.title, ctx.cwd)
    elif steps and not ctx.nested_calls:  # it showed the step going: its own title again
        update["title"] = _call_fields(info, ctx).get("title", info.name)
    return update


def cancelled_call(
    info: CallInfo,
    ctx: RenderContext,
    *,
    streamed: bool = False,
    attached: str | None = None,
    partial: str | None = None,
    steps: StepList | None = None,
) -> list[ToolCallUpdate]:
    """Close a call the turn's cancellation interrupted: ``failed``; a terminal keeps its output
    and gets a last line saying why. ``partial`` is what a command printed before the cancel,
    for a client that had no live terminal (it gets that much, fenced). A call that lists its
    own calls (``steps``) shows them as they ended."""
    if steps and not ctx.nested_calls:
        return [steps_card(info, steps, ctx, "failed")]
    result = ToolResult(content=(TextBlock(text="cancelled"),), is_error=True)
    if attached is not None:  # the client's terminal is gone with the release: keep what it printed
        view = TerminalResultView(output=partial, error="cancelled") if partial else None
        return _terminal_finish(info, result, view, ctx, "failed", streamed, attached)
    if info.is_terminal and ctx.terminal_key is not None:
        return _terminal_finish(info, result, None, ctx, "failed", streamed, attached)
    if info.is_terminal and partial:
        view = TerminalResultView(output=partial, error="cancelled")
        return _terminal_finish(info, result, view, ctx, "failed", streamed)
    return [tool_call_update(info.call_id, "failed")]
