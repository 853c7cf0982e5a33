"""A question to the user (``ask_user``, ``elicitation/create`` in form mode) cancelled with
``session/cancel`` while the client has not answered, through the real process: the card closes
as a cancelled call does, the model is told the call was cancelled, the agent keeps serving, and
an answer the client sends after the cancel changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_openai import FakeOpenAI, chunk, stream_reply, tool_delta

from dsh_acp.models._history import CANCELLED_TEXT
from dsh_acp.testing import AcpClient, AcpSchema

pytestmark = pytest.mark.anyio

QUESTION = {"question": "Which database should I use?", "choices": ["PostgreSQL", "SQLite"]}
ASKING_CLIENT = {"elicitation": {"form": {}}}


def _asks() -> Any:
    call = tool_delta(0, id="call-ask", name="ask_user", arguments=json.dumps(QUESTION))
    return stream_reply(chunk(tool_calls=[call]), chunk(finish="tool_calls"))


def _answers(text: str) -> Any:
    return stream_reply(chunk(text), chunk(finish="stop"))


async def test_a_question_cancelled_before_the_answer(
    acp_schema: AcpSchema, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    asked = anyio.Event()
    release = anyio.Event()
    answered = anyio.Event()

    async def late_answer() -> Any:
        asked.set()
        # Like a client that does not act on $/cancel_request: the user answers after the cancel.
        with anyio.CancelScope(shield=True):
            await release.wait()
        answered.set()
        return {"action": "accept", "content": {"answer": "SQLite"}}

    def on_request(method: str, params: Any) -> Any:
        return late_answer() if method == "elicitation/create" else None

    args = ["--model", "openai:fake", "--state-dir", str(tmp_path / "state")]
    replies = [_asks(), _answers("Still here.")]
    async with FakeOpenAI(replies, strict=True, title="Database setup") as server:
        args += ["--base-url", server.base_url]
        async with AcpClient.subprocess(args, schema=acp_schema, on_agent_request=on_request) as client:
            await client.initialize(ASKING_CLIENT)
            sid = await client.new_session(str(tmp_path))
            async with anyio.create_task_group() as group:
                answers: list[Any] = []

                async def first() -> None:
                    answers.append(await client.prompt(sid, "Set up the database"))

                group.start_soon(first)
                with anyio.fail_after(10):
                    await asked.wait()
                await client.cancel(sid)
            assert answers == [{"stopReason": "cancelled"}]
            cancelled_at = len(client.lines)
            release.set()
            with anyio.fail_after(10):
                await answered.wait()
                await client.wait_until(
                    lambda: any(
                        line.direction == "client" and "result" in (line.message or {})
                        for line in client.lines[cancelled_at:]
                    )
                )
            assert await client.prompt(sid, "Are you there?") == {"stopReason": "end_turn"}
            updates = client.updates(sid)
            lines = list(client.lines)
        client.assert_valid()
        assert client.exit_code == 0
        # The log kept the cancel, not the late answer: a reload shows the card closed the same way.
        async with AcpClient.subprocess(args, schema=acp_schema) as client:
            await client.initialize(ASKING_CLIENT)
            await client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
            replayed = [u for u in client.updates(sid) if u.get("toolCallId") == "call-ask"]
        client.assert_valid()
    assert [u.get("status") for u in replayed][-1] == "failed"
    assert "The user answered" not in str(replayed)

    # The question was asked once, in form mode, on its own card; the agent withdrew it.
    (question,) = [line.message for line in lines if line.message.get("method") == "elicitation/create"]
    assert question["params"]["mode"] == "form"
    withdrawn = [
        line.message
        for line in lines
        if line.direction == "agent" and line.message.get("method") == "$/cancel_request"
    ]
    assert withdrawn == [
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": question["id"]}}
    ]
    # Its card showed the question while it waited, then closed once, as any cancelled call does.
    card = [u for u in updates if u.get("toolCallId") == "call-ask"]
    assert card[0]["sessionUpdate"] == "tool_call"
    assert "Question: Which database should I use?" in [u.get("title") for u in card]
    statuses = [u["status"] for u in card if "status" in u]
    assert statuses[-1] == "failed"
    assert statuses.count("failed") == 1
    assert "completed" not in statuses
    # The late answer reached the agent and changed nothing: no reply to it, no update about it.
    (late,) = [
        i
        for i, line in enumerate(lines)
        if line.direction == "client"
        and "method" not in line.message
        and line.message["id"] == question["id"]
    ]
    assert lines[late].message["result"]["content"] == {"answer": "SQLite"}
    after = [line.message for line in lines[late + 1 :] if line.direction == "agent"]
    assert [m for m in after if "method" not in m] == [
        {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}
    ]
    assert all(m.get("params", {}).get("update", {}).get("toolCallId") != "call-ask" for m in after)
    # The model was told the call was cancelled, not the late answer.
    _, second = server.requests
    tool_results = [m for m in second.json["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_results] == [("call-ask", CANCELLED_TEXT)]
    assert "The user answered" not in second.body.decode()
    said = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert said == "Still here."
    # Nothing went wrong on the agent's side: no traceback, no complaint about the late answer.
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "no pending request" not in err
