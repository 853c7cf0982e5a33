"""Walking a tree for glob, grep and ls: sorted, bounded, junk directories skipped.

Walks never follow symlinks (as ``grep -r`` does not): a link inside the workspace cannot lead a
search outside it, and a link cycle cannot trap it. Everything here is synchronous and meant to
run in a worker thread; ``check`` is called now and then so that a cancelled call stops early.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from dsh_tools import shown_text

__all__ = [
    "SKIP_DIRS",
    "Found",
    "glob_files",
    "glob_root",
    "grep_files",
    "list_dir",
    "translate_glob",
]

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".jj",
        "node_modules", ".venv", ".tox", ".nox",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis",
    }
)  # fmt: skip
"""Version-control metadata, installed dependencies and caches: never what a search is after."""

_MAGIC = re.compile(r"[*?\[{]")
_SNIFF = 8192
_CHECK_EVERY = 256


def _nothing() -> None:
    pass


@dataclass
class Found:
    """A bounded result: the lines to show and how many more there were."""

    lines: list[str] = field(default_factory=list)
    omitted: int = 0
    files: int = 0
    """Files that matched (grep)."""
    skipped: list[str] = field(default_factory=list)
    """Junk directories left out (ls)."""

    def add(self, line: str, limit: int) -> None:
        if len(self.lines) < limit:
            self.lines.append(line)
        else:
            self.omitted += 1


def translate_glob(pattern: str) -> str:
    """A regular expression for a glob: ``**`` spans directories, ``*`` and ``?`` do not,
    ``[...]`` is a class (``[!...]`` negated) and ``{a,b}`` an alternative."""
    out: list[str] = []
    depth, i = 0, 0
    balanced = pattern.count("{") == pattern.count("}")
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        close = pattern.find("]", i + 2) if char == "[" else -1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif close > 0:
            body = pattern[i + 1 : close].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = close
        elif char == "{" and balanced:
            out.append("(?:")
            depth += 1
        elif char == "," and depth:
            out.append("|")
        elif char == "}" and depth:
            out.append(")")
            depth -= 1
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def glob_root(pattern: str) -> tuple[str, str]:
    """Split a glob into its literal leading directories and the rest, so a walk can start at
    the deepest directory the pattern names (``src/**/*.py`` walks ``src`` only)."""
    parts = pattern.split("/")
    literal = 0
    while literal < len(parts) - 1 and not _MAGIC.search(parts[literal]):
        literal += 1
    root = "/".join(parts[:literal]) or ("/" if pattern.startswith("/") else "")
    return root, "/".join(parts[literal:])


def _entries(directory: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as scan:
            entries = list(scan)
    except OSError:  # unreadable directories are skipped, as grep -s does
        return []
    # A directory sorts as "name/", so that the walk order is plain sorted order of full paths.
    return sorted(entries, key=lambda e: e.name + "/" if e.is_dir(follow_symlinks=False) else e.name)


def _walk(root: str, check: Callable[[], None]) -> Iterator[os.DirEntry[str]]:
    """The regular files under ``root`` in sorted order, junk directories and symlinks skipped."""
    stack = [iter(_entries(root))]
    seen = 0
    while stack:
        entry = next(stack[-1], None)
        seen += 1
        if seen % _CHECK_EVERY == 0:
            check()
        if entry is None:
            stack.pop()
        elif entry.is_dir(follow_symlinks=False):
            if entry.name not in SKIP_DIRS:
                stack.append(iter(_entries(entry.path)))
        elif entry.is_file(follow_symlinks=False):
            yield entry


def glob_files(root: str, pattern: str, *, limit: int, check: Callable[[], None] = _nothing) -> Found:
    """Files under ``root`` whose path relative to it matches ``pattern`` (a glob)."""
    matcher = re.compile(translate_glob(pattern), re.DOTALL)
    found = Found()
    prefix = len(root.rstrip("/")) + 1
    for entry in _walk(root, check):
        if matcher.fullmatch(entry.path[prefix:]):
            found.add(shown_text(entry.path), limit)
    return found


def _read(path: str) -> bytes | None:
    # os.open/os.read: builtin open() costs a buffered wrapper and an fstat per file.
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        data = os.read(fd, 1 << 16)
        if len(data) < 1 << 16:
            return data
        chunks = [data]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _bytes_twin(pattern: re.Pattern[str]) -> re.Pattern[bytes] | None:
    """The same pattern over bytes, when it means the same on ASCII data (an ASCII pattern does,
    unless it uses escapes only text patterns have, such as ``\\u00e9``: those fail to compile)."""
    if not pattern.pattern.isascii():
        return None
    try:
        return re.compile(pattern.pattern.encode(), pattern.flags & ~re.UNICODE)
    except re.error:
        return None


def grep_files(
    root: str,
    pattern: re.Pattern[str],
    *,
    file_glob: str | None,
    limit: int,
    max_line: int,
    check: Callable[[], None] = _nothing,
) -> Found:
    """Lines matching ``pattern`` (``path:line:text``) in the text files under ``root``, or in
    ``root`` itself when it is a file. Binary files (a NUL byte in the first 8 KiB) are skipped.

    A glob without ``/`` filters on file names, one with ``/`` on the path below ``root``.
    """
    # An ASCII pattern means the same as a bytes pattern on ASCII data, so most files are
    # searched without decoding; anything else is decoded and searched as text.
    fast = _bytes_twin(pattern)
    name_filter = re.compile(translate_glob(file_glob), re.DOTALL) if file_glob else None
    on_name = file_glob is not None and "/" not in file_glob
    prefix = len(root.rstrip("/")) + 1
    found = Found()
    paths: Iterator[str]
    if os.path.isfile(root):
        paths, on_name = iter([root]), True
    else:
        paths = (entry.path for entry in _walk(root, check))
    for path in paths:
        if name_filter and not name_filter.fullmatch(os.path.basename(path) if on_name else path[prefix:]):
            continue
        data = _read(path)
        if data is None or b"\0" in data[:_SNIFF]:
            continue
        if fast is not None and data.isascii():
            if fast.search(data) is None:
                continue
            text = data.decode("ascii")
        else:
            # -sig: a BOM is not part of line 1. Bytes that are not UTF-8 become surrogates
            # (as in file names) and are shown as \xNN escapes.
            text = data.decode("utf-8-sig", "surrogateescape")
            if pattern.search(text) is None:
                continue
        found.files += 1
        _matching_lines(path, text, pattern, found, limit, max_line)
    return found


def _matching_lines(
    path: str, text: str, pattern: re.Pattern[str], found: Found, limit: int, max_line: int
) -> None:
    line, counted, pos = 1, 0, 0
    while pos < len(text):
        match = pattern.search(text, pos)
        # A match after the final newline is on no line (grep reports none there either).
        if match is None or (match.start() == len(text) and text.endswith("\n")):
            return
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.start())
        end = len(text) if end < 0 else end
        line += text.count("\n", counted, start)
        counted = start
        shown = text[start : min(end, start + max_line + 1)].rstrip("\r")
        shown = shown if len(shown) <= max_line else shown[:max_line] + " […]"
        found.add(shown_text(f"{path}:{line}:{shown}"), limit)
        pos = end + 1  # one entry per line, however many matches it holds


def list_dir(directory: str, *, limit: int) -> Found:
    """The entries of one directory, sorted: ``name/`` for a directory, ``name -> target`` for
    a symlink; junk directories are listed in ``skipped`` instead. Names that are not UTF-8
    show their bytes as ``\\xNN``."""
    found = Found()
    for entry in _entries(directory):
        name = shown_text(entry.name)
        if entry.is_symlink():
            try:
                found.add(f"{name} -> {shown_text(os.readlink(entry.path))}", limit)
            except OSError:
                found.add(f"{name} -> ?", limit)
        elif entry.is_dir(follow_symlinks=False):
            if entry.name in SKIP_DIRS:
                found.skipped.append(name + "/")
            else:
                found.add(name + "/", limit)
        else:
            found.add(name, limit)
    return found
