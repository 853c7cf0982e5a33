"""A file change as a git patch: the renderable text of a v2 ``diff``.

v2 diffs carry no before and after texts, only the changed paths and, optionally, a patch; the
patch is what a client draws, so every diff gets one. A ``FileDiff`` holds the whole file or a
fragment of it (a tool's call-time snippet, an applied hunk), and nothing says where a fragment
sits in its file: a fragment's hunk is numbered from its own first line, as v1 clients number it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator

__all__ = ["git_patch", "patch_path"]

_NO_NEWLINE = "\\ No newline at end of file"


def patch_path(path: str, cwd: str) -> str:
    """How a patch names ``path`` (absolute): relative to the session's folder inside it, as git
    names paths from the root of its tree; outside it, absolute."""
    if path == cwd or not path.startswith(cwd.rstrip("/") + "/"):
        return path
    return os.path.relpath(path, cwd)


def git_patch(path: str, old_text: str | None, new_text: str) -> str | None:
    """The git patch that turns ``old_text`` into ``new_text`` in the file named ``path`` (as
    ``patch_path`` gives it; ``old_text=None``: a new file); ``None`` when they are the same."""
    if old_text == new_text:
        return None
    a, b = f"a/{path}", f"b/{path}"  # an absolute path keeps its slash: a//etc/hosts
    head = [f"diff --git {a} {b}"]
    if old_text is None:
        head.append("new file mode 100644")
        if not new_text:
            return "\n".join(head) + "\n"
    old = _lines(old_text or "")
    new = _lines(new_text)
    body = list(_hunks(old, new))
    head += ["--- /dev/null" if old_text is None else f"--- {a}", f"+++ {b}"]
    return "\n".join(head + body) + "\n"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _hunks(old: list[str], new: list[str]) -> Iterator[str]:
    """The hunks of a unified diff (three lines of context), each line without its newline and a
    line that had none followed by git's marker."""
    lines = difflib.unified_diff(old, new, n=3, lineterm="")
    for index, line in enumerate(lines):
        if index < 2:  # difflib's own ``---``/``+++`` lines: the patch writes git's
            continue
        if line.startswith("@@") or line.endswith("\n"):
            yield line.removesuffix("\n")
        else:
            yield line
            yield _NO_NEWLINE
