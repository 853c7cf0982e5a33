"""The system prompt: who the agent is, where it works, and the conventions its tools keep.

Deterministic (no dates, no environment reads): the same session and tools give the same bytes,
so golden fixtures and provider prompt caches both stay stable. The tools' own schemas travel in
the request's ``tools``; the rules here are the ones the tools give (``prompt_rules``) and the
agent's own, so the agent names no tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh_tools import ToolSchema

__all__ = ["system_prompt"]

_AFTER_TOOL_RULES = "After changing code, run the tests or checks and report the result."
"""The agent's own rule for a session that has tools to change and check code with."""


def system_prompt(cwd: str, tools: Sequence[ToolSchema], extra: str = "") -> str:
    """The system prompt for a session working in ``cwd`` with ``tools``; ``extra`` (project or
    user instructions) is appended as its own section."""
    lines = [
        "You are a coding agent in the user's editor.",
        f"Working directory: {cwd}; relative or omitted paths mean it.",
    ]
    lines += ["", "# Rules"]
    lines += [f"- {rule}" for rule in _rules(tools)]
    lines += [
        "- Be brief: the user sees every tool call and result, do not restate them.",
        "- Ask before acting on ambiguous or risky tasks.",
        "- If a call fails, fix it from the error.",
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


def _rules(tools: Sequence[ToolSchema]) -> list[str]:
    """The tools' rules in registration order, each stated once, then the agent's own."""
    if not tools:
        return []
    rules = dict.fromkeys(rule for tool in tools for rule in tool.prompt_rules)
    return [*rules, _AFTER_TOOL_RULES]
