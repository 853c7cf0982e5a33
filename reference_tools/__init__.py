"""reference_tools: bash and file-system tools that render well and are safe to run."""

from __future__ import annotations

from dsh_tools import ToolDefinition

__all__ = ["default_tools"]


def default_tools() -> list[ToolDefinition]:
    """Every reference tool, as the CLI registers them by default."""
    return []
