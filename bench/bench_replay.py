"""Loading a long session: ``session/load`` of 1k, 10k and 100k logged events, beside a bare loop.

    .venv/bin/python bench/bench_replay.py [--runs 5] [--sizes 1000,10000,100000]

A live run makes the log: one real ``dsh-acp`` process (``--model script:``, the reference tools,
bypass mode) plays turns whose steps read a file and answer, which logs user prompts, assistant
replies, tool calls, tool results (with their views and ``meta``), usage and stops. That log's
turns are repeated (with fresh ids, through the store's own writer) to make logs of each size.

For each size and run, two children read the same log from the same temporary folder, as the
editor's child process would: ``dsh-acp`` answering ``session/load`` (replaying every event,
each card drawn again by its tool's presenters, and rebuilding the conversation), and
``bench/_replay_floor.py``, a bare loop that reads the log with orjson and writes one
``session/update`` line per event: the floor no agent can beat. The figure is the wall time from
writing the request to reading its answer (the client only counts lines), divided by the events.

Memory: the live run's growth of ``VmRSS`` from making its session to the end of its turns, against
a fresh agent's growth while it loaded that same log (both after a warm-up session, so imports are
not counted; both make the session, its model and its tools).

Targets: ≤ 15 µs per event at every size; flat (the 100k figure ≤ 1.5× the 1k one); a 100k-event
session loads in ≤ 1.5 s; memory after the load ≤ 2× what the live session held. Exits 1 on a miss.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _stats import report

TARGET_US = 15.0
TARGET_FLAT = 1.5
TARGET_LOAD_S = 1.5
TARGET_MEMORY = 2.0
LIVE_TURNS = 40
STEPS = 12  # model steps per live turn, each but the last reading a file


def _rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))


class Agent:
    """A child speaking JSON-RPC over its stdio; the client only counts lines."""

    def __init__(self, command: list[str], cwd: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, env=env, bufsize=1 << 20
        )
        self.next_id = 0

    def ask(self, method: str, params: Any) -> tuple[Any, int]:
        """Send a request; its result and the lines read before it."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.next_id += 1
        marker = f'{{"jsonrpc":"2.0","id":{self.next_id},'.encode()
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        lines = 0
        readline = self.process.stdout.readline
        while True:
            line = readline()
            if not line:
                raise SystemExit(f"{method}: the agent exited")
            if line.startswith(marker):
                answer = json.loads(line)
                if "result" not in answer:
                    raise SystemExit(f"{method} failed: {answer}")
                return answer["result"], lines
            if line.startswith(b'{"jsonrpc":"2.0","id":') and b'"method"' in line:
                raise SystemExit(f"the agent asked something during {method}: {line[:200]!r}")
            lines += 1

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        assert self.process.stdout is not None
        self.process.stdout.close()


def _script(folder: Path) -> Path:
    turns = [[{"text": "warm"}]]
    for turn in range(LIVE_TURNS):
        steps: list[dict[str, Any]] = []
        for step in range(STEPS - 1):
            call = {"id": f"r{turn}-{step}", "name": "read", "arguments": {"file_path": "notes.txt"}}
            steps.append(
                {
                    "text": f"Reading, step {step}.",
                    "tool_calls": [call],
                    "usage": {"input": 900 + step, "output": 20, "context_window": 200000},
                }
            )
        steps.append({"text": "Done reading the notes. " * 8})
        turns.append(steps)
    path = folder / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return path


def _agent(folder: Path, script: Path) -> Agent:
    command = [
        sys.executable,
        "-m",
        "dsh_acp",
        "--state-dir",
        str(folder / "state"),
        "--model",
        f"script:{script}",
        "--mode",
        "bypass",
    ]
    return Agent(command, str(folder / "work"))


def live_run(folder: Path) -> tuple[str, int, int]:
    """Play the live turns; the session id, its events, and the RSS it grew by (KiB)."""
    script = _script(folder)
    agent = _agent(folder, script)
    try:
        agent.ask("initialize", {"protocolVersion": 1})
        warm = agent.ask("session/new", {"cwd": str(folder / "work"), "mcpServers": []})[0]["sessionId"]
        agent.ask("session/prompt", {"sessionId": warm, "prompt": [{"type": "text", "text": "warm up"}]})
        time.sleep(0.2)
        # From before the session is made: a load makes its session too (its model, its tools).
        before = _rss_kib(agent.process.pid)
        sid = agent.ask("session/new", {"cwd": str(folder / "work"), "mcpServers": []})[0]["sessionId"]
        agent.ask("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "skip"}]})
        for turn in range(LIVE_TURNS):
            agent.ask(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"turn {turn}"}]}
            )
        time.sleep(0.2)
        grown = _rss_kib(agent.process.pid) - before
    finally:
        agent.close()
    log = folder / "state" / "sessions" / f"{sid}.jsonl"
    events = sum(1 for _ in log.open("rb")) - 1
    return sid, events, grown


def grow_log(source: Path, target: Path, events: int) -> int:
    """A log of about ``events`` events: the source's turns repeated with fresh ids."""
    lines = source.read_bytes().splitlines()
    header, body = lines[0], lines[1:]
    out = [header]
    copy = 0
    while len(out) - 1 < events:
        for line in body:
            record = json.loads(line)
            for key in ("call_id", "text_id", "thought_id", "message_id"):
                if isinstance(record.get(key), str):
                    record[key] = f"{record[key]}-{copy}"
            for call in record.get("tool_calls") or ():
                call["id"] = f"{call['id']}-{copy}"
            out.append(json.dumps(record, separators=(",", ":")).encode())
            if len(out) - 1 >= events:
                break
        copy += 1
    target.write_bytes(b"\n".join(out) + b"\n")
    return len(out) - 1


def load_once(folder: Path, script: Path, sid: str, floor: bool) -> tuple[float, int, int]:
    """Seconds to answer ``session/load``, the updates sent, and the RSS grown by it (KiB)."""
    if floor:
        log = folder / "state" / "sessions" / f"{sid}.jsonl"
        agent = Agent(
            [sys.executable, str(Path(__file__).parent / "_replay_floor.py"), str(log)], str(folder / "work")
        )
    else:
        agent = _agent(folder, script)
    try:
        agent.ask("initialize", {"protocolVersion": 1})
        if not floor:
            agent.ask("session/load", {"sessionId": "warm", "cwd": str(folder / "work"), "mcpServers": []})
        time.sleep(0.1)
        before = _rss_kib(agent.process.pid)
        started = time.perf_counter()
        _, updates = agent.ask(
            "session/load", {"sessionId": sid, "cwd": str(folder / "work"), "mcpServers": []}
        )
        elapsed = time.perf_counter() - started
        time.sleep(0.1)
        grown = _rss_kib(agent.process.pid) - before
    finally:
        agent.close()
    return elapsed, updates, grown


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    ok = True
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "work").mkdir()
        (folder / "work" / "notes.txt").write_text("".join(f"line {i}: some notes\n" for i in range(40)))
        sid, live_events, live_grown = live_run(folder)
        script = folder / "script.json"
        sessions = folder / "state" / "sessions"
        live_log = sessions / f"{sid}.jsonl"
        # A one-turn session the load runs warm up with (imports, first presenter calls).
        grow_log(live_log, sessions / "warm.jsonl", 50)
        _, _, load_grown = min(
            (load_once(folder, script, sid, floor=False) for _ in range(3)), key=lambda r: r[2]
        )
        ratio = load_grown / max(live_grown, 1)
        print(
            f"live session: {live_events} events, grew {live_grown} KiB; a load of it grew {load_grown} KiB"
        )
        per_event: dict[int, float] = {}
        for size in sizes:
            count = grow_log(live_log, sessions / "big.jsonl", size)
            agent_s, floor_s = [], []
            for _ in range(args.runs):  # interleaved: drift in the machine's speed hits both alike
                agent_s.append(load_once(folder, script, "big", floor=False)[0])
                floor_s.append(load_once(folder, script, "big", floor=True)[0])
            agent_median, floor_median = statistics.median(agent_s), statistics.median(floor_s)
            per_event[size] = agent_median / count * 1e6
            floor_us = floor_median / count * 1e6
            report(
                f"session/load, {count} events: µs per event",
                per_event[size],
                "µs",
                f"target ≤ {TARGET_US:g}",
                f"floor {floor_us:.2f} µs ({per_event[size] / floor_us:.1f}×)",
            )
            ok &= per_event[size] <= TARGET_US
            if size >= 100_000:
                report(
                    f"session/load, {count} events: seconds", agent_median, "s", f"target ≤ {TARGET_LOAD_S:g}"
                )
                ok &= agent_median <= TARGET_LOAD_S
        if len(sizes) > 1:
            flat = per_event[sizes[-1]] / per_event[sizes[0]]
            report(
                f"per-event cost, {sizes[-1]} vs {sizes[0]} events", flat, "×", f"target ≤ {TARGET_FLAT:g}"
            )
            ok &= flat <= TARGET_FLAT
        report("memory after a load / what the live session held", ratio, "×", f"target ≤ {TARGET_MEMORY:g}")
        ok &= ratio <= TARGET_MEMORY
        shutil.rmtree(folder / "state", ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
