"""The tools that read and change one file: ``read``, ``write`` and ``edit``.

``write`` and ``edit`` answer with a diff card even when it repeats the call-time one: an
update's content replaces the call's, and a text would wipe the diff.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

from dsh_tools import (
    DiffCallView,
    DiffResultView,
    FileDiff,
    GenericCallView,
    GenericResultView,
    Location,
    SchemaSpec,
    ToolCallView,
    ToolError,
    ToolExecution,
    ToolOutput,
    ToolResult,
    ToolResultView,
    define_tool,
    fenced,
    text,
    text_of,
)

from . import _file_access, _hunks, _paths
from ._read_tracker import tracker

__all__ = [
    "MAX_READ_BYTES",
    "MAX_READ_LINES",
    "PREFER_FILE_TOOLS",
    "WHOLE_FILE_LIMIT",
    "edit_tool",
    "read_tool",
    "result_meta",
    "write_tool",
]

_READ_FIRST = "Read a file before changing it, and again if it changed since."
PREFER_FILE_TOOLS = "Prefer the file tools over shell commands for files."
_EDITING_RULES = (_READ_FIRST, PREFER_FILE_TOOLS)
"""What the system prompt says for the tools that read or change files (the policy enforces the
first: an edit of a file not read, or changed since, is refused)."""

MAX_READ_LINES = 2000
MAX_READ_BYTES = 100 * 1024
_MAX_LINE_CHARS = 2000
WHOLE_FILE_LIMIT = 256 * 1024
"""Bytes of a file (and characters of its text after the change) up to which the card a person
approves shows it whole: the card is sent twice (the call and the permission request) and kept
in the session log."""


def result_meta(result: ToolResult) -> dict[str, Any] | None:
    """The ``meta`` a result card is drawn from; presenters validate softly: a failed call or an
    old log's meta gives the generic card."""
    return result.meta if not result.is_error and isinstance(result.meta, dict) else None


# -- read --------------------------------------------------------------------------------

_READ_PARAMETERS: SchemaSpec = {
    "file_path": {"type": "string", "required": True},
    "offset": {"type": "integer", "description": "1-based start line."},
    "limit": {"type": "integer"},
}


async def _read(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    path = _paths.absolute(execution, args["file_path"])
    target = _file_access.target(execution, path)
    offset, limit = args.get("offset", 1), args.get("limit", MAX_READ_LINES)
    if offset < 1 or limit < 1:
        raise ToolError("offset and limit must be at least 1")
    # Before the read: a change made after it, even during the read, then shows.
    stamp = await _file_access.stamp(execution, target)
    content = await _file_access.read_text(execution, target, path)
    tracker(execution).record(target, content, stamp)
    total = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    if total == 0:
        return ToolOutput([text(f"{path} is empty.")], meta={"path": path, "start": 0, "end": 0, "total": 0})
    pos = _hunks.line_start(content, offset)
    if pos < 0 or offset > total:
        raise ToolError(f"offset {offset} is past the end of {path}, which has {total} lines")
    shown = _numbered_lines(content, pos, offset, limit)
    body = "\n".join(shown.rows) + "".join(f"\n\n[{note}]" for note in shown.notes(offset, total))
    return ToolOutput([text(body)], meta={"path": path, "start": offset, "end": shown.last, "total": total})


@dataclass(frozen=True, slots=True)
class _Lines:
    """The numbered lines one read shows."""

    rows: list[str]
    last: int
    """The number of the last line shown."""
    shortened: bool
    """Some line was cut at ``_MAX_LINE_CHARS``."""
    full: bool
    """The output limit stopped the read."""

    def notes(self, offset: int, total: int) -> list[str]:
        notes = [f"Lines longer than {_MAX_LINE_CHARS} characters were shortened."] if self.shortened else []
        if self.last < total:
            why = f" (the {MAX_READ_BYTES // 1024} KiB output limit was reached)" if self.full else ""
            notes.append(
                f"Showing lines {offset}-{self.last} of {total}{why}. To read on, use offset={self.last + 1}."
            )
        return notes


def _numbered_lines(content: str, pos: int, offset: int, limit: int) -> _Lines:
    """Up to ``limit`` lines from line ``offset`` (at ``pos``), numbered as ``cat -n`` does, within
    ``MAX_READ_BYTES`` (at least one line)."""
    rows: list[str] = []
    size, shortened, line = 0, False, offset
    while line < offset + limit and pos < len(content):
        end = content.find("\n", pos)
        end = len(content) if end < 0 else end
        row = content[pos:end]
        if len(row) > _MAX_LINE_CHARS:
            row, shortened = f"{row[:_MAX_LINE_CHARS]} [… {len(row) - _MAX_LINE_CHARS} more characters]", True
        row = f"{line:>6}\t{row}"
        size += len(row.encode()) + 1
        if size > MAX_READ_BYTES and rows:
            break
        rows.append(row)
        line, pos = line + 1, end + 1
    return _Lines(rows, line - 1, shortened, size > MAX_READ_BYTES)


def _present_read(args: dict[str, Any]) -> ToolCallView:
    path, offset, limit = args["file_path"], args.get("offset"), args.get("limit")
    if limit is not None:
        window = f" (lines {offset or 1}-{(offset or 1) + limit - 1})"
    else:
        window = f" (from line {offset})" if offset is not None else ""
    # A relative path is fine here: a UI bridge resolves it against the session's folder.
    locations = (Location(path=path, line=offset or 1),)
    return GenericCallView(title=f"Read {path}{window}", kind="read", raw_input=args, locations=locations)


@functools.lru_cache(maxsize=256)
def _extension(path: str) -> str:
    """The fence's language: the file's extension (kept: a session reads the same files again and
    again, and a load draws every card again; ``splitext`` is a fifth of this card's cost)."""
    return os.path.splitext(path)[1].lstrip(".")


def _present_read_result(args: dict[str, Any], result: ToolResult) -> ToolResultView | None:
    meta = result_meta(result)
    if meta is None:
        return None
    start, end = meta["start"], meta["end"]
    window = "empty" if not meta["total"] else f"line {start}" if start == end else f"lines {start}-{end}"
    extension = _extension(meta["path"])
    return GenericResultView(
        title=f"Read {meta['path']} ({window})", content=(text(fenced(text_of(result.content), extension)),)
    )


read_tool = define_tool(
    name="read",
    # What a call leaves out (its line and byte limits, long lines) its output says, with the
    # offset to go on from: the schema stays short.
    description="Read a text file as numbered lines (cat -n).",
    parameters=_READ_PARAMETERS,
    execute=_read,
    present_call=_present_read,
    present_result=_present_read_result,
    kind="read",
    read_only=True,
    prompt_rules=_EDITING_RULES,
)


# -- the approval card: the whole file before and after --------------------------------------
#
# Some clients (Toad) number a diff's lines as if oldText and newText were whole files, so a
# fragment replaced at line 120 shows at line 1. For the person approving, write and edit offer
# the file's whole text before and after the change, computed as the call will make it: every
# client then numbers the lines right, and those that diff for themselves (Zed, JetBrains) show
# the same hunk in context. A file that is large, missing or not text, or a change the call
# would refuse, keeps the call card. The host runs these only for a path it may read unasked.


async def _whole_text(execution: ToolExecution, path: str) -> str | None:
    """The file's text as the tools see it, if it is small enough to show whole."""
    real = _file_access.checked(execution, path)
    try:
        # A stat costs microseconds, less than a hop to a worker thread.
        if os.stat(real).st_size > WHOLE_FILE_LIMIT:
            return None
        return await _file_access.file_system(execution).read_text(real)
    except (OSError, ValueError):  # missing, a directory, not text, too large for the backend
        return None


def _whole_card(card: ToolCallView, path: str, before: str, after: str) -> ToolCallView | None:
    if len(before) > WHOLE_FILE_LIMIT or len(after) > WHOLE_FILE_LIMIT or not isinstance(card, DiffCallView):
        return None
    return card.model_copy(update={"diffs": (FileDiff(path=path, old_text=before, new_text=after),)})


# -- write -------------------------------------------------------------------------------

_WRITE_PARAMETERS: SchemaSpec = {
    "file_path": {"type": "string", "required": True},
    "content": {"type": "string", "required": True},
}


async def _write(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    path, content = _paths.absolute(execution, args["file_path"]), args["content"]
    target = _file_access.target(execution, path)
    try:
        old: str | None = await _file_access.read_text(execution, target, path)
    except ToolError:
        # A directory, a binary file: not something to overwrite. (A stat costs microseconds,
        # less than a hop to a worker thread: it runs on the event loop on purpose.)
        if os.path.lexists(target):  # noqa: ASYNC240
            raise
        old = None
    if old is not None:
        await _file_access.check_fresh(execution, target, old, path)
        content = content.replace("\r\n", "\n")  # the file keeps its own line endings
    await _file_access.write_text(execution, target, path, content)
    tracker(execution).record(target, content)
    hunks = [] if old is None else _hunks.diff_hunks(old, content)
    meta = {"path": path, "created": old is None, "hunks": hunks, "line": _hunks.first_changed_line(hunks)}
    if old is None:
        return ToolOutput([text(f"Created {path}.")], meta=meta)
    return ToolOutput([text(f"Wrote {path}." if hunks else f"{path} already had this content.")], meta=meta)


def _present_write(args: dict[str, Any]) -> ToolCallView:
    path = args["file_path"]
    # Pure: the old content is unknown here, so the pending card shows the new text as a whole;
    # the result card replaces it with the hunks actually applied.
    diff = FileDiff(path=path, old_text=None, new_text=args["content"])
    return DiffCallView(title=f"Write {path}", diffs=(diff,), locations=(Location(path=path),))


async def _preview_write(args: dict[str, Any], execution: ToolExecution) -> ToolCallView | None:
    path = _paths.absolute(execution, args["file_path"])
    before = await _whole_text(execution, path)
    if before is None:  # a new file: the call card shows it whole already
        return None
    return _whole_card(_present_write(args), args["file_path"], before, args["content"].replace("\r\n", "\n"))


def _diff_result(
    verb: str, meta: dict[str, Any], diffs: tuple[FileDiff, ...], note: str = ""
) -> ToolResultView:
    path = meta["path"]
    location = (Location(path=path, line=meta["line"]),)
    return DiffResultView(title=f"{verb} {path}{note}", diffs=diffs, locations=location)


def _hunk_diffs(meta: dict[str, Any]) -> tuple[FileDiff, ...]:
    return tuple(
        FileDiff(path=meta["path"], old_text=hunk["old_text"], new_text=hunk["new_text"])
        for hunk in meta["hunks"]
    )


def _present_write_result(args: dict[str, Any], result: ToolResult) -> ToolResultView | None:
    meta = result_meta(result)
    if meta is None:
        return None
    if meta["created"]:
        return _diff_result(
            "Write", meta, (FileDiff(path=meta["path"], old_text=None, new_text=args["content"]),)
        )
    if not meta["hunks"]:
        return GenericResultView(title=f"Write {meta['path']} (no changes)")
    return _diff_result("Write", meta, _hunk_diffs(meta))


write_tool = define_tool(
    name="write",
    description="Create or overwrite a file (and its parent directories); for partial changes use edit.",
    parameters=_WRITE_PARAMETERS,
    execute=_write,
    present_call=_present_write,
    present_result=_present_write_result,
    preview=_preview_write,
    kind="edit",
    prompt_rules=_EDITING_RULES,
)


# -- edit --------------------------------------------------------------------------------

_EDIT_PARAMETERS: SchemaSpec = {
    "file_path": {"type": "string", "required": True},
    "old_string": {"type": "string", "required": True},
    "new_string": {"type": "string", "required": True},
    "replace_all": {"type": "boolean"},
}


async def _edit(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    path = _paths.absolute(execution, args["file_path"])
    # Matching works on LF text: the backend hands it over that way and puts CRLF back.
    old, new = args["old_string"].replace("\r\n", "\n"), args["new_string"].replace("\r\n", "\n")
    if not old:
        raise ToolError("old_string is empty; to create a file, use write")
    if old == new:
        raise ToolError("old_string and new_string are the same, so there is nothing to change")
    target = _file_access.target(execution, path)
    content = await _file_access.read_text(execution, target, path)
    seen = await _file_access.check_fresh(execution, target, content, path)
    replace_all = bool(args.get("replace_all", False))
    sites = _hunks.find_sites(content, old, limit=None if replace_all else 2)
    if not sites:
        raise ToolError(
            f"old_string was not found in {path}. It must match the file exactly, whitespace and "
            "indentation included; read the file again and copy the text to replace."
        )
    if len(sites) > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {content.count(old)} times in {path}; include more surrounding lines "
            "to make it unique, or set replace_all to true to replace every occurrence."
        )
    first_line = content.count("\n", 0, sites[0]) + 1
    hunks, omitted = _hunks.edit_hunks(content, sites, old, new, first_line=first_line)
    # The new text is handed to the backend a chunk at a time and never built whole: in a large
    # file, building it costs more than writing it.
    edited = _hunks.Splice(content, sites, old, new)
    await _file_access.write_text(execution, target, path, edited)
    tracker(execution).record(target, edited, base=seen)
    line = _hunks.first_changed_line(hunks)
    meta = {"path": path, "hunks": hunks, "line": line, "replacements": len(sites), "omitted": omitted}
    count = f"{len(sites)} replacements" if len(sites) > 1 else "1 replacement"
    return ToolOutput([text(f"Edited {path}: {count}, the first at line {line}.")], meta=meta)


def _present_edit(args: dict[str, Any]) -> ToolCallView:
    path = args["file_path"]
    diff = FileDiff(path=path, old_text=args["old_string"], new_text=args["new_string"])
    return DiffCallView(title=f"Edit {path}", diffs=(diff,), locations=(Location(path=path),))


async def _preview_edit(args: dict[str, Any], execution: ToolExecution) -> ToolCallView | None:
    path = _paths.absolute(execution, args["file_path"])
    old, new = args["old_string"].replace("\r\n", "\n"), args["new_string"].replace("\r\n", "\n")
    if not old or old == new:
        return None
    before = await _whole_text(execution, path)
    if before is None:
        return None
    replace_all = bool(args.get("replace_all", False))
    sites = _hunks.find_sites(before, old, limit=None if replace_all else 2)
    if not sites or (len(sites) > 1 and not replace_all):
        return None  # the call will say why it cannot make the change
    after = str(_hunks.Splice(before, sites, old, new))
    return _whole_card(_present_edit(args), args["file_path"], before, after)


def _present_edit_result(args: dict[str, Any], result: ToolResult) -> ToolResultView | None:
    meta = result_meta(result)
    if meta is None:
        return None
    note = f" ({meta['omitted']} more changes not shown)" if meta["omitted"] else ""
    return _diff_result("Edit", meta, _hunk_diffs(meta), note)


edit_tool = define_tool(
    name="edit",
    description="Replace old_string (exact, whitespace included; once unless replace_all) with new_string.",
    parameters=_EDIT_PARAMETERS,
    execute=_edit,
    present_call=_present_edit,
    present_result=_present_edit_result,
    preview=_preview_edit,
    kind="edit",
    prompt_rules=_EDITING_RULES,
)
