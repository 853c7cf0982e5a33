"""The system prompt: who the agent is, where it works, and the conventions its tools keep.

Deterministic (no dates, no environment reads): the same session and tools give the same bytes,
so golden fixtures and provider prompt caches both stay stable. The tools' own schemas travel in
the request's ``tools``; this text states only what ties them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_tools import ToolSchema

__all__ = ["system_prompt"]

_FILE_TOOLS = ("read", "write", "edit", "glob", "grep", "ls")
_SHELL_TOOLS = ("bash",)


def system_prompt(cwd: str, tools: Sequence[ToolSchema], extra: str = "") -> str:
    """The system prompt for a session working in ``cwd`` with ``tools``; ``extra`` (project or
    user instructions) is appended as its own section."""
    names = [tool.name for tool in tools]
    available = set(names)
    lines = [
        "You are a coding agent working inside the user's editor. You act through tools; the editor",
        "shows every tool call and its result to the user.",
        "",
        "# Workspace",
        f"The session's working directory is {cwd}.",
        "Paths are absolute, or relative to that directory. Prefer absolute paths in tool arguments.",
    ]
    if names:
        lines += ["", "# Tools", "Available tools: " + ", ".join(names) + "."]
        lines += [f"- {rule}" for rule in _rules(available)]
    lines += [
        "",
        "# Answers",
        "- Keep answers short and direct. Do not restate what a tool result already shows.",
        "- When a task is ambiguous or risky, ask before acting.",
        "- If a tool fails, read its error and correct the call instead of repeating it unchanged.",
    ]
    if extra.strip():
        lines += [
            "",
            "# Project instructions",
            "The project's instruction files (AGENTS.md and the like), outermost first; where they",
            "disagree, the nearer file wins, and the user's own requests win over both.",
            "",
            extra.strip(),
        ]
    return "\n".join(lines) + "\n"


def _rules(available: set[str]) -> list[str]:
    def named(*candidates: str) -> str:
        present = [f"`{name}`" for name in candidates if name in available]
        return f" ({', '.join(present)})" if present else ""

    file_tools = named(*_FILE_TOOLS)
    rules = [
        f"Read a file before editing or overwriting it{named('read')}; edits to a file you have not read"
        " may be refused.",
        "An edit's old text must match the file exactly, whitespace and indentation included, and be unique "
        "in the file; include enough surrounding lines to make it so.",
        "If a file changed since you read it, read it again before editing it.",
    ]
    if file_tools:
        rules.append(
            f"Prefer the dedicated file tools{file_tools} over shell commands for reading, searching and"
            " editing files."
        )
    if available & set(_SHELL_TOOLS):
        rules.append(
            f"Commands{named(*_SHELL_TOOLS)} run in the working directory; the exit code is shown after the"
            " output. A non-zero exit code means the command failed."
        )
        rules.append("Do not start interactive programs: commands get no input.")
    rules.append("After changing code, run the project's tests or checks and report the outcome.")
    return rules
