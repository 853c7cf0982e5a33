"""A diff card widened to whole files for the person approving it.

An edit's card carries the replaced fragment and its replacement. Some clients (Toad) number a
diff's lines as if ``oldText``/``newText`` were whole files, so a change at line 120 is shown at
line 1. Before a person is asked, a diff whose file is small enough is widened to the file's
text before and after the change: every client then numbers the lines right, and clients that
compute their own diff (Zed, JetBrains) show the same hunk with its real context. Whenever the
change cannot be placed for sure (the file is large, missing, not text, or the fragment is not
found exactly once), the card keeps its fragment form.
"""

from __future__ import annotations

import os
from collections import Counter

from dsh_tools import DiffCallView, FileDiff, Services
from dsh_tools.filesystem import FileSystem, LocalFileSystem

__all__ = ["WHOLE_FILE_LIMIT", "widened"]

WHOLE_FILE_LIMIT = 256 * 1024
"""Bytes of a file (and characters of its new text) up to which an approval shows it whole: a
card is sent twice (the ``tool_call`` and the permission request) and kept in the session log."""


async def _widen(diff: FileDiff, cwd: str, file_system: FileSystem) -> FileDiff:
    path = diff.path if os.path.isabs(diff.path) else os.path.join(cwd, diff.path)
    # A realpath and a stat cost microseconds, less than a hop to a worker thread.
    real = os.path.realpath(path)  # noqa: ASYNC240
    try:
        if os.stat(real).st_size > WHOLE_FILE_LIMIT:
            return diff
        before = await file_system.read_text(real)
    except (OSError, ValueError):  # missing, a directory, not text, too large for the backend
        return diff
    if diff.old_text is None:  # a write over an existing file
        after = diff.new_text.replace("\r\n", "\n")
    else:
        old, new = diff.old_text.replace("\r\n", "\n"), diff.new_text.replace("\r\n", "\n")
        if not old or before.count(old) != 1:
            return diff
        after = before.replace(old, new, 1)
    if len(before) > WHOLE_FILE_LIMIT or len(after) > WHOLE_FILE_LIMIT:
        return diff
    return FileDiff(path=diff.path, old_text=before, new_text=after)


async def widened(view: DiffCallView, cwd: str, services: Services) -> DiffCallView:
    """``view`` with each diff of a small, existing file in whole-file form (see the module)."""
    # mypy rejects an abstract class as a type[T] argument (python/mypy#4717).
    file_system = services.get(FileSystem) or LocalFileSystem()  # type: ignore[type-abstract]
    per_path = Counter(diff.path for diff in view.diffs)
    diffs = []
    for diff in view.diffs:
        # Two fragments of one file would need each other's result: they stay fragments.
        diffs.append(diff if per_path[diff.path] > 1 else await _widen(diff, cwd, file_system))
    return view.model_copy(update={"diffs": tuple(diffs)})
