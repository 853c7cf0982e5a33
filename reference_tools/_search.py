"""Walking a tree for glob, grep and ls: sorted, bounded, junk directories skipped.

Walks never follow symlinks (as ``grep -r`` does not): a link inside the workspace cannot lead a
search outside it, and a link cycle cannot trap it. Everything here is synchronous and meant to
run in a worker thread; ``check`` is called now and then so that a cancelled call stops early.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from dsh_tools import shown_text

__all__ = [
    "SKIP_DIRS",
    "Found",
    "decode_text",
    "glob_files",
    "glob_root",
    "grep_files",
    "line_entry",
    "list_dir",
    "path_filter",
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


def glob_files(
    root: str,
    pattern: str,
    *,
    limit: int,
    check: Callable[[], None] = _nothing,
    paths: Iterable[str] | None = None,
) -> Found:
    """Files under ``root`` whose path relative to it matches ``pattern`` (a glob). ``paths``:
    the files under ``root`` as another walk found them (ripgrep's), in any order."""
    matcher = re.compile(translate_glob(pattern), re.DOTALL)
    found = Found()
    prefix = len(root.rstrip("/")) + 1
    walked = (entry.path for entry in _walk(root, check)) if paths is None else sorted(paths)
    for path in walked:
        if matcher.fullmatch(path[prefix:]):
            found.add(shown_text(path), limit)
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


def path_filter(root: str, file_glob: str | None, *, names: bool = False) -> Callable[[str], bool]:
    """Whether a path under ``root`` passes grep's glob: one without ``/`` (or any, with
    ``names``) filters on file names, one with ``/`` on the path below ``root``."""
    if not file_glob:
        return lambda path: True
    matcher = re.compile(translate_glob(file_glob), re.DOTALL).fullmatch
    if names or "/" not in file_glob:
        return lambda path: matcher(os.path.basename(path)) is not None
    prefix = len(root.rstrip("/")) + 1
    return lambda path: matcher(path[prefix:]) is not None


def decode_text(data: bytes) -> str | None:
    """A file's bytes as the text grep searches, or ``None`` for a binary file (a NUL byte).

    ripgrep's rules, so that both engines agree: a UTF-8 BOM is dropped (it is not part of line
    1), a UTF-16 BOM means UTF-16, and bytes that are not UTF-8 become surrogates, as in file
    names (shown as ``\\xNN`` escapes).
    """
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16", "replace")
        return None if "\0" in text else text
    if b"\0" in data:
        return None
    if data.isascii():
        return data.decode("ascii")
    return data.decode("utf-8-sig", "surrogateescape")


def line_entry(path: str, line: int, text: str, max_line: int) -> str:
    """One grep result, ``path:line:text``: the line without its CR, shortened past
    ``max_line`` characters, bytes that are not UTF-8 escaped."""
    text = text[: max_line + 1].rstrip("\r")
    text = text if len(text) <= max_line else text[:max_line] + " […]"
    return shown_text(f"{path}:{line}:{text}")


def grep_files(
    root: str,
    pattern: re.Pattern[str],
    *,
    file_glob: str | None,
    limit: int,
    max_line: int,
    line_pattern: re.Pattern[str] | None = None,
    check: Callable[[], None] = _nothing,
) -> Found:
    """Lines matching ``pattern`` (``path:line:text``) in the text files under ``root``, or in
    ``root`` itself when it is a file; binary files are skipped. Each line is searched on its
    own: a match never spans lines.

    ``line_pattern``, the same pattern as ripgrep reads it (``_ripgrep.translate``), is searched
    instead when given: a match within a line is then also a match of the whole text at the same
    place (no look-around, no ``\\A``/``\\Z``), so the whole text is searched first, and only
    lines where a match ran past the line end are searched alone.
    """
    line_safe = line_pattern is not None
    # An ASCII pattern means the same as a bytes pattern on ASCII data, so most files are
    # searched without decoding; anything else is decoded and searched as text.
    fast = _bytes_twin(pattern) if line_safe else None
    keep = path_filter(root, file_glob)
    found = Found()
    paths: Iterator[str]
    if os.path.isfile(root):
        paths, keep = iter([root]), path_filter(root, file_glob, names=True)
    else:
        paths = (entry.path for entry in _walk(root, check))
    for path in paths:
        if not keep(path):
            continue
        data = _read(path)
        if data is None or (fast is not None and data.isascii() and fast.search(data) is None):
            continue
        text = decode_text(data)
        if text is None or (line_pattern is not None and line_pattern.search(text) is None):
            continue
        if _matching_lines(path, text, line_pattern or pattern, found, limit, max_line, line_safe):
            found.files += 1
    return found


def _lines_of(text: str) -> Iterator[tuple[int, int]]:
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield start, end
        start = end + 1


def _matching_lines(
    path: str, text: str, pattern: re.Pattern[str], found: Found, limit: int, max_line: int, line_safe: bool
) -> bool:
    """Add the lines of ``text`` that match; whether there was any."""
    if not line_safe:
        hits = [
            (start, end) for start, end in _lines_of(text) if pattern.search(text, start, end) is not None
        ]
    else:
        hits, pos = [], 0
        while pos < len(text):
            match = pattern.search(text, pos)
            if match is None:
                break
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.start())
            end = len(text) if end < 0 else end
            if start == len(text):
                break  # a match after the final newline is on no line
            # Leftmost: a line before this one with a match alone would have matched here first.
            if match.end() <= end or pattern.search(text, start, end) is not None:
                hits.append((start, end))
            pos = end + 1
    line, counted = 1, 0
    for start, end in hits:
        line += text.count("\n", counted, start)
        counted = start
        found.add(line_entry(path, line, text[start:end], max_line), limit)
    return bool(hits)


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
