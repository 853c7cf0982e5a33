"""grep speed: the grep tool against bare ``rg`` on a 50 000-file tree, side by side.

Target: the tool (through ``ToolRegistry.execute``: policy, ripgrep runs, result text) takes
≤ 1.5 × bare ``rg`` on every pattern below, medians of alternating runs. The floor is the same
``rg`` binary the tool uses, with the same walk options (``--no-ignore --hidden``), its output
read through a pipe (``rg`` stops at the first match when its output is ``/dev/null``). The tree
is Python-like text in 500 directories of 100 files (2-5 KiB each, ~190 MB), with a planted line
in about 1 % of the files, built once in a temporary directory.

Patterns: a regex with no literal (``\\b\\d{2}\\b``, the planted lines), case-insensitive
(``NEEDLE_MARKER`` with ``case_insensitive``) and a common word (``return``, in ~a third of all
lines: the tool still shows 200 and counts the rest). ``--python`` also times the Python walk.
Exits non-zero when a pattern misses its target.

Run: python bench/bench_grep.py [--files 50000] [--repeats 7] [--python]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _stats import report

from dsh_tools import Services, TextBlock, ToolExecution, ToolRegistry
from reference_tools import _ripgrep
from reference_tools.fs import register_fs_tools

TARGET = 1.5
PATTERNS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("regex with no literal", {"pattern": r"\b\d{2}\b"}, [r"\b\d{2}\b"]),
    ("case-insensitive", {"pattern": "NEEDLE_MARKER", "case_insensitive": True}, ["-i", "NEEDLE_MARKER"]),
    ("common word", {"pattern": "return"}, ["return"]),
]

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "compute",
    "result",
    "value",
    "index",
    "return",
    "import",
    "class",
    "def",
    "self",
    "data",
    "items",
]


def build_tree(root: Path, files: int) -> int:
    """Write the tree; returns how many files hold the pattern."""
    rng = random.Random(1)
    planted = 0
    for index in range(files):
        directory = root / f"pkg{index // 5000}" / f"mod{index // 100}"
        if index % 100 == 0:
            directory.mkdir(parents=True)
        lines = [
            "    " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
            for _ in range(rng.randint(40, 90))
        ]
        if rng.random() < 0.01:
            lines.insert(5, "    needle_marker = 42")
            planted += 1
        (directory / f"f{index % 100}.py").write_text("\n".join(lines) + "\n")
    return planted


def time_rg(binary: str, root: Path, args: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [binary, "--no-config", "--no-ignore", "--hidden", *args, str(root)],
        stdout=subprocess.PIPE,
        check=False,
    )
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.returncode
    assert done.stdout
    return elapsed


async def time_tool(registry: ToolRegistry, root: Path, arguments: dict[str, Any]) -> tuple[float, int]:
    call = ToolExecution(call_id="1", name="grep", arguments=arguments, cwd=str(root), services=Services())
    start = time.perf_counter()
    result = await registry.execute(call)
    elapsed = time.perf_counter() - start
    body = "".join(b.text for b in result.content if isinstance(b, TextBlock))
    assert not result.is_error, body[:200]
    return elapsed, int(result.meta["matches"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--python", action="store_true", help="also time the Python walk (slow)")
    parser.add_argument("--tree", type=Path, help="build the tree here once and reuse it on later runs")
    options = parser.parse_args()
    binary = _ripgrep.rg_binary()
    if binary is None:
        sys.exit("rg is not installed (pip install -e .): nothing to compare")
    missed = []
    with tempfile.TemporaryDirectory() as directory:
        root = options.tree or Path(directory, "tree")
        started = time.perf_counter()
        mark = root.with_name(root.name + ".planted")  # beside the tree: not searched
        if options.tree is not None and mark.exists():
            planted = int(mark.read_text())
        else:
            planted = build_tree(root, options.files)
            mark.write_text(str(planted))
        built = time.perf_counter() - started
        print(
            f"{options.files} files, {planted} holding the planted line, ready in {built:.1f} s; rg: {binary}"
        )
        registry = ToolRegistry()
        register_fs_tools(registry)

        async def run(arguments: dict[str, Any], rg_args: list[str]) -> tuple[list[float], list[float], int]:
            await time_tool(registry, root, arguments)  # warm the page cache for both
            time_rg(binary, root, rg_args)
            floor, tool, matches = [], [], 0
            for _ in range(options.repeats):
                floor.append(time_rg(binary, root, rg_args))
                elapsed, matches = await time_tool(registry, root, arguments)
                tool.append(elapsed)
            return floor, tool, matches

        for label, arguments, rg_args in PATTERNS:
            floor, tool, matches = anyio.run(run, arguments, rg_args)
            base, ours = statistics.median(floor), statistics.median(tool)
            ratio = ours / base
            report(f"rg {' '.join(rg_args)} ({label})", base * 1000, "ms", "floor")
            verdict = "ok" if ratio <= TARGET else "MISSED"
            report(
                f"grep tool, {label} ({matches} lines)",
                ours * 1000,
                "ms",
                f"ratio {ratio:.2f}",
                f"target ≤ {TARGET} {verdict}",
            )
            if ratio > TARGET:
                missed.append(label)
            if options.python:
                _ripgrep.rg_binary.cache_clear()
                saved = _ripgrep.rg_binary
                _ripgrep.rg_binary = lambda: None  # type: ignore[assignment]
                try:
                    walk = statistics.median(
                        anyio.run(time_tool, registry, root, arguments)[0]
                        for _ in range(max(1, options.repeats // 2))
                    )
                finally:
                    _ripgrep.rg_binary = saved
                report(
                    f"grep tool on the Python walk, {label}", walk * 1000, "ms", f"ratio {walk / base:.2f}"
                )
    if missed:
        sys.exit(f"missed the target on: {', '.join(missed)}")


if __name__ == "__main__":
    main()
