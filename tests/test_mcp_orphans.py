"""An MCP server's whole tree dies with the agent, even when the agent is SIGKILLed (no cleanup runs).

The server (``mcp_servers/stubborn_tree.py``) ignores SIGTERM and the end of its stdin, and keeps a
grandchild that does the same: only the guard the stdio transport shares with the bash tool (the
server's warden in the agent's guard process) can stop that tree once the agent is gone.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

from dsh_acp.mcp._servers import connect_servers
from dsh_tools import ToolRegistry

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="uses pidfd and /proc"),
]

SERVER = str(Path(__file__).parent / "mcp_servers" / "stubborn_tree.py")
# Generous: the agent imports the MCP SDK before it starts the server (more on a loaded machine).
CONNECT_S = 60.0
GONE_S = 5.0


def stubborn(pid_file: Path) -> dict[str, Any]:
    return {"name": "stubborn", "command": sys.executable, "args": [SERVER, str(pid_file)], "env": []}


class Agent:
    """The real ``dsh-acp`` over its stdio, raw JSON-RPC lines."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.buffer = b""
        self.next_id = 0

    async def request(self, method: str, params: Any) -> tuple[Any, list[Any]]:
        """Send a request; return its result and the notifications that came before it."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")
        notifications: list[Any] = []
        with anyio.fail_after(CONNECT_S):
            while True:
                while b"\n" not in self.buffer:
                    self.buffer += await self.process.stdout.receive()
                raw, self.buffer = self.buffer.split(b"\n", 1)
                line = json.loads(raw)
                if line.get("id") == self.next_id and "method" not in line:
                    assert "error" not in line, line
                    return line["result"], notifications
                notifications.append(line)


def descendants(root: int) -> set[int]:
    """Every process below ``root``, from the parent links in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


async def test_a_sigkilled_agent_takes_its_mcp_servers_whole_trees_with_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "stubborn.pid"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"text": "hi"}]]}))
    process = await anyio.open_process(
        [sys.executable, "-m", "dsh_acp", "--model", f"script:{script}"], stderr=None
    )
    pidfds: list[int] = []
    try:
        agent = Agent(process)
        await agent.request("initialize", {"protocolVersion": 1})
        session, _ = await agent.request(
            "session/new", {"cwd": str(tmp_path), "mcpServers": [stubborn(pid_file)]}
        )
        # Connected, not merely started: a server that failed to start would be stopped anyway.
        prompt = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "/tools"}]}
        _, updates = await agent.request("session/prompt", prompt)
        told = json.dumps(updates)
        assert "mcp__stubborn__noop" in told, told
        server, grandchild = (int(pid) for pid in pid_file.read_text().split())
        tree = descendants(process.pid)
        assert {server, grandchild} <= tree  # the reaper is in there too: it must go as well
        # Opened while all are alive: a pid reused later cannot be mistaken for one of them.
        pidfds = [os.pidfd_open(pid) for pid in sorted(tree)]
        process.send_signal(signal.SIGKILL)  # no finally, no atexit: only the guards can act
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()
    try:
        with anyio.fail_after(GONE_S):
            for pidfd in pidfds:
                await anyio.wait_readable(pidfd)  # readable once that process has exited
    finally:
        for pidfd in pidfds:
            os.close(pidfd)


async def test_stopping_a_server_ends_its_whole_tree(tmp_path: Path) -> None:
    pid_file = tmp_path / "stubborn.pid"
    registry = ToolRegistry().layer()
    async with anyio.create_task_group() as agent_tasks:
        connections, failures = await connect_servers(
            [stubborn(pid_file)], registry, task_group=agent_tasks, start_timeout=CONNECT_S
        )
        try:
            assert failures == []
            server, grandchild = (int(pid) for pid in pid_file.read_text().split())
            pidfds = [os.pidfd_open(server), os.pidfd_open(grandchild)]
        finally:
            with anyio.CancelScope(shield=True):
                await connections.aclose()
    try:
        # The stop itself ends the tree (SIGKILL to the group), not the agent's exit.
        with anyio.fail_after(GONE_S):
            for pidfd in pidfds:
                await anyio.wait_readable(pidfd)
    finally:
        for pidfd in pidfds:
            os.close(pidfd)
