"""An agent child process spoken to over NDJSON, for the benches: no SDK on the client side, just
``os.read``/``os.write`` on its pipes, so the client costs as little as possible."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import orjson

__all__ = ["NdjsonChild", "initialize_params"]


def initialize_params(client: str, *, live_terminal: bool = False) -> dict[str, Any]:
    """The ``initialize`` params of a bench client: no fs or terminals on the client, and with
    ``live_terminal`` Zed's live terminal output convention."""
    capabilities: dict[str, Any] = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    if live_terminal:
        capabilities["_meta"] = {"terminal_output": True}
    return {
        "protocolVersion": 1,
        "clientCapabilities": capabilities,
        "clientInfo": {"name": client, "version": "0"},
    }


class NdjsonChild:
    """One agent process; ``started`` is when it was spawned (``time.perf_counter``)."""

    def __init__(self, command: list[str], cwd: str, env: dict[str, str] | None = None) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, cwd=cwd, env=env
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.pid = self.proc.pid
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._buffer = b""
        self._lines: deque[bytes] = deque()  # read but not yet consumed
        self._next_id = 0
        self._cpu_clock = ((~self.pid) << 3) | 2  # Linux: CPUCLOCK_SCHED of the whole process

    def send(self, message: dict[str, Any]) -> None:
        data = orjson.dumps({"jsonrpc": "2.0", **message}, option=orjson.OPT_APPEND_NEWLINE)
        while data:
            data = data[os.write(self._in, data) :]

    def request(self, method: str, params: Any) -> int:
        request_id = self._next_id
        self._next_id += 1
        self.send({"id": request_id, "method": method, "params": params})
        return request_id

    def lines(self) -> Iterator[bytes]:
        """The agent's lines as they arrive (1 MiB reads); stop iterating at any point, the rest stays."""
        pending = self._lines
        while True:
            while pending:
                yield pending.popleft()
            data = os.read(self._out, 1 << 20)
            if not data:
                raise RuntimeError(f"agent exited early: {self.stderr()}")
            lines = (self._buffer + data).split(b"\n")
            self._buffer = lines.pop()
            pending.extend(lines)

    def messages(self) -> Iterator[dict[str, Any]]:
        """The agent's messages, parsed, as they arrive."""
        for line in self.lines():
            yield orjson.loads(line)

    def call(self, method: str, params: Any) -> Any:
        """Send a request and return its result (notifications in between are skipped)."""
        request_id = self.request(method, params)
        for message in self.messages():
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message["result"]
        raise AssertionError("unreachable")

    def cpu_seconds(self) -> float:
        """The agent's CPU time so far, all threads (dead ones included), in seconds."""
        try:
            return time.clock_gettime(self._cpu_clock)
        except OSError:  # not Linux's clock ids: /proc's utime + stime, in clock ticks
            return sum(self._stat_seconds())

    def system_seconds(self) -> float:
        """The agent's CPU time in the kernel so far, all threads, in seconds (clock ticks)."""
        return self._stat_seconds()[1]

    def _stat_seconds(self) -> tuple[float, float]:
        """The user and system times of ``/proc/PID/stat``, all threads, in seconds."""
        with open(f"/proc/{self.pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick

    def status_kib(self, key: str) -> int:
        with open(f"/proc/{self.pid}/status") as file:
            for line in file:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        raise KeyError(key)

    def reset_peak(self) -> bool:
        """Reset VmHWM to the current RSS (Linux ≥ 4.0); False if not allowed."""
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as file:
                file.write("5")
        except OSError:
            return False
        return True

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-2000:]

    def close(self, timeout: float = 10) -> None:
        """Close stdin (the agent's cue to exit) and reap it, killed after ``timeout`` seconds."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self._stderr.close()
