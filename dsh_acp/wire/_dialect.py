"""The wire shapes of one ACP version, for everything a session sends: a connection speaks v1 or
the v2 draft (``initialize`` chose), and every session of it draws the same render intents in
that version's shapes.

``_dialect_of.dialect_of(ctx)`` gives the one for a session's ``RenderContext``. ``Dialect`` is v1's: its
methods are v1's bridge and builders (``_bridge``, ``_updates``, ``_client_requests``) — whose
bytes the v1 goldens pin — gathered under the names the loop, the replay and the session methods
call; ``dsh_acp.wire.v2._dialect.V2Dialect`` overrides what v2 draws otherwise. The tools and
their presenters know nothing of either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from dsh_tools import ContentBlock, PlanView, ToolResult, ToolResultView

from ._bridge import (
    CallInfo,
    RenderContext,
    announce_call,
    attach_terminal,
    cancelled_call,
    child_question,
    finish_call,
    logged_plan_update,
    output_chunk,
    permission_tool_call,
    plan_update,
    wire_block,
)
from ._client_requests import PermissionOption, permission_params
from ._steps import StepList
from ._updates import (
    ConfigOption,
    ToolCallStatus,
    agent_message,
    agent_thought,
    card_details,
    config_option_update,
    current_mode_update,
    tool_call_update,
    user_message_chunk,
)

__all__ = ["Dialect", "StopReason", "Update"]

Update = Mapping[str, Any]
"""One ``session/update`` payload, of either version."""
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


class Dialect:
    """ACP v1's shapes (``V2Dialect`` overrides what v2 draws otherwise)."""

    version = 1

    # -- tool calls ---------------------------------------------------------------------------

    def announce(self, info: CallInfo, status: ToolCallStatus, ctx: RenderContext) -> list[Update]:
        """The updates that show a call for the first time."""
        return [announce_call(info, status, ctx)]

    def early_card(self, info: CallInfo, ctx: RenderContext) -> list[Update]:
        """A ``pending`` card for a call whose arguments still stream: no ``rawInput`` yet (the
        full card of an edit carries none to replace an early ``{}``)."""
        cards = self.announce(info, "pending", ctx)
        for card in cards:
            if "toolCallId" in card:
                card.pop("rawInput", None)  # type: ignore[attr-defined]
        return cards

    def card_details(self, info: CallInfo, status: ToolCallStatus, ctx: RenderContext) -> list[Update]:
        """The whole card of a call the client shows since it streamed (an update of it)."""
        return [card_details(announce_call(info, status, ctx))]

    def status(self, call_id: str, status: ToolCallStatus) -> Update:
        """A call's status changed (it runs, it was refused while streaming)."""
        return tool_call_update(call_id, status)

    def retitled(self, call_id: str, title: str) -> Update:
        """A card's new title (its arguments, streaming, say more)."""
        return tool_call_update(call_id, title=title)

    def attach_terminal(self, info: CallInfo, terminal_id: str) -> Update:
        """The command runs in the client's terminal ``terminal_id`` (v1's client terminals)."""
        return attach_terminal(info, terminal_id)

    def output(self, info: CallInfo, data: str, ctx: RenderContext) -> Update | None:
        """Live output of a command (``None`` when the client shows none)."""
        return output_chunk(info, data, ctx)

    def finish(
        self,
        info: CallInfo,
        result: ToolResult,
        view: ToolResultView | None,
        ctx: RenderContext,
        *,
        streamed: bool = False,
        attached: str | None = None,
        steps: StepList | None = None,
    ) -> list[Update]:
        """The updates that close a call with its result (``steps``: its own calls, a subagent's)."""
        return [*finish_call(info, result, view, ctx, streamed=streamed, attached=attached, steps=steps)]

    def cancelled(
        self,
        info: CallInfo,
        ctx: RenderContext,
        *,
        streamed: bool = False,
        attached: str | None = None,
        partial: str | None = None,
        steps: StepList | None = None,
        crashed: bool = False,
    ) -> list[Update]:
        """Close a call a cancel interrupted (``crashed``: one a replay finds never finished)."""
        return [
            *cancelled_call(info, ctx, streamed=streamed, attached=attached, partial=partial, steps=steps)
        ]

    def permission(
        self, session_id: str, info: CallInfo, ctx: RenderContext, options: Iterable[PermissionOption]
    ) -> Mapping[str, Any]:
        """The params of ``session/request_permission`` for the call whose card is ``info``."""
        return permission_params(session_id, permission_tool_call(info, ctx), options)

    def child_question(
        self, params: Mapping[str, Any], parent: CallInfo, ctx: RenderContext
    ) -> dict[str, Any]:
        """The permission request of a call a subagent makes, asked for its task ``parent``: on
        the child's own card marked with its parent where the client nests calls, else on the
        task's card."""
        return {**params, "toolCall": child_question(params["toolCall"], parent, ctx)}

    def plan(self, view: PlanView) -> Update:
        """A plan view as the session's plan."""
        return plan_update(view)

    def logged_plan(self, entries: Sequence[Any]) -> Update:
        """The session's plan as its log keeps it."""
        return logged_plan_update(entries)

    # -- the session around the conversation --------------------------------------------------

    def config_options(self, options: list[ConfigOption]) -> Update:
        """The session's config options, all of them, after one changed."""
        return config_option_update(options)

    def mode_changed(self, mode_id: str) -> Update | None:
        """The permission mode changed (``None``: the config options say it)."""
        return current_mode_update(mode_id)

    # -- messages and turns -------------------------------------------------------------------

    def prompt_inserted(self, message_id: str, prompt: Sequence[ContentBlock]) -> list[Update]:
        """What a turn sends when its prompt joins the conversation (v1: nothing; the client
        shows what it sent)."""
        return []

    def turn_ended(self, stop: StopReason | None, error: Mapping[str, Any] | None = None) -> list[Update]:
        """What a turn sends when it ends (v1: nothing; the prompt's answer says it)."""
        return []

    def replayed_prompt(self, message_id: str | None, content: Sequence[ContentBlock]) -> list[Update]:
        """A logged prompt, replayed."""
        return [user_message_chunk(wire_block(block), message_id) for block in content]

    def replayed_reply(
        self, text: str, text_id: str | None, reasoning: str, thought_id: str | None
    ) -> list[Update]:
        """A logged model step's reasoning and text, replayed."""
        updates: list[Update] = []
        if reasoning:
            updates.append(agent_thought(reasoning, thought_id))
        if text:
            updates.append(agent_message(text, text_id))
        return updates
