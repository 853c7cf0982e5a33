"""The guard that commands in a client's terminal run under: nothing they start outlives it,
whichever process the client kills (the guard itself, or a shell it started the guard from)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import reference_tools

GUARD = str(Path(reference_tools.__file__).parent / "_guard.py")
pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds processes through /proc")


def _sleeping(marker: bytes) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def _gone_within(marker: bytes, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _sleeping(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _sleeping(marker)


@pytest.mark.parametrize("through_a_shell", [False, True])
def test_killing_the_guard_or_its_shell_stops_the_whole_command(through_a_shell: bool) -> None:
    stamp = "26.125" if through_a_shell else "26.25"
    command = f"echo started; sleep {stamp} & sleep {stamp}; wait"
    argv = [sys.executable, "-I", "-S", GUARD, "bash", "-c", command]
    if through_a_shell:  # as Toad runs it: its shell starts the guard, and it kills the shell
        argv = ["/bin/sh", "-c", " ".join(f"'{part}'" for part in argv) + "; echo after"]
    started = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert started.stdout is not None
    assert started.stdout.readline() == b"started\n"
    marker = b"sleep\x00" + stamp.encode()
    deadline = time.monotonic() + 5
    while len(_sleeping(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(_sleeping(marker)) == 2
    started.kill()  # SIGKILL to the one process the client knows
    started.wait()
    assert _gone_within(marker, 3)
    started.stdout.close()


def test_the_guard_exits_as_the_command_did() -> None:
    code = subprocess.run([sys.executable, "-I", "-S", GUARD, "bash", "-c", "exit 7"], check=False)
    assert code.returncode == 7
    killed = subprocess.run([sys.executable, "-I", "-S", GUARD, "bash", "-c", "kill -TERM $$"], check=False)
    assert killed.returncode == -signal.SIGTERM
    missing = subprocess.run(
        [sys.executable, "-I", "-S", GUARD, "no-such-program-here"], capture_output=True, check=False
    )
    assert missing.returncode == 127
    assert b"no-such-program-here" in missing.stderr
