"""ripgrep and the Python walk give the same grep and glob results, byte for byte, over one tree
that holds every case where they could differ: ignore files, junk directories, hidden files,
binary files (a NUL early or late), symlinks, a FIFO, names that are not UTF-8 or hold a newline,
BOMs, CRLF, long lines, the result caps and their footers."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from dsh_tools import Services, TextBlock, ToolExecution, ToolRegistry
from reference_tools import _ripgrep
from reference_tools.fs import register_fs_tools

pytestmark = pytest.mark.anyio


def _tree(root: Path) -> Path:
    files: dict[str, bytes] = {
        "src/app.py": b"import os\ndef main():\n    return needle_Value42\n",
        "src/util.py": b"def helper(x):\n    return x  # Needle\n\n\ndef other():\n    pass\n",
        "src/web/page.tsx": b"export const Needle = 1;\r\nconst x = 'needle';\r\n",
        "src/web/page.ts": b"foo\nbar\nfoo bar\n",
        "README.md": b"# Title\nA needle in a haystack.\nTrailing spaces   \n\nno newline at end needle",
        ".gitignore": b"ignored.txt\nsrc/web/\n",
        "ignored.txt": b"needle ignored by git but not by us\n",
        ".hidden/secret.txt": b"hidden needle\n",
        ".env": b"NEEDLE=1\n",
        "node_modules.txt": b"needle in a file named like a junk dir\n",
        "node_modules/pkg/index.js": b"needle\n",
        "deep/a/.git/objects/x": b"needle\n",
        "deep/a/__pycache__/m.pyc": b"needle\n",
        "deep/a/b/c.txt": b"needle deep\nNEEDLE deep\n",
        "bin/early": b"needle\x00needle\n",
        "bin/late": b"needle\n" + b"x" * 200_000 + b"\n\x00needle\n",
        "enc/bom8.txt": b"\xef\xbb\xbfneedle after a BOM\nsecond needle\n",
        "enc/bom16.txt": "needle in UTF-16\nanother needle\n".encode("utf-16"),
        "enc/latin1.txt": b"caf\xe9 needle\n\xff\xfe needle\n",
        "enc/unicode.txt": "café Straße needle\nÉCOLE NEEDLE ſ\nnum ²³ ٣ needle\n".encode(),
        "long.txt": b"needle " + b"y" * 1200 + b"\n",
        "empty.txt": b"",
        "blank.txt": b"\n\n\n",
        "colon:name.txt": b"needle with a colon in the name\n",
        "many/lots.txt": b"".join(b"needle line %d\n" % i for i in range(150)),
        "many/more.txt": b"".join(b"needle more %d\n" % i for i in range(80)),
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    raw = os.fsencode(root)
    with open(os.path.join(raw, b"name-\xff\xfe.txt"), "wb") as handle:
        handle.write(b"needle in a name that is not UTF-8\n")
    with open(os.path.join(raw, b"new\nline.txt"), "wb") as handle:
        handle.write(b"needle in a name with a newline\n")
    (root / "link-file.txt").symlink_to(root / "README.md")
    (root / "link-dir").symlink_to(root / "src")
    os.mkfifo(root / "fifo")
    return root


GREPS: list[dict[str, Any]] = [
    {"pattern": "needle"},
    {"pattern": "needle", "case_insensitive": True},
    {"pattern": "NEEDLE"},
    {"pattern": "^def \\w+"},
    {"pattern": "[A-Z][a-z]+[0-9]{2}"},  # no literal
    {"pattern": "\\bneedle\\b"},
    {"pattern": "foo|bar"},
    {"pattern": "foo\\s+bar"},  # a match never spans lines
    {"pattern": "foo[^x]bar"},
    {"pattern": "\\s+$"},
    {"pattern": "^$"},
    {"pattern": "x*"},
    {"pattern": "caf\\w"},
    {"pattern": "caf."},  # "." never matches a byte that is not UTF-8, in either engine
    {"pattern": "[^a-z ]+ needle"},  # nor does a negated class
    {"pattern": "\\W+ needle", "path": "enc"},
    {"pattern": "stra(?i:SSE)"},
    {"pattern": "(?i)école|straße"},
    {"pattern": "\\d"},
    {"pattern": "needle", "glob": "*.py"},
    {"pattern": "needle", "glob": "*.{ts,tsx}"},
    {"pattern": "needle", "glob": "src/**"},
    {"pattern": "needle", "glob": "**/c.txt"},
    {"pattern": "needle", "glob": "[!a-m]*.txt"},
    {"pattern": "needle", "path": "many"},
    {"pattern": "needle", "path": "README.md"},
    {"pattern": "needle(?= more)"},  # look-ahead: the Python walk for both
    {"pattern": "(n)eedl\\1"},  # a back-reference: the Python walk for both
    {"pattern": "\\Aneedle"},
]


async def _call(root: Path, name: str, arguments: dict[str, Any]) -> tuple[str, Any]:
    registry = ToolRegistry()
    register_fs_tools(registry)
    call = ToolExecution(call_id="1", name=name, arguments=arguments, cwd=str(root), services=Services())
    result = await registry.execute(call)
    assert not result.is_error, result.content
    return "".join(b.text for b in result.content if isinstance(b, TextBlock)), result.meta


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tree(Path(os.path.realpath(tmp_path_factory.mktemp("engines"))))


def _python_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ripgrep, "rg_binary", lambda: None)


@pytest.mark.parametrize("arguments", GREPS, ids=lambda a: " ".join(f"{k}={v}" for k, v in a.items()))
async def test_grep_engines_agree(
    tree: Path, arguments: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[list[str]] = []
    real_run = _ripgrep._run

    async def counting(argv: list[str], cwd: str) -> Any:
        runs.append(argv)
        return await real_run(argv, cwd)

    monkeypatch.setattr(_ripgrep, "_run", counting)
    fast = await _call(tree, "grep", arguments)
    translatable = _ripgrep.to_rust_regex(arguments["pattern"], re.MULTILINE) is not None
    assert bool(runs) == (translatable and arguments.get("path") != "README.md")  # a file: Python
    _python_only(monkeypatch)
    slow = await _call(tree, "grep", arguments)
    assert fast == slow


async def test_grep_results_hold_what_both_engines_must_show(tree: Path) -> None:
    body, _ = await _call(tree, "grep", {"pattern": "not UTF-8|caf|BOM|UTF-16|another|ignored|hidden|junk"})
    assert f"{tree}/name-\\xff\\xfe.txt:1:needle in a name that is not UTF-8" in body
    assert f"{tree}/enc/latin1.txt:1:caf\\xe9 needle" in body
    assert f"{tree}/enc/bom8.txt:1:needle after a BOM" in body
    assert f"{tree}/enc/bom16.txt:2:another needle" in body
    assert f"{tree}/ignored.txt:1:" in body
    assert f"{tree}/.hidden/secret.txt:1:" in body
    assert f"{tree}/node_modules.txt:1:" in body
    body, meta = await _call(tree, "grep", {"pattern": "needle"})
    for absent in ("node_modules/", "/.git/", "__pycache__", "bin/", "link-", "fifo"):
        assert absent not in body, absent
    assert body.endswith(f"[{meta['matches'] - 200} more not shown; narrow the pattern, path or glob.]")
    assert meta["files"] == 17  # the text files outside the junk with a lowercase "needle"
    long_line = next(line for line in body.splitlines() if line.startswith(f"{tree}/long.txt:"))
    assert long_line.endswith(" […]")
    assert len(long_line) == len(f"{tree}/long.txt:1:") + 500 + 4


GLOBS = ["**/*.txt", "*", "**", "src/**/*.py", "**/*.{ts,tsx}", "enc/*", "**/.*", "many/*.txt", "**/name-*"]


@pytest.mark.parametrize("pattern", GLOBS)
async def test_glob_engines_agree(tree: Path, pattern: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = await _call(tree, "glob", {"pattern": pattern})
    _python_only(monkeypatch)
    slow = await _call(tree, "glob", {"pattern": pattern})
    assert fast == slow


@pytest.mark.parametrize(
    ("pattern", "rust"),
    [
        ("abc", "abc"),
        ("a\\.b", "a\\x{2e}b"),
        ("a.b", "a.b"),
        ("(?i)x", "(?i)x"),
        (
            "\\s",
            "[[\\x{9}-\\x{d}\\x{1c}-\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}]]",
        ),
        ("[^a-c\\w]", "[^a-c[\\p{L}\\p{N}_]]"),
        ("a{2,}?", "(?:a){2,}?"),
        ("^x$", "(?m:^)x(?m:$)"),
        ("(?=x)", None),
        ("(a)\\1", None),
        ("\\Ax", None),
        ("(?a)\\w", None),
        ("(?-m:^)", None),
    ],
)
def test_python_patterns_in_rust_syntax(pattern: str, rust: str | None) -> None:
    assert _ripgrep.to_rust_regex(pattern, re.MULTILINE) == rust


def test_posix_classes_mean_what_python_means() -> None:
    with pytest.warns(FutureWarning):  # Python reads "[[:alpha:]]" as a set of "[:alph" and "]"
        assert _ripgrep.to_rust_regex("[[:alpha:]]", re.MULTILINE) == "[\\x{5b}\\x{3a}alph]\\x{5d}"


def test_python_space_and_word_classes_are_spelled_out_exactly() -> None:
    import unicodedata

    spaces = [code for code in range(0x110000) if chr(code).isspace()]
    spelled = re.findall(r"\\x\{([0-9a-f]+)\}(?:-\\x\{([0-9a-f]+)\})?", _ripgrep._SPACE)
    covered = [c for low, high in spelled for c in range(int(low, 16), int(high or low, 16) + 1)]
    assert covered == spaces
    word = re.compile(r"\w")
    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        expected = unicodedata.category(char)[0] in "LN" or char == "_"
        assert bool(word.match(char)) == expected, hex(code)


async def test_glob_walks_with_ripgrep(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[list[str]] = []
    real_run = _ripgrep._run

    async def counting(argv: list[str], cwd: str) -> Any:
        runs.append(argv)
        return await real_run(argv, cwd)

    monkeypatch.setattr(_ripgrep, "_run", counting)
    body, _ = await _call(tree, "glob", {"pattern": "**/name-*"})
    assert body == f"{tree}/name-\\xff\\xfe.txt"
    assert len(runs) == 1
    assert "--files" in runs[0]


async def test_a_cancelled_grep_leaves_no_ripgrep_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    pid_file = tmp_path / "pid"
    fake = tmp_path / "rg"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 100\n")
    fake.chmod(0o755)
    monkeypatch.setattr(_ripgrep, "rg_binary", lambda: str(fake))
    (tmp_path / "a.txt").write_text("needle\n")
    with anyio.move_on_after(0.5):
        await _call(tmp_path, "grep", {"pattern": "needle"})
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone, and reaped


async def test_ripgrep_failing_hands_the_search_to_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "rg"
    fake.write_text("#!/bin/sh\necho 'rg: regex parse error' >&2\nexit 2\n")
    fake.chmod(0o755)
    monkeypatch.setattr(_ripgrep, "rg_binary", lambda: str(fake))
    (tmp_path / "a.txt").write_text("needle\n")
    body, meta = await _call(tmp_path, "grep", {"pattern": "needle"})
    assert body == f"{tmp_path}/a.txt:1:needle"
    assert meta["matches"] == 1
