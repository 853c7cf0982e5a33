"""The file-system tools (``read``, ``write``, ``edit``, ``glob``, ``grep``, ``ls``) and the
policy that keeps them safe.

Each tool is a ``define_tool`` with a parameter spec, an ``execute`` body and two pure
presenters. The pattern to copy:

- Resolve paths against the session (``execution.cwd``), never the process cwd, and put only
  absolute paths in results, views and ``meta``.
- Fail with ``ToolError`` and a sentence the model can act on.
- Put in ``meta`` what the result card needs (JSON only): ``present_result`` is replayed from the
  session log with the same ``meta``, so it must not look at the disk.
- ``write`` and ``edit`` answer with a diff card even when it repeats the call-time one: an
  update's content replaces the call's, and a text would wipe the diff.

The tools live in ``_file_tools`` (read, write, edit) and ``_search_tools`` (glob, grep, ls);
what they share in ``_read_tracker`` and ``_file_access``. This module holds
the policy and the registration.

Register them with ``register_fs_tools(registry)``: it adds the tools and ``fs_policy``, the
pre-execute listener that asks before anything outside the workspace is touched and refuses to
overwrite what the model has not read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dsh_tools import (
    Ask,
    Deny,
    Disposer,
    PathSubject,
    PreExecuteListener,
    PreNext,
    PreToolDecision,
    ToolDefinition,
    ToolError,
    ToolExecution,
    ToolRegistry,
)

from . import _paths
from ._file_access import CheckedPaths
from ._file_tools import MAX_READ_BYTES, MAX_READ_LINES, edit_tool, read_tool, write_tool
from ._read_tracker import ReadTracker, TextPrint, tracker
from ._search_tools import glob_target, glob_tool, grep_tool, ls_tool

__all__ = [
    "MAX_READ_BYTES",
    "MAX_READ_LINES",
    "ReadTracker",
    "TextPrint",
    "edit_tool",
    "fs_policy",
    "fs_tools",
    "glob_tool",
    "grep_tool",
    "ls_tool",
    "read_tool",
    "register_fs_tools",
    "write_tool",
]


# -- the policy and registration ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rule:
    verb: str
    target: Callable[[ToolExecution, dict[str, Any]], str]
    """The absolute path a call touches."""
    needs_read: bool = False
    """An existing file must have been read in this session first."""
    acts_on_file: bool = False
    """The tool opens the file the policy checked (read, write, edit)."""


def _file_arg(execution: ToolExecution, args: dict[str, Any]) -> str:
    return _paths.absolute(execution, args["file_path"])


def _path_arg(execution: ToolExecution, args: dict[str, Any]) -> str:
    return _paths.absolute(execution, args.get("path") or ".")


_RULES: dict[ToolDefinition, _Rule] = {
    read_tool: _Rule("read", _file_arg, acts_on_file=True),
    write_tool: _Rule("write", _file_arg, needs_read=True, acts_on_file=True),
    edit_tool: _Rule("edit", _file_arg, needs_read=True, acts_on_file=True),
    glob_tool: _Rule("search", lambda execution, args: glob_target(execution, args)[0]),
    grep_tool: _Rule("search", _path_arg),
    ls_tool: _Rule("list", _path_arg),
}


def fs_policy(registry: ToolRegistry) -> PreExecuteListener:
    """The pre-execute listener for the fs tools registered in ``registry``.

    It keys on the tool definitions themselves (not on names), so another tool called ``read``
    is not its business, and it composes: every decision it does not make is left to the
    listeners after it.

    - ``write`` over an existing file and ``edit`` need a prior ``read`` of that file in this
      session (or a write or edit of it): otherwise ``Deny``, telling the model to read first.
      (Whether the file changed since is checked by the tools, which hold its text then.)
    - A path outside the session's cwd and additional directories, compared as real paths (so
      neither ``..`` nor a symlink leads out), gives ``Ask`` (unless a later listener denies),
      never a silent access.
    """

    async def listener(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        definition = registry.get(execution.name)
        rule = _RULES.get(definition) if definition is not None else None
        if rule is None or not isinstance(execution.arguments, dict):
            return await next_()
        try:
            path = rule.target(execution, execution.arguments)
        except ToolError:  # the tool itself reports a path it cannot resolve
            return await next_()
        # A few stats, cheaper than a hop to a worker thread: they run on the event loop.
        real = os.path.realpath(path)  # noqa: ASYNC240
        try:
            info: os.stat_result | None = os.stat(real)
        except OSError:
            info = None
        is_file = info is not None and stat.S_ISREG(info.st_mode)
        if rule.needs_read and is_file and not tracker(execution).has_read(real):
            return Deny(
                f"{path} has not been read in this session; read it before you {rule.verb} it, "
                "so that the change is made to its current content"
            )
        if rule.acts_on_file:
            # The tool acts on this very path (see _file_access.target), not on a second resolution.
            execution.services.setdefault(CheckedPaths, CheckedPaths).paths[execution.call_id] = real
        # A file with other hard links may also live outside: nothing here can show where.
        links = info.st_nlink if info is not None and is_file else 1
        if links == 1 and _paths.inside_workspace(real, _paths.workspace_roots(execution)):
            return await next_()
        decision = await next_()
        if isinstance(decision, Deny):
            return decision
        if links > 1:
            reason = (
                f"{rule.verb} {path}, a file with {links} hard links: its other names may be "
                "outside the workspace"
            )
        else:
            shown = path if real == path else f"{path} (really {real})"
            reason = f"{rule.verb} {shown}, which is outside the workspace"
        return Ask(reason, subject=PathSubject(rule.verb, real, path))

    return listener


def fs_tools() -> list[ToolDefinition]:
    """The file-system tools, in catalog order. Register ``fs_policy`` with them (or use
    ``register_fs_tools``): without it nothing asks before touching files outside the workspace."""
    return list(_RULES)


def register_fs_tools(registry: ToolRegistry) -> Disposer:
    """Register the fs tools and their policy in ``registry``; the disposer removes them all."""
    disposers: list[Disposer] = []

    def undo() -> None:
        for disposer in reversed(disposers):
            disposer()

    try:
        for tool in fs_tools():
            disposers.append(registry.register(tool))
        disposers.append(registry.on_pre_execute(fs_policy(registry)))
    except BaseException:
        undo()
        raise
    return Disposer(undo)
