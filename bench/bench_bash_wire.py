"""bash output through the real agent over its real stdio, beside a bare loop doing the same.

    .venv/bin/python bench/bench_bash_wire.py [--runs 5] [--count 7000000]

Targets: output delivered to the client at ≥ 0.9× the bare loop's rate, and the
agent's CPU ≤ 2 ms per MB (the command's own CPU is not the agent's: it runs in another process).

- ``dsh-acp``: ``python -m dsh_acp --model script:… --mode bypass`` whose scripted model calls
  ``bash`` with ``seq 1 COUNT`` (about 8 bytes a number) once; the client advertises
  ``_meta.terminal_output`` and reads the live ``terminal_output`` updates.
- ``bare``: this file with ``--bare``: an asyncio + orjson loop with no framework that runs the
  same command with ``asyncio.create_subprocess_exec`` and relays each read (≤ 64 KiB, decoded
  incrementally as UTF-8) as one ``terminal_output`` notification: the floor. It keeps the
  system's default pipe sizes (64 KiB) where dsh-acp widens its pipes to 1 MiB (``widen_pipe``)
  and reads 256 KiB at a time; the same loop with those (``BENCH_WIDE=1``) is printed beside it.

The client hashes the decoded ``data`` of every update (nothing is stored) and checks length and
SHA-256 against the command's own output: every byte exactly once. Figures, medians over
``--runs`` fresh processes each, interleaved, each running the command twice (two prompts) and
measured on the second: the first prompt of a fresh agent also loads the agent loop, the tools
and pydantic, a cost of its own (the README's performance section). MB/s from sending that
``session/prompt`` to the ``terminal_exit`` update (1 MB = 10⁶ B); the agent's process CPU (its
threads only) over the same span per MB; the agent's peak RSS growth (``VmHWM`` reset before
that prompt; target ≤ 32 MB). Exits non-zero when a target is missed.
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

from _child import NdjsonChild, initialize_params
from _stats import report

CALL_ID = "call_bash"
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


def one_run(command: list[str], cwd: str, env: dict[str, str], expected: tuple[int, str]) -> dict[str, float]:
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
        child.close()


def prompt(child: NdjsonChild, session: str, expected: tuple[int, str]) -> dict[str, float]:
    """One prompt whose turn runs the command: its rate, agent CPU per MB and peak RSS growth."""
    rss_before = child.status_kib("VmRSS")
    reset = child.reset_peak()
    cpu_before = child.cpu_seconds()
    start = time.perf_counter()
    request_id = child.request(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    digest = hashlib.sha256()
    length = 0
    exit_at = cpu_at_exit = None
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
        if "terminal_exit" in meta:
            exit_at, cpu_at_exit = time.perf_counter(), child.cpu_seconds()
    assert exit_at is not None, "no terminal_exit"
    assert cpu_at_exit is not None
    assert (length, digest.hexdigest()) == expected, ("output differs", length, expected[0])
    hwm = child.status_kib("VmHWM")
    return {
        "mb_per_s": length / 1e6 / (exit_at - start),
        "cpu_ms_per_mb": (cpu_at_exit - cpu_before) * 1000 / (length / 1e6),
        "growth_mib": (hwm - (rss_before if reset else hwm)) / 1024,
    }


def main(runs: int, count: int) -> int:
    command = f"seq 1 {count}"
    expected = expected_output(command)
    print(f"{command}: {expected[0] / 1e6:.1f} MB, {runs} runs each, interleaved")
    results: dict[str, list[dict[str, float]]] = {"dsh-acp": [], "bare": []}
    with tempfile.TemporaryDirectory(prefix="bench-bash-wire-") as tmp:
        cwd = os.path.realpath(tmp)
        call = {"id": CALL_ID, "name": "bash", "arguments": {"command": command, "description": "bench"}}
        script = Path(cwd, "script.json")
        script.write_bytes(orjson.dumps({"turns": [[{"tool_calls": [call]}, {"text": ["done"]}]] * 2}))
        env = {**os.environ, "BENCH_COMMAND": command}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules compiled once
        env["PYTHONPYCACHEPREFIX"] = os.path.join(cwd, "pycache")
        state = os.path.join(cwd, "state")
        agent = [sys.executable, "-m", "dsh_acp", "--model", f"script:{script}", "--mode", "bypass"]
        bare = [sys.executable, str(Path(__file__).resolve()), "--bare"]
        commands = {"dsh-acp": [*agent, "--state-dir", state], "bare": bare, "bare, 1 MiB pipes": bare}
        envs = dict.fromkeys(commands, env) | {"bare, 1 MiB pipes": {**env, "BENCH_WIDE": "1"}}
        one_run(commands["dsh-acp"], cwd, env, expected)  # warm-up: the bytecode cache
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
    report("agent CPU per MB of output: dsh-acp", cpu, "ms", f"target ≤ {CPU_TARGET_MS_PER_MB}")
    report("  floor: bare loop", median("bare", "cpu_ms_per_mb"), "ms")
    wide_rate = median("bare, 1 MiB pipes", "mb_per_s")
    report(
        "  the floor with dsh-acp's pipe sizes and reads", wide_rate, "MB/s", "", f"({rate / wide_rate:.2f}×)"
    )
    report("  … its CPU per MB", median("bare, 1 MiB pipes", "cpu_ms_per_mb"), "ms")
    report("agent peak RSS growth: dsh-acp", growth, "MiB", f"target ≤ {GROWTH_TARGET_MIB:.0f}")
    missed = rate < RATE_TARGET * floor or cpu > CPU_TARGET_MS_PER_MB or growth > GROWTH_TARGET_MIB
    return 1 if missed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=7_000_000, help="seq 1 COUNT (default: about 56 MB)")
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.exit(serve_bare() if args.bare else main(args.runs, args.count))
