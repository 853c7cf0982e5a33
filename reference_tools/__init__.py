"""reference_tools: bash, file-system and web tools that render well and are safe to run.

They are the examples to copy when writing a tool: each declares its kind and whether it is
read-only, validates its arguments through ``define_tool``, and presents its calls with render
intents (a terminal card for ``bash``).
"""

from __future__ import annotations

from dsh_tools import ToolDefinition, ToolRegistry

from .ask import ask_user_tool
from .bash import BashSettings, bash_tools
from .fs import ReadTracker, fs_policy, fs_tools, register_fs_tools
from .todo import todo_tool
from .web import WebFetchSettings, web_fetch_tool

__all__ = [
    "BashSettings",
    "ReadTracker",
    "WebFetchSettings",
    "ask_user_tool",
    "bash_tools",
    "default_tools",
    "fs_policy",
    "fs_tools",
    "install_policies",
    "register_fs_tools",
    "todo_tool",
    "web_fetch_tool",
]


def default_tools(*, sandbox: bool = False) -> list[ToolDefinition]:
    """Every reference tool, as the CLI registers them by default (``sandbox``: the sessions
    have a sandbox for commands; see ``bash_tools``)."""
    return [*bash_tools(sandbox=sandbox), *fs_tools(), todo_tool(), web_fetch_tool()]


def install_policies(registry: ToolRegistry) -> None:
    """The policies the reference tools need (the file tools' read-before-edit and workspace
    rules), as a pre-execute listener on ``registry``."""
    registry.on_pre_execute(fs_policy(registry))
