"""bash output through the real agent over its real stdio, beside a bare loop doing the same.

    .venv/bin/python bench/bench_bash_wire.py [--runs 5] [--count 7000000] [--line BYTES]

Targets: output delivered to the client at ≥ 0.9× the bare loop's rate, and the
agent's CPU ≤ 2 ms per MB (the command's own CPU is not the agent's: it runs in another process).

- ``dsh-acp``: ``python -m dsh_acp --model script:… --mode bypass`` whose scripted model calls
  ``bash`` with ``seq 1 COUNT`` (about 8 bytes a number) once; the client advertises
  ``_meta.terminal_output`` and reads the live ``terminal_output`` updates.
  ``--line BYTES`` runs ``yes`` with lines of that length instead (``COUNT`` lines): seq's lines
  of about 8 bytes are the worst case for the JSON encoding of the output, which spends about 10 ns
  on each escaped character (the newline) in orjson, in the floor as in dsh-acp.
- ``bare``: this file with ``--bare``: an asyncio + orjson loop with no framework that runs the
  same command with ``asyncio.create_subprocess_exec`` and relays each read (≤ 64 KiB, decoded
  incrementally as UTF-8) as one ``terminal_output`` notification: the floor. It keeps the
  system's default pipe sizes (64 KiB) where dsh-acp widens its pipes to 1 MiB (``widen_pipe``)
  and reads 256 KiB at a time; the same loop with those (``BENCH_WIDE=1``) is printed beside it.

The client hashes the decoded ``data`` of every update (nothing is stored) and checks length and
SHA-256 against the command's own output: every byte exactly once. Figures, medians over
``--runs`` fresh processes each, interleaved, each running the command twice (two prompts) and
measured on the second: the first prompt of a fresh agent also loads the agent loop, the tools
and pydantic, a cost of its own (bench/README.md, the figures the README shows). MB/s from sending that
``session/prompt`` to the ``terminal_exit`` update (1 MB = 10⁶ B); the agent's process CPU (its
threads only) over the same span per MB; the agent's peak RSS growth (``VmHWM`` reset before
that prompt; target ≤ 32 MB). Exits non-zero when a target is missed. The CPU figure is
printed as a ratio to the floor's too: on a shared machine the floor itself moves by 1.9× with
the hour, and the absolute target with it.

``--instructions``: instead, the user-space instructions each of the three spends per MB of
output, counted by valgrind's cachegrind, which do not move with the machine's load: each runs in
a process of its own for ``seq 1 1000000`` and for ``seq 1 4000000`` (with ``--line``, as many
lines as make 6.9 MB and four times that; both prompts each), and the
figure is the difference of the two totals over the megabytes between them, so start-up, the
first prompt's imports and the exit cancel out. They leave out the kernel's side (the pipes'
reads and writes), which the timed figure has. Slowed by valgrind, each agent finds its pipe full
at every read, so its reads are whole (64 or 256 KiB): that is the figure of a fast command.
Reports and does not judge; ``--keep DIR`` keeps the outputs for ``cg_diff``/``cg_annotate``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _cachegrind as cachegrind
from _child import NdjsonChild, initialize_params
from _stats import report

CALL_ID = "call_bash"
WIDE = "bare, 1 MiB pipes"
RATE_TARGET = 0.9
CPU_TARGET_MS_PER_MB = 2.0
GROWTH_TARGET_MIB = 32.0
INIT_PARAMS = initialize_params("bench-bash-wire-client", live_terminal=True)


def expected_output(command: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    length = 0
    with subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 20):
            digest.update(chunk)
            length += len(chunk)
    return length, digest.hexdigest()


def serve_bare() -> int:
    """``--bare``: the floor. Runs the prompt's command and relays its output, nothing else."""
    import asyncio
    import codecs

    from dsh_tools import widen_pipe

    out = sys.stdout.buffer
    option = orjson.OPT_APPEND_NEWLINE
    wide = os.environ.get("BENCH_WIDE") == "1"
    if wide:
        widen_pipe(out.fileno())

    def write(message: dict[str, Any]) -> None:
        out.write(orjson.dumps({"jsonrpc": "2.0", **message}, option=option))
        out.flush()

    def update(session: str, fields: dict[str, Any]) -> None:
        fields = {"sessionUpdate": "tool_call_update", "toolCallId": CALL_ID, **fields}
        write({"method": "session/update", "params": {"sessionId": session, "update": fields}})

    async def run(session: str, command: str) -> int:
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True
        )
        assert proc.stdout is not None
        chunk = 64 * 1024
        if wide:  # the same pipe sizes and reads as dsh-acp
            transport = proc._transport.get_pipe_transport(1)  # type: ignore[attr-defined]
            widen_pipe(transport.get_extra_info("pipe").fileno())
            chunk = 256 * 1024
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while True:
            data = await proc.stdout.read(chunk)
            text = decoder.decode(data, final=not data)
            if text:
                update(session, {"_meta": {"terminal_output": {"terminal_id": CALL_ID, "data": text}}})
            if not data:
                break
        return await proc.wait()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 24)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        command = os.environ["BENCH_COMMAND"]
        while line := await reader.readline():
            message = orjson.loads(line)
            method, request_id = message.get("method"), message.get("id")
            if method == "initialize":
                write({"id": request_id, "result": {"protocolVersion": 1}})
            elif method == "session/new":
                write({"id": request_id, "result": {"sessionId": "s"}})
            elif method == "session/prompt":
                session = message["params"]["sessionId"]
                code = await run(session, command)
                exit_ = {"terminal_id": CALL_ID, "exit_code": code, "signal": None}
                update(session, {"status": "completed", "_meta": {"terminal_exit": exit_}})
                write({"id": request_id, "result": {"stopReason": "end_turn"}})

    asyncio.run(main())
    return 0


def one_run(
    command: list[str], cwd: str, env: dict[str, str], expected: tuple[int, str], timeout: float = 10
) -> dict[str, float]:
    """One fresh process: the command's turn run twice, the second measured (``timeout``: how long
    its exit may take once stdin closes; valgrind, killed, would not write its counts)."""
    child = NdjsonChild(command, cwd, env)
    try:
        child.call("initialize", INIT_PARAMS)
        session = child.call("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]
        # The first prompt of a fresh agent loads the agent loop, the tools and pydantic (about
        # 180 ms of CPU, a third of this span): that is the first prompt's cost, not bash's
        # output path. The same command runs once unmeasured, then once measured.
        prompt(child, session, expected)
        return prompt(child, session, expected)
    finally:
        child.close(timeout=timeout)


def prompt(child: NdjsonChild, session: str, expected: tuple[int, str]) -> dict[str, float]:
    """One prompt whose turn runs the command: its rate, agent CPU per MB and peak RSS growth."""
    rss_before = child.status_kib("VmRSS")
    reset = child.reset_peak()
    cpu_before, system_before = child.cpu_seconds(), child.system_seconds()
    start = time.perf_counter()
    request_id = child.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    digest = hashlib.sha256()
    length = updates = 0
    exit_at = cpu_at_exit = system_at_exit = None
    for message in child.messages():
        if "method" not in message:
            assert message.get("id") == request_id, message
            assert message["result"]["stopReason"] == "end_turn", message
            break
        meta = (message["params"].get("update") or {}).get("_meta") or {}
        output = meta.get("terminal_output")
        if output is not None:
            data = output["data"].encode()
            digest.update(data)
            length += len(data)
            updates += 1
        if "terminal_exit" in meta:
            exit_at, cpu_at_exit = time.perf_counter(), child.cpu_seconds()
            system_at_exit = child.system_seconds()
    assert exit_at is not None, "no terminal_exit"
    assert cpu_at_exit is not None
    assert system_at_exit is not None
    assert (length, digest.hexdigest()) == expected, ("output differs", length, expected[0])
    hwm = child.status_kib("VmHWM")
    return {
        "mb_per_s": length / 1e6 / (exit_at - start),
        "cpu_ms_per_mb": (cpu_at_exit - cpu_before) * 1000 / (length / 1e6),
        "system_ms_per_mb": (system_at_exit - system_before) * 1000 / (length / 1e6),
        "updates_per_mb": updates / (length / 1e6),
        "growth_mib": (hwm - (rss_before if reset else hwm)) / 1024,
    }


def agents(cwd: str, command: str) -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
    """The argv and environment of dsh-acp and of the two floors, each running ``command`` in its
    turns; dsh-acp's scripted model (two turns, each calling ``bash`` once) is written to ``cwd``."""
    call = {"id": CALL_ID, "name": "bash", "arguments": {"command": command, "description": "bench"}}
    script = Path(cwd, f"script-{hashlib.sha256(command.encode()).hexdigest()[:12]}.json")
    script.write_bytes(orjson.dumps({"turns": [[{"tool_calls": [call]}, {"text": ["done"]}]] * 2}))
    env = {**os.environ, "BENCH_COMMAND": command}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules compiled once
    env["PYTHONPYCACHEPREFIX"] = os.path.join(cwd, "pycache")
    state = os.path.join(cwd, "state")
    agent = [sys.executable, "-m", "dsh_acp", "--model", f"script:{script}", "--mode", "bypass"]
    bare = [sys.executable, str(Path(__file__).resolve()), "--bare"]
    commands = {"dsh-acp": [*agent, "--state-dir", state], "bare": bare, WIDE: bare}
    envs = dict.fromkeys(commands, env) | {WIDE: {**env, "BENCH_WIDE": "1"}}
    return commands, envs


def output_command(count: int, line: int | None) -> str:
    """``seq 1 COUNT``, or with ``line`` COUNT lines of that many bytes (letters and digits, so
    that nothing in a line but its newline is escaped in JSON)."""
    if line is None:
        return f"seq 1 {count}"
    text = ("abcdefghijklmnopqrstuvwxyz0123456789" * (line // 36 + 1))[: max(0, line - 1)]
    return f"yes {text} | head -n {count}"


def main(runs: int, count: int, line: int | None) -> int:
    command = output_command(count, line)
    expected = expected_output(command)
    print(f"{command}: {expected[0] / 1e6:.1f} MB, {runs} runs each, interleaved")
    results: dict[str, list[dict[str, float]]] = {"dsh-acp": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="bench-bash-wire-") as tmp:
        cwd = os.path.realpath(tmp)
        commands, envs = agents(cwd, command)
        one_run(commands["dsh-acp"], cwd, envs["dsh-acp"], expected)  # warm-up: the bytecode cache
        for _ in range(runs):
            for name, argv in commands.items():
                results.setdefault(name, []).append(one_run(argv, cwd, envs[name], expected))

    def median(name: str, key: str) -> float:
        return statistics.median(run[key] for run in results[name])

    rate, floor = median("dsh-acp", "mb_per_s"), median("bare", "mb_per_s")
    cpu, growth = median("dsh-acp", "cpu_ms_per_mb"), median("dsh-acp", "growth_mib")
    report(
        "bash output delivered, exactly once: dsh-acp",
        rate,
        "MB/s",
        f"target ≥ {RATE_TARGET}× floor",
        f"({rate / floor:.2f}×)",
    )
    report("  floor: bare asyncio + orjson relay loop", floor, "MB/s")
    floor_cpu = median("bare", "cpu_ms_per_mb")
    report(
        "agent CPU per MB of output: dsh-acp",
        cpu,
        "ms",
        f"target ≤ {CPU_TARGET_MS_PER_MB}",
        f"({cpu / floor_cpu:.2f}× floor)",
    )
    report("  floor: bare loop", floor_cpu, "ms")
    wide_rate, wide_cpu = median(WIDE, "mb_per_s"), median(WIDE, "cpu_ms_per_mb")
    report(
        "  the floor with dsh-acp's pipe sizes and reads", wide_rate, "MB/s", "", f"({rate / wide_rate:.2f}×)"
    )
    report("  … its CPU per MB", wide_cpu, "ms", "", f"({cpu / wide_cpu:.2f}×)")
    for name in results:  # clock ticks: a coarse split, for where the CPU goes
        report(f"  of which in the kernel: {name}", median(name, "system_ms_per_mb"), "ms")
    for name in results:  # each update is a read, and a turn of the loop
        report(f"  terminal_output updates per MB: {name}", median(name, "updates_per_mb"), "")
    report("agent peak RSS growth: dsh-acp", growth, "MiB", f"target ≤ {GROWTH_TARGET_MIB:.0f}")
    missed = rate < RATE_TARGET * floor or cpu > CPU_TARGET_MS_PER_MB or growth > GROWTH_TARGET_MIB
    return 1 if missed else 0


def instructions(short: int, long: int, line: int | None, keep: str | None) -> None:
    """User-space instructions per MB of output of dsh-acp and the floors, under cachegrind: (a
    process printing ``long`` lines - one printing ``short``) / the megabytes between them."""
    per_mb: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-bash-wire-") as tmp:
        cwd = os.path.realpath(tmp)
        shell = {count: output_command(count, line) for count in (short, long)}
        runs = {count: (*agents(cwd, command), expected_output(command)) for count, command in shell.items()}
        commands, envs, expected = runs[short]
        one_run(commands["dsh-acp"], cwd, envs["dsh-acp"], expected)  # fills the bytecode cache
        for name in commands:
            totals = []
            for count, (argvs, environments, output) in runs.items():
                out = Path(keep or cwd, f"cachegrind.{name.replace(' ', '').replace(',', '')}.{count}")
                env = {**environments[name], "PYTHONHASHSEED": "0"}  # dicts and sets alike from run to run
                one_run([*cachegrind.command(out), *argvs[name]], cwd, env, output, timeout=300)
                totals.append(cachegrind.total(out))
            megabytes = 2 * (runs[long][2][0] - runs[short][2][0]) / 1e6  # two prompts each
            per_mb[name] = (totals[1] - totals[0]) / megabytes
    floor = per_mb["bare"]
    print(f"user-space instructions per MB of bash output (cachegrind, {shell[short]} and {shell[long]}):")
    for name, count in per_mb.items():
        print(f"  {name}: {count:,.0f} ({count / floor:.2f}x the floor)")
    print(
        f"  (the target for dsh-acp's CPU: <= {CPU_TARGET_MS_PER_MB} ms per MB, the kernel's side included)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=7_000_000, help="seq 1 COUNT (default: about 56 MB)")
    parser.add_argument("--line", type=int, help="COUNT lines of this many bytes (yes) instead of seq's")
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--instructions", action="store_true", help="only the instructions per MB of each (valgrind)"
    )
    parser.add_argument("--keep", help="with --instructions: keep the cachegrind outputs here")
    args = parser.parse_args()
    if args.bare:
        sys.exit(serve_bare())
    if args.instructions:
        short = 1_000_000 if args.line is None else 6_900_000 // args.line
        instructions(short, 4 * short, args.line, args.keep)
        sys.exit(0)
    sys.exit(main(args.runs, args.count, args.line))
