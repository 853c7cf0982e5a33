"""What each slash command does: the command table, name → handler.

A command runs inside its prompt's turn (the turn's cancel stops it) and answers the user with an
agent message outside the model's conversation. Which commands exist, and how they are described
to the editor, is in ``_commands``; commands that go to the model as an instruction have no handler
here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from dsh_acp._config import AgentConfig
from dsh_acp.loop._commands import COMMANDS, MODEL_COMMANDS, NO_MODEL_MESSAGE, tools_text
from dsh_acp.loop._turn import StopReason, TurnRunner
from dsh_acp.models._model import ContextOverflow
from dsh_acp.permissions._modes import MODES
from dsh_acp.session._session import Session

from ._pickers import SessionPickers

__all__ = ["CommandHandler", "CommandTable"]

CommandHandler = Callable[[Session, TurnRunner, str], Awaitable[StopReason]]
"""A command's handler: the session, the turn it runs in, and what the user typed after it."""


class CommandTable:
    """The handler of every slash command that the agent runs itself."""

    def __init__(self, config: AgentConfig, pickers: SessionPickers) -> None:
        self.config = config
        self._pickers = pickers
        self.handlers: dict[str, CommandHandler] = {
            "compact": self._compact,
            "mode": self._mode,
            "model": self._model,
            "permissions": self._permissions,
            "tools": self._tools,
        }
        assert set(self.handlers) == set(COMMANDS) - MODEL_COMMANDS, "each command needs a handler"

    async def run(self, session: Session, runner: TurnRunner, name: str, argument: str) -> StopReason:
        """Run the command ``name`` (one of the table's) in the turn ``runner`` runs."""
        return await self.handlers[name](session, runner, argument)

    async def _say(self, session: Session, text: str) -> StopReason:
        await session.say(text, self.config.message_ids())
        return "end_turn"

    async def _tools(self, session: Session, runner: TurnRunner, argument: str) -> StopReason:
        return await self._say(session, tools_text(session.registry.schemas()))

    async def _permissions(self, session: Session, runner: TurnRunner, argument: str) -> StopReason:
        from dsh_acp.permissions._approvals import permissions_command
        from dsh_acp.session._events import PermissionRemoved

        rules = session.permissions
        answer = permissions_command(
            rules.allow,
            rules.reject,
            rules.project,
            argument,
            lambda rule, match: session.record(PermissionRemoved(rule, match)),
        )
        return await self._say(session, answer)

    async def _mode(self, session: Session, runner: TurnRunner, argument: str) -> StopReason:
        if argument not in MODES:
            return await self._say(session, f"Unknown mode {argument!r}. Modes: {', '.join(MODES)}.")
        self._pickers.switch_mode(session, argument)
        await self._pickers.in_step(session, mode=True, options=True)()
        label, description = MODES[argument]
        return await self._say(session, f"Mode: {label}. {description}")

    async def _model(self, session: Session, runner: TurnRunner, argument: str) -> StopReason:
        known = [m.id for m in self.config.models]
        if argument not in known:
            listed = ", ".join(known) or "none configured"
            return await self._say(session, f"Unknown model {argument!r}. Models: {listed}.")
        await self._pickers.switch_model(session, argument)
        await self._pickers.in_step(session, mode=False, options=True)()
        return await self._say(session, f"Model: {argument}.")

    async def _compact(self, session: Session, runner: TurnRunner, argument: str) -> StopReason:
        if session.model is None:
            return await self._say(session, NO_MODEL_MESSAGE)
        try:
            done = await runner.compact(f"compaction-{self.config.message_ids()}")
        except ContextOverflow as error:
            # The window was unknown or too optimistic: the server said how large it is.
            if not error.context_window:
                raise
            done = await runner.compact(f"compaction-{self.config.message_ids()}", error.context_window)
        if not done:
            return await self._say(session, "There is nothing to compact yet.")
        return "end_turn"
