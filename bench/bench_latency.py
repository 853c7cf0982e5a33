"""Latency from a command's output to the client's terminal, through the real agent.

    .venv/bin/python bench/bench_latency.py [--runs 3] [--lines 40] [--gap-ms 50]

The scripted model asks the real ``dsh-acp`` (a child over NDJSON pipes, ``--mode bypass``, the
CLI's default coalescing) to run a ``bash`` command that prints ``--lines`` lines, one every
``--gap-ms``, each carrying the wall-clock time it was written. The client advertises Zed's
``_meta.terminal_output`` (JetBrains' ``terminal_output_delta`` takes the same path) and, for
every live ``terminal_output`` update, takes the time it read it minus the time in each line: the
latency a person watching the terminal sees. Medians and 95th percentiles over every line of
``--runs`` fresh agents; the target is a median of at most 50 ms.

Anchor, same run: the same printer read straight from a pipe by this process (the floor: a pipe
hop and a process wake-up). A client that runs the command in its own terminal (``terminal/*``)
shows the output without any agent in between, so it has nothing to measure here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child import NdjsonChild
from _stats import report

TARGET_MS = 50.0
PRINTER = """\
import sys, time
lines, gap = int(sys.argv[1]), float(sys.argv[2])
for _ in range(lines):
    time.sleep(gap)
    sys.stdout.write(f"T {time.time():.6f}\\n")
    sys.stdout.flush()
"""
ZED = {"fs": {"readTextFile": False, "writeTextFile": False}, "_meta": {"terminal_output": True}}


def _latencies(data: str, now: float) -> list[float]:
    return [now - float(line[2:]) for line in data.splitlines() if line.startswith("T ")]


def agent_run(folder: Path, lines: int, gap: float) -> list[float]:
    printer = folder / "printer.py"
    printer.write_text(PRINTER)
    command = f"{sys.executable} {printer} {lines} {gap}"
    script = {
        "turns": [
            [
                {
                    "tool_calls": [
                        {"id": "t", "name": "bash", "arguments": {"command": command, "description": "tick"}}
                    ]
                },
                {"text": "done"},
            ]
        ]
    }
    (folder / "model.json").write_text(json.dumps(script))
    agent = NdjsonChild(
        [
            sys.executable,
            "-m",
            "dsh_acp",
            "--model",
            f"script:{folder / 'model.json'}",
            "--mode",
            "bypass",
            "--state-dir",
            str(folder / "state"),
        ],
        cwd=str(folder),
        env={**os.environ, "DSH_TERMINALS": "agent"},
    )
    latencies: list[float] = []
    try:
        agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": ZED})
        session = agent.call("session/new", {"cwd": str(folder), "mcpServers": []})["sessionId"]
        prompt = agent.request(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
        )
        for message in agent.messages():
            now = time.time()
            if message.get("id") == prompt and "method" not in message:
                break
            update = message.get("params", {}).get("update", {})
            output = (update.get("_meta") or {}).get("terminal_output")
            if output:
                latencies.extend(_latencies(output["data"], now))
    finally:
        agent.close()
    if len(latencies) != lines:
        raise AssertionError(f"{len(latencies)} of {lines} lines reached the client live")
    return latencies


def pipe_run(folder: Path, lines: int, gap: float) -> list[float]:
    printer = folder / "printer.py"
    printer.write_text(PRINTER)
    proc = subprocess.Popen([sys.executable, str(printer), str(lines), str(gap)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    latencies: list[float] = []
    for raw in proc.stdout:
        latencies.extend(_latencies(raw.decode(), time.time()))
    proc.wait()
    return latencies


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def main(runs: int, lines: int, gap: float) -> int:
    agent: list[float] = []
    floor: list[float] = []
    with tempfile.TemporaryDirectory() as root:
        for run in range(runs):
            folder = Path(root, f"run{run}")
            folder.mkdir()
            agent += agent_run(folder, lines, gap)
            floor += pipe_run(folder, lines, gap)
    ms = 1000.0
    median = statistics.median(agent) * ms
    report(
        "output -> client terminal, median",
        median,
        "ms",
        target=f"target <= {TARGET_MS:g}",
        baseline=f"pipe {statistics.median(floor) * ms:.2f} ms",
    )
    report(
        "output -> client terminal, p95", _p95(agent) * ms, "ms", baseline=f"pipe {_p95(floor) * ms:.2f} ms"
    )
    return 0 if median <= TARGET_MS else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--gap-ms", type=float, default=50.0)
    options = parser.parse_args()
    sys.exit(main(options.runs, options.lines, options.gap_ms / 1000))
