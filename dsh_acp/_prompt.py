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
    available = {tool.name for tool in tools}
    lines = [
        "You are a coding agent in the user's editor; the user sees every tool call and result.",
        f"Working directory: {cwd}. Relative paths, and an omitted path or workdir, mean it.",
    ]
    lines += ["", "# Rules"]
    lines += [f"- {rule}" for rule in _rules(available)] if available else []
    lines += [
        "- Be brief; do not restate tool results.",
        "- Ask before acting on ambiguous or risky tasks.",
        "- If a tool fails, fix the call from its error.",
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
    rules = ["Read a file before editing or overwriting it, and again if it changed."]
    if available & set(_FILE_TOOLS):
        rules.append("Prefer the file tools over shell commands for files.")
    if available & set(_SHELL_TOOLS):
        rules.append("Commands get no input: never start interactive programs.")
    rules.append("After changing code, run the tests or checks and report the result.")
    return rules
