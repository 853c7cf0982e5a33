"""What idle sessions cost the agent: memory and file descriptors per ``session/new``.

    .venv/bin/python bench/bench_sessions.py [--sessions 10000] [--runs 3] [--model openai:gpt-4.1]

One real ``dsh-acp`` process per run (session logs in a temporary state folder; with an
``openai:`` model a dummy key is set, nothing is sent: ``session/new`` builds the model without
calling it). After ``initialize`` and 50 warm-up sessions, ``--sessions`` more are opened one after
the other; the figures (medians over ``--runs``) are the growth of the agent's ``VmRSS`` divided by
the session count, and the descriptors it holds at the end (``/proc/PID/fd``).

Targets: ≤ 2 KiB per idle session, ≤ 64 descriptors after 10,000 sessions. Exits 1 when missed.

Printed beside the RSS figure: the Python objects an idle session keeps, as ``tracemalloc`` counts
them (the agent served in this process over OS pipes, the same sessions opened, the traced
memory's growth after a collection, divided by the count): RSS also moves with the allocator's
arenas, this does not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import report

TARGET_BYTES = 2048
TARGET_FDS = 64


def _status(pid: int) -> tuple[int, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
    return rss_kib, len(os.listdir(f"/proc/{pid}/fd"))


def run(sessions: int, model: str | None) -> tuple[float, int, float]:
    """Bytes per idle session, descriptors at the end, seconds per session/new."""
    import time

    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "dsh_acp", "--state-dir", f"{folder}/state"]
        env = dict(os.environ)
        if model:
            command += ["--model", model]
            env.setdefault("DSH_API_KEY", "sk-bench-not-a-real-key")
        agent = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert agent.stdin is not None
        assert agent.stdout is not None

        def ask(request_id: int, method: str, params: Any) -> Any:
            assert agent.stdin is not None
            assert agent.stdout is not None
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            agent.stdin.write(json.dumps(message).encode() + b"\n")
            agent.stdin.flush()
            while True:
                answer = json.loads(agent.stdout.readline())
                if answer.get("id") == request_id:
                    if "result" not in answer:
                        raise SystemExit(f"{method} failed: {answer}")
                    return answer["result"]

        try:
            ask(0, "initialize", {"protocolVersion": 1})
            new = {"cwd": folder, "mcpServers": []}
            for i in range(50):
                ask(1_000_000 + i, "session/new", new)
            time.sleep(0.2)
            rss_before, _ = _status(agent.pid)
            started = time.perf_counter()
            for i in range(sessions):
                ask(i + 1, "session/new", new)
            elapsed = time.perf_counter() - started
            time.sleep(0.2)
            rss_after, fds = _status(agent.pid)
        finally:
            agent.stdin.close()
            agent.wait(timeout=30)
            agent.stdout.close()
    return (rss_after - rss_before) * 1024 / sessions, fds, elapsed / sessions


_TRACED = """
import gc, os, sys, threading, tracemalloc
import anyio, orjson
from dsh_acp import build_config, serve
from dsh_acp.rpc._stdio import FdReceiveStream, FdSendStream

config = build_config(sys.argv[2:])
sessions, folder = int(sys.argv[1]), os.getcwd()
to_agent, from_agent = os.pipe(), os.pipe()
answered = threading.Semaphore(0)

def read() -> None:
    with os.fdopen(from_agent[0], "rb") as lines:
        for line in lines:
            if b'"result"' in line or b'"error"' in line:
                answered.release()

async def ask(method, params, request_id) -> None:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    os.write(to_agent[1], orjson.dumps(message) + b"\\n")
    await anyio.to_thread.run_sync(answered.acquire)

async def main() -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(serve, config, FdReceiveStream(to_agent[0]), FdSendStream(from_agent[1]))
        await ask("initialize", {"protocolVersion": 1}, 0)
        new = {"cwd": folder, "mcpServers": []}
        for i in range(50):
            await ask("session/new", new, 10**6 + i)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(sessions):
            await ask("session/new", new, i + 1)
        await anyio.sleep(0.2)
        gc.collect()
        print((tracemalloc.get_traced_memory()[0] - before) / sessions)
        os.close(to_agent[1])

threading.Thread(target=read, daemon=True).start()
tracemalloc.start()
anyio.run(main)
"""


def traced(sessions: int, model: str | None) -> float:
    """Bytes of Python objects per idle session (``tracemalloc``)."""
    with tempfile.TemporaryDirectory() as folder:
        argv = [str(sessions), "--state-dir", f"{folder}/state", *(["--model", model] if model else [])]
        env = dict(os.environ)
        if model:
            env.setdefault("DSH_API_KEY", "sk-bench-not-a-real-key")
        result = subprocess.run(
            [sys.executable, "-c", _TRACED, *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=folder,
            check=True,
        )
    return float(result.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", default="openai:gpt-4.1", help='"" for no model')
    args = parser.parse_args()
    results = [run(args.sessions, args.model or None) for _ in range(args.runs)]
    per_session = statistics.median(r[0] for r in results)
    fds = max(r[1] for r in results)
    seconds = statistics.median(r[2] for r in results)
    label = f"memory per idle session ({args.sessions} sessions)"
    report(label, per_session, "B", f"target ≤ {TARGET_BYTES}")
    report("  Python objects per idle session (tracemalloc)", traced(args.sessions, args.model or None), "B")
    report(f"descriptors after {args.sessions} sessions", fds, "fds", f"target ≤ {TARGET_FDS}")
    report("session/new round trip", seconds * 1e3, "ms")
    return 0 if per_session <= TARGET_BYTES and fds <= TARGET_FDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
