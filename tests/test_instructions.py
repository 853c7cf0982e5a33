"""Project instructions (AGENTS.md) in the system prompt, and /init, through the agent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_acp.loop._instructions import ProjectInstructions
from dsh_acp.testing import AcpClient, AcpSchema
from helpers import recorded

pytestmark = pytest.mark.anyio


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "outside").mkdir()
    (tmp_path / "AGENTS.md").write_text("Above the repository: never read.\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Run tests with `make test`.\n")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "AGENTS.md").write_text("This package uses tabs.\n")
    return repo


async def test_agents_md_from_the_session_folder_up_to_the_repository_root(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    repo = _repo(tmp_path)
    config, models = recorded([[{"text": "one"}], [{"text": "two"}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(repo / "pkg"))
        await client.prompt(sid, "hi")
        first = models[0].requests[0].system
        # Outermost first, nearest last; nothing above the repository root.
        assert "From ../AGENTS.md:\nRun tests with `make test`." in first
        assert "From AGENTS.md:\nThis package uses tabs." in first
        assert first.index("make test") < first.index("tabs")
        assert "never read" not in first
        # Changed between requests: the next request has the new text.
        nearest = repo / "pkg" / "AGENTS.md"
        nearest.write_text("This package uses spaces.\n")
        os.utime(nearest, ns=(1, 1))  # a different mtime even within the clock's resolution
        await client.prompt(sid, "again")
        second = models[0].requests[1].system
        assert "uses spaces" in second
        assert "uses tabs" not in second
    client.assert_valid()


async def test_configured_names_and_no_instructions(acp_schema: AcpSchema, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "CLAUDE.md").write_text("Prefer small commits.\n")
    config, models = recorded([[{"text": "one"}]], instruction_files=("CLAUDE.md",))
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        await client.prompt(await client.new_session(str(repo)), "hi")
    system = models[0].requests[0].system
    assert "Prefer small commits." in system
    assert "make test" not in system
    config, models = recorded([[{"text": "one"}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        await client.prompt(await client.new_session(str(tmp_path / "outside")), "hi")
    assert "# Project instructions" not in models[0].requests[0].system


def test_instructions_are_bounded(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("start\n" + "x" * 100_000 + "\nend\n")
    text = ProjectInstructions(max_bytes=4096).text(str(tmp_path))
    assert len(text.encode()) < 5000
    assert text.startswith("From AGENTS.md:\nstart")


async def test_slash_init_asks_the_model_and_the_conversation_keeps_the_instruction(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    config, models = recorded([[{"text": "Wrote it."}], [{"text": "ok"}]], state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "/init focus on tests") == {"stopReason": "end_turn"}
        await client.prompt(sid, "thanks")
    (first, second) = models[0].requests
    sent = first.messages[-1].content[0].text  # type: ignore[union-attr]
    assert sent.startswith("Write a starter AGENTS.md")
    assert sent.endswith("The user adds: focus on tests")
    # /init has no title of its own: the next prompt names the session.
    assert [u["title"] for u in client.updates(sid, ["session_info_update"])] == ["thanks"]
    # After a reload the conversation holds the instruction, not the bare command.
    config, models = recorded(
        [[{"text": "Wrote it."}], [{"text": "ok"}], [{"text": "again"}]], state_dir=tmp_path / "state"
    )
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        await client.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        await client.prompt(sid, "more")
    restored = models[0].requests[0].messages
    assert restored[0].content[0].text == sent  # type: ignore[union-attr]
    assert second.messages[:2] == restored[:2]
