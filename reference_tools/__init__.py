"""reference_tools: bash and file-system tools that render well and are safe to run.

They are the examples to copy when writing a tool: each declares its kind and whether it is
read-only, validates its arguments through ``define_tool``, and presents its calls with render
intents (a terminal card for ``bash``).
"""

from __future__ import annotations

from dsh_tools import ToolDefinition

from .bash import BashSettings, bash_tools

__all__ = ["BashSettings", "bash_tools", "default_tools"]


def default_tools() -> list[ToolDefinition]:
    """Every reference tool, as the CLI registers them by default."""
    return [*bash_tools()]
