"""The kit's client around a subprocess agent: it sees every line as it passes, keeps the agent's
stderr when asked, and ends an agent that will not exit (the demo is built on these)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
import pytest

from dsh_acp.testing import AcpClient, WireLine
from dsh_acp.testing import _client as kit_client
from helpers import slow_child_watcher

pytestmark = pytest.mark.anyio


def fake_agent(tmp_path: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``sys.executable -m dsh_acp ...`` run a shell script instead of the agent."""
    agent = tmp_path / "agent"
    agent.write_text("#!/bin/sh\n" + body)
    agent.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(agent))


async def test_on_line_sees_both_directions_in_order() -> None:
    seen: list[WireLine] = []
    async with AcpClient.subprocess(["--no-tools"], on_line=seen.append) as client:
        await client.initialize()
    assert [(line.direction, line.message.get("id")) for line in seen] == [("client", 0), ("agent", 0)]
    assert seen == client.lines
    assert client.exit_code == 0


async def test_capture_stderr_keeps_the_agents_last_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_agent(tmp_path, "echo starting >&2\necho 'cannot start: broken' >&2\nexit 3\n", monkeypatch)
    async with AcpClient.subprocess([], capture_stderr=True) as client:
        assert client.process is not None
        await client.process.wait()
    assert list(client.stderr_lines) == ["starting", "cannot start: broken"]
    assert client.exit_code == 3
    assert not client.hung


async def hung_agent_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """Run ``script`` as an agent that ignores its closed stdin (and SIGTERM): it must be killed
    0.5 s after its stdin closes, and reported so."""
    fake_agent(tmp_path, "trap '' TERM\n" + script, monkeypatch)
    monkeypatch.setattr(kit_client, "EXIT_LIMIT_S", 0.5)
    with pytest.raises(TimeoutError, match=r"did not exit within 0.5 s of its stdin closing"):
        async with AcpClient.subprocess([]) as client:
            pass
    assert client.hung
    assert client.exit_code == -9


async def test_an_agent_that_outlives_its_stdin_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await hung_agent_is_killed(tmp_path, monkeypatch, "exec sleep 60\n")  # holds stdout open


@pytest.mark.slow
async def test_a_killed_agent_is_reported_killed_however_late_its_exit_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A child of the agent holds its stdout until 1 s, so the client is still ending when the
    # agent, killed at 0.5 s, is a zombie whose exit the watcher delivers only at 2.5 s. The client
    # must wait for that exit, never reap the agent itself (the watcher would then find no child
    # and report 255).
    slow_child_watcher(monkeypatch, delay=2.0)
    await hung_agent_is_killed(tmp_path, monkeypatch, "sleep 1 &\nexec sleep 60\n")


def _wait_exited_unreaped(pid_file: Path) -> None:
    """Until the process whose pid ``pid_file`` gets has exited, leaving its status unread."""
    while not pid_file.read_text().endswith("\n"):
        time.sleep(0.01)
    os.waitid(os.P_PID, int(pid_file.read_text()), os.WEXITED | os.WNOWAIT)


async def test_a_terminal_killed_after_its_command_exited_reports_the_commands_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent's terminal/kill lands after the command exited but before its exit was delivered:
    # the status the agent then reads is the command's own, not one the kill made up.
    slow_child_watcher(monkeypatch, delay=0.5)
    pid_file = tmp_path / "pid"
    pid_file.write_text("")
    terminals = AcpClient().terminals
    async with anyio.create_task_group() as group:
        command = {"command": "sh", "args": ["-c", f"echo $$ > {pid_file}; exit 3"]}
        terminal = {"terminalId": (await terminals.answer("terminal/create", command, group))["terminalId"]}
        with anyio.fail_after(10):
            await anyio.to_thread.run_sync(_wait_exited_unreaped, pid_file, abandon_on_cancel=True)
        await terminals.answer("terminal/kill", terminal, group)
        status = await terminals.answer("terminal/wait_for_exit", terminal, group)
    assert status == {"exitCode": 3, "signal": None}
