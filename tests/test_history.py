"""What is sent is always a valid conversation: unit cases, a property test over random
histories and over random sessions of prompts, cancels, failures, tool steps and compactions,
and a whole session through the agent against a server as strict as the strictest real ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_openai import (
    ALTERNATION_ERROR,
    FakeOpenAI,
    Reply,
    chunk,
    conversation_problem,
    sse,
    stream_reply,
    tool_delta,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_acp import (
    AssistantMessage,
    ContextMessage,
    Message,
    ModelRequest,
    RpcError,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
    build_config,
)
from dsh_acp.models._history import CANCELLED_TEXT, INTERRUPTED_TEXT, conversation
from dsh_acp.models._openai_request import RequestEncoder, chat_request
from dsh_acp.models._settings import ModelSettings
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import TextBlock

SETTINGS = ModelSettings(model="m", base_url="http://127.0.0.1:1/v1")


def user(text: str) -> UserMessage:
    return UserMessage((TextBlock(text=text),))


def result(call_id: str, text: str = "ok") -> ToolResultMessage:
    return ToolResultMessage(call_id, "ls", (TextBlock(text=text),))


def sent(messages: list[Message]) -> list[dict[str, Any]]:
    body = chat_request(SETTINGS, ModelRequest(messages=messages, tools=[], system="sys"))
    return json.loads(json.dumps(body["messages"]))


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


# -- the cases the strict servers refused -----------------------------------------------------


def test_the_checker_refuses_what_strict_servers_refuse() -> None:
    assert conversation_problem([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]) == (
        ALTERNATION_ERROR
    )
    assert conversation_problem([{"role": "user", "content": "a"}]) is None
    unanswered = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "user", "content": "b"},
    ]
    assert "no result" in (conversation_problem(unanswered) or "")
    empty = [{"role": "user", "content": "a"}, {"role": "assistant", "content": ""}]
    assert "needs content" in (conversation_problem(empty) or "")


def test_a_prompt_that_got_no_answer_merges_with_the_next() -> None:
    # Cancelled before the first token, a failed request, or `length` with no text: no reply.
    messages = sent([user("one"), AssistantMessage(text="1"), user("two"), user("three")])
    assert roles(messages) == ["system", "user", "assistant", "user"]
    assert messages[-1]["content"] == "two\n\nthree"
    assert conversation_problem(messages) is None


def test_a_reasoning_only_reply_is_no_turn() -> None:
    messages = sent([user("one"), AssistantMessage(reasoning="hmm"), user("two")])
    assert roles(messages) == ["system", "user"]
    assert messages[-1]["content"] == "one\n\ntwo"


def test_a_turn_interrupted_after_its_tools_gets_an_assistant_note() -> None:
    call = ToolCallRequest("c1", "ls", "{}")
    messages = sent([user("look"), AssistantMessage(tool_calls=(call,)), result("c1"), user("again")])
    assert roles(messages) == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert messages[4]["content"] == INTERRUPTED_TEXT
    assert conversation_problem(messages) is None


def test_missing_orphan_and_duplicate_results() -> None:
    calls = (ToolCallRequest("a", "ls", "{}"), ToolCallRequest("b", "ls", "{}"))
    messages = sent(
        [
            user("go"),
            result("zzz"),
            AssistantMessage(tool_calls=calls),
            result("b", "B"),
            result("b", "again"),
        ]
    )
    assert roles(messages) == ["system", "user", "assistant", "tool", "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[3:]] == [("a", CANCELLED_TEXT), ("b", "B")]
    assert conversation_problem(messages) is None


def test_a_summary_then_a_prompt_is_one_user_message() -> None:
    messages = sent([ContextMessage("Summary of the conversation so far:\nwe met"), user("next")])
    assert roles(messages) == ["system", "user"]
    summary = "<context>\nSummary of the conversation so far:\nwe met\n</context>"
    assert messages[1]["content"] == f"{summary}\n\nnext"


def test_context_from_tools_stays_inside_the_step() -> None:
    call = ToolCallRequest("c1", "ls", "{}")
    messages = sent([user("go"), AssistantMessage(tool_calls=(call,)), result("c1"), ContextMessage("note")])
    assert roles(messages) == ["system", "user", "assistant", "tool"]
    assert messages[-1]["content"] == "ok\n<context>\nnote\n</context>"


def test_unchanged_messages_are_the_same_objects() -> None:
    history: list[Message] = [user("a"), AssistantMessage(text="b"), user("c")]
    assert all(x is y for x, y in zip(conversation(history), history, strict=True))


# -- property: any history, and any session, is sent valid ------------------------------------

_IDS = st.sampled_from(["c1", "c2", "c3"])
_CALL = st.builds(ToolCallRequest, _IDS, st.just("ls"), st.just("{}"))
_MESSAGE = st.one_of(
    st.builds(user, st.sampled_from(["p", "q"])),
    st.builds(ContextMessage, st.just("ctx")),
    st.builds(
        AssistantMessage,
        text=st.sampled_from(["", "answer", " "]),
        reasoning=st.sampled_from(["", "why"]),
        tool_calls=st.lists(_CALL, max_size=3, unique_by=lambda c: c.id).map(tuple),
    ),
    st.builds(result, _IDS),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_MESSAGE, max_size=14))
def test_any_history_followed_by_a_prompt_is_sent_valid(history: list[Message]) -> None:
    messages = sent([*history, user("now")])
    assert conversation_problem(messages) is None, messages
    # Nothing the user said is lost, in order.
    said = [
        block.text
        for message in history
        if isinstance(message, UserMessage)
        for block in message.content
        if isinstance(block, TextBlock)
    ]
    text = "\n".join(m["content"] for m in messages if m["role"] == "user")
    position = 0
    for piece in [*said, "now"]:
        position = text.index(piece, position) + len(piece)


_OPS = st.lists(
    st.one_of(
        st.just(("answer",)),
        st.just(("cancel_before_token",)),
        st.just(("fail",)),
        st.just(("length_no_text",)),
        st.just(("reasoning_only",)),
        st.tuples(st.just("tools"), st.integers(1, 3), st.integers(0, 3), st.booleans()),
        st.just(("compact",)),
    ),
    max_size=20,
)


class _Session:
    """What the agent's history holds after each kind of event, and what it sends."""

    def __init__(self) -> None:
        self.history: list[Message] = []
        self.calls = 0
        self.encoder = RequestEncoder(SETTINGS)

    def request(self, extra: tuple[Message, ...] = ()) -> None:
        messages = sent([*self.history, *extra])
        assert conversation_problem(messages) is None, messages
        # The incremental encoder sends exactly what encoding it all afresh sends.
        request = ModelRequest(messages=[*self.history, *extra], tools=[], system="sys")
        assert json.loads(self.encoder.encode(request)) == json.loads(
            json.dumps(chat_request(SETTINGS, request))
        )

    def apply(self, op: tuple[Any, ...]) -> None:
        self.history.append(user("prompt"))
        self.request()
        kind = op[0]
        if kind == "answer":
            self.history.append(AssistantMessage(text="done"))
        elif kind == "reasoning_only":
            self.history.append(AssistantMessage(reasoning="thinking"))
        elif kind == "tools":
            _, count, answered, then_answer = op
            calls = []
            for _ in range(count):
                self.calls += 1
                calls.append(ToolCallRequest(f"call_{self.calls % 4}", "ls", "{}"))
            self.history.append(AssistantMessage(tool_calls=tuple(calls)))
            self.history.extend(result(call.id) for call in calls[:answered])
            if answered >= count:  # the step finished: the loop asks the model again
                self.history.append(ContextMessage("from a hook"))
                self.request()
                if then_answer:
                    self.history.append(AssistantMessage(text="after tools"))
        elif kind == "compact":
            summary = UserMessage((TextBlock(text="Summarize"),))
            self.request((summary,))
            self.history[:] = [ContextMessage("Summary of the conversation so far:\nsummary")]
        # cancel_before_token, fail, length_no_text: the turn added nothing after the prompt.


@settings(max_examples=100, deadline=None)
@given(_OPS)
def test_any_session_sends_only_valid_conversations(ops: list[tuple[Any, ...]]) -> None:
    session = _Session()
    for op in ops:
        session.apply(op)
    session.history.append(user("last"))
    session.request()


# -- through the agent, against a strict server ------------------------------------------------


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_session_with_cancels_failures_and_compaction_keeps_answering(
    acp_schema: AcpSchema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    config_dir = tmp_path / "config" / "dsh-acp"
    config_dir.mkdir(parents=True)
    # The cancels below must land before this bound, on a loaded machine too.
    (config_dir / "config.toml").write_text("first_event_timeout = 2\nmax_retries = 0\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    replies = [
        Reply(chunks=(), then="stall"),  # 1: cancelled before the first token
        Reply(chunks=(), then="stall"),  # 2: the answer never begins: a failed turn
        stream_reply(chunk(finish="length")),  # 3: cut off before any text
        stream_reply(  # 4: a tool step, then cancelled while asking again
            chunk(tool_calls=[tool_delta(0, id="call_0", name="ls", arguments='{"path": "."}')]),
            chunk(finish="tool_calls"),
        ),
        Reply(chunks=(), then="stall"),
        stream_reply(chunk("We listed files."), chunk(finish="stop")),  # 5: /compact's summary
        stream_reply(chunk("Still here."), chunk(finish="stop")),  # 6: answers
    ]
    async with FakeOpenAI(replies, strict=True, title="T") as server:
        args = ["--model", "openai:fake", "--base-url", server.base_url, "--state-dir", str(tmp_path / "s")]
        async with AcpClient.in_memory(build_config(args), schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))

            async def cancelled(text: str, requests: int) -> None:
                outcome: dict[str, Any] = {}

                async def run() -> None:
                    outcome.update(await client.prompt(sid, text))

                with anyio.fail_after(10):
                    async with anyio.create_task_group() as group:
                        group.start_soon(run)
                        await server.wait_for_requests(requests)
                        await client.cancel(sid)
                assert outcome == {"stopReason": "cancelled"}

            await cancelled("first", 1)
            with pytest.raises(RpcError, match="did not begin its answer"), anyio.fail_after(10):
                await client.prompt(sid, "second")
            assert await client.prompt(sid, "third") == {"stopReason": "max_tokens"}
            await cancelled("fourth", 5)
            assert await client.prompt(sid, "/compact") == {"stopReason": "end_turn"}
            assert await client.prompt(sid, "sixth") == {"stopReason": "end_turn"}
        client.assert_valid()
    assert server.refused == []
    assert len(server.chat_requests) == 7
    last = server.chat_requests[-1].json["messages"]
    assert roles(last) == ["system", "user"]
    assert "We listed files." in last[1]["content"]
    assert last[1]["content"].endswith("sixth")


@pytest.mark.anyio
async def test_a_call_cut_off_by_the_output_limit_fails_and_the_model_hears_why(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    replies = [
        stream_reply(
            chunk("Let me write it."),
            chunk(tool_calls=[tool_delta(0, id="call_w", name="write", arguments='{"path": "a.txt", "con')]),
            chunk(finish="length"),
        ),
        stream_reply(chunk("Trying again later."), chunk(finish="stop")),
    ]
    async with FakeOpenAI(replies, strict=True, title="T") as server:
        args = ["--model", "openai:fake", "--base-url", server.base_url, "--state-dir", str(tmp_path / "s")]
        async with AcpClient.in_memory(build_config(args), schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            assert await client.prompt(sid, "write a.txt") == {"stopReason": "max_tokens"}
            updates = client.updates(sid)
            assert await client.prompt(sid, "go on") == {"stopReason": "end_turn"}
        client.assert_valid()
    assert not (tmp_path / "a.txt").exists()
    card = [u for u in updates if u.get("toolCallId") == "call_w"]
    assert card[0]["sessionUpdate"] == "tool_call"
    assert card[-1]["status"] == "failed"
    assert "output limit" in json.dumps(card[-1])
    assert server.refused == []
    sent_messages = server.requests[-1].json["messages"]
    call = next(m for m in sent_messages if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["arguments"] == "{}"  # what strict servers can parse
    result = next(m for m in sent_messages if m["role"] == "tool")
    assert "output limit" in result["content"]


@pytest.mark.anyio
async def test_a_call_is_shown_while_its_arguments_stream_and_closed_if_they_never_complete(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    streaming = Reply(
        chunks=sse(chunk(tool_calls=[tool_delta(0, id="call_0", name="read", arguments='{"pa')]), done=False),
        then="stall",
    )
    replies = [
        streaming,
        stream_reply(
            chunk(tool_calls=[tool_delta(0, id="call_0", name="ls", arguments='{"path": "."}')]),
            chunk(finish="tool_calls"),
        ),
        stream_reply(chunk("Listed."), chunk(finish="stop")),
    ]
    async with FakeOpenAI(replies, strict=True, title="T") as server:
        args = ["--model", "openai:fake", "--base-url", server.base_url, "--state-dir", str(tmp_path / "s")]
        async with AcpClient.in_memory(build_config(args), schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            outcome: dict[str, Any] = {}

            async def run() -> None:
                outcome.update(await client.prompt(sid, "read it"))

            with anyio.fail_after(10):
                async with anyio.create_task_group() as group:
                    group.start_soon(run)
                    await client.wait_until(
                        lambda: any(u["sessionUpdate"] == "tool_call" for u in client.updates(sid))
                    )
                    await client.cancel(sid)
            assert outcome == {"stopReason": "cancelled"}
            first = client.updates(sid)
            assert await client.prompt(sid, "list") == {"stopReason": "end_turn"}
            second = client.updates(sid)[len(first) :]
        client.assert_valid()
    card = [u for u in first if u.get("toolCallId") == "call_0"]
    assert [(u["sessionUpdate"], u.get("status")) for u in card] == [
        ("tool_call", "pending"),
        ("tool_call_update", "failed"),
    ]
    statuses = [
        (u["sessionUpdate"], u.get("status")) for u in second if u.get("toolCallId", "").startswith("call_0")
    ]
    assert statuses[0] == ("tool_call", "pending")
    assert statuses[-1] == ("tool_call_update", "completed")
    assert ("tool_call_update", "failed") not in statuses
    assert server.refused == []
