"""Counting a child's user-space instructions with valgrind's cachegrind, for the benches'
``--instructions`` modes: a count does not move with the machine's load as CPU time does."""

from __future__ import annotations

import os
import shutil
import time


def command(out: str | os.PathLike[str]) -> list[str]:
    """The argv prefix that runs a command under cachegrind, its counts written to ``out`` (a
    stale file there is removed first: it must not pass for this run's). Exits the bench when
    valgrind is missing."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (cachegrind) on the PATH")
    if os.path.exists(out):
        os.unlink(out)
    return ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={os.fspath(out)}"]


def total(out: str | os.PathLike[str], wait: float = 30) -> int:
    """The instruction total of a cachegrind output file, waiting up to ``wait`` seconds for it
    (valgrind writes it as the process ends); exits the bench when it does not come."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(out) as file:
                for line in file:
                    if line.startswith("summary:"):
                        return int(line.split()[1])
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{os.fspath(out)}: no cachegrind summary (did valgrind end early?)")
        time.sleep(0.1)
