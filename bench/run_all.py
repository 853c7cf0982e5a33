"""bench/README.md's performance table, from one run: dsh-acp beside the official SDKs and the floor.

    .venv/bin/python bench/run_all.py [--runs 15] [--turns 5] [--chunks 20000] [--sessions 10000]

Runs, in this one process tree and one sitting, ``bench_agent.py`` (cold start, idle peak RSS and
agent CPU per streamed chunk for dsh-acp, the official Python SDK agent ``sdk_agent.py``, the
official TypeScript SDK agent ``ts_sdk_agent.mjs`` and the bare asyncio + orjson floor
``bare_agent.py``, interleaved) and ``bench_sessions.py`` (memory and descriptors per idle
session), then prints the table as Markdown, ready to paste into bench/README.md (the README
shows its headline figures). Each figure's target is in the table; the script exits 1 when any is
missed (and prints which). Needs the ``bench`` extra (``agent-client-protocol``) and node with
``npm ci`` done in tests/client.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_agent
import bench_sessions

COLUMNS = ("dsh-acp", "official SDK", bench_agent.TS_SDK, "bare")
HEADINGS = ("dsh-acp", "Python SDK", "TypeScript SDK", "floor (bare asyncio + orjson)")


def _cell(figures: dict[str, float], name: str, digits: int) -> str:
    value = figures.get(name)
    return "—" if value is None else f"{value:,.{digits}f}"


def table(sessions: tuple[float, int, float] | None, traced: float | None, session_count: int) -> list[str]:
    rows = [
        "| figure | " + " | ".join(HEADINGS) + " | target |",
        "|---|" + "---:|" * len(HEADINGS) + "---|",
    ]
    targets = {
        "cold start (ms)": (f"≤ {bench_agent.START_RATIO}× floor", 0),
        "idle peak RSS (MiB)": (f"≤ {bench_agent.IDLE_RSS_MIB:.0f} MiB", 1),
        "agent CPU per streamed chunk (µs)": (f"≤ {bench_agent.CHUNK_RATIO}× floor", 2),
    }
    for figure, (target, digits) in targets.items():
        values = bench_agent.FIGURES.get(figure)
        if values is None:
            continue
        cells = [_cell(values, name, digits) for name in COLUMNS]
        ratio = values["dsh-acp"] / values["bare"]
        cells[0] += f" ({ratio:.2f}×)"
        rows.append(f"| {figure} | " + " | ".join(cells) + f" | {target} |")
    blank = " | ".join("" for _ in HEADINGS[1:])
    http = bench_agent.FIGURES.get("idle peak RSS, an HTTP model (MiB)")
    if http is not None:
        target = f"≤ {bench_agent.IDLE_RSS_MIB:.0f} MiB"
        figure = "idle peak RSS with an OpenAI-compatible model (MiB)"
        rows.append(f"| {figure} | {http['dsh-acp']:.1f} | {blank} | {target} |")
    if sessions is not None:
        per_session, fds, seconds = sessions
        most_bytes, most_fds = bench_sessions.TARGET_BYTES, bench_sessions.TARGET_FDS
        rows.append(f"| memory per idle session, RSS (B) | {per_session:,.0f} | {blank} | ≤ {most_bytes} |")
        if traced is not None:
            rows.append(f"| Python objects per idle session, tracemalloc (B) | {traced:,.0f} | {blank} | |")
        rows.append(f"| descriptors after {session_count:,} sessions | {fds} | {blank} | ≤ {most_fds} |")
        rows.append(f"| `session/new` round trip (ms) | {seconds * 1e3:.2f} | {blank} | |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="cold-start spawns per agent")
    parser.add_argument("--turns", type=int, default=5, help="measured streaming turns per agent")
    parser.add_argument("--chunks", type=int, default=20_000, help="text chunks per streaming turn")
    parser.add_argument("--sessions", type=int, default=10_000, help="idle sessions opened (0: skip)")
    parser.add_argument("--session-runs", type=int, default=3)
    args = parser.parse_args()
    if bench_agent.TS_SDK not in bench_agent.AGENTS:
        print("note: node or tests/client/node_modules is missing: no TypeScript SDK column")
    missed = bench_agent.main(args.runs, args.turns, args.chunks, bytecode_cache=True)
    sessions, traced = None, None
    if args.sessions:
        print(f"\nidle sessions: {args.session_runs} agents × {args.sessions} session/new")
        results = [bench_sessions.run(args.sessions, "openai:gpt-4.1") for _ in range(args.session_runs)]
        sessions = (
            statistics.median(r[0] for r in results),
            max(r[1] for r in results),
            statistics.median(r[2] for r in results),
        )
        traced = bench_sessions.traced(args.sessions, "openai:gpt-4.1")
        if sessions[0] > bench_sessions.TARGET_BYTES:
            missed.append(f"memory per idle session {sessions[0]:.0f} B > {bench_sessions.TARGET_BYTES} B")
        if sessions[1] > bench_sessions.TARGET_FDS:
            missed.append(f"descriptors {sessions[1]} > {bench_sessions.TARGET_FDS}")
    print(
        f"\nmedians of one run, {platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}; ratios are dsh-acp / floor"
    )
    print("\n".join(table(sessions, traced, args.sessions)))
    for miss in missed:
        print(f"MISSED: {miss}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
