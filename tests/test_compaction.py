"""Automatic compaction through the agent, against a fake server with a small context window:
before a request would not fit, after the server says it did not, and when nothing can fit;
/compact summarises only what fits; a reload continues from the compacted conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chunk, llama_error, prompt_tokens, stream_reply

from dsh_acp import (
    AssistantMessage,
    ContextMessage,
    Message,
    RpcError,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
    build_config,
)
from dsh_acp.loop._compaction import choose_cut
from dsh_acp.session._events import SUMMARY_PREFIX
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import TextBlock

pytestmark = pytest.mark.anyio

COMPACTION_CLIENT = {"session": {"compaction": {}}}


def answer(text: str, usage: tuple[int, int] | None = None) -> Any:
    documents = [chunk(text), chunk(finish="stop")]
    if usage is not None:
        documents.append(chunk(choices=False, usage=usage))
    return stream_reply(*documents)


def args(server: FakeOpenAI, tmp_path: Path, tools: bool = False) -> list[str]:
    return [
        "--model",
        "openai:fake",
        "--base-url",
        server.base_url,
        "--state-dir",
        str(tmp_path / "state"),
        *([] if tools else ["--no-tools"]),
    ]


def texts(request: Any) -> str:
    return "\n".join(str(m.get("content")) for m in request.json["messages"])


def user(text: str) -> UserMessage:
    return UserMessage((TextBlock(text=text),))


def test_a_cut_falls_where_a_turn_or_step_begins_and_shrinks_tool_output() -> None:
    call = ToolCallRequest("c", "read", "{}")
    history: list[Message] = [
        user("one"),
        AssistantMessage(tool_calls=(call,)),
        ToolResultMessage("c", "read", (TextBlock(text="x" * 50_000),)),
        AssistantMessage(text="read it"),
        user("two"),
    ]
    cut = choose_cut(history, 4000, keep_current_turn=True)
    assert cut is not None
    assert cut.end == 4  # the whole first turn (its huge result shrunk), not the second
    shrunk = cut.prefix[2]
    assert isinstance(shrunk, ToolResultMessage)
    assert len(shrunk.content[0].text) < 2000  # type: ignore[union-attr]
    assert choose_cut([user("only")], 4000, keep_current_turn=True) is None
    assert choose_cut(history, None) is not None
    summary = ContextMessage(SUMMARY_PREFIX + "what happened")
    assert choose_cut([summary, user("now")], 4000, keep_current_turn=True) is None
    assert choose_cut([summary], None) is None
    assert choose_cut([summary, user("then"), AssistantMessage(text="done")], None) is not None


async def test_compacts_before_a_request_that_would_not_fit(acp_schema: AcpSchema, tmp_path: Path) -> None:
    replies = [
        answer("First answer.", usage=(700, 50)),
        answer("SUMMARY-ONE"),  # the automatic compaction
        answer("Second answer.", usage=(300, 20)),
        answer("Third answer."),
    ]
    second = "second " * 120  # ~280 tokens more: past 85 % of 1024
    async with FakeOpenAI(replies, strict=True, n_ctx=1024, title="T") as server:
        async with AcpClient.in_memory(build_config(args(server, tmp_path)), schema=acp_schema) as client:
            await client.initialize(COMPACTION_CLIENT)
            sid = await client.new_session(str(tmp_path))
            assert await client.prompt(sid, "first") == {"stopReason": "end_turn"}
            assert await client.prompt(sid, second) == {"stopReason": "end_turn"}
            updates = client.updates(sid)
        client.assert_valid()
        # A reload continues from the compacted conversation, the second prompt kept verbatim.
        async with AcpClient.in_memory(build_config(args(server, tmp_path)), schema=acp_schema) as client:
            await client.initialize(COMPACTION_CLIENT)
            await client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
            assert await client.prompt(sid, "third") == {"stopReason": "end_turn"}
        client.assert_valid()
    assert server.refused == []
    _, summarize, after, reloaded = server.requests
    assert "second second" not in texts(summarize)  # the current prompt is not summarised
    assert "first" in texts(summarize)
    assert "SUMMARY-ONE" in texts(after)
    assert "second second" in texts(after)
    assert "First answer." not in texts(after)
    assert [m["role"] for m in reloaded.json["messages"]] == ["system", "user", "assistant", "user"]
    assert "SUMMARY-ONE" in texts(reloaded)
    assert "second second" in texts(reloaded)
    statuses = [u["status"] for u in updates if u["sessionUpdate"] == "compaction_update"]
    assert statuses == ["in_progress", "completed"]


async def test_compacts_and_retries_when_the_server_says_it_does_not_fit(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    # The server does not say its window up front: the first refusal teaches it.
    replies = [answer("First answer."), answer("SUMMARY-ONE"), answer("Second answer.")]
    async with FakeOpenAI(replies, strict=True, n_ctx=1024, models_style="none", title="T") as server:
        async with AcpClient.in_memory(build_config(args(server, tmp_path)), schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            assert await client.prompt(sid, "alpha " * 350) == {"stopReason": "end_turn"}
            assert await client.prompt(sid, "beta " * 350) == {"stopReason": "end_turn"}
        client.assert_valid()
    assert len(server.refused) == 1
    assert "exceeds the available context size (1024 tokens)" in server.refused[0]
    *_, summarize, retried = server.requests
    assert "alpha alpha" in texts(summarize)
    assert "SUMMARY-ONE" in texts(retried)
    assert "beta beta" in texts(retried)


async def test_when_nothing_fits_the_error_says_what_to_do(acp_schema: AcpSchema, tmp_path: Path) -> None:
    async with FakeOpenAI([answer("never")], strict=True, n_ctx=1024, title="T") as server:
        async with AcpClient.in_memory(build_config(args(server, tmp_path)), schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            with pytest.raises(RpcError) as info:
                await client.prompt(sid, "huge " * 2000)
            assert "start a new session" in info.value.message
            assert "1024 tokens" in info.value.message
        client.assert_valid()


async def test_slash_compact_summarises_only_what_fits(acp_schema: AcpSchema, tmp_path: Path) -> None:
    replies = [answer(f"Answer {n}.") for n in range(3)]
    replies += [answer("SUMMARY"), answer("After.")]
    async with FakeOpenAI(replies, strict=True, n_ctx=1024, title="T") as server:
        async with AcpClient.in_memory(build_config(args(server, tmp_path)), schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            for n in range(3):
                assert await client.prompt(sid, f"turn{n} " * 80) == {"stopReason": "end_turn"}
            assert await client.prompt(sid, "/compact") == {"stopReason": "end_turn"}
            assert await client.prompt(sid, "next") == {"stopReason": "end_turn"}
        client.assert_valid()
    assert server.refused == []
    summarize, after = server.requests[-2:]
    assert "turn0 turn0" in texts(summarize)
    assert "turn2 turn2" not in texts(summarize)  # the newest turn did not fit: it is kept
    assert "turn2 turn2" in texts(after)
    assert "SUMMARY" in texts(after)


async def test_a_summary_request_that_does_not_fit_is_retried_smaller(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    overflow = llama_error(
        400,
        "request (1100 tokens) exceeds the available context size (1024 tokens), try increasing it",
        "exceed_context_size_error",
        n_prompt_tokens=1100,
        n_ctx=1024,
    )
    replies = [
        answer("First answer. " * 40, usage=(300, 580)),
        overflow,  # the summariser's first try: the server counts more tokens than estimated
        answer("SUMMARY"),
        answer("Second answer."),
    ]
    async with FakeOpenAI(replies, strict=True, n_ctx=1024, title="T") as server:
        async with AcpClient.in_memory(build_config(args(server, tmp_path)), schema=acp_schema) as client:
            await client.initialize(COMPACTION_CLIENT)
            sid = await client.new_session(str(tmp_path))
            assert await client.prompt(sid, "first " * 150) == {"stopReason": "end_turn"}
            assert await client.prompt(sid, "second") == {"stopReason": "end_turn"}
            updates = client.updates(sid)
        client.assert_valid()
    _, too_big, smaller, after = server.requests
    assert len(smaller.body) < len(too_big.body)
    assert "SUMMARY" in texts(after)
    statuses = [u["status"] for u in updates if u["sessionUpdate"] == "compaction_update"]
    assert statuses == ["in_progress", "failed", "in_progress", "completed"]


async def test_a_refused_request_is_a_warning_notice_and_the_summary_no_message(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    # Through the real process, for a client that shows notices but not compactions: the
    # compaction the agent chose is announced once, with why, and its summary stays out of the chat.
    replies = [answer("First answer."), answer("SUMMARY-ONE"), answer("Second answer.")]
    async with FakeOpenAI(replies, strict=True, n_ctx=1024, models_style="none", title="T") as server:
        async with AcpClient.subprocess(args(server, tmp_path), schema=acp_schema) as client:
            await client.initialize({"session": {"notices": {}}})
            sid = await client.new_session(str(tmp_path))
            assert await client.prompt(sid, "alpha " * 350) == {"stopReason": "end_turn"}
            assert await client.prompt(sid, "beta " * 350) == {"stopReason": "end_turn"}
            updates = client.updates(sid)
        client.assert_valid()
    assert len(server.refused) == 1
    notices = [u for u in updates if u["sessionUpdate"] == "notice"]
    assert [(n["severity"], n["title"]) for n in notices] == [
        ("warning", "Context window exceeded: compacting and retrying")
    ]
    assert "1,024-token context window" in notices[0]["description"]
    said = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert said == "First answer.Second answer."
    assert "SUMMARY-ONE" in texts(server.requests[-1])


async def test_a_summary_alone_is_not_summarised_again(acp_schema: AcpSchema, tmp_path: Path) -> None:
    # The reference tools' definitions fill most of a small window, so each turn's request sits
    # near the threshold even after compacting: a compaction that could only summarise the last
    # summary again frees nothing and costs a model call, so it is not made.
    window = 1500
    replies = [answer(f"Answer {n}.") for n in range(12)]
    async with FakeOpenAI(replies, strict=True, n_ctx=window, title="T") as server:
        config = build_config(args(server, tmp_path, tools=True))
        async with AcpClient.in_memory(config, schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            for n in range(3):
                assert await client.prompt(sid, f"question {n} " * 20) == {"stopReason": "end_turn"}
        client.assert_valid()
    assert server.refused == []
    asked = [r.json for r in server.requests if r.method == "POST"]
    assert prompt_tokens(asked[0]) > 0.7 * window  # the regime this test is about: tools fill the window
    summaries = [body for body in asked if "tools" not in body]
    # One compaction per turn after the first, each summarising the turn before it.
    assert len(summaries) == 2
    for body in summaries:
        assert any("question" in str(m.get("content")) for m in body["messages"][1:-1])
