"""Project instructions: ``AGENTS.md`` (or the configured file names) from the session folder and
its parents up to the repository root, for the system prompt.

Read on every model request but only re-read when a file changes (its size or modification time),
so an edit to ``AGENTS.md`` takes effect on the next request and an unchanged one costs a few
``stat`` calls. Bounded: each file and the whole section keep a head and a tail of their text.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from dsh_tools import bound_text

__all__ = ["DEFAULT_FILES", "MAX_BYTES", "ProjectInstructions"]

_log = logging.getLogger("dsh_acp.instructions")

DEFAULT_FILES = ("AGENTS.md",)
MAX_BYTES = 32 * 1024
"""The most instruction text one system prompt carries (all files together)."""


def _folders(cwd: str) -> list[Path]:
    """The session folder and its parents up to the repository root (the nearest folder holding
    ``.git``), outermost first; just the session folder outside a repository."""
    here = Path(cwd)
    chain = [here, *here.parents]
    for index, folder in enumerate(chain):
        if (folder / ".git").exists():
            return list(reversed(chain[: index + 1]))
    return [here]


class ProjectInstructions:
    """The instruction files of a folder tree, cached by size and modification time."""

    def __init__(self, names: Sequence[str] = DEFAULT_FILES, max_bytes: int = MAX_BYTES) -> None:
        self.names = tuple(names)
        self.max_bytes = max_bytes
        self._cache: dict[Path, tuple[int, int, str]] = {}

    def files(self, cwd: str) -> list[Path]:
        """The instruction files that exist for a session in ``cwd``, outermost first."""
        return [folder / name for folder in _folders(cwd) for name in self.names if (folder / name).is_file()]

    def text(self, cwd: str) -> str:
        """The instructions for a session in ``cwd``: each file under a line naming it (relative
        to ``cwd`` where it can be), the nearest last; empty when there are none."""
        parts = []
        for path in self.files(cwd):
            content = self._read(path)
            if content.strip():
                parts.append(f"From {os.path.relpath(path, cwd)}:\n{content.strip()}")
        if not parts:
            return ""
        text = "\n\n".join(parts)
        half = self.max_bytes // 2
        return bound_text(text, head=half, tail=half)

    def _read(self, path: Path) -> str:
        try:
            stat = path.stat()
        except OSError:
            return ""
        cached = self._cache.get(path)
        if cached is not None and cached[:2] == (stat.st_size, stat.st_mtime_ns):
            return cached[2]
        try:
            data = path.read_bytes()[: self.max_bytes * 2]
        except OSError as error:
            _log.warning("cannot read %s: %s", path, error)
            return ""
        half = self.max_bytes // 2
        text = bound_text(data.decode("utf-8", errors="replace"), head=half, tail=half)
        self._cache[path] = (stat.st_size, stat.st_mtime_ns, text)
        return text
