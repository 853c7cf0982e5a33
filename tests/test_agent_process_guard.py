"""Through the real ``dsh-acp`` process: commands cannot read the agent's secrets, and nothing a
command starts escapes, not even a process that left its group, whether the call is cancelled,
times out, or the agent dies (SIGKILL, or the editor closing its stdin)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from secret_cases import PLAIN, SECRET

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="uses pidfd and /proc"),
]

GONE_S = 5.0


class Agent:
    """The real agent over its stdio: raw JSON-RPC lines, notifications kept."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.buffer = b""
        self.next_id = 0
        self.notifications: list[Any] = []

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: Any) -> int:
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    async def answer(self, request_id: int, limit: float = 30) -> Any:
        assert self.process.stdout is not None
        with anyio.fail_after(limit):
            while True:
                while b"\n" not in self.buffer:
                    self.buffer += await self.process.stdout.receive()
                raw, self.buffer = self.buffer.split(b"\n", 1)
                line = json.loads(raw)
                if line.get("id") == request_id and "method" not in line:
                    assert "error" not in line, line
                    return line["result"]
                self.notifications.append(line)


@asynccontextmanager
async def agent_running(
    tmp_path: Path, command: str, **arguments: Any
) -> AsyncIterator[tuple[Agent, str, int]]:
    """An agent whose first prompt runs ``command`` with bash; yields it, the session id and the
    id of the (still unanswered) prompt request."""
    call = {"id": "c1", "name": "bash", "arguments": {"command": command, "description": "x", **arguments}}
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"tool_calls": [call]}, {"text": ["done"]}]]}))
    env = {**os.environ, **{name: value for name, value, _ in SECRET}, **dict(PLAIN)}
    process = await anyio.open_process(
        [
            sys.executable,
            "-m",
            "dsh_acp",
            "--model",
            f"script:{script}",
            "--mode",
            "bypass",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        env=env,
        stderr=None,
    )
    (tmp_path / "agent.pid").write_text(str(process.pid))  # for commands to find their agent
    try:
        agent = Agent(process)
        await agent.answer(await agent.request("initialize", {"protocolVersion": 1}))
        new = {"cwd": str(tmp_path), "mcpServers": []}
        session = (await agent.answer(await agent.request("session/new", new)))["sessionId"]
        go = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
        yield agent, session, await agent.request("session/prompt", go)
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()


async def test_commands_cannot_read_the_agents_secrets(tmp_path: Path) -> None:
    out = tmp_path / "environ.txt"
    # Every process from the command up to the agent: the shell, its warden, the guard, the agent.
    walk = (
        "agent=$(cat agent.pid); p=$$; while :; do echo \"== $p $(cut -d' ' -f2 /proc/$p/stat)\"; "
        "tr '\\0' '\\n' < /proc/$p/environ; [ \"$p\" = \"$agent\" ] && break; "
        "p=$(cut -d' ' -f4 /proc/$p/stat); [ \"$p\" -gt 1 ] || break; done"
    )
    async with agent_running(tmp_path, f"{{ {walk}; }} > {shlex.quote(str(out))} 2>&1") as (agent, _, prompt):
        await agent.answer(prompt)
        pid = agent.process.pid
    seen = out.read_text()
    assert f"== {pid} " in seen, seen  # the walk reached the agent
    assert seen.count("== ") >= 4, seen  # bash, warden, guard, agent
    for name, _value, hidden in SECRET:
        assert hidden not in seen, name
    # The agent's own entry still names them (the values are blanked): what was read is its environ.
    agent_part = seen.split(f"== {pid} ", 1)[1]
    assert "GITHUB_TOKEN=" in agent_part
    for name, value in PLAIN:
        assert f"{name}={value}" in agent_part


ESCAPEES = (
    # A new session; it writes its own pid once in it ($! could be read before setsid ran).
    "setsid sh -c 'echo \"session $$\" >> pids; exec sleep 1000' & "
    '( (sleep 1000 & echo "orphan $!" >> pids) & ); '  # a double fork: re-parented, same group
    "(setsid sh -c 'sleep 1000 & echo \"both $!\" >> pids' &); "  # a new session, its parent gone
    'echo "leader $$" >> pids; '
)


async def escapees_started(tmp_path: Path) -> list[int]:
    """Pidfds of the command's processes once all four have written their pids."""
    pids_file = tmp_path / "pids"
    with anyio.fail_after(30):
        # Nothing signals a file being written from another process tree: poll it.
        while not pids_file.exists() or len(pids_file.read_text().splitlines()) < 4:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    pids = dict(line.split() for line in pids_file.read_text().splitlines())
    pidfds = [os.pidfd_open(int(pid)) for pid in pids.values()]  # while alive: no reused pid fools us
    leader = int(pids["leader"])
    for how in ("session", "both"):
        assert os.getsid(int(pids[how])) != os.getsid(leader)  # they did leave the group
    return pidfds


async def assert_all_exit(pidfds: list[int]) -> None:
    try:
        with anyio.fail_after(GONE_S):
            for pidfd in pidfds:
                await anyio.wait_readable(pidfd)  # readable once that process has exited
    finally:
        for pidfd in pidfds:
            os.close(pidfd)


@pytest.mark.parametrize("how", ["cancel", "sigkill", "stdin closed"])
async def test_processes_that_left_the_group_die_with_the_call_or_the_agent(tmp_path: Path, how: str) -> None:
    async with agent_running(tmp_path, ESCAPEES + "sleep 1000") as (agent, session, prompt):
        pidfds = await escapees_started(tmp_path)
        if how == "cancel":
            await agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
            assert (await agent.answer(prompt))["stopReason"] == "cancelled"
            await assert_all_exit(pidfds)
            assert agent.process.returncode is None  # the agent itself carries on
        elif how == "sigkill":
            agent.process.send_signal(signal.SIGKILL)  # no finally, no atexit: only the guard can act
            await agent.process.wait()
            await assert_all_exit(pidfds)
        else:
            assert agent.process.stdin is not None
            await agent.process.stdin.aclose()  # the editor went away
            with anyio.fail_after(10):
                await agent.process.wait()
            await assert_all_exit(pidfds)


async def test_processes_that_left_the_group_die_when_the_call_times_out(tmp_path: Path) -> None:
    # The bound must leave the four escapees time to start and write their pids on a loaded machine.
    async with agent_running(tmp_path, ESCAPEES + "sleep 1000", timeout_ms=3000) as (agent, _, prompt):
        pidfds = await escapees_started(tmp_path)
        await agent.answer(prompt)
        await assert_all_exit(pidfds)
