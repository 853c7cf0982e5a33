"""What the agent changed in files, turn by turn, as the session log tells it: what ``/undo``
reads to take a turn back.

Each write through the session's file system is a ``FileChanged`` event (``_file_journal``);
this folds them per turn and per file (the first write's ``before``, the last write's ``after``),
and remembers which turns ``/undo`` took back and which ran commands (whose changes to files no
log sees).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._events import FileChanged, FilesRestored

__all__ = ["FileHistory", "FileTurn", "PathChange", "undo_note"]


@dataclass(frozen=True, slots=True)
class PathChange:
    """One file's change over a turn: what it held before its first write, after its last."""

    path: str
    before: str | None
    """The digest of the kept bytes (``None``: the turn created the file)."""
    after: str
    not_kept: str | None


@dataclass(slots=True)
class FileTurn:
    """The file changes of one turn, in the order they were made."""

    prompt: str
    """The first words of the turn's prompt (what the undo card names it by)."""
    changes: list[FileChanged] = field(default_factory=list)

    def per_file(self) -> list[PathChange]:
        """One ``PathChange`` per file, in the order the files were first written."""
        first: dict[str, FileChanged] = {}
        last: dict[str, FileChanged] = {}
        for change in self.changes:
            first.setdefault(change.path, change)
            last[change.path] = change
        return [
            PathChange(path, start.before, last[path].after, start.not_kept) for path, start in first.items()
        ]


@dataclass(slots=True)
class FileHistory:
    """A session's file changes by turn (0-based prompt index)."""

    turns: dict[int, FileTurn] = field(default_factory=dict)
    undone: set[int] = field(default_factory=set)
    commands: set[int] = field(default_factory=set)
    """Turns that ran a command: what it did to files is not in the log."""

    def change(self, turn: int, event: FileChanged, prompt: str) -> None:
        found = self.turns.get(turn)
        if found is None:
            found = self.turns[turn] = FileTurn(prompt)
        found.changes.append(event)

    def last_undoable(self) -> int | None:
        """The latest turn that changed files and was not taken back yet."""
        return max((turn for turn in self.turns if turn not in self.undone), default=None)

    def restored(self, event: FilesRestored) -> None:
        self.undone.add(event.turn)


def undo_note(event: FilesRestored) -> str:
    """What the model is told of an undo (with its next request)."""
    parts = []
    if event.restored:
        parts.append("restored to what they held before it: " + ", ".join(event.restored))
    if event.removed:
        parts.append("removed (it had created them): " + ", ".join(event.removed))
    if event.left:
        parts.append("left as they are: " + "; ".join(f"{path} ({why})" for path, why in event.left))
    done = "; ".join(parts) if parts else "nothing was changed"
    return (
        f"The user took back (/undo) the file changes of an earlier turn of yours: {done}. "
        "Read a file again before you change it."
    )
