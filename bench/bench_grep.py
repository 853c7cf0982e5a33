"""grep speed: the grep tool against ``grep -r`` on a 50 000-file tree.

Target (issue 5 §5): the tool (through ``ToolRegistry.execute``: policy, worker thread, result
text) takes ≤ 3 × ``grep -r`` over the same tree, medians of alternating runs. The tree is
Python-like text in 500 directories of 100 files (2-5 KiB each, ~190 MB), with a rare pattern
in about 1 % of the files, built once in a temporary directory. ``grep`` runs with the
environment's locale, its output to /dev/null.

Run: python bench/bench_grep.py [--files 50000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _stats import report

from dsh_tools import Services, TextBlock, ToolExecution, ToolRegistry
from reference_tools.fs import register_fs_tools

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


def time_grep(root: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["grep", "-r", "needle_marker", str(root)], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


async def time_tool(registry: ToolRegistry, root: Path, planted: int) -> float:
    call = ToolExecution(
        call_id="1", name="grep", arguments={"pattern": "needle_marker"}, cwd=str(root), services=Services()
    )
    start = time.perf_counter()
    result = await registry.execute(call)
    elapsed = time.perf_counter() - start
    body = "".join(b.text for b in result.content if isinstance(b, TextBlock))
    assert not result.is_error, body[:200]
    assert result.meta["matches"] == planted, body[:200]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    if shutil.which("grep") is None:
        sys.exit("grep is not installed")
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory, "tree")
        started = time.perf_counter()
        planted = build_tree(root, options.files)
        built = time.perf_counter() - started
        print(f"{options.files} files, {planted} holding the pattern, built in {built:.1f} s")
        registry = ToolRegistry()
        register_fs_tools(registry)

        async def run() -> tuple[list[float], list[float]]:
            await time_tool(registry, root, planted)  # warm the page cache for both
            time_grep(root)
            grep, tool = [], []
            for _ in range(options.repeats):
                grep.append(time_grep(root))
                tool.append(await time_tool(registry, root, planted))
            return grep, tool

        grep, tool = anyio.run(run)
        base, ours = statistics.median(grep), statistics.median(tool)
        report(
            "grep -r", base * 1000, "ms", f"locale {os.environ.get('LC_ALL') or os.environ.get('LANG', 'C')}"
        )
        report("grep tool (registry.execute)", ours * 1000, "ms", f"ratio {ours / base:.2f}", "target ≤ 3")


if __name__ == "__main__":
    main()
