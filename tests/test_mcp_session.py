"""MCP servers named in session/new become that session's tools, through the real protocol."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_acp.mcp import _servers as _mcp
from dsh_acp.testing import AcpClient, AcpSchema
from helpers import scripted

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).parent / "mcp_servers"


def stdio(name: str, script: str, *args: str) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [str(SERVERS / script), *args], "env": []}


async def test_mcp_tools_join_the_session_and_failures_are_told(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    turns = [
        [],  # the /tools command's turn: it never reaches the model
        [
            {"tool_calls": [{"id": "m1", "name": "mcp__toolbox__echo", "arguments": {"text": "hi"}}]},
            {"text": "done"},
        ],
    ]
    async with AcpClient.in_memory(scripted(turns), schema=acp_schema) as client:
        result = await client.initialize()
        assert result["agentCapabilities"]["mcpCapabilities"] == {"http": _mcp.HTTP_SUPPORTED, "sse": False}
        servers = [stdio("toolbox", "toolbox.py"), stdio("broken", "exits.py")]
        sid = await client.new_session(str(tmp_path), mcpServers=servers)
        answer_at = next(
            i for i, m in enumerate(client.agent_messages) if m.get("result", {}).get("sessionId")
        )
        await client.wait_for(
            lambda m: any(u.get("sessionUpdate") == "agent_message_chunk" for u in client.updates(sid))
        )
        # The failure is told after the answer (the client learns the session id from it).
        told = client.updates(sid, ("agent_message_chunk",))
        assert len(told) == 1
        assert told[0]["content"]["text"].startswith('MCP server "broken" failed to start')
        assert all(
            i > answer_at for i, m in enumerate(client.agent_messages) if m.get("method") == "session/update"
        )
        await client.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/tools"}]}
        )
        listing = client.updates(sid, ("agent_message_chunk",))[-1]["content"]["text"]
        assert "`mcp__toolbox__echo`" in listing
        assert await client.prompt(sid, "echo please") == {"stopReason": "end_turn"}
        calls = client.updates(sid, ("tool_call", "tool_call_update"))
        assert calls[0]["title"] == "toolbox: echo"
        assert calls[0]["kind"] == "other"
        assert calls[-1]["status"] == "completed"
        # A second session does not see the first one's MCP tools.
        other = await client.new_session(str(tmp_path))
        await client.request(
            "session/prompt", {"sessionId": other, "prompt": [{"type": "text", "text": "/tools"}]}
        )
        assert "mcp__" not in client.updates(other, ("agent_message_chunk",))[-1]["content"]["text"]
    client.assert_valid()
