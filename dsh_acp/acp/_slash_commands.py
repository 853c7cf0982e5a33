"""Slash commands: one table of each command's name, description, input hint and what it does.

A prompt that starts with a known ``/command`` runs it instead of going to the model (an unknown
``/x`` goes to the model unchanged). A command the agent runs itself answers inside its prompt's
turn (the turn's cancel stops it) with an agent message outside the model's conversation; a model
command (``/init``) sends the model an instruction in place of what the user typed, and is part of
the conversation. The editor lists them from ``available_commands_update``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh_acp._config import AgentConfig
from dsh_acp._safe_text import visible
from dsh_acp.models._model import ContextOverflow
from dsh_acp.permissions._approvals import permissions_command
from dsh_acp.permissions._modes import MODES
from dsh_acp.session._events import PermissionRemoved
from dsh_acp.wire._updates import AvailableCommandsUpdate, available_commands_update

# An idle session lists the commands without loading the loop, the tools or pydantic: what the
# handlers use loads with the first prompt (see test_startup_imports).
if TYPE_CHECKING:
    from dsh_acp.loop._turn import StopReason, TurnRunner
    from dsh_acp.session._session import Session
    from dsh_tools import ContentBlock, ToolSchema

    from ._pickers import SessionPickers

__all__ = [
    "COMMANDS",
    "NO_MODEL_MESSAGE",
    "CommandTable",
    "SlashCommand",
    "available_commands",
    "parse_command",
]

NO_MODEL_MESSAGE = (
    "No model is configured, so I cannot answer yet. Start dsh-acp with `--model script:PATH` "
    "(a scripted model, see the README) or `--model openai:<name>` with an API key."
)
"""What a prompt, or a command that needs the model, is answered with when there is none."""

INIT_INSTRUCTION = (
    "Write a starter AGENTS.md in the working directory: the instructions a coding agent needs "
    "before working on this project. Look at the project first (its layout, README, build and "
    "test configuration), then write it with the write tool. Keep it short and concrete: what "
    "the project is, how to build, test and lint it (the exact commands), the code layout, and "
    "the conventions the code follows. If an AGENTS.md exists, read it and improve it instead. "
    "Do not invent commands you did not find."
)


class CommandTable:
    """What the agent's own commands act on: its configuration and the session pickers."""

    def __init__(self, config: AgentConfig, pickers: SessionPickers) -> None:
        self.config = config
        self.pickers = pickers

    async def run(self, session: Session, runner: TurnRunner, name: str, argument: str) -> StopReason:
        """Run the command ``name`` (one the agent runs itself) in the turn ``runner`` runs."""
        handler = _BY_NAME[name].handler
        assert handler is not None, f"/{name} goes to the model"
        return await handler(self, session, runner, argument)

    async def say(self, session: Session, text: str) -> StopReason:
        await session.say(text, self.config.message_ids())
        return "end_turn"


CommandHandler = Callable[["CommandTable", "Session", "TurnRunner", str], Awaitable["StopReason"]]
"""A command's handler: the table, the session, the turn it runs in, and what the user typed
after the command."""


@dataclass(frozen=True, slots=True)
class SlashCommand:
    name: str
    description: str
    hint: str | None
    """What the editor shows as the command's input (``None``: it takes none)."""
    handler: CommandHandler | None = None
    """What the agent does; ``None`` for a model command, which sends ``instruction`` instead."""
    instruction: str | None = None


def tools_text(schemas: Sequence[ToolSchema]) -> str:
    """What ``/tools`` answers: each tool with the first line of its description."""
    if not schemas:
        return "No tools are registered."
    lines = ["Tools:"]
    for schema in schemas:
        first = schema.description.strip().splitlines()[0] if schema.description.strip() else ""
        lines.append(visible(f"- `{schema.name}`: {first}"))  # an MCP server's words
    return "\n".join(lines)


async def _tools(table: CommandTable, session: Session, runner: TurnRunner, argument: str) -> StopReason:
    return await table.say(session, tools_text(session.registry.schemas()))


async def _permissions(
    table: CommandTable, session: Session, runner: TurnRunner, argument: str
) -> StopReason:
    rules = session.permissions
    answer = permissions_command(
        rules.allow,
        rules.reject,
        rules.project,
        argument,
        lambda rule, match: session.record(PermissionRemoved(rule, match)),
    )
    return await table.say(session, answer)


async def _mode(table: CommandTable, session: Session, runner: TurnRunner, argument: str) -> StopReason:
    if argument not in MODES:
        return await table.say(session, f"Unknown mode {argument!r}. Modes: {', '.join(MODES)}.")
    table.pickers.switch_mode(session, argument)
    await table.pickers.in_step(session, mode=True, options=True)()
    label, description = MODES[argument]
    return await table.say(session, f"Mode: {label}. {description}")


async def _model(table: CommandTable, session: Session, runner: TurnRunner, argument: str) -> StopReason:
    known = [m.id for m in table.config.models]
    if argument not in known:
        listed = ", ".join(known) or "none configured"
        return await table.say(session, f"Unknown model {argument!r}. Models: {listed}.")
    await table.pickers.switch_model(session, argument)
    await table.pickers.in_step(session, mode=False, options=True)()
    return await table.say(session, f"Model: {argument}.")


async def _compact(table: CommandTable, session: Session, runner: TurnRunner, argument: str) -> StopReason:
    if session.model is None:
        return await table.say(session, NO_MODEL_MESSAGE)
    ids = table.config.message_ids
    try:
        done = await runner.compact(f"compaction-{ids()}")
    except ContextOverflow as error:
        # The window was unknown or too optimistic: the server said how large it is.
        if not error.context_window:
            raise
        done = await runner.compact(f"compaction-{ids()}", error.context_window)
    if not done:
        return await table.say(session, "There is nothing to compact yet.")
    return "end_turn"


async def _undo(table: CommandTable, session: Session, runner: TurnRunner, argument: str) -> StopReason:
    from dsh_acp.loop._undo import undo_last_turn

    answer = await undo_last_turn(session, f"undo-{table.config.message_ids()}")
    return await table.say(session, answer) if answer is not None else "end_turn"


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("compact", "Summarize the conversation so far to free context", None, _compact),
    SlashCommand("init", "Write a starter AGENTS.md for this project", None, instruction=INIT_INSTRUCTION),
    SlashCommand("mode", "Switch the permission mode", "default, accept_edits, auto, plan or bypass", _mode),
    SlashCommand("model", "Switch the model", "a model id from the model picker", _model),
    SlashCommand(
        "permissions",
        "List the remembered approvals, remove one, or keep one for the project",
        "remove N, or project N",
        _permissions,
    ),
    SlashCommand("tools", "List the tools and what they do", None, _tools),
    SlashCommand("undo", "Take back the file changes of the last turn (again: the turn before)", None, _undo),
)
_BY_NAME = {command.name: command for command in COMMANDS}


def available_commands() -> AvailableCommandsUpdate:
    """The ``available_commands_update`` a session sends after ``session/new``."""
    return available_commands_update(
        (command.name, command.description, command.hint) for command in COMMANDS
    )


def parse_command(prompt: Sequence[ContentBlock]) -> tuple[SlashCommand, str] | None:
    """The command a prompt starts with and what follows it, or ``None`` (not a known command)."""
    from dsh_tools import TextBlock

    if not prompt or not isinstance(prompt[0], TextBlock):
        return None
    text = prompt[0].text.strip()
    if not text.startswith("/"):
        return None
    name, _, argument = text[1:].partition(" ")
    command = _BY_NAME.get(name)
    return None if command is None else (command, argument.strip())


def model_instruction(command: SlashCommand, argument: str) -> str:
    """The instruction a model command sends in place of what the user typed."""
    assert command.instruction is not None
    return command.instruction + (f"\n\nThe user adds: {argument}" if argument else "")
