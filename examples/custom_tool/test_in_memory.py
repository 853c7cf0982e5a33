"""Drive the shout tool from a test of your own: the agent in this process, a scripted model
playing the model, the edit's permission question answered, and the cards checked. Only public
names: the configuration and the scripted model from ``dsh_acp``, the client from the kit."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest
from shout import TOOLS

from dsh_acp import AgentConfig, ModelChoice, ScriptedModel
from dsh_acp.testing import AcpClient, AcpSchema

CALL = {"id": "shout-1", "name": "shout", "arguments": {"path": "notes.txt", "line": "hello world"}}
TURNS = [[{"tool_calls": [CALL]}, {"text": "Done: line 2 is loud now."}]]
"""One prompt: the model calls shout, then answers."""


@pytest.mark.anyio
async def test_shout_asks_first_then_shows_its_diff(acp_schema: AcpSchema, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("first line\nhello world\nlast line\n")
    config = AgentConfig(
        models=[ModelChoice("script", "Script", lambda: ScriptedModel(TURNS))],
        tools=lambda: TOOLS,
    )
    # The default mode asks before an edit: the client allows it once.
    answers = deque(["allow_once"])
    async with AcpClient.in_memory(config, schema=acp_schema, permission_answers=answers) as client:
        await client.initialize()
        session = await client.new_session(str(tmp_path))
        assert await client.prompt(session, "Make the second line loud") == {"stopReason": "end_turn"}

        (question,) = [r for r in client.agent_requests if r["method"] == "session/request_permission"]
        assert question["params"]["toolCall"]["title"] == "Shout in notes.txt"
        (done,) = [u for u in client.updates(session, {"tool_call_update"}) if u.get("status") == "completed"]
        assert done["content"][0]["type"] == "diff"
        assert done["locations"] == [{"path": str(tmp_path / "notes.txt"), "line": 2}]
    assert (tmp_path / "notes.txt").read_text() == "first line\nHELLO WORLD\nlast line\n"
    client.assert_valid()  # every line the agent wrote is valid ACP
