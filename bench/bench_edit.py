"""edit speed: applied hunks that cost what the edit costs, not what the file costs.

Targets: for a one-line edit in a 100 MB file, building the hunks takes ≤ 5 ms and
about the same as in a 1 MB file; the whole ``edit`` call (through ``ToolRegistry.execute``,
policy and stale check included) takes ≤ 1.5 × reading and writing the file once. Also
reported: what ``difflib`` over the whole file would take (measured on 1 MB and 10 MB files and
extrapolated linearly to 100 MB, as that is how it grows on this input: one changed line).

The baseline "reading and writing the file once" is the least a text edit can do: read the
bytes, decode UTF-8, encode, write a temporary file and rename it over the original.

The edit is timed with the file rewritten (same text, new inode and times) before every edit,
so the stale check cannot trust the file's stat and compares the text: the slow path, and the
one the target is for. The edit keeps the line's length, as it did from the start; it is timed
again with a longer line, where only the new text's head can reuse the old text's chunk hashes.
Then it is timed right after a ``read`` of a file last changed more than ``RACY_NS`` ago (the
clock is moved forward rather than waiting), where the stat proves the file unchanged and the
check hashes nothing: the common read-then-edit case.

Run: python bench/bench_edit.py [--big-mb 100]
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _stats import median_us, report

from dsh_acp.session._file_journal import FileJournal, KeptFiles
from dsh_tools import Services, ToolExecution, ToolRegistry, filesystem
from dsh_tools.filesystem import LocalFileSystem
from reference_tools import _hunks
from reference_tools._read_tracker import text_print
from reference_tools.fs import register_fs_tools

HUNK_TARGET_MS = 5.0
EDIT_RATIO = 1.5  # the edit call against reading and writing the file once
LINE = "    result = compute_total(alpha, beta, gamma)  # a typical line of code: {:08d}\n"


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def make_file(path: Path, size: int) -> tuple[str, str]:
    """A file of about ``size`` bytes of distinct lines with one marked line in the middle;
    returns the (old, new) text of the edit."""
    count = size // len(LINE.format(0))
    with path.open("w") as file:
        file.writelines(LINE.format(index) for index in range(count // 2))
        file.write("    marker = 1  # the line the benchmark edits\n")
        file.writelines(LINE.format(index) for index in range(count // 2, count))
    return "marker = 1", "marker = 2"


def hunk_ms(text: str, old: str, new: str) -> tuple[float, float]:
    """(locating the site and its line, building the hunks from it), in ms."""
    sites = _hunks.find_sites(text, old, limit=2)
    first = text.count("\n", 0, sites[0]) + 1
    locate = median_ms(lambda: (_hunks.find_sites(text, old, limit=2), text.count("\n", 0, sites[0])), 5)
    build = median_us(lambda: _hunks.edit_hunks(text, sites, old, new, first_line=first), inner=200) / 1000
    return locate, build


def baseline_once(path: Path) -> None:
    text = path.read_bytes().decode()
    temp = path.with_name(path.name + ".tmp")
    temp.write_bytes(text.encode())
    os.replace(temp, path)


def edit_vs_baseline(
    path: Path, old: str, new: str, repeats: int, *, read_first: bool = False, journal: bool = False
) -> tuple[float, float]:
    """Median ms of (reading + writing once, the edit call), measured alternately so that the
    machine's drift (page cache, writeback) affects both alike. The edits go back and forth an
    even number of times, so the file ends as it began. With ``read_first``, the session
    reads the file (untimed) after the baseline rewrote it, with the clock moved past the racy
    window, so the edit's stale check can rest on the file's stat. With ``journal``, the edits go
    through the agent's undo journal, each in a turn of its own (so each keeps a copy of the
    file: the most it can cost)."""

    async def run() -> tuple[float, float]:
        registry = ToolRegistry()
        register_fs_tools(registry)
        services = Services()
        cwd = str(path.parent)
        if journal:
            turns = iter(range(1 << 30))
            kept = KeptFiles(str(path.parent / "kept"))
            services.add(FileJournal(LocalFileSystem(), kept, lambda event: None, lambda: next(turns)))

        async def call(name: str, call_id: str, **arguments: str) -> float:
            execution = ToolExecution(
                call_id=call_id, name=name, arguments=arguments, cwd=cwd, services=services
            )
            start = time.perf_counter()
            result = await registry.execute(execution)
            assert not result.is_error, result.content
            return (time.perf_counter() - start) * 1000

        await call("read", "r", file_path=str(path))
        base, edit = [], []
        for index in range(repeats + repeats % 2):
            start = time.perf_counter()
            baseline_once(path)
            base.append((time.perf_counter() - start) * 1000)
            if read_first:
                await call("read", f"r{index}", file_path=str(path))
            before, after = (old, new) if index % 2 == 0 else (new, old)
            edit.append(
                await call("edit", str(index), file_path=str(path), old_string=before, new_string=after)
            )
        return statistics.median(base), statistics.median(edit)

    if not read_first:
        return anyio.run(run)
    clock = filesystem._clock_ns
    filesystem._clock_ns = lambda: clock() + filesystem.RACY_NS  # as if last changed 3 s ago
    try:
        return anyio.run(run)
    finally:
        filesystem._clock_ns = clock


def difflib_ms(text: str, old: str, new: str) -> float:
    changed = text.replace(old, new, 1)
    a, b = text.splitlines(keepends=True), changed.splitlines(keepends=True)
    return median_ms(lambda: list(difflib.unified_diff(a, b, n=3)), 3)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--big-mb", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        small, big = Path(directory, "small.py"), Path(directory, "big.py")
        old, new = make_file(small, 1 << 20)
        make_file(big, options.big_mb << 20)
        small_text, big_text = small.read_text(), big.read_text()
        missed: list[str] = []

        print(f"one-line edit in the middle of a file of {len(LINE.format(0))}-byte lines")
        locate_small, build_small = hunk_ms(small_text, old, new)
        locate_big, build_big = hunk_ms(big_text, old, new)
        report("build hunks, 1 MB", build_small * 1000, "µs", "target ≤ 5 ms")
        report(f"build hunks, {options.big_mb} MB", build_big * 1000, "µs", "target ≤ 5 ms, ≈ 1 MB")
        for label, built in (("1 MB", build_small), (f"{options.big_mb} MB", build_big)):
            if built > HUNK_TARGET_MS:
                missed.append(f"building the hunks of a {label} file took {built:.2f} ms")
        report("locate the site and count its line, 1 MB", locate_small, "ms")
        report(f"locate the site and count its line, {options.big_mb} MB", locate_big, "ms")

        for path, repeats in ((small, 101), (big, options.repeats)):
            label = "1 MB" if path is small else f"{options.big_mb} MB"
            base, call = edit_vs_baseline(path, old, new, repeats)
            report(f"read + write once, {label}", base, "ms")
            report(
                f"edit call, {label}",
                call,
                "ms",
                f"ratio {call / base:.2f}",
                "target ≤ 1.5" if path is big else "",
            )
            # The target is the big file's: on 1 MB the tool's fixed cost (policy, stat, the
            # registry) is a visible share of a ~2 ms read + write, and is printed for scale.
            if path is big and call > EDIT_RATIO * base:
                missed.append(f"the edit call on {label} took {call / base:.2f}× read + write")
        # What /undo's journal adds (the agent's sessions go through it): a copy of the file kept
        # and the written bytes' digest, for files up to its limit; a larger file only pays for
        # the attempt.
        medium = Path(directory, "medium.py")
        make_file(medium, 10 << 20)
        for path, repeats in ((small, 51), (medium, 15), (big, 5)):
            label = {small: "1 MB", medium: "10 MB", big: f"{options.big_mb} MB"}[path]
            _, plain = edit_vs_baseline(path, old, new, repeats)
            _, kept = edit_vs_baseline(path, old, new, repeats, journal=True)
            report(f"edit call with the undo journal, {label}", kept, "ms", f"without {plain:.2f} ms")
        longer = new.replace("2", "22")  # most edits change the length: only the head is kept
        base, call = edit_vs_baseline(big, old, longer, options.repeats)
        report(f"read + write once, {options.big_mb} MB", base, "ms")
        report(
            f"edit call, a longer line, {options.big_mb} MB",
            call,
            "ms",
            f"ratio {call / base:.2f}",
            "target ≤ 1.5",
        )
        if call > EDIT_RATIO * base:
            missed.append(f"the edit call with a longer line took {call / base:.2f}× read + write")
        base, call = edit_vs_baseline(big, old, new, options.repeats, read_first=True)
        report(f"read + write once, {options.big_mb} MB", base, "ms")
        report(
            f"edit call right after a read (stat proof), {options.big_mb} MB",
            call,
            "ms",
            f"ratio {call / base:.2f}",
        )
        # Where the edit's time beyond the I/O goes, on the big file: the whole-text passes left.
        changed = big_text.replace(old, new, 1)
        fresh = [changed.replace(new, old, 1) for _ in range(5)]  # str hashes are cached: new objects
        report(
            "  of which: hashing the text (stale check, no stat proof)",
            median_ms(lambda: text_print(fresh.pop()), 5),
            "ms",
        )
        report("  of which: finding the edit, counting its line", locate_big, "ms")
        sites = _hunks.find_sites(big_text, old)
        seen = text_print(big_text)
        for label, after in (("same length", new), ("longer line", longer)):
            report(
                f"  of which: hashing the new text ({label})",
                median_ms(functools.partial(text_print, _hunks.Splice(big_text, sites, old, after), seen), 5),
                "ms",
            )
        local = LocalFileSystem()
        spliced = _hunks.Splice(big_text, sites, old, new)
        out = str(Path(directory, "out.py"))
        report(
            "  of which: writing it in 64 KiB blocks (not built)",
            median_ms(lambda: anyio.run(local.write_chunks, out, spliced.chunks()), 5),
            "ms",
        )
        report("  (building the new text with str.replace)", median_ms(lambda: str(spliced), 5), "ms")

        print("write over an existing file: diff_hunks (trim the common head and tail, difflib on the rest)")
        report(
            f"one changed line, {options.big_mb} MB",
            median_ms(lambda: _hunks.diff_hunks(big_text, changed), 3),
            "ms",
        )
        ends = (
            "first\n"
            + big_text[big_text.index("\n") + 1 : big_text.rindex("\n", 0, len(big_text) - 1) + 1]
            + "last\n"
        )
        report(
            f"first and last lines changed, {options.big_mb} MB (one region)",
            median_ms(lambda: _hunks.diff_hunks(big_text, ends), 3),
            "ms",
        )

        ten = Path(directory, "ten.py")
        make_file(ten, 10 << 20)
        diff_small = difflib_ms(small_text, old, new)
        diff_ten = difflib_ms(ten.read_text(), old, new)
        report("difflib.unified_diff over the whole file, 1 MB", diff_small, "ms")
        report("difflib.unified_diff over the whole file, 10 MB", diff_ten, "ms")
        report(
            f"difflib.unified_diff, {options.big_mb} MB (extrapolated from 10 MB)",
            diff_ten * options.big_mb / 10,
            "ms",
        )
    for miss in missed:
        print(f"MISSED: {miss}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
