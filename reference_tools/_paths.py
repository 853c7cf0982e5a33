"""Paths as the file-system tools see them: absolute against the session, checked on real paths."""

from __future__ import annotations

import os
import re

from dsh_tools import ToolError, ToolExecution

__all__ = ["absolute", "inside_workspace", "workspace_roots"]


def absolute(execution: ToolExecution, path: str) -> str:
    """``path`` made absolute against the session's cwd (never the process cwd) and normalized.

    Symlinks are kept: this is the path the tool shows and opens. Policy checks use
    ``os.path.realpath`` of it, which is what the kernel will actually reach.
    """
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        if execution.cwd is None:
            raise ToolError(f"{path!r} is a relative path and this session has no working directory")
        path = os.path.join(execution.cwd, path)
    path = os.path.normpath(path)
    if "\\x" in path and not os.path.lexists(path):
        # The tools show a byte of a name that is not UTF-8 as \xNN: a path copied from their
        # results names the file that has those bytes (when no file has the escape itself).
        raw = _SHOWN_BYTE.sub(lambda match: chr(0xDC00 + int(match[1], 16)), path)
        if os.path.lexists(raw):
            return raw
    return path


_SHOWN_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")


def workspace_roots(execution: ToolExecution) -> tuple[str, ...]:
    """The real paths of the session's cwd and additional directories."""
    cwd = (execution.cwd,) if execution.cwd else ()
    return tuple(os.path.realpath(root) for root in (*cwd, *execution.additional_directories))


def inside_workspace(real_path: str, roots: tuple[str, ...]) -> bool:
    """Whether an already resolved path is one of ``roots`` or below one."""
    return any(real_path == root or real_path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)
