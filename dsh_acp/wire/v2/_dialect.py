"""ACP v2's shapes for everything a session sends: v1's ``Dialect`` where the two agree, the v2
bridge and builders (``_bridge``, ``_updates``) where they do not."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsh_acp.wire._bridge import CallInfo, RenderContext, child_question, steps_card, wire_block
from dsh_acp.wire._client_requests import PermissionOption
from dsh_acp.wire._dialect import Dialect, StopReason, Update
from dsh_acp.wire._steps import StepList
from dsh_acp.wire._updates import ConfigOption, ToolCallStatus
from dsh_tools import ContentBlock, PlanView, ToolResult, ToolResultView

from ._bridge import (
    announce_call,
    cancelled_call,
    finish_call,
    logged_plan_entries_update,
    output_chunk,
    permission_params,
    plan_entries_update,
)
from ._updates import (
    config_option_update,
    replayed_message,
    state_idle,
    state_running,
    user_message,
)

__all__ = ["V2Dialect"]


class V2Dialect(Dialect):
    """The v2 draft's shapes."""

    version = 2

    def announce(self, info: CallInfo, status: ToolCallStatus, ctx: RenderContext) -> list[Update]:
        return [*announce_call(info, status, ctx)]

    def card_details(self, info: CallInfo, status: ToolCallStatus, ctx: RenderContext) -> list[Update]:
        return self.announce(info, status, ctx)  # an upsert either way

    def attach_terminal(self, info: CallInfo, terminal_id: str) -> Update:
        raise AssertionError("a v2 client has no terminals of its own")

    def output(self, info: CallInfo, data: str, ctx: RenderContext) -> Update | None:
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
        return [*finish_call(info, result, view, ctx, streamed=streamed, steps=steps)]

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
        return [*cancelled_call(info, ctx, steps=steps, crashed=crashed)]

    def child_question(
        self, params: Mapping[str, Any], parent: CallInfo, ctx: RenderContext
    ) -> dict[str, Any]:
        """v2's request names its call in its ``subject``: a command's is asked on the task's
        card by its id, a call's with the card v1 puts there."""
        subject = params.get("subject")
        if not isinstance(subject, Mapping):
            return dict(params)
        if subject.get("type") == "tool_call":
            subject = {**subject, "toolCall": child_question(subject["toolCall"], parent, ctx)}
        elif not ctx.nested_calls:
            subject = {**subject, "toolCallId": parent.call_id}
        if ctx.nested_calls:
            return {**params, "subject": subject}
        title = steps_card(parent, StepList(), ctx, "pending")["title"]
        return {**params, "title": f"{title} · {params.get('title', '')}", "subject": subject}

    def permission(
        self, session_id: str, info: CallInfo, ctx: RenderContext, options: Iterable[PermissionOption]
    ) -> Mapping[str, Any]:
        return permission_params(session_id, info, ctx, options)

    def plan(self, view: PlanView) -> Update:
        return plan_entries_update(view)

    def logged_plan(self, entries: Sequence[Any]) -> Update:
        return logged_plan_entries_update(entries)

    def config_options(self, options: list[ConfigOption]) -> Update:
        return config_option_update(options)

    def mode_changed(self, mode_id: str) -> Update | None:
        return None  # the mode is a config option: its update says it

    def prompt_inserted(self, message_id: str, prompt: Sequence[ContentBlock]) -> list[Update]:
        """The turn runs, and the user's message is echoed with the id its prompt is answered with."""
        return [state_running(), user_message(message_id, [wire_block(block) for block in prompt])]

    def turn_ended(self, stop: StopReason | None, error: Mapping[str, Any] | None = None) -> list[Update]:
        return [state_idle("error" if error is not None else stop, error)]

    def replayed_prompt(self, message_id: str | None, content: Sequence[ContentBlock]) -> list[Update]:
        assert message_id is not None, "a v2 replay gives every message an id"
        return [user_message(message_id, [wire_block(block) for block in content])]

    def replayed_reply(
        self, text: str, text_id: str | None, reasoning: str, thought_id: str | None
    ) -> list[Update]:
        updates: list[Update] = []
        if reasoning:
            assert thought_id is not None, "a v2 replay gives every message an id"
            updates.append(replayed_message("agent_thought", thought_id, reasoning))
        if text:
            assert text_id is not None, "a v2 replay gives every message an id"
            updates.append(replayed_message("agent_message", text_id, text))
        return updates
