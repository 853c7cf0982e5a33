"""``/undo``: take back the file changes of the latest turn not taken back yet.

What a turn changed is in the session log (``FileChanged`` events, folded per file by
``FileHistory``): each file goes back to the bytes it held before the turn's first write of it, a
file the turn created is removed. A file is only put back while it holds exactly what the agent
last wrote to it (compared by digest, in the backend, just before the replace): one the user
changed since, deleted, replaced by a link or a directory, is left as it is and named on the
card. The undo is logged (``FilesRestored``): a reload shows its card, the next ``/undo`` takes
back the turn before, and the model is told with its next request.

Not covered: what commands changed (``bash`` writes past the session's file system), and files
too large to keep (``UNDO_LIMIT``). The card says so when the turn ran commands.
"""

from __future__ import annotations

from dsh_acp.session._events import FilesRestored
from dsh_acp.session._file_history import FileTurn, PathChange
from dsh_acp.session._file_journal import FileJournal
from dsh_acp.session._replay import restored_card
from dsh_acp.session._session import Session
from dsh_tools import DiffCallView, FileDiff, GenericCallView, ToolCallView
from dsh_tools.filesystem import content_digest

__all__ = ["NOTHING_TO_UNDO", "undo_last_turn"]

NOTHING_TO_UNDO = "There is nothing to undo: no turn of this session changed files through the file tools."
ALL_UNDONE = "Every turn's file changes were taken back already."
_READ_LIMIT = 256 * 1024 * 1024
"""The most of a file read to compare it with what the agent wrote (the local disk's own limit)."""
_CONTEXT = 3
WHOLE_FILE_LIMIT = 256 * 1024
"""Characters of a file up to which the card shows it whole, as an edit's approval does (a card
is kept in the session log); a larger file's diff is its changed lines and a few around them."""


def _region(old: str, new: str) -> tuple[str, str]:
    """The changed lines of two texts with a few lines around them (a large file's diff card)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start, keep = max(0, head - _CONTEXT), max(0, tail - _CONTEXT)
    return "".join(a[start : len(a) - keep]), "".join(b[start : len(b) - keep])


def _diff(path: str, current: bytes | None, restored: bytes | None) -> FileDiff | None:
    """What the card shows for one file: the agent's text and what it went back to (a removed
    file goes to nothing); ``None`` for bytes that are not text."""
    try:
        old = (current or b"").decode("utf-8")
        new = (restored or b"").decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(old) > WHOLE_FILE_LIMIT or len(new) > WHOLE_FILE_LIMIT:
        old, new = _region(old, new)
    return FileDiff(path=path, old_text=old, new_text=new)


class _Undo:
    """One ``/undo``'s outcome, file by file."""

    def __init__(self, journal: FileJournal) -> None:
        self.journal = journal
        self.restored: list[str] = []
        self.removed: list[str] = []
        self.left: list[tuple[str, str]] = []
        self.diffs: list[FileDiff] = []

    async def take_back(self, change: PathChange) -> None:
        path = change.path
        if change.not_kept is not None:
            self.left.append((path, f"what it held was not kept: {change.not_kept}"))
            return
        if not change.after:
            self.left.append((path, "what the agent wrote to it cannot be told"))
            return
        before = None
        if change.before is not None:
            before = self.journal.kept.read(change.before)
            if before is None:
                self.left.append((path, "the copy kept of it is gone"))
                return
        try:  # what the card shows the agent's text as
            current = await self.journal.snapshot(path, limit=_READ_LIMIT)
        except (OSError, ValueError):
            current = None  # not a file the agent wrote: the put-back below says what it is
        else:
            if content_digest(current) != change.after:
                self.left.append((path, "it was deleted since" if current is None else "it changed since"))
                return
        # The backend compares, just before it writes: a change since the read above wins too.
        why = await self.journal.put_back(path, before, expected=change.after)
        if why is not None:
            self.left.append((path, why))
            return
        (self.restored if before is not None else self.removed).append(path)
        diff = _diff(path, current, before)
        if diff is not None:
            self.diffs.append(diff)

    def notice(self, ran_commands: bool) -> str:
        lines = []
        if self.restored:
            count = len(self.restored)
            files = f"{count} files to what they" if count > 1 else "1 file to what it"
            lines.append(f"Restored {files} held before.")
        if self.removed:
            count = len(self.removed)
            lines.append(f"Removed {count} file{'s' if count > 1 else ''} the turn created.")
        lines.extend(f"Left `{path}` as it is: {why}." for path, why in self.left)
        if ran_commands:
            lines.append("The turn also ran commands: what they changed in files is not undone.")
        return "\n".join(lines) if lines else "Nothing was changed."

    def view(self, title: str) -> ToolCallView:
        if self.diffs:
            return DiffCallView(title=title, diffs=tuple(self.diffs))
        return GenericCallView(title=title, kind="edit")


async def undo_last_turn(session: Session, call_id: str) -> str | None:
    """Take back the latest turn's file changes, show the card and log it; ``None`` when done,
    else what to tell the user (there was nothing to undo)."""
    history = session.files
    turn = history.last_undoable() if history is not None else None
    if history is None or turn is None:
        return ALL_UNDONE if history is not None and history.undone else NOTHING_TO_UNDO
    journal = session.services.get(FileJournal)
    assert isinstance(journal, FileJournal), "every session's file system is journaled"
    changes: FileTurn = history.turns[turn]
    undo = _Undo(journal)
    for change in changes.per_file():
        await undo.take_back(change)
    title = (
        f"Undo the file changes of “{changes.prompt}”"
        if changes.prompt
        else "Undo the file changes of a turn"
    )
    event = FilesRestored(
        turn,
        call_id,
        tuple(undo.restored),
        tuple(undo.removed),
        tuple(undo.left),
        undo.view(title).model_dump(mode="json"),
        undo.notice(turn in history.commands),
    )
    session.record(event)
    for update in restored_card(event, session.render):
        await session.send(update)
    return None
