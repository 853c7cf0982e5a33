"""Live terminal output through the real agent over a pipe.

    .venv/bin/python bench/bench_terminal.py [--runs 5] [--mb 50] [--chunk 4096]

A test tool (``spew``, defined here with ``define_tool``, a terminal card via ``TerminalCallView``)
emits ``--mb`` × 10⁶ bytes of terminal-like text (lines, ANSI colour escapes, tabs, quotes and
backslashes; each chunk led by its index, so a lost, repeated or reordered chunk changes the hash)
in ``--chunk``-byte pieces through ``execution.report(TerminalOutput(...))``, one event-loop turn per
piece, as a tool reading a child's pipe would. The agent runs in a child process: this file with
``--agent``, a launcher that builds the CLI's ``AgentConfig`` (``build_config``: scripted model, session
logs, default permission mode) with that tool as the only one, then calls ``serve_stdio``. The
client is plain NDJSON over pipes, advertises ``clientCapabilities._meta.terminal_output`` and allows
the permission request the default mode makes for an ``execute`` tool.

The client hashes the decoded ``data`` of every ``terminal_output`` update as it arrives (nothing is
stored) and asserts that length and SHA-256 equal the tool's output: every byte exactly once. Figures,
medians over ``--runs`` fresh agent processes:

- delivered MB/s: output bytes (1 MB = 10⁶ B) / wall time from sending ``session/prompt`` to reading
  the call's ``terminal_exit`` update (target ≥ 50 MB/s);
- peak RSS growth: the agent's ``VmHWM`` after the turn minus its ``VmRSS`` just before the prompt,
  the peak having been reset to the current RSS there (``/proc/PID/clear_refs``), in MiB (target
  ≤ 32 MB);
- the agent's CPU per 4 KiB of output (its process CPU clock over the same span as the rate).

Anchor, same run: ``--bare``, a plain child (blocking stdio, orjson, no event loop, no tool) writing
the same updates coalesced the same way (64 KiB each): the ceiling of this client and pipe.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child import NdjsonChild, initialize_params
from _stats import report

CALL_ID = "call_spew"
COALESCE_BYTES = 64 * 1024  # the agent's default flush size, mirrored by the bare anchor
INIT_PARAMS = initialize_params("bench-terminal-client", live_terminal=True)


def output_chunks(total: int, size: int) -> Iterator[str]:
    """The tool's output: ``total`` bytes of ASCII in ``size``-byte chunks, each led by its index."""
    line = '\x1b[32mok\x1b[0m  tests/test_{:05d}.py::test_case PASSED   [ 42%] \t"quoted" \\path\n'
    body = "".join(line.format(i) for i in range(size // 40 + 2))
    sent = 0
    index = 0
    while sent < total:
        head = f"{index:08x}|"
        chunk = (head + body[len(head) : size])[: total - sent]
        yield chunk
        sent += len(chunk)
        index += 1


def expected_digest(total: int, size: int) -> tuple[int, str]:
    digest = hashlib.sha256()
    length = 0
    for chunk in output_chunks(total, size):
        data = chunk.encode()
        digest.update(data)
        length += len(data)
    return length, digest.hexdigest()


def write_script(path: Path, total: int, size: int) -> None:
    """The scripted model: call ``spew`` once, then say ``done``."""
    call = {"id": CALL_ID, "name": "spew", "arguments": {"total": total, "chunk": size}}
    path.write_bytes(orjson.dumps({"turns": [[{"tool_calls": [call]}, {"text": ["done"]}]]}))


# -- the agents (child processes) ---------------------------------------------------------------------


def serve_agent(script: str, state_dir: str) -> int:
    """``--agent``: dsh-acp configured as the CLI does, with ``spew`` as its only tool."""
    from anyio.lowlevel import checkpoint

    from dsh_acp import build_config, serve_stdio
    from dsh_tools import (
        TerminalCallView,
        TerminalOutput,
        TerminalResultView,
        ToolExecution,
        ToolResult,
        define_tool,
    )

    async def spew(args: dict[str, Any], execution: ToolExecution) -> str:
        for chunk in output_chunks(args["total"], args["chunk"]):
            await execution.report(TerminalOutput(chunk))
            await checkpoint()  # one loop turn per chunk, like a tool reading a child's pipe
        return f"wrote {args['total']} bytes"

    def present_result(args: dict[str, Any], result: ToolResult) -> TerminalResultView:
        return TerminalResultView(exit_code=0)

    tool = define_tool(
        name="spew",
        description="Write a lot of terminal output.",
        parameters={
            "total": {"type": "integer", "required": True},
            "chunk": {"type": "integer", "required": True},
        },
        execute=spew,
        present_call=lambda args: TerminalCallView(title=f"spew {args['total']} bytes"),
        present_result=present_result,
        kind="execute",
    )
    config = build_config(["--model", f"script:{script}", "--no-tools", "--state-dir", state_dir])
    config.tools = lambda: [tool]
    return serve_stdio(config)


def serve_bare(total: int, size: int) -> int:
    """``--bare``: the same update stream from a plain blocking loop (the anchor)."""
    out = sys.stdout.buffer
    option = orjson.OPT_APPEND_NEWLINE

    def write(message: dict[str, Any]) -> None:
        out.write(orjson.dumps({"jsonrpc": "2.0", **message}, option=option))

    def update(session: str, fields: dict[str, Any]) -> None:
        fields = {"sessionUpdate": "tool_call_update", "toolCallId": CALL_ID, **fields}
        write({"method": "session/update", "params": {"sessionId": session, "update": fields}})

    def flush(session: str, parts: list[str]) -> None:
        update(session, {"_meta": {"terminal_output": {"terminal_id": CALL_ID, "data": "".join(parts)}}})
        parts.clear()

    for line in sys.stdin.buffer:
        message = orjson.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            write({"id": request_id, "result": {"protocolVersion": 1}})
        elif method == "session/new":
            write({"id": request_id, "result": {"sessionId": "s"}})
        elif method == "session/prompt":
            session = message["params"]["sessionId"]
            parts: list[str] = []
            buffered = 0
            for chunk in output_chunks(total, size):
                parts.append(chunk)
                buffered += len(chunk)
                if buffered >= COALESCE_BYTES:
                    flush(session, parts)
                    buffered = 0
            if parts:
                flush(session, parts)
            exit_ = {"terminal_id": CALL_ID, "exit_code": 0, "signal": None}
            update(session, {"status": "completed", "_meta": {"terminal_exit": exit_}})
            write({"id": request_id, "result": {"stopReason": "end_turn"}})
        out.flush()
    return 0


# -- the client --------------------------------------------------------------------------------------


class Child(NdjsonChild):
    """An agent process spoken to over NDJSON, answering its permission requests."""

    def answer(self, request: dict[str, Any]) -> None:
        """Answer a request of the agent's: allow a permission once; anything else is unknown."""
        if request["method"] == "session/request_permission":
            options = request["params"]["options"]
            allow = next(o["optionId"] for o in options if o["kind"] == "allow_once")
            outcome = {"outcome": "selected", "optionId": allow}
            self.send({"id": request["id"], "result": {"outcome": outcome}})
        else:
            error = {"code": -32601, "message": f"Method not found: {request['method']}"}
            self.send({"id": request["id"], "error": error})


def one_run(
    command: list[str], cwd: str, expected: tuple[int, str], env: dict[str, str] | None = None
) -> dict[str, float]:
    """One fresh agent, one turn; checks the output arrived exactly once and returns the figures."""
    child = Child(command, cwd, env)
    try:
        child.call("initialize", INIT_PARAMS)
        session = child.call("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]
        rss_before = child.status_kib("VmRSS")
        reset = child.reset_peak()
        hwm_before = child.status_kib("VmHWM")
        cpu_before = child.cpu_seconds()
        start = time.perf_counter()
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "spew"}]}
        request_id = child.request("session/prompt", prompt)
        digest = hashlib.sha256()
        length = updates = 0
        exit_at = cpu_at_exit = None
        stop = None
        for message in child.messages():
            if "method" not in message:
                assert message.get("id") == request_id, message
                stop = message["result"]["stopReason"]
                break
            if "id" in message:  # a request of the agent's: permission to run the tool
                child.answer(message)
                continue
            update = message["params"]["update"]
            meta = update.get("_meta") or {}
            if update.get("toolCallId") == CALL_ID and update["sessionUpdate"] == "tool_call_update":
                assert "content" not in update, "a terminal update must not carry content"
            output = meta.get("terminal_output")
            if output is not None:
                assert output["terminal_id"] == CALL_ID, output
                assert exit_at is None, "output after terminal_exit"
                data = output["data"].encode()
                digest.update(data)
                length += len(data)
                updates += 1
            if "terminal_exit" in meta:
                exit_at = time.perf_counter()
                cpu_at_exit = child.cpu_seconds()
                assert meta["terminal_exit"]["exit_code"] == 0, meta
        hwm_after = child.status_kib("VmHWM")
        assert stop == "end_turn", stop
        assert exit_at is not None, "no terminal_exit"
        assert cpu_at_exit is not None
        assert (length, digest.hexdigest()) == expected, ("output differs", length, expected[0])
        base = rss_before if reset else min(rss_before, hwm_before)
        return {
            "mb_per_s": length / 1e6 / (exit_at - start),
            "growth_mib": (hwm_after - base) / 1024,
            "cpu_us_per_4k": (cpu_at_exit - cpu_before) / (length / 4096) * 1e6,
            "updates": updates,
            "reset": float(reset),
        }
    finally:
        child.close()


def main(runs: int, total: int, size: int, bytecode_cache: bool) -> None:
    expected = expected_digest(total, size)
    me = [sys.executable, str(Path(__file__).resolve())]
    results: dict[str, list[dict[str, float]]] = {"dsh-acp": [], "bare": []}
    print(f"{total / 1e6:.0f} MB of terminal output in {size}-byte chunks, {runs} runs each, interleaved")
    with tempfile.TemporaryDirectory(prefix="bench-terminal-") as tmp:
        cwd = os.path.realpath(tmp)
        script = Path(cwd, "script.json")
        write_script(script, total, size)
        state = os.path.join(cwd, "state")
        env = dict(os.environ)
        if bytecode_cache:  # as an installed agent: modules compiled once (here even if this env says not to)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = os.path.join(cwd, "pycache")
        commands = {
            "dsh-acp": [*me, "--agent", "--script", str(script), "--state-dir", state],
            "bare": [*me, "--bare", "--bytes", str(total), "--chunk", str(size)],
        }
        for _ in range(runs):
            for name, command in commands.items():
                results[name].append(one_run(command, cwd, expected, env))

    def median(name: str, key: str) -> float:
        return statistics.median(run[key] for run in results[name])

    if not all(run["reset"] for per_agent in results.values() for run in per_agent):
        print("(VmHWM could not be reset: growth is VmHWM after minus RSS before, an upper bound)")
    bare_rate, bare_growth = median("bare", "mb_per_s"), median("bare", "growth_mib")
    report(
        "terminal output delivered, exactly once: dsh-acp",
        median("dsh-acp", "mb_per_s"),
        "MB/s",
        "target ≥ 50 MB/s",
        f"| bare writer {bare_rate:.0f} MB/s",
    )
    report("  anchor: bare blocking writer, same updates (client ceiling)", bare_rate, "MB/s")
    report(
        "agent peak RSS growth during the turn: dsh-acp",
        median("dsh-acp", "growth_mib"),
        "MiB",
        "target ≤ 32 MB",
        f"| bare writer {bare_growth:.1f} MiB",
    )
    report("  anchor: bare blocking writer", bare_growth, "MiB")
    report("agent CPU per 4 KiB of output: dsh-acp", median("dsh-acp", "cpu_us_per_4k"), "µs")
    report("  anchor: bare blocking writer", median("bare", "cpu_us_per_4k"), "µs")
    print(f"(terminal_output updates per turn: dsh-acp {median('dsh-acp', 'updates'):.0f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="fresh agent processes each (default 5)")
    parser.add_argument("--mb", type=float, default=50, help="output size in MB (10⁶ bytes; default 50)")
    parser.add_argument("--chunk", type=int, default=4096, help="bytes per reported chunk (default 4096)")
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="do not cache compiled modules for the agent"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--agent", action="store_true", help=argparse.SUPPRESS)
    mode.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--script", help=argparse.SUPPRESS)
    parser.add_argument("--state-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    total = args.bytes if args.bytes is not None else int(args.mb * 1e6)
    if args.agent:
        sys.exit(serve_agent(args.script, args.state_dir))
    if args.bare:
        sys.exit(serve_bare(total, args.chunk))
    main(args.runs, total, args.chunk, not args.no_bytecode_cache)
