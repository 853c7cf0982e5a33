"""The ACP methods end to end over in-memory pipes, every agent message schema-validated."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import scripted

from dsh_acp._connection import RpcError
from dsh_acp.testing import AcpClient, AcpSchema

pytestmark = pytest.mark.anyio


async def test_initialize_negotiates_version_and_advertises(acp_schema: AcpSchema, tmp_path: Any) -> None:
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        result = await client.initialize(version=65535)
        assert result["protocolVersion"] == 1
        assert result["agentInfo"]["name"] == "dsh-acp"
        assert result["authMethods"] == []
        assert result["agentCapabilities"]["promptCapabilities"]["embeddedContext"] is True
        again = await client.initialize(version=1)
        assert again["protocolVersion"] == 1
    client.assert_valid()


async def test_initialize_rejects_bad_version(acp_schema: AcpSchema) -> None:
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        with pytest.raises(RpcError) as info:
            await client.request("initialize", {"protocolVersion": "one"})
        assert info.value.code == -32602
        assert (await client.initialize())["protocolVersion"] == 1
    client.assert_valid()


async def test_prompt_streams_thought_and_text_with_message_ids(acp_schema: AcpSchema, tmp_path: Any) -> None:
    config = scripted([[{"thought": "thinking", "text": ["Hello", ", world"]}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert sid == "sess-1"
        result = await client.prompt(sid, "hi")
        assert result == {"stopReason": "end_turn"}
        kinds = [u["sessionUpdate"] for u in client.updates(sid)]
        assert kinds == ["agent_thought_chunk", "agent_message_chunk", "agent_message_chunk"]
        texts = [u["content"]["text"] for u in client.updates(sid)]
        assert texts == ["thinking", "Hello", ", world"]
        ids = [u["messageId"] for u in client.updates(sid)]
        assert ids[1] == ids[2] != ids[0]
    client.assert_valid()
