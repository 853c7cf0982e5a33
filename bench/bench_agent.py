"""dsh-acp as an editor sees it: cold start, streaming CPU per chunk, idle memory.

    .venv/bin/python bench/bench_agent.py [--runs 15] [--turns 5] [--chunks 20000]
    .venv/bin/python bench/bench_agent.py --start-only   # figures 1 and 3 only
    .venv/bin/python bench/bench_agent.py --profile      # cProfile of dsh-acp's streaming turn
    .venv/bin/python bench/bench_agent.py --code         # figure 2 with chunks of source code

A plain client (no SDK: spawn the process, NDJSON over its stdin/stdout pipes) drives three agents
doing the same work, side by side in one run, runs interleaved so that drift hits them alike:

- ``dsh-acp``: the console script, ``--model script:PATH``, with the tools the CLI registers by default;
- ``official SDK``: ``bench/sdk_agent.py``, the same script played with ``agent-client-protocol``;
- ``bare``: ``bench/bare_agent.py``, an asyncio + orjson loop without a framework.

Figures (medians):

1. cold start: from just before ``Popen`` to the ``initialize`` response read (target dsh-acp ≤ 1.4×
   bare); the interpreter alone (``python -c "import orjson"``, spawn → exit) is shown for scale.
2. streaming: one ``session/prompt`` whose turn streams ``--chunks`` text chunks of 200 bytes: the
   agent's CPU time (all its threads, read from its process CPU clock, ns resolution) between just
   before the prompt is sent and the response's arrival, divided by the chunk count. A warm-up turn
   runs first in each process, so one-off costs (pydantic building the prompt model on first use)
   are not spread over the chunks. The client reads everything and checks that every chunk arrived,
   in order, once, with one ``messageId`` (target dsh-acp ≤ 1.2× bare).
3. idle peak RSS: ``VmHWM`` of the agent after ``initialize`` and ``session/new`` (target ≤ 30 MiB);
   also of dsh-acp with an OpenAI-compatible model, as users run it, once the warm-up after
   ``initialize`` has loaded the model client (same target: aiohttp's warm-up took it to 41 MiB).

Each figure is printed beside its floor and its target; the exit status is 1 when a target is missed
(each miss is printed as ``MISSED: ...``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _cachegrind as cachegrind
from _child import NdjsonChild, initialize_params
from _stats import report

HERE = Path(__file__).resolve().parent

CHUNK_BYTES = 200
INIT_PARAMS = initialize_params("bench-client")


# -- the agents -------------------------------------------------------------------------------


ENV: dict[str, str] = dict(os.environ)
"""The children's environment; ``main`` points its caches and session logs at the run's folder."""


def child_environment(folder: str, bytecode_cache: bool) -> dict[str, str]:
    """dsh-acp keeps session logs (the CLI's default): in ``folder``, not in ``~``. With
    ``bytecode_cache``, compiled modules are cached (in ``folder``) as for an installed agent, even
    when ``PYTHONDONTWRITEBYTECODE`` is set here; without, everything not precompiled (the project's
    own modules in a development checkout) is compiled from source at every start."""
    env = {**os.environ, "DSH_STATE_DIR": os.path.join(folder, "state")}
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(folder, "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _dsh_acp_command(script: Path) -> list[str]:
    exe = shutil.which("dsh-acp", path=str(Path(sys.executable).parent)) or shutil.which("dsh-acp")
    if exe is not None:
        return [exe, "--model", f"script:{script}"]
    return [sys.executable, "-m", "dsh_acp", "--model", f"script:{script}"]


AGENTS: dict[str, Callable[[Path], list[str]]] = {
    "dsh-acp": _dsh_acp_command,
    "official SDK": lambda script: [sys.executable, str(HERE / "sdk_agent.py"), "--script", str(script)],
    "bare": lambda script: [sys.executable, str(HERE / "bare_agent.py"), "--script", str(script)],
}

BARE_LOG = "bare + log"
"""The bare loop keeping each turn's message in a log (``bare_agent.py --log``): an anchor of the
streamed chunk only."""

TS_SDK = "TypeScript SDK"
"""``bench/ts_sdk_agent.mjs``, the same agent written with the official TypeScript SDK: measured
beside the others when node and the SDK (``npm ci`` in tests/client) are there."""


def _ts_sdk_command(script: Path) -> list[str]:
    return [shutil.which("node") or "node", str(HERE / "ts_sdk_agent.mjs"), "--script", str(script)]


if shutil.which("node") and (HERE.parent / "tests/client/node_modules/@agentclientprotocol/sdk").is_dir():
    AGENTS[TS_SDK] = _ts_sdk_command

FIGURES: dict[str, dict[str, float]] = {}
"""The medians of the last ``main``, by figure and agent (``bench/run_all.py`` prints them)."""


CODE_CHUNKS = False
"""``--code``: the chunks are cut from the agent's own source instead of prose."""


def chunk_texts(count: int) -> list[str]:
    """``count`` distinct 200-byte ASCII chunks (the index leads, so order is checkable): prose
    without ``-``, ``_``, ``:`` or capitals, or with ``--code`` slices of dsh-acp's source, which
    have all of them (the session log then searches the message for every secret shape)."""
    if CODE_CHUNKS:
        files = sorted((HERE.parent / "dsh_acp").glob("*.py"))
        source = "".join(f.read_text() for f in files).encode("ascii", "replace").decode()
        width = CHUNK_BYTES - 7
        return [f"{i:06d} " + source[(i * width) % (len(source) - width) :][:width] for i in range(count)]
    filler = "the quick brown fox jumps over the lazy dog, then writes some code; " * 4
    return [f"{i:06d} " + filler[: CHUNK_BYTES - 7] for i in range(count)]


def write_script(path: Path, turns: list[list[str]]) -> None:
    """A scripted-model file: one turn per list of chunks, one text step each."""
    path.write_bytes(orjson.dumps({"turns": [[{"text": chunks}] for chunks in turns]}))


# -- the client -------------------------------------------------------------------------------


class AgentProcess(NdjsonChild):
    """One agent child with the benches' environment."""

    def __init__(self, command: list[str], cwd: str) -> None:
        super().__init__(command, cwd, ENV)


def new_session(agent: AgentProcess, cwd: str) -> str:
    agent.call("initialize", INIT_PARAMS)
    return str(agent.call("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"])


# -- 1 and 3: cold start and idle RSS ---------------------------------------------------------------


def cold_start(command: list[str], cwd: str) -> tuple[float, float]:
    """(ms from spawn to the initialize response, VmHWM MiB after initialize + session/new)."""
    agent = AgentProcess(command, cwd)
    try:
        agent.call("initialize", INIT_PARAMS)
        elapsed = (time.perf_counter() - agent.started) * 1000
        agent.call("session/new", {"cwd": cwd, "mcpServers": []})
        return elapsed, agent.status_kib("VmHWM") / 1024
    finally:
        agent.close()


def http_model_rss(cwd: str) -> float:
    """VmHWM MiB of dsh-acp run as users run it, with an OpenAI-compatible model, once the
    warm-up after ``initialize`` (the model client and its HTTP stack) is over and a session is
    made. Nothing listens at the base URL: an idle agent does not ask it anything."""
    command = _dsh_acp_command(Path(cwd, "unused.json"))[:-2]
    agent = AgentProcess([*command, "--model", "openai:bench", "--base-url", "http://127.0.0.1:9/v1"], cwd)
    try:
        agent.call("initialize", INIT_PARAMS)
        agent.call("session/new", {"cwd": cwd, "mcpServers": []})
        time.sleep(0.5)  # the warm-up imports run on the loop once initialize is answered
        agent.call("session/new", {"cwd": cwd, "mcpServers": []})  # (so they are over by now)
        return agent.status_kib("VmHWM") / 1024
    finally:
        agent.close()


def interpreter_start() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import orjson"], check=True, env=ENV)
    return (time.perf_counter() - start) * 1000


# -- 2: streaming ------------------------------------------------------------------------------


def stream_turn(agent: AgentProcess, session_id: str, expected: list[str]) -> tuple[float, float]:
    """Run one prompt whose turn streams ``expected``; (agent CPU µs per chunk, wall µs per chunk).

    Checks that every chunk arrived once, in order, in one message. Other session updates (the
    session's available commands, usage...) are allowed and not counted.
    """
    count = 0
    message_id = None
    cpu_before = agent.cpu_seconds()
    wall_before = time.perf_counter()
    request_id = agent.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "stream"}]}
    )
    loads = orjson.loads
    for line in agent.lines():
        message = loads(line)
        if "method" in message:
            assert message["method"] == "session/update", message
            assert "id" not in message, message
            assert message["params"]["sessionId"] == session_id, message
            update = message["params"]["update"]
            if update["sessionUpdate"] != "agent_message_chunk":
                continue
            assert update["content"]["text"] == expected[count], (count, update)
            if message_id is None:
                message_id = update.get("messageId")
            assert update.get("messageId") == message_id, update
            count += 1
            continue
        assert message.get("id") == request_id, message
        assert message["result"]["stopReason"] == "end_turn", message
        break
    wall = time.perf_counter() - wall_before
    cpu = agent.cpu_seconds() - cpu_before
    assert count == len(expected), (count, len(expected))
    return cpu / count * 1e6, wall / count * 1e6


# -- the run ---------------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values)


# The targets: ratios against the bare loop measured in the same run, and an absolute memory cap.
START_RATIO = 1.4  # cold start ≤ 1.4× bare
CHUNK_RATIO = 1.2  # agent CPU per burst chunk ≤ 1.2× bare
IDLE_RSS_MIB = 30.0


def main(runs: int, turns: int, chunks: int, bytecode_cache: bool, streaming: bool = True) -> list[str]:
    """Run the figures; the targets missed (empty when all are met)."""
    missed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        cwd = os.path.realpath(tmp)
        ENV.clear()
        ENV.update(child_environment(cwd, bytecode_cache))
        if not bytecode_cache:
            print("bytecode cache off: modules without a .pyc are compiled at every start")
        small = Path(cwd, "small.json")
        write_script(small, [["hello"]])
        print(f"cold start and idle RSS: {runs} spawns of each agent (+1 warm-up), interleaved")
        starts: dict[str, list[float]] = {name: [] for name in AGENTS}
        rss: dict[str, list[float]] = {name: [] for name in AGENTS}
        interpreter: list[float] = []
        for run in range(runs + 1):
            for name, command in AGENTS.items():
                elapsed, hwm = cold_start(command(small), cwd)
                if run:
                    starts[name].append(elapsed)
                    rss[name].append(hwm)
            if run:
                interpreter.append(interpreter_start())
        FIGURES["cold start (ms)"] = {name: _median(values) for name, values in starts.items()}
        FIGURES["idle peak RSS (MiB)"] = {name: _median(values) for name, values in rss.items()}
        sdk_start, bare_start = _median(starts["official SDK"]), _median(starts["bare"])
        dsh_start = _median(starts["dsh-acp"])
        ratio = dsh_start / bare_start
        report(
            "cold start, spawn → initialize response: dsh-acp",
            dsh_start,
            "ms",
            f"target ≤ {START_RATIO}× bare ({START_RATIO * bare_start:.0f} ms), now {ratio:.2f}×",
            f"| SDK {sdk_start:.0f} ms, bare {bare_start:.0f} ms",
        )
        if dsh_start > START_RATIO * bare_start:
            missed.append(f"cold start {dsh_start:.0f} ms > {START_RATIO}× bare {bare_start:.0f} ms")
        report("  anchor: official Python SDK agent", sdk_start, "ms")
        if TS_SDK in starts:
            report("  anchor: official TypeScript SDK agent", _median(starts[TS_SDK]), "ms")
        report("  anchor: bare asyncio + orjson loop", bare_start, "ms")
        report('  anchor: interpreter alone (python -c "import orjson")', _median(interpreter), "ms")
        missed += idle_rss(rss)
        http_rss = _median([http_model_rss(cwd) for _ in range(max(3, runs // 3))])
        FIGURES["idle peak RSS, an HTTP model (MiB)"] = {"dsh-acp": http_rss}
        report(
            "idle peak RSS, with an OpenAI-compatible model: dsh-acp",
            http_rss,
            "MiB",
            f"target ≤ {IDLE_RSS_MIB:.0f} MiB",
        )
        if http_rss > IDLE_RSS_MIB:
            missed.append(f"idle peak RSS with an HTTP model {http_rss:.1f} MiB > {IDLE_RSS_MIB:.0f} MiB")
        if streaming:
            missed += stream(cwd, turns, chunks)
    for miss in missed:
        print(f"MISSED: {miss}")
    return missed


def idle_rss(rss: dict[str, list[float]]) -> list[str]:
    print("\nidle peak RSS (VmHWM after initialize + session/new)")
    sdk_rss, bare_rss, dsh_rss = (_median(rss[name]) for name in ("official SDK", "bare", "dsh-acp"))
    report(
        "idle peak RSS: dsh-acp",
        dsh_rss,
        "MiB",
        f"target ≤ {IDLE_RSS_MIB:.0f} MiB",
        f"| SDK {sdk_rss:.1f} MiB, bare {bare_rss:.1f} MiB ({dsh_rss / bare_rss:.2f}× bare)",
    )
    report("  anchor: official Python SDK agent", sdk_rss, "MiB")
    if TS_SDK in rss:
        report("  anchor: official TypeScript SDK agent", _median(rss[TS_SDK]), "MiB")
    report("  anchor: bare asyncio + orjson loop", bare_rss, "MiB")
    return [f"idle peak RSS {dsh_rss:.1f} MiB > {IDLE_RSS_MIB:.0f} MiB"] if dsh_rss > IDLE_RSS_MIB else []


def stream(cwd: str, turns: int, chunks: int) -> list[str]:
    """Figure 2: agent CPU per burst chunk, the three agents' turns interleaved."""
    print(f"\nstreaming: {turns} turns × {chunks} chunks of {CHUNK_BYTES} B per agent, interleaved")
    expected = chunk_texts(chunks)
    big = Path(cwd, "stream.json")
    write_script(big, [["warm-up"], *([expected] * turns)])
    # The floor again, keeping each turn's message as dsh-acp's session log does (an anchor: what
    # the log costs depends on the machine's page cache).
    with_log = {
        **AGENTS,
        BARE_LOG: lambda script: [*AGENTS["bare"](script), "--log", str(Path(cwd, "bare-log.jsonl"))],
    }
    cpu: dict[str, list[float]] = {name: [] for name in with_log}
    wall: dict[str, list[float]] = {name: [] for name in with_log}
    agents: dict[str, tuple[AgentProcess, str]] = {}
    try:
        for name, command in with_log.items():
            agent = AgentProcess(command(big), cwd)
            agents[name] = agent, new_session(agent, cwd)
            stream_turn(agent, agents[name][1], ["warm-up"])
        for _ in range(turns):
            for name, (agent, session_id) in agents.items():
                cpu_us, wall_us = stream_turn(agent, session_id, expected)
                cpu[name].append(cpu_us)
                wall[name].append(wall_us)
    finally:
        for agent, _ in agents.values():
            agent.close()
    FIGURES["agent CPU per streamed chunk (µs)"] = {
        name: _median(values) for name, values in cpu.items() if name != BARE_LOG
    }
    dsh, sdk, bare = (_median(cpu[name]) for name in ("dsh-acp", "official SDK", "bare"))
    report(
        "agent CPU per streamed chunk: dsh-acp",
        dsh,
        "µs",
        f"target ≤ {CHUNK_RATIO}× bare ({CHUNK_RATIO * bare:.1f} µs): {dsh / bare:.2f}×",
        f"| SDK {sdk:.1f} µs ({sdk / dsh:.1f}× dsh-acp), bare {bare:.1f} µs",
    )
    report("  anchor: official Python SDK agent", sdk, "µs")
    if TS_SDK in cpu:
        report("  anchor: official TypeScript SDK agent", _median(cpu[TS_SDK]), "µs")
    report("  anchor: bare asyncio + orjson loop", bare, "µs")
    bare_log = _median(cpu[BARE_LOG])
    report(
        "  anchor: bare loop + the turn's log record (write, fsync)",
        bare_log,
        "µs",
        f"(dsh-acp is {dsh / bare_log:.2f}× it)",
    )
    for name in AGENTS:
        report(f"  wall time per chunk, client reading everything: {name}", _median(wall[name]), "µs")
    return (
        [f"CPU per burst chunk {dsh:.2f} µs > {CHUNK_RATIO}× bare {bare:.2f} µs"]
        if dsh > CHUNK_RATIO * bare
        else []
    )


# -- --instructions -----------------------------------------------------------------------------------


def instructions(short: int, long: int, keep: str | None) -> None:
    """User-space instructions per burst chunk of each agent, counted by valgrind's cachegrind:
    (a turn of ``long`` chunks - a turn of ``short``) / the chunks between them, each in a process
    of its own after a one-chunk warm-up turn. Deterministic where the CPU clock is not: what the
    session log's record of the grown message costs is in it, start-up and idle time are not.
    ``keep``: a folder for every agent's cachegrind outputs (``cg_diff`` an agent's two, then
    ``cg_annotate`` the difference: where its instructions per chunk go)."""
    counts: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        cwd = os.path.realpath(tmp)
        ENV.clear()
        ENV.update(child_environment(cwd, bytecode_cache=True))
        ENV["PYTHONHASHSEED"] = "0"  # the children's dicts and sets alike from run to run
        agents = {
            "bare": AGENTS["bare"],
            BARE_LOG: lambda script: [*AGENTS["bare"](script), "--log", str(Path(cwd, "bare-log.jsonl"))],
            "dsh-acp": AGENTS["dsh-acp"],
        }
        for name, command in agents.items():
            totals = []
            for chunks in (short, long):
                expected = chunk_texts(chunks)
                script = Path(cwd, f"stream-{chunks}.json")
                write_script(script, [["warm-up"], expected])
                if chunks == short:  # a first run writes the bytecode cache: not a cost of the chunks
                    agent = AgentProcess(command(script), cwd)
                    try:
                        stream_turn(agent, new_session(agent, cwd), ["warm-up"])
                    finally:
                        agent.close()
                out = Path(keep or cwd, f"cachegrind.{name.replace(' ', '')}.{chunks}")
                agent = AgentProcess([*cachegrind.command(out), *command(script)], cwd)
                try:
                    session_id = new_session(agent, cwd)
                    stream_turn(agent, session_id, ["warm-up"])
                    stream_turn(agent, session_id, expected)
                finally:
                    agent.close(timeout=120)  # killed, valgrind would not write its counts
                totals.append(cachegrind.total(out))
            counts[name] = (totals[1] - totals[0]) / (long - short)
    bare = counts["bare"]
    print(f"user-space instructions per burst chunk (cachegrind, turns of {short} and {long} chunks):")
    for name, count in counts.items():
        print(f"  {name}: {count:,.0f} ({count / bare:.2f}x bare)")
    print(f"  (the target for dsh-acp's CPU per burst chunk: <= {CHUNK_RATIO}x bare)")


# -- --profile ---------------------------------------------------------------------------------------


def profile(chunks: int, top: int, trickle: bool) -> None:
    """cProfile of dsh-acp's streaming turn, in-process, over real pipes as in production.

    The agent is ``serve()`` with the config the CLI builds (reference tools, scripted model, session
    logs) on ``FdReceiveStream``/``FdSendStream`` over ``os.pipe()``s, so the write fast path of
    stdio is the one profiled; a thread drains the output pipe. One turn runs unprofiled (its CPU,
    the event loop thread's only, is the clean figure), then the same turn under cProfile.

    ``trickle``: the scripted model yields to the event loop after every chunk, as a model reading
    the network does (the script format cannot say that; the model's ``stream`` is wrapped here).
    """
    import cProfile
    import pstats
    import queue
    import threading

    import anyio
    from anyio.lowlevel import checkpoint

    from dsh_acp import ScriptedModel, build_config, serve
    from dsh_acp.rpc._stdio import FdReceiveStream, FdSendStream

    if trickle:
        stream = ScriptedModel.stream

        async def trickling(self: ScriptedModel, request: Any) -> Any:
            async for event in stream(self, request):
                yield event
                await checkpoint()

        ScriptedModel.stream = trickling  # type: ignore[method-assign,assignment]

    expected = chunk_texts(chunks)
    tmp = tempfile.TemporaryDirectory(prefix="bench-profile-")
    script = Path(tmp.name, "stream.json")
    write_script(script, [["warm-up"], expected, expected])
    config = build_config(["--model", f"script:{script}", "--state-dir", str(Path(tmp.name, "state"))])
    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    responses: queue.Queue[dict[str, Any]] = queue.Queue()
    seen = [0]

    def drain() -> None:
        rest = b""
        while data := os.read(from_agent_r, 1 << 20):
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if b'"agent_message_chunk"' in line:
                    seen[0] += 1
                elif not line.startswith(b'{"jsonrpc":"2.0","method"'):
                    responses.put(orjson.loads(line))

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    profiler = cProfile.Profile()

    async def call(method: str, params: Any, request_id: int) -> Any:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        os.write(to_agent_w, orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE))
        response = await anyio.to_thread.run_sync(responses.get)
        assert response["id"] == request_id, response
        return response["result"]

    async def client() -> None:
        cwd = os.getcwd()
        await call("initialize", INIT_PARAMS, 0)
        session = (await call("session/new", {"cwd": cwd}, 1))["sessionId"]
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
        await call("session/prompt", prompt, 2)
        for request_id, profiled in ((3, False), (4, True)):
            before = seen[0]
            cpu = time.thread_time()
            if profiled:
                profiler.enable()
            await call("session/prompt", prompt, request_id)
            profiler.disable()
            cpu = time.thread_time() - cpu
            assert seen[0] - before == chunks, (seen[0] - before, chunks)
            label = "under cProfile" if profiled else "unprofiled"
            print(f"{'trickle' if trickle else 'burst'} turn, {chunks} chunks, {label}: ", end="")
            print(f"{cpu / chunks * 1e6:.2f} µs of event-loop-thread CPU per chunk")
        os.close(to_agent_w)

    async def run() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(
                serve,
                config,
                FdReceiveStream(to_agent_r, close_fd=True),
                FdSendStream(from_agent_w, close_fd=True),
            )
            await client()

    anyio.run(run)
    reader.join(5)
    tmp.cleanup()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="cold-start spawns per agent (default 15)")
    parser.add_argument("--turns", type=int, default=5, help="measured streaming turns per agent")
    parser.add_argument("--chunks", type=int, default=20_000, help="text chunks per streaming turn")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="start the agents without writing or reading a bytecode cache for uncompiled modules",
    )
    parser.add_argument(
        "--start-only", action="store_true", help="only cold start and idle RSS (no streaming turns)"
    )
    parser.add_argument(
        "--code", action="store_true", help="stream chunks of source code instead of prose (figure 2)"
    )
    parser.add_argument("--profile", action="store_true", help="profile dsh-acp's streaming turn instead")
    parser.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    parser.add_argument(
        "--trickle", action="store_true", help="with --profile: one event-loop turn per chunk"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="only the instructions per burst chunk of dsh-acp and the floor (valgrind)",
    )
    parser.add_argument("--keep", help="with --instructions: keep the cachegrind outputs here")
    args = parser.parse_args()
    CODE_CHUNKS = args.code
    if args.instructions:
        instructions(1_000, 5_000, args.keep)
    elif args.profile:
        profile(args.chunks, args.top, args.trickle)
    else:
        missed = main(args.runs, args.turns, args.chunks, not args.no_bytecode_cache, not args.start_only)
        sys.exit(1 if missed else 0)
