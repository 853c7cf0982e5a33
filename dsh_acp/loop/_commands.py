"""Slash commands: a prompt that starts with a known ``/command`` runs it instead of going to the
model (an unknown ``/x`` goes to the model unchanged)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsh_acp._safe_text import visible
from dsh_acp.wire._updates import AvailableCommandsUpdate, available_commands_update

if TYPE_CHECKING:  # the content models are pydantic's: a prompt has loaded them by the time they are read
    from dsh_tools import ContentBlock, ToolSchema

__all__ = [
    "COMMANDS",
    "COMPACT_INSTRUCTION",
    "MODEL_COMMANDS",
    "NO_MODEL_MESSAGE",
    "available_commands",
    "model_instruction",
    "parse_command",
    "tools_text",
]

COMMANDS: dict[str, tuple[str, str | None]] = {
    "compact": ("Summarize the conversation so far to free context", None),
    "init": ("Write a starter AGENTS.md for this project", None),
    "mode": ("Switch the permission mode", "default, accept_edits, plan or bypass"),
    "model": ("Switch the model", "a model id from the model picker"),
    "permissions": (
        "List the remembered approvals, remove one, or keep one for the project",
        "remove N, or project N",
    ),
    "tools": ("List the tools and what they do", None),
}

NO_MODEL_MESSAGE = (
    "No model is configured, so I cannot answer yet. Start dsh-acp with `--model script:PATH` "
    "(a scripted model, see the README) or `--model openai:<name>` with an API key."
)
"""What a prompt, or a command that needs the model, is answered with when there is none."""

COMPACT_INSTRUCTION = (
    "Summarize our conversation so far for your own future reference: the user's goals, what was "
    "done (files read and changed, commands run and their outcomes), decisions made, and what "
    "remains. Be complete but concise; this summary will replace the conversation."
)


INIT_INSTRUCTION = (
    "Write a starter AGENTS.md in the working directory: the instructions a coding agent needs "
    "before working on this project. Look at the project first (its layout, README, build and "
    "test configuration), then write it with the write tool. Keep it short and concrete: what "
    "the project is, how to build, test and lint it (the exact commands), the code layout, and "
    "the conventions the code follows. If an AGENTS.md exists, read it and improve it instead. "
    "Do not invent commands you did not find."
)
MODEL_COMMANDS = frozenset({"init"})
"""Commands that go to the model as an instruction (and so are part of the conversation)."""


def model_instruction(name: str, argument: str) -> str:
    """The instruction a model command sends in place of what the user typed."""
    assert name == "init"
    return INIT_INSTRUCTION + (f"\n\nThe user adds: {argument}" if argument else "")


def available_commands() -> AvailableCommandsUpdate:
    """The ``available_commands_update`` a session sends after ``session/new``."""
    return available_commands_update(
        (name, description, hint) for name, (description, hint) in COMMANDS.items()
    )


def parse_command(prompt: Sequence[ContentBlock]) -> tuple[str, str] | None:
    """``(name, argument)`` when the prompt starts with a known command, else ``None``."""
    from dsh_tools import TextBlock

    if not prompt or not isinstance(prompt[0], TextBlock):
        return None
    text = prompt[0].text.strip()
    if not text.startswith("/"):
        return None
    name, _, argument = text[1:].partition(" ")
    if name not in COMMANDS:
        return None
    return name, argument.strip()


def tools_text(schemas: Sequence[ToolSchema]) -> str:
    """What ``/tools`` answers: each tool with the first line of its description."""
    if not schemas:
        return "No tools are registered."
    lines = ["Tools:"]
    for schema in schemas:
        first = schema.description.strip().splitlines()[0] if schema.description.strip() else ""
        lines.append(visible(f"- `{schema.name}`: {first}"))  # an MCP server's words
    return "\n".join(lines)
