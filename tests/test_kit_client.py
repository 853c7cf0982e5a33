"""The kit's client around a subprocess agent: it sees every line as it passes, keeps the agent's
stderr when asked, and ends an agent that will not exit (the demo is built on these)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh_acp.testing import AcpClient, WireLine
from dsh_acp.testing import _client as kit_client

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


async def test_an_agent_that_outlives_its_stdin_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ignores its closed stdin (and SIGTERM) and holds stdout open.
    fake_agent(tmp_path, "trap '' TERM\nexec sleep 60\n", monkeypatch)
    monkeypatch.setattr(kit_client, "EXIT_LIMIT_S", 0.5)
    with pytest.raises(TimeoutError, match=r"did not exit within 0.5 s of its stdin closing"):
        async with AcpClient.subprocess([]) as client:
            pass
    assert client.hung
    assert client.exit_code == -9
