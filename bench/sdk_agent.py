"""Baseline for the benchmarks: the same scripted agent, written with the official Python SDK.

    python bench/sdk_agent.py [--script PATH]

It plays the scripted-model file format of ``dsh-acp --model script:PATH`` (only ``text`` steps:
the n-th prompt of a session plays turn n, each string of a step's ``text`` one
``agent_message_chunk`` sharing a ``messageId``), so that ``bench_agent.py`` can compare the two
doing exactly the same work. It is written the way the SDK's README shows an agent: ``acp.run_agent``
over stdio, typed responses, ``session_update`` with typed update models.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from pathlib import Path
from typing import Any

import orjson
from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    text_block,
)
from acp.interfaces import Client
from acp.schema import AgentCapabilities, AgentMessageChunk, Implementation


class ScriptedSdkAgent(Agent):
    """Plays a script's text steps; one session history counter per session."""

    def __init__(self, turns: list[list[dict[str, Any]]]) -> None:
        self._turns = turns
        self._conn: Client | None = None
        self._prompts: dict[str, int] = {}

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="sdk-bench-agent", title="SDK bench agent", version="0"),
        )

    async def new_session(
        self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        self._prompts[session_id] = 0
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        assert self._conn is not None
        index = self._prompts[session_id]
        self._prompts[session_id] = index + 1
        for step in self._turns[index]:
            text = step.get("text") or ()
            chunks = [text] if isinstance(text, str) else text
            message_id = uuid.uuid4().hex
            for chunk in chunks:
                await self._conn.session_update(
                    session_id,
                    AgentMessageChunk(
                        session_update="agent_message_chunk",
                        content=text_block(chunk),
                        message_id=message_id,
                    ),
                )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--script", help="a scripted-model file ({'turns': [[step, ...], ...]})")
    args = parser.parse_args()
    turns = orjson.loads(Path(args.script).read_bytes())["turns"] if args.script else []
    asyncio.run(run_agent(ScriptedSdkAgent(turns)))


if __name__ == "__main__":
    main()
