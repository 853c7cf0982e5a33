"""glob, grep and ls: sorted, bounded, junk skipped, symlinks not followed, errors clear."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dsh_tools import (
    GenericCallView,
    GenericResultView,
    Services,
    TextBlock,
    ToolExecution,
    ToolRegistry,
    ToolResult,
)
from reference_tools import _ripgrep, _search
from reference_tools.fs import fs_tools, register_fs_tools

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["ripgrep", "python"], autouse=True)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with each search engine: ripgrep, and the Python walk that stands in
    where ripgrep is missing."""
    if request.param == "python":
        monkeypatch.setattr(_ripgrep, "rg_binary", lambda: None)
    else:
        assert _ripgrep.rg_binary() is not None, "rg is a dependency: it must be installed here"
    return str(request.param)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = Path(os.path.realpath(tmp_path)) / "ws"
    for name, content in {
        "a.py": "import os\nprint('hello')\n",
        "a.txt": "hello text\n",
        "b/c.py": "def hello():\n    return 'HELLO'\n",
        "b/d/e.ts": "const hello = 1;\r\n",
        "b/d/f.tsx": "export {}\n",
        ".git/config": "hello = git\n",
        "node_modules/x/index.js": "hello\n",
        "__pycache__/a.pyc": "hello\n",
        ".venv/lib/site.py": "hello\n",
        "img.png": "",
        "unicode.txt": "café Straße\nÉCOLE\n",
        "bom.txt": "\ufeffhello bom\n",
    }.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8", newline="")
    (workspace / "img.png").write_bytes(b"\x89PNG\x00\x00hello")
    return workspace


async def run(ws: Path, name: str, **arguments: Any) -> tuple[str, bool, Any]:
    registry = ToolRegistry()
    register_fs_tools(registry)
    call = ToolExecution(call_id="1", name=name, arguments=arguments, cwd=str(ws), services=Services())
    result = await registry.execute(call)
    body = "".join(block.text for block in result.content if isinstance(block, TextBlock))
    return body, result.is_error, result.meta


async def ok(ws: Path, name: str, **arguments: Any) -> str:
    body, is_error, _ = await run(ws, name, **arguments)
    assert not is_error, body
    return body


# -- glob ---------------------------------------------------------------------------------


async def test_glob_is_sorted_absolute_and_skips_junk(ws: Path) -> None:
    assert (await ok(ws, "glob", pattern="**/*.py")).splitlines() == [str(ws / "a.py"), str(ws / "b/c.py")]
    everything = (await ok(ws, "glob", pattern="**")).splitlines()
    assert everything == sorted(everything)
    assert not any(
        part in line for line in everything for part in (".git", "node_modules", "__pycache__", ".venv")
    )


async def test_glob_patterns(ws: Path) -> None:
    assert (await ok(ws, "glob", pattern="*.py")).splitlines() == [str(ws / "a.py")]  # * stays in a directory
    assert (await ok(ws, "glob", pattern="b/**/*.{ts,tsx}")).splitlines() == [
        str(ws / "b/d/e.ts"),
        str(ws / "b/d/f.tsx"),
    ]
    assert (await ok(ws, "glob", pattern="a.[!p]*")).splitlines() == [str(ws / "a.txt")]
    assert (await ok(ws, "glob", pattern="?.py", path="b")).splitlines() == [str(ws / "b/c.py")]
    assert (await ok(ws, "glob", pattern=str(ws / "b/*.py"))).splitlines() == [str(ws / "b/c.py")]


async def test_glob_finds_junk_when_asked_for_it_directly(ws: Path) -> None:
    assert (await ok(ws, "glob", pattern=".git/*")).splitlines() == [str(ws / ".git/config")]


async def test_glob_with_no_match_and_bad_roots(ws: Path) -> None:
    assert await ok(ws, "glob", pattern="**/*.rs") == f"No files match **/*.rs in {ws}."
    body, is_error, _ = await run(ws, "glob", pattern="*", path="missing")
    assert is_error
    assert f"{ws / 'missing'} does not exist" in body
    body, is_error, _ = await run(ws, "glob", pattern="*", path="a.py")
    assert is_error
    assert "is not a directory" in body


async def test_glob_is_bounded(ws: Path) -> None:
    many = ws / "many"
    many.mkdir()
    for index in range(250):
        (many / f"{index:03d}.log").write_text("")
    body, _, meta = await run(ws, "glob", pattern="many/*.log")
    lines = body.splitlines()
    assert lines[:200] == [str(many / f"{index:03d}.log") for index in range(200)]
    assert lines[-1] == "[50 more not shown; narrow the pattern.]"
    assert meta["count"] == 250


async def test_glob_does_not_follow_symlinks(ws: Path) -> None:
    outside = ws.parent / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("")
    (ws / "link").symlink_to(outside)
    (ws / "loop").symlink_to(ws)
    assert "secret" not in await ok(ws, "glob", pattern="**/*.py")


def test_glob_translation() -> None:
    import re

    def matches(pattern: str, path: str) -> bool:
        return re.fullmatch(_search.translate_glob(pattern), path, re.DOTALL) is not None

    assert matches("**/*.py", "a.py")
    assert matches("**/*.py", "x/y/a.py")
    assert not matches("*.py", "x/a.py")
    assert matches("src/**", "src/a/b")
    assert not matches("src/**", "lib/a")
    assert matches("{a,b}/*.c", "b/x.c")
    assert not matches("{a,b}/*.c", "c/x.c")
    assert matches("{x.c", "{x.c")  # unbalanced braces are literal
    assert matches("[ab].txt", "a.txt")
    assert matches("[!ab].txt", "c.txt")
    assert not matches("[!ab].txt", "a.txt")
    assert matches("a+b(1).txt", "a+b(1).txt")
    assert _search.glob_root("src/**/*.py") == ("src", "**/*.py")
    assert _search.glob_root("/abs/dir/*.py") == ("/abs/dir", "*.py")
    assert _search.glob_root("*.py") == ("", "*.py")
    assert _search.glob_root("/*.py") == ("/", "*.py")


# -- grep ---------------------------------------------------------------------------------


async def test_grep_lines_are_sorted_with_paths_and_numbers(ws: Path) -> None:
    body = await ok(ws, "grep", pattern="hello")
    assert body.splitlines() == [
        f"{ws / 'a.py'}:2:print('hello')",
        f"{ws / 'a.txt'}:1:hello text",
        f"{ws / 'b/c.py'}:1:def hello():",
        f"{ws / 'b/d/e.ts'}:1:const hello = 1;",  # no \r from the CRLF file
        f"{ws / 'bom.txt'}:1:hello bom",  # no BOM on line 1
    ]


async def test_grep_options(ws: Path) -> None:
    insensitive = (await ok(ws, "grep", pattern="hello", case_insensitive=True)).splitlines()
    assert f"{ws / 'b/c.py'}:2:    return 'HELLO'" in insensitive
    assert (await ok(ws, "grep", pattern="hello", glob="*.py")).splitlines() == [
        f"{ws / 'a.py'}:2:print('hello')",
        f"{ws / 'b/c.py'}:1:def hello():",
    ]
    assert (await ok(ws, "grep", pattern="hello", glob="b/*.py")).splitlines() == [
        f"{ws / 'b/c.py'}:1:def hello():"
    ]
    assert (await ok(ws, "grep", pattern="^def", path="b")).splitlines() == [
        f"{ws / 'b/c.py'}:1:def hello():"
    ]
    assert (await ok(ws, "grep", pattern="import", path="a.py")).splitlines() == [
        f"{ws / 'a.py'}:1:import os"
    ]


async def test_grep_understands_unicode(ws: Path) -> None:
    assert (await ok(ws, "grep", pattern="straße|école", case_insensitive=True)).splitlines() == [
        f"{ws / 'unicode.txt'}:1:café Straße",
        f"{ws / 'unicode.txt'}:2:ÉCOLE",
    ]
    assert (await ok(ws, "grep", pattern=r"caf\w\b")).splitlines() == [f"{ws / 'unicode.txt'}:1:café Straße"]
    assert (await ok(ws, "grep", pattern=r"caf\u00e9")).splitlines() == [
        f"{ws / 'unicode.txt'}:1:café Straße"
    ]


async def test_grep_skips_binary_files_and_junk(ws: Path) -> None:
    body = await ok(ws, "grep", pattern="hello")
    for skipped in ("img.png", ".git", "node_modules", "__pycache__", ".venv"):
        assert skipped not in body


async def test_grep_errors_and_no_match(ws: Path) -> None:
    body, is_error, _ = await run(ws, "grep", pattern="(unclosed")
    assert is_error
    assert "invalid regular expression '(unclosed': missing ), unterminated subpattern" in body
    body, is_error, _ = await run(ws, "grep", pattern="x", path="missing")
    assert is_error
    assert "does not exist" in body
    assert await ok(ws, "grep", pattern="zebra") == f"No matches for zebra in {ws}."


async def test_grep_is_bounded_and_counts_the_rest(ws: Path) -> None:
    (ws / "big.txt").write_text("match\n" * 300 + "x" * 1000 + " match\n")
    body, _, meta = await run(ws, "grep", pattern="match", path="big.txt")
    lines = body.splitlines()
    assert lines[:200] == [f"{ws / 'big.txt'}:{n}:match" for n in range(1, 201)]
    assert lines[-1] == "[101 more not shown; narrow the pattern, path or glob.]"
    assert meta == {"root": str(ws / "big.txt"), "matches": 301, "files": 1}
    body = await ok(ws, "grep", pattern="x+ match", path="big.txt")
    assert body == f"{ws / 'big.txt'}:301:{'x' * 500} […]"


async def test_grep_reports_each_line_once(ws: Path) -> None:
    (ws / "m.txt").write_text("a a a\nb\na\n")
    assert (await ok(ws, "grep", pattern="a", path="m.txt")).splitlines() == [
        f"{ws / 'm.txt'}:1:a a a",
        f"{ws / 'm.txt'}:3:a",
    ]
    assert (await ok(ws, "grep", pattern="^", path="m.txt")).count(
        "\n"
    ) == 2  # three lines, none after the end


def test_grep_stops_when_cancelled(ws: Path) -> None:
    for index in range(600):
        (ws / f"n{index}.txt").write_text("x\n")
    checks = 0

    class Cancelled(Exception):
        pass

    def check() -> None:
        nonlocal checks
        checks += 1
        raise Cancelled

    import re

    with pytest.raises(Cancelled):
        _search.grep_files(str(ws), re.compile("x"), file_glob=None, limit=10, max_line=100, check=check)
    assert checks == 1


# -- ls -----------------------------------------------------------------------------------


async def test_ls_lists_sorted_and_names_what_it_skips(ws: Path) -> None:
    (ws / "link").symlink_to("b/c.py")
    assert (await ok(ws, "ls")).splitlines() == [
        f"{ws}/",
        "  a.py",
        "  a.txt",
        "  b/",
        "  bom.txt",
        "  img.png",
        "  link -> b/c.py",
        "  unicode.txt",
        "  [not listed: .git/, .venv/, __pycache__/, node_modules/]",
    ]
    assert (await ok(ws, "ls", path="b/d")).splitlines() == [f"{ws / 'b/d'}/", "  e.ts", "  f.tsx"]


async def test_ls_errors_bounds_and_empty(ws: Path) -> None:
    body, is_error, _ = await run(ws, "ls", path="a.py")
    assert is_error
    assert "is not a directory" in body
    (ws / "empty").mkdir()
    assert await ok(ws, "ls", path="empty") == f"{ws / 'empty'} is empty."
    (ws / "repo/.git").mkdir(parents=True)
    assert await ok(ws, "ls", path="repo") == f"{ws / 'repo'}/\n  [not listed: .git/]"
    many = ws / "many"
    many.mkdir()
    for index in range(510):
        (many / f"{index:03d}").write_text("")
    lines = (await ok(ws, "ls", path="many")).splitlines()
    assert len(lines) == 1 + 500 + 2
    assert lines[-1] == "[10 more not shown; list a subdirectory.]"


# -- cards --------------------------------------------------------------------------------


def test_search_cards() -> None:
    tools = {tool.name: tool for tool in fs_tools()}
    assert tools["glob"].call_view({"pattern": "**/*.py", "path": "/w"}) == GenericCallView(
        title="Glob **/*.py in /w", kind="search", raw_input={"pattern": "**/*.py", "path": "/w"}
    )
    grep = tools["grep"].call_view({"pattern": "TODO", "path": "/w/src", "glob": "*.py"})
    assert isinstance(grep, GenericCallView)
    assert (grep.title, grep.kind, grep.locations) == ("Grep TODO in /w/src (*.py)", "search", ())
    assert tools["ls"].call_view({"path": "/w"}) == GenericCallView(
        title="List /w", kind="read", raw_input={"path": "/w"}
    )
    # Output is fenced: a "# heading" or a path_with_underscores must not render as Markdown.
    result = ToolResult(content=(TextBlock(text="/w/__init__.py:1:# x"),), meta={"root": "/w"})
    assert tools["grep"].result_view({"pattern": "x"}, result) == GenericResultView(
        content=(TextBlock(text="```\n/w/__init__.py:1:# x\n```"),)
    )
