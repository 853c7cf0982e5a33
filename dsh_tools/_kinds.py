"""What a tool does, in a module of its own: policies (permission modes) and ``define_tool`` read
it without importing the views, which are pydantic models."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["TOOL_KINDS", "ToolKind"]

ToolKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
"""What a tool does: picks a UI's icon, and is what policies (permission modes) key on."""

TOOL_KINDS: tuple[ToolKind, ...] = get_args(ToolKind)
