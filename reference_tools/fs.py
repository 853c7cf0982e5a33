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

Register them with ``register_fs_tools(registry)``: it adds the tools and ``fs_policy``, the
pre-execute listener that asks before anything outside the workspace is touched and refuses to
overwrite what the model has not read.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, NamedTuple

import anyio.to_thread

from dsh_tools import (
    Ask,
    Deny,
    DiffCallView,
    DiffResultView,
    Disposer,
    FileDiff,
    GenericCallView,
    GenericResultView,
    Location,
    PathSubject,
    PreExecuteListener,
    PreNext,
    PreToolDecision,
    SchemaProp,
    SchemaSpec,
    ToolCallView,
    ToolDefinition,
    ToolError,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    ToolResultView,
    define_tool,
    text,
)
from dsh_tools.filesystem import FileSystem, FileTooLargeError, LocalFileSystem, NotTextError

from . import _hunks, _paths, _ripgrep, _search

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


def _check_cancelled() -> None:
    # anyio.from_thread is imported on the first search, not with the tools (idle memory).
    import anyio.from_thread

    anyio.from_thread.check_cancelled()


_READ_FIRST = "Read a file before editing or overwriting it, and again if it changed."
_PREFER_FILE_TOOLS = "Prefer the file tools over shell commands for files."
_EDITING_RULES = (_READ_FIRST, _PREFER_FILE_TOOLS)
"""What the system prompt says for the tools that read or change files (the policy enforces the
first: an edit of a file not read, or changed since, is refused)."""
_SEARCHING_RULES = (_PREFER_FILE_TOOLS,)

MAX_READ_LINES = 2000
MAX_READ_BYTES = 100 * 1024
_MAX_LINE_CHARS = 2000
_MAX_GLOB = 200
_MAX_GREP = 200
_MAX_GREP_LINE = 500
_MAX_LS = 500
_LOCAL = LocalFileSystem()


# -- shared helpers ----------------------------------------------------------------------


_HASH_CHUNK = 1 << 16


class TextPrint(NamedTuple):
    """A text's length and the hash of each of its ``_HASH_CHUNK``-character chunks."""

    length: int
    chunks: tuple[int, ...]


def _text_print(
    content: str | _hunks.Splice, base: TextPrint | None = None, *, size: int = _HASH_CHUNK
) -> TextPrint:
    """The print of ``content``, the same for a text and a splice that spells it.

    ``base``, the print of the text a splice was made from, spares hashing what the splice
    kept: the chunks wholly inside its head, and inside its tail when the length is the same
    (the tail then sits at the same offsets).
    """
    # CRLF is folded so that a backend's line-ending conversion is not mistaken for a change
    # (rare: a backend hands over LF text, so only a lone "\r" gets here). A splice without
    # "\r" shares its head and tail with its base even if the base was folded: a fold there
    # would have left a "\r" in them.
    if "\r" in content:
        content, base = str(content).replace("\r\n", "\n"), None
    # Python's str hash (SipHash, several GB/s) is the cheapest full pass over the text and is
    # stable for the life of the process, which outlives any session's tracker. It is taken
    # over fixed-size chunks so that a splice can be hashed without being built.
    if isinstance(content, str):
        chunks = (content[start : start + size] for start in range(0, len(content), size))
        return TextPrint(len(content), tuple(map(hash, chunks)))
    if base is None:
        return TextPrint(len(content), tuple(map(hash, content.chunks(size))))
    head = content.head // size  # chunks wholly inside the head
    if base.length == len(content):
        tail = max(head, -(-(len(content) - content.tail) // size))  # the first chunk in the tail
        kept = base.chunks[tail:]
    else:
        tail, kept = -(-len(content) // size), ()
    changed = tuple(map(hash, content.chunks(size, head * size, tail * size)))
    return TextPrint(len(content), base.chunks[:head] + changed + kept)


@dataclass(frozen=True, slots=True)
class _Seen:
    text: TextPrint
    """The print of the text the session saw."""
    stamp: Hashable | None
    """The backend's ``fingerprint`` of the file taken before that text was read, if any."""


class ReadTracker:
    """What this session has read: for each file (by real path), a print of its text (hashes of
    its chunks) and, when the backend gives one, a fingerprint of the file.

    Kept in the session's services (``services.setdefault(ReadTracker, ReadTracker)``): ``read``
    records, ``write`` and ``edit`` record what they wrote, ``fs_policy`` asks whether a file was
    read, and ``write``/``edit`` refuse a file whose text differs from what was recorded.

    The file fingerprint (``FileSystem.fingerprint``, a stat for the local disk) only saves
    work: when the one taken after the current read equals the one taken before the recorded
    read, the file provably did not change in between and its text is not hashed again. In
    every other case (no fingerprint, a file touched or replaced, times too recent to prove
    anything) the texts are compared.
    """

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}

    def record(
        self,
        path: str,
        content: str | _hunks.Splice,
        stamp: Hashable | None = None,
        *,
        base: TextPrint | None = None,
    ) -> None:
        """Remember ``content`` as what the session last saw of ``path``.

        ``stamp`` is the backend's fingerprint of the file taken *before* ``content`` was read
        from it (so a change after it shows); leave it out for text the tools wrote, as one
        taken after a write could already describe someone else's change. For a splice,
        ``base`` is the print of the text it was made from (``seen`` of it), to hash less.
        """
        self._seen[os.path.realpath(path)] = _Seen(_text_print(content, base), stamp)

    def has_read(self, path: str) -> bool:
        """Whether the session has read (or written) ``path``."""
        return os.path.realpath(path) in self._seen

    def seen(self, path: str) -> TextPrint | None:
        """The print of what the session last saw of ``path``; right after ``changed`` said no,
        it is the print of the text that was checked."""
        seen = self._seen.get(os.path.realpath(path))
        return None if seen is None else seen.text

    def changed(self, path: str, content: str, stamp: Hashable | None = None) -> bool:
        """Whether ``content`` (the file's text now) differs from what was recorded.

        ``stamp`` is the backend's fingerprint of the file taken *after* ``content`` was read.
        """
        seen = self._seen.get(os.path.realpath(path))
        if seen is None:
            return False
        if seen.stamp is not None and seen.stamp == stamp:
            return False  # the backend proves that the file did not change since the recorded read
        return seen.text != _text_print(content)


def _tracker(execution: ToolExecution) -> ReadTracker:
    return execution.services.setdefault(ReadTracker, ReadTracker)


class _Checked:
    """The real path ``fs_policy`` checked for each call, so that the tool acts on that path
    and does not resolve the one it was given a second time (a link could have changed)."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}


def _target(execution: ToolExecution, path: str) -> str:
    """The real path a call acts on: the one its policy checked, else resolved now."""
    checked = execution.services.get(_Checked)
    real = checked.paths.pop(execution.call_id, None) if checked is not None else None
    return real if real is not None else os.path.realpath(path)


def _file_system(execution: ToolExecution) -> FileSystem:
    # mypy rejects an abstract class as a type[T] argument (python/mypy#4717); the lookup is by
    # isinstance, so any registered backend is found.
    return execution.services.get(FileSystem) or _LOCAL  # type: ignore[type-abstract]


async def _read_text(execution: ToolExecution, target: str, path: str) -> str:
    """The text of ``target`` (a real path); errors name ``path``, as the call did."""
    try:
        return await _file_system(execution).read_text(target)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; use ls to list it") from None
    except (NotTextError, FileTooLargeError) as error:
        raise ToolError(f"{path} cannot be read as text: {error}") from None
    except OSError as error:
        raise ToolError(f"cannot read {path}: {error.strerror or error}") from None


async def _write_text(execution: ToolExecution, target: str, path: str, content: str | _hunks.Splice) -> None:
    file_system = _file_system(execution)
    try:
        if isinstance(content, str):
            await file_system.write_text(target, content)
        else:
            await file_system.write_chunks(target, content.chunks())
    except OSError as error:
        raise ToolError(f"cannot write {path}: {error.strerror or error}") from None
    except UnicodeEncodeError as error:  # JSON can carry lone surrogates; files cannot
        raise ToolError(f"cannot write {path}: the text is not valid Unicode ({error.reason})") from None


async def _stamp(execution: ToolExecution, path: str) -> Hashable | None:
    try:
        return await _file_system(execution).fingerprint(path)
    except OSError:  # no proof: the texts get compared
        return None


async def _check_fresh(execution: ToolExecution, target: str, current: str, path: str) -> TextPrint | None:
    """Refuse ``current`` (the text of ``target`` now) unless it is what the session last saw;
    return its print, if the session has one."""
    # The stamp is taken after ``current`` was read: if it equals the one taken before the
    # recorded read, nothing changed in between, so ``current`` is what the session saw.
    stamp = await _stamp(execution, target)
    tracker = _tracker(execution)
    if tracker.changed(target, current, stamp):
        raise ToolError(
            f"{path} has changed since it was last read (it was modified outside these tools); "
            "read it again and make the change on its current text"
        )
    return tracker.seen(target)  # no await since the check: no other call can have recorded


def _fenced(body: str, info: str = "") -> str:
    """``body`` as a Markdown code block: tool output must not render as Markdown (a ``#``
    line would become a heading). The fence is longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def _result_text(result: ToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _meta(result: ToolResult) -> dict[str, Any] | None:
    # Presenters validate softly: a failed call or an old log's meta gives the generic card.
    return result.meta if not result.is_error and isinstance(result.meta, dict) else None


# -- read --------------------------------------------------------------------------------

_READ_PARAMETERS: SchemaSpec = {
    "file_path": {"type": "string", "required": True},
    "offset": {"type": "integer", "description": "1-based start line."},
    "limit": {"type": "integer"},
}


async def _read(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    path = _paths.absolute(execution, args["file_path"])
    target = _target(execution, path)
    offset, limit = args.get("offset", 1), args.get("limit", MAX_READ_LINES)
    if offset < 1 or limit < 1:
        raise ToolError("offset and limit must be at least 1")
    # Before the read: a change made after it, even during the read, then shows.
    stamp = await _stamp(execution, target)
    content = await _read_text(execution, target, path)
    _tracker(execution).record(target, content, stamp)
    total = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    if total == 0:
        return ToolOutput([text(f"{path} is empty.")], meta={"path": path, "start": 0, "end": 0, "total": 0})
    pos = _hunks.line_start(content, offset)
    if pos < 0 or offset > total:
        raise ToolError(f"offset {offset} is past the end of {path}, which has {total} lines")
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
    last = line - 1
    notes = [f"Lines longer than {_MAX_LINE_CHARS} characters were shortened."] if shortened else []
    if last < total:
        why = f" (the {MAX_READ_BYTES // 1024} KiB output limit was reached)" if size > MAX_READ_BYTES else ""
        notes.append(f"Showing lines {offset}-{last} of {total}{why}. To read on, use offset={last + 1}.")
    body = "\n".join(rows) + "".join(f"\n\n[{note}]" for note in notes)
    return ToolOutput([text(body)], meta={"path": path, "start": offset, "end": last, "total": total})


def _present_read(args: dict[str, Any]) -> ToolCallView:
    path, offset, limit = args["file_path"], args.get("offset"), args.get("limit")
    if limit is not None:
        window = f" (lines {offset or 1}-{(offset or 1) + limit - 1})"
    else:
        window = f" (from line {offset})" if offset is not None else ""
    # A relative path is fine here: a UI bridge resolves it against the session's folder.
    locations = (Location(path=path, line=offset or 1),)
    return GenericCallView(title=f"Read {path}{window}", kind="read", raw_input=args, locations=locations)


def _present_read_result(args: dict[str, Any], result: ToolResult) -> ToolResultView | None:
    meta = _meta(result)
    if meta is None:
        return None
    start, end = meta["start"], meta["end"]
    window = "empty" if not meta["total"] else f"line {start}" if start == end else f"lines {start}-{end}"
    extension = os.path.splitext(meta["path"])[1].lstrip(".")
    return GenericResultView(
        title=f"Read {meta['path']} ({window})", content=(text(_fenced(_result_text(result), extension)),)
    )


read_tool = define_tool(
    name="read",
    description=(
        f"Read a text file as numbered lines (cat -n), at most {MAX_READ_LINES} lines and "
        f"{MAX_READ_BYTES // 1024} KiB per call; lines over 2000 characters are cut."
    ),
    parameters=_READ_PARAMETERS,
    execute=_read,
    present_call=_present_read,
    present_result=_present_read_result,
    kind="read",
    read_only=True,
    prompt_rules=_EDITING_RULES,
)


# -- write -------------------------------------------------------------------------------

_WRITE_PARAMETERS: SchemaSpec = {
    "file_path": {"type": "string", "required": True},
    "content": {"type": "string", "required": True},
}


async def _write(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    path, content = _paths.absolute(execution, args["file_path"]), args["content"]
    target = _target(execution, path)
    try:
        old: str | None = await _read_text(execution, target, path)
    except ToolError:
        # A directory, a binary file: not something to overwrite. (A stat costs microseconds,
        # less than a hop to a worker thread: it runs on the event loop on purpose.)
        if os.path.lexists(target):  # noqa: ASYNC240
            raise
        old = None
    if old is not None:
        await _check_fresh(execution, target, old, path)
        content = content.replace("\r\n", "\n")  # the file keeps its own line endings
    await _write_text(execution, target, path, content)
    _tracker(execution).record(target, content)
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
    meta = _meta(result)
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
    description=(
        "Create or overwrite a file, making parent directories; read an existing one first. For "
        "partial changes use edit."
    ),
    parameters=_WRITE_PARAMETERS,
    execute=_write,
    present_call=_present_write,
    present_result=_present_write_result,
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
    target = _target(execution, path)
    content = await _read_text(execution, target, path)
    seen = await _check_fresh(execution, target, content, path)
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
    await _write_text(execution, target, path, edited)
    _tracker(execution).record(target, edited, base=seen)
    line = _hunks.first_changed_line(hunks)
    meta = {"path": path, "hunks": hunks, "line": line, "replacements": len(sites), "omitted": omitted}
    count = f"{len(sites)} replacements" if len(sites) > 1 else "1 replacement"
    return ToolOutput([text(f"Edited {path}: {count}, the first at line {line}.")], meta=meta)


def _present_edit(args: dict[str, Any]) -> ToolCallView:
    path = args["file_path"]
    diff = FileDiff(path=path, old_text=args["old_string"], new_text=args["new_string"])
    return DiffCallView(title=f"Edit {path}", diffs=(diff,), locations=(Location(path=path),))


def _present_edit_result(args: dict[str, Any], result: ToolResult) -> ToolResultView | None:
    meta = _meta(result)
    if meta is None:
        return None
    note = f" ({meta['omitted']} more changes not shown)" if meta["omitted"] else ""
    return _diff_result("Edit", meta, _hunk_diffs(meta), note)


edit_tool = define_tool(
    name="edit",
    description=(
        "Replace old_string in a file read first. It must match exactly, whitespace included, "
        "and occur once unless replace_all."
    ),
    parameters=_EDIT_PARAMETERS,
    execute=_edit,
    present_call=_present_edit,
    present_result=_present_edit_result,
    kind="edit",
    prompt_rules=_EDITING_RULES,
)


# -- glob, grep, ls ----------------------------------------------------------------------

# The whole list would cost tokens on every request; a few names say what kind of directory it is.
_SKIPPED = ".git, node_modules, caches and the like"
_PATH: SchemaProp = {"type": "string"}


async def _in_thread(call: Callable[[], _search.Found]) -> _search.Found:
    # Walks run in a worker thread so the event loop keeps serving the session; the walk polls
    # check_cancelled, so a cancelled call stops within a few hundred files.
    return await anyio.to_thread.run_sync(call)


def _search_result(body: str, found: _search.Found, empty: str, narrow: str) -> str:
    if not found.lines:
        return empty
    if found.omitted:
        body += f"\n\n[{found.omitted} more not shown; {narrow}.]"
    return body


def _directory(execution: ToolExecution, path: str | None) -> str:
    directory = _paths.absolute(execution, path or ".")
    if not os.path.isdir(directory):
        raise ToolError(
            f"{directory} is not a directory" if os.path.exists(directory) else f"{directory} does not exist"
        )
    return directory


def _glob_target(execution: ToolExecution, args: dict[str, Any]) -> tuple[str, str]:
    literal, rest = _search.glob_root(args["pattern"])
    return _paths.absolute(execution, os.path.join(args.get("path") or ".", literal)), rest


_GLOB_PARAMETERS: SchemaSpec = {
    "pattern": {"type": "string", "required": True},
    "path": _PATH,
}


async def _glob(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    root, pattern = _glob_target(execution, args)
    _directory(execution, root)
    # ripgrep walks in parallel; matching and sorting are the Python walk's either way.
    paths = await _ripgrep.rg_files(root, skip_dirs=_search.SKIP_DIRS)
    found = await _in_thread(
        functools.partial(
            _search.glob_files, root, pattern, limit=_MAX_GLOB, check=_check_cancelled, paths=paths
        )
    )
    body = _search_result(
        "\n".join(found.lines), found, f"No files match {args['pattern']} in {root}.", "narrow the pattern"
    )
    return ToolOutput([text(body)], meta={"root": root, "count": len(found.lines) + found.omitted})


def _present_glob(args: dict[str, Any]) -> ToolCallView:
    where = f" in {args['path']}" if args.get("path") else ""
    return GenericCallView(title=f"Glob {args['pattern']}{where}", kind="search", raw_input=args)


def _present_search_result(args: dict[str, Any], result: ToolResult) -> ToolResultView | None:
    return (
        None if _meta(result) is None else GenericResultView(content=(text(_fenced(_result_text(result))),))
    )


glob_tool = define_tool(
    name="glob",
    description=(
        f"Find files by glob (src/**/*.{{ts,tsx}}). Returns sorted absolute paths, at most {_MAX_GLOB}. "
        f"Skips {_SKIPPED}; does not follow symlinks."
    ),
    parameters=_GLOB_PARAMETERS,
    execute=_glob,
    present_call=_present_glob,
    present_result=_present_search_result,
    kind="search",
    read_only=True,
    prompt_rules=_SEARCHING_RULES,
)

_GREP_PARAMETERS: SchemaSpec = {
    "pattern": {"type": "string", "required": True},
    "path": {"type": "string", "description": "File or directory."},
    "glob": {"type": "string", "description": "Only files matching it (*.py; with a /, paths below path)."},
    "case_insensitive": {"type": "boolean"},
}


async def _grep(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    root = _paths.absolute(execution, args.get("path") or ".")
    if not os.path.exists(root):  # noqa: ASYNC240 (a stat: cheaper than a thread hop)
        raise ToolError(f"{root} does not exist")
    flags = re.MULTILINE | (re.IGNORECASE if args.get("case_insensitive") else 0)
    try:
        pattern = re.compile(args["pattern"], flags)
    except re.error as error:
        raise ToolError(f"invalid regular expression {args['pattern']!r}: {error}") from None
    found = await _grep_found(root, pattern, args.get("glob"))
    empty = f"No matches for {args['pattern']} in {root}."
    body = _search_result("\n".join(found.lines), found, empty, "narrow the pattern, path or glob")
    total = len(found.lines) + found.omitted
    return ToolOutput([text(body)], meta={"root": root, "matches": total, "files": found.files})


async def _grep_found(root: str, pattern: re.Pattern[str], file_glob: str | None) -> _search.Found:
    """ripgrep's results where it can give them, else the Python walk's (the same results)."""
    translated = _ripgrep.translate(pattern.pattern, pattern.flags)
    rust, line_pattern = translated or (None, None)
    if rust is not None and os.path.isdir(root):  # noqa: ASYNC240 (a stat: cheaper than a thread hop)
        keep = _search.path_filter(root, file_glob)
        ran = await _ripgrep.rg_grep(
            root, rust, skip_dirs=_search.SKIP_DIRS, file_glob=file_glob, keep=keep, limit=_MAX_GREP
        )
        if ran is not None:
            lines, total, files = ran
            shown = [_search.line_entry(path, line, text, _MAX_GREP_LINE) for path, line, text in lines]
            return _search.Found(lines=shown, omitted=total - len(shown), files=files)
    grep = functools.partial(
        _search.grep_files,
        root,
        pattern,
        file_glob=file_glob,
        limit=_MAX_GREP,
        max_line=_MAX_GREP_LINE,
        line_pattern=line_pattern,
        check=_check_cancelled,
    )
    return await _in_thread(grep)


def _present_grep(args: dict[str, Any]) -> ToolCallView:
    where = f" in {args['path']}" if args.get("path") else ""
    only = f" ({args['glob']})" if args.get("glob") else ""
    return GenericCallView(title=f"Grep {args['pattern']}{where}{only}", kind="search", raw_input=args)


grep_tool = define_tool(
    name="grep",
    description=(
        "Search file contents with a Python regex, line by line. "
        f"Returns sorted path:line:text, at most {_MAX_GREP}. Skips binary files and {_SKIPPED}; "
        "does not follow symlinks."
    ),
    parameters=_GREP_PARAMETERS,
    execute=_grep,
    present_call=_present_grep,
    present_result=_present_search_result,
    kind="search",
    read_only=True,
    prompt_rules=_SEARCHING_RULES,
)

_LS_PARAMETERS: SchemaSpec = {
    "path": _PATH,
}


async def _ls(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    directory = _directory(execution, args.get("path"))
    found = await _in_thread(functools.partial(_search.list_dir, directory, limit=_MAX_LS))
    lines = [directory.rstrip("/") + "/", *(f"  {line}" for line in found.lines)]
    if found.skipped:
        lines.append(f"  [not listed: {', '.join(found.skipped)}]")
    body = "\n".join(lines) if len(lines) > 1 else f"{directory} is empty."
    if found.omitted:
        body += f"\n\n[{found.omitted} more not shown; list a subdirectory.]"
    return ToolOutput([text(body)], meta={"path": directory, "count": len(found.lines) + found.omitted})


def _present_ls(args: dict[str, Any]) -> ToolCallView:
    return GenericCallView(title=f"List {args.get('path') or '.'}", kind="read", raw_input=args)


ls_tool = define_tool(
    name="ls",
    description=(
        f"List a directory, sorted (directories end with /), at most {_MAX_LS} entries; {_SKIPPED} "
        "are named, not listed."
    ),
    parameters=_LS_PARAMETERS,
    execute=_ls,
    present_call=_present_ls,
    present_result=_present_search_result,
    kind="read",
    read_only=True,
    prompt_rules=_SEARCHING_RULES,
)


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
    glob_tool: _Rule("search", lambda execution, args: _glob_target(execution, args)[0]),
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
        if rule.needs_read and is_file and not _tracker(execution).has_read(real):
            return Deny(
                f"{path} has not been read in this session; read it before you {rule.verb} it, "
                "so that the change is made to its current content"
            )
        if rule.acts_on_file:
            # The tool acts on this very path (see _target), not on a second resolution.
            execution.services.setdefault(_Checked, _Checked).paths[execution.call_id] = real
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
