"""The tools that find files and text: ``glob``, ``grep`` and ``ls``. ripgrep does the walking
where it can; the Python walk in ``_search`` gives the same results where it cannot."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from dsh_tools import (
    GenericCallView,
    GenericResultView,
    SchemaProp,
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

from . import _paths, _ripgrep, _search
from ._file_tools import PREFER_FILE_TOOLS, result_meta

__all__ = ["glob_target", "glob_tool", "grep_tool", "ls_tool"]


def _check_cancelled() -> None:
    # anyio.from_thread is imported on the first search, not with the tools (idle memory).
    import anyio.from_thread

    anyio.from_thread.check_cancelled()


# What the three searches skip is said once, in the system prompt, not in each description (the
# whole list would cost tokens on every request; a few names say what kind of directory it is).
# Their limits are not said at all: a result cut short says so, and how to narrow it.
_SEARCHING_RULES = (
    PREFER_FILE_TOOLS,
    "File searches skip .git, node_modules, caches and the like, and symlinks.",
)
_MAX_GLOB = 200
_MAX_GREP = 200
_MAX_GREP_LINE = 500
_MAX_LS = 500
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


def glob_target(execution: ToolExecution, args: dict[str, Any]) -> tuple[str, str]:
    literal, rest = _search.glob_root(args["pattern"])
    return _paths.absolute(execution, os.path.join(args.get("path") or ".", literal)), rest


_GLOB_PARAMETERS: SchemaSpec = {
    "pattern": {"type": "string", "required": True},
    "path": _PATH,
}


async def _glob(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    root, pattern = glob_target(execution, args)
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
        None
        if result_meta(result) is None
        else GenericResultView(content=(text(fenced(text_of(result.content))),))
    )


glob_tool = define_tool(
    name="glob",
    description="Find files by glob (src/**/*.{ts,tsx}); returns sorted absolute paths.",
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
    description="Search file contents by Python regex, line by line; returns sorted path:line:text. "
    "Skips binary files.",
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
    description="List a directory, sorted; directories end with /.",
    parameters=_LS_PARAMETERS,
    execute=_ls,
    present_call=_present_ls,
    present_result=_present_search_result,
    kind="read",
    read_only=True,
    prompt_rules=_SEARCHING_RULES,
)
