"""The render bridge for ACP v2: the same render intents, through the same composition as v1's
(``dsh_acp.wire._bridge``, for a client that shows live terminals), spelled as v2 spells it.

v1's bridge decides what a card shows — its title relative to the session's folder, absolute
paths, the reason it asks, ``rawInput`` always an object, the applied hunks of an edit, a failed
exit, what a command printed and why it stopped — and this module changes only what v2 spells
otherwise, one rule each, so the two versions never drift apart:

- a call is announced and changed with one upsert, ``tool_call_update``;
- a ``diff`` is a structured change (``add`` for a new file, else ``modify``, its absolute path)
  with a git patch to draw;
- a command runs in a terminal the agent owns: the card refers to it (``terminalId``, the call's
  id) after a ``terminal_update`` created it with its command and folder; its output is appended
  with ``terminal_output_chunk`` (v1's ``_meta.terminal_output``) and its exit is the terminal's
  ``exitStatus`` (v1's ``_meta.terminal_exit``);
- the plan is a ``plan_update`` of the session's one plan;
- a call stopped by a cancel ends ``cancelled``, one the agent never finished (a crash) ``failed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dsh_acp.wire import _bridge as v1
from dsh_acp.wire._bridge import CallInfo, RenderContext
from dsh_acp.wire._client_profile import TerminalKey
from dsh_acp.wire._client_requests import PermissionOption
from dsh_acp.wire._steps import StepList
from dsh_acp.wire._updates import ToolCallStatus as V1Status
from dsh_acp.wire._updates import WireBlock
from dsh_tools import PlanView, TerminalCallView, ToolResult, ToolResultView

from ._patch import git_patch, patch_path
from ._updates import Update, plan_update, terminal_output_chunk, terminal_update

__all__ = [
    "announce_call",
    "cancelled_call",
    "finish_call",
    "logged_plan_entries_update",
    "output_chunk",
    "permission_params",
    "plan_entries_update",
    "respelled",
]

_LIVE: TerminalKey = "terminal_output"
"""v1's live-output convention: what v1 draws a command as, for v2 to respell."""


def _live(ctx: RenderContext) -> RenderContext:
    return replace(ctx, terminal_key=_LIVE) if ctx.terminal_key != _LIVE else ctx


def _diff(block: Mapping[str, Any], cwd: str) -> WireBlock:
    """A v1 ``diff`` block as a v2 ``diff``: the change and the patch that draws it."""
    path, old = block["path"], block.get("oldText")
    diff: WireBlock = {
        "type": "diff",
        "changes": [{"operation": "add" if old is None else "modify", "path": path, "fileType": "text"}],
    }
    patch = git_patch(patch_path(path, cwd), old, block["newText"])
    if patch is not None:
        diff["patch"] = {"format": "git_patch", "text": patch}
    return diff


def _fields(update: Mapping[str, Any], cwd: str) -> dict[str, Any]:
    """A v1 card (or a change of one) with its diffs respelled and its terminal ``_meta`` taken out."""
    out = dict(update)
    if "content" in out:
        out["content"] = [_diff(item, cwd) if item.get("type") == "diff" else item for item in out["content"]]
    meta = {k: v for k, v in out.pop("_meta", {}).items() if not k.startswith("terminal_")}
    if meta:
        out["_meta"] = meta
    return out


def respelled(update: Mapping[str, Any], cwd: str) -> list[Update]:
    """The v2 updates of one v1 update (see the module docstring)."""
    kind = update.get("sessionUpdate")
    if kind == "plan":
        return [plan_update(update["entries"])]
    if kind not in ("tool_call", "tool_call_update"):
        return [dict(update)]
    meta = update.get("_meta") or {}
    call_id = update["toolCallId"]
    updates: list[Update] = []
    info = meta.get("terminal_info")
    if isinstance(info, Mapping):  # the card refers to a terminal: it exists first
        updates.append(terminal_update(call_id, command=update.get("title"), cwd=info.get("cwd")))
    output = meta.get(_LIVE)
    if isinstance(output, Mapping) and output.get("data"):
        updates.append(terminal_output_chunk(call_id, output["data"]))
    card = _fields(update, cwd)
    card["sessionUpdate"] = "tool_call_update"
    if set(card) - {"sessionUpdate", "toolCallId"}:  # something of the card changed
        updates.append(card)
    ended = meta.get("terminal_exit")
    if isinstance(ended, Mapping):  # before the call's status: its terminal has exited
        exit_status = terminal_update(
            call_id, exit_code=ended.get("exit_code"), signal=ended.get("signal"), exited=True
        )
        updates.insert(len(updates) - (1 if card in updates else 0), exit_status)
    return updates


def _all(updates: Iterable[Mapping[str, Any]], cwd: str) -> list[Update]:
    return [out for update in updates for out in respelled(update, cwd)]


def announce_call(info: CallInfo, status: V1Status, ctx: RenderContext) -> list[Update]:
    """The updates that show a call: its terminal first when it runs a command, then the card."""
    return respelled(v1.announce_call(info, status, _live(ctx)), ctx.cwd)


def permission_params(
    session_id: str, info: CallInfo, ctx: RenderContext, options: Iterable[PermissionOption]
) -> dict[str, Any]:
    """``session/request_permission``: titled by the call's card, with why it asks as the
    description, about the command a terminal would run or else the call itself."""
    card = _fields(v1.permission_tool_call(info, _live(ctx)), ctx.cwd)
    params: dict[str, Any] = {"sessionId": session_id, "title": card.get("title") or info.name}
    if info.notice:
        params["description"] = info.notice
    view = info.view
    if isinstance(view, TerminalCallView):
        cwd = info.cwd or (v1.absolute(view.cwd, ctx.cwd) if view.cwd else ctx.cwd)
        params["subject"] = {"type": "command", "command": view.title, "cwd": cwd, "toolCallId": info.call_id}
    else:
        params["subject"] = {"type": "tool_call", "toolCall": card}
    params["options"] = list(options)
    return params


def output_chunk(info: CallInfo, data: str, ctx: RenderContext) -> Update | None:
    """Live output of a command, appended to its terminal."""
    update = v1.output_chunk(info, data, _live(ctx))
    return None if update is None else respelled(update, ctx.cwd)[0]


def plan_entries_update(view: PlanView) -> Update:
    """A plan view as the session's plan."""
    return plan_update(v1.plan_update(view)["entries"])


def logged_plan_entries_update(entries: Sequence[Any]) -> Update:
    """A plan as the session log keeps it (v1's reading: what is not an entry is left out)."""
    return plan_update(v1.logged_plan_update(entries)["entries"])


def finish_call(
    info: CallInfo,
    result: ToolResult,
    view: ToolResultView | None,
    ctx: RenderContext,
    *,
    streamed: bool = False,
    steps: StepList | None = None,
) -> list[Update]:
    """The updates that close a call with its result's card (a command's terminal gets what it
    printed that was not streamed, and its exit)."""
    updates = v1.finish_call(info, result, view, _live(ctx), streamed=streamed, steps=steps)
    return _all(updates, ctx.cwd)


def cancelled_call(
    info: CallInfo, ctx: RenderContext, *, steps: StepList | None = None, crashed: bool = False
) -> list[Update]:
    """Close a call the turn's cancellation interrupted (``cancelled``), or one a replay finds
    the agent never finished (``crashed``: ``failed``). A command's terminal keeps what it
    printed (it streamed there) and gets a last line saying why, and its exit."""
    updates = _all(v1.cancelled_call(info, _live(ctx), streamed=True, steps=steps), ctx.cwd)
    if not crashed:
        last = updates[-1]
        if last.get("sessionUpdate") == "tool_call_update" and last.get("status") == "failed":
            updates[-1] = {**last, "status": "cancelled"}
    return updates
