"""The OpenAI-compatible model against a fake server on 127.0.0.1: what it sends, how it reads
the stream, and how it fails (auth, retries, drops, stalls, malformed chunks) — never hanging,
never leaking the key."""

from __future__ import annotations

import base64
import logging
import socket
import subprocess
import sys
import time
import traceback
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_openai import FakeOpenAI, Reply, chunk, error_reply, sse, stream_reply, tool_delta

from dsh_acp import (
    ARGUMENTS_SHOWN,
    AssistantMessage,
    ContextMessage,
    Finish,
    Message,
    ModelAuthError,
    ModelError,
    ModelEvent,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallRequest,
    ToolCallStart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from dsh_acp.models._openai import OpenAIModel
from dsh_acp.models._settings import ModelSettings
from dsh_tools import ToolSchema
from dsh_tools._content import TextBlock

pytestmark = pytest.mark.anyio

KEY = "sk-test-7f3a9c1e5b2d4f60a8e7"
TOOL = ToolSchema(
    name="read",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
REQUEST = ModelRequest(messages=[UserMessage((TextBlock(text="hello"),))], tools=[TOOL], system="be brief")


def settings_for(server: FakeOpenAI, **changes: Any) -> ModelSettings:
    settings = ModelSettings(
        model="deepseek-chat",
        base_url=server.base_url,
        api_key=KEY,
        key_source="DSH_API_KEY",
        key_hint="DSH_API_KEY (or DEEPSEEK_API_KEY)",
        context_window=131072,
        stall_timeout=5.0,
        retry_base_delay=0.01,
    )
    return replace(settings, **changes)


class Sleeps:
    """An injected sleep: records the back-off instead of waiting it out."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def collect(model: OpenAIModel, request: ModelRequest = REQUEST) -> list[ModelEvent]:
    async with aclosing(model.stream(request)) as events:
        return [event async for event in events]


async def stream_once(server: FakeOpenAI, request: ModelRequest = REQUEST) -> list[ModelEvent]:
    """One response from a fresh model on ``server``'s default settings, the model closed after."""
    model = OpenAIModel(settings_for(server))
    try:
        return await collect(model, request)
    finally:
        await model.aclose()


async def collect_until_error(
    model: OpenAIModel, request: ModelRequest = REQUEST
) -> tuple[list[ModelEvent], ModelError]:
    seen: list[ModelEvent] = []
    try:
        async with aclosing(model.stream(request)) as events:
            async for event in events:
                seen.append(event)
    except ModelError as error:
        return seen, error
    raise AssertionError(f"no ModelError; the events were {seen}")


# -- the happy path ---------------------------------------------------------------------------


async def test_streams_reasoning_text_usage_and_finish() -> None:
    reply = stream_reply(
        chunk(reasoning="Think"),
        chunk(reasoning="ing."),
        chunk("Hel"),
        chunk("lo!"),
        chunk(finish="stop"),
        chunk(usage=(1200, 34), choices=False),
    )
    async with FakeOpenAI([reply]) as server:
        events = await stream_once(server)
    assert events == [
        ReasoningDelta("Think"),
        ReasoningDelta("ing."),
        TextDelta("Hel"),
        TextDelta("lo!"),
        Usage(1200, 34, 131072),
        Finish("stop"),
    ]


async def test_request_line_headers_and_body() -> None:
    async with FakeOpenAI([stream_reply(chunk("ok", finish="stop"))]) as server:
        model = OpenAIModel(settings_for(server))
        try:
            await collect(model)
        finally:
            await model.aclose()
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["accept"] == "text/event-stream"
    assert sent.headers["user-agent"].startswith("dsh-acp/")
    assert sent.json == {
        "model": "deepseek-chat",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {"name": "read", "description": "Read a file.", "parameters": TOOL.parameters},
            }
        ],
    }


def _without_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


async def test_the_proxy_of_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fake stands in for the proxy: a proxied request names the whole URL on its request line.
    _without_proxies(monkeypatch)
    async with FakeOpenAI([stream_reply(chunk("ok", finish="stop"))]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        model = OpenAIModel(settings_for(proxy, base_url="http://models.example:8000/v1"))
        try:
            events = await collect(model)
        finally:
            await model.aclose()
    assert events == [TextDelta("ok"), Finish("stop")]
    [sent] = proxy.requests
    assert (sent.method, sent.path) == ("POST", "http://models.example:8000/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    # aiohttp gives a proxy a session's default Authorization as Proxy-Authorization: the key
    # must not go there (through a CONNECT, the proxy would read it).
    assert "proxy-authorization" not in sent.headers


async def test_no_key_sends_no_authorization_header() -> None:
    async with FakeOpenAI([stream_reply(chunk("ok", finish="stop"))]) as server:
        model = OpenAIModel(settings_for(server, api_key=None))
        try:
            await collect(model, ModelRequest(messages=[UserMessage((TextBlock(text="x"),))], tools=[]))
        finally:
            await model.aclose()
    [sent] = server.requests
    assert "authorization" not in sent.headers
    assert "tools" not in sent.json  # an empty tools list is refused by some servers


async def test_conversation_round_trips_through_the_request() -> None:
    history: list[Message] = [
        UserMessage((TextBlock(text="fix it"),)),
        AssistantMessage(
            text="Looking.",
            reasoning="need the file",
            tool_calls=(ToolCallRequest("call_1", "read", '{"path": "a.py"}'),),
        ),
        ToolResultMessage("call_1", "read", (TextBlock(text="print(1)"),)),
        ContextMessage("a.py is generated"),
    ]
    async with FakeOpenAI([stream_reply(chunk("done", finish="stop"))] * 2) as server:
        for send_reasoning in (True, False):
            model = OpenAIModel(settings_for(server, send_reasoning=send_reasoning))
            try:
                await collect(model, ModelRequest(messages=history, tools=[TOOL]))
            finally:
                await model.aclose()
    with_reasoning, without = (request.json["messages"] for request in server.requests)
    assert with_reasoning == [
        {"role": "user", "content": "fix it"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "a.py"}'},
                }
            ],
            "reasoning_content": "need the file",
        },
        # Context the step's tools produced stays inside the step: a user message here would
        # break the alternation strict templates check.
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "print(1)\n<context>\na.py is generated\n</context>",
        },
    ]
    assert "reasoning_content" not in without[1]
    assert without[0] == with_reasoning[0]
    assert without[2:] == with_reasoning[2:]


async def test_one_client_per_model_and_aclose() -> None:
    replies = [stream_reply(chunk("a", finish="stop")), stream_reply(chunk("b", finish="stop"))]
    async with FakeOpenAI(replies) as server:
        model = OpenAIModel(settings_for(server))
        await collect(model)
        client = model._client
        await collect(model)
        assert model._client is client is not None
        await model.aclose()
        assert client.closed
        assert model._client is None
        await model.aclose()  # twice is fine


# -- the stream -------------------------------------------------------------------------------


async def test_tool_call_deltas_are_assembled_by_index() -> None:
    reply = stream_reply(
        chunk("Reading both."),
        chunk(tool_calls=[tool_delta(0, id="call_a", name="read", arguments="")]),
        chunk(tool_calls=[tool_delta(0, arguments='{"pa')]),
        chunk(tool_calls=[tool_delta(1, id="call_b", name="grep", arguments='{"pattern": "\\u00e9')]),
        chunk(tool_calls=[tool_delta(0, arguments='th": "a.py"')]),
        chunk(tool_calls=[tool_delta(1, arguments='\\"x\\"" }')]),
        # Some servers repeat the name with every delta: it must not be doubled.
        chunk(tool_calls=[tool_delta(0, name="read", arguments="}")]),
        chunk(tool_calls=[tool_delta(2, id="call_c", name="ls", arguments="{}")]),
        chunk(finish="tool_calls"),
        chunk(usage=(10, 20), choices=False),
    )
    async with FakeOpenAI([reply]) as server:
        events = await stream_once(server)
    assert events == [
        TextDelta("Reading both."),
        # Each call is announced once its name is known, its arguments reported as they grow,
        # and it is completed at the end.
        ToolCallStart("call_a", "read"),
        ToolCallArguments("call_a", '{"pa'),
        ToolCallStart("call_b", "grep"),
        ToolCallArguments("call_b", '{"pattern": "\\u00e9'),
        ToolCallArguments("call_a", '{"path": "a.py"'),
        ToolCallArguments("call_b", '{"pattern": "\\u00e9\\"x\\"" }'),
        ToolCallArguments("call_a", '{"path": "a.py"}'),
        ToolCallStart("call_c", "ls"),
        ToolCallArguments("call_c", "{}"),
        ToolCallRequest("call_a", "read", '{"path": "a.py"}'),
        ToolCallRequest("call_b", "grep", '{"pattern": "\\u00e9\\"x\\"" }'),
        ToolCallRequest("call_c", "ls", "{}"),
        Usage(10, 20, 131072),
        Finish("tool_calls"),
    ]


async def test_a_streaming_calls_arguments_are_reported_up_to_a_bound() -> None:
    content = "x" * 3000
    reply = stream_reply(
        chunk(tool_calls=[tool_delta(0, id="w", name="write", arguments='{"file_path": "a.py", ')]),
        chunk(tool_calls=[tool_delta(0, arguments=f'"content": "{content}')]),
        chunk(tool_calls=[tool_delta(0, arguments=content)]),  # past the bound: cut there
        chunk(tool_calls=[tool_delta(0, arguments=f'{content}"}}')]),  # nothing more to report
        chunk(finish="tool_calls"),
    )
    async with FakeOpenAI([reply]) as server:
        events = await stream_once(server)
    whole = f'{{"file_path": "a.py", "content": "{content * 3}"}}'
    shown = [event.text for event in events if isinstance(event, ToolCallArguments)]
    assert shown == [whole[:22], whole[:3034], whole[:ARGUMENTS_SHOWN]]
    assert events[-2:] == [ToolCallRequest("w", "write", whole), Finish("tool_calls")]


async def test_sse_split_anywhere_with_comments_and_crlf() -> None:
    body = b"".join(
        [
            b": keep-alive\r\n\r\n",
            b"event: message\r\n",
            *(piece.replace(b"\n", b"\r\n") for piece in sse(chunk("h\u00e9llo "), done=False)),
            b":\n\n",
            *sse(chunk("w\u00f6rld", finish="stop"), chunk(usage=(3, 4), choices=False)),
        ]
    )
    # Every 7 bytes: lines, CRLFs and UTF-8 sequences all fall across chunk boundaries.
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    async with FakeOpenAI([Reply(chunks=pieces)]) as server:
        events = await stream_once(server)
    assert events == [TextDelta("h\u00e9llo "), TextDelta("w\u00f6rld"), Usage(3, 4, 131072), Finish("stop")]


@pytest.mark.parametrize(
    ("sent", "expected"),
    [("stop", "stop"), ("tool_calls", "tool_calls"), ("length", "length"), ("content_filter", "refusal")],
)
async def test_finish_reasons_are_mapped(sent: str, expected: str) -> None:
    async with FakeOpenAI([stream_reply(chunk("x"), chunk(finish=sent))]) as server:
        events = await stream_once(server)
    assert events[-1] == Finish(expected)  # type: ignore[arg-type]


async def test_cut_off_tool_calls_are_reported_as_cut_off() -> None:
    reply = stream_reply(
        chunk(tool_calls=[tool_delta(0, id="c", name="read", arguments='{"pa')]),
        chunk(tool_calls=[tool_delta(1, id="d")]),  # cut before its name: nothing to show
        chunk(finish="length"),
    )
    async with FakeOpenAI([reply]) as server:
        events = await stream_once(server)
    assert events == [
        ToolCallStart("c", "read"),
        ToolCallArguments("c", '{"pa'),
        ToolCallRequest("c", "read", '{"pa', cut_off=True),
        Finish("length"),
    ]


async def test_tool_calls_with_stop_finish_count_as_tool_calls() -> None:
    reply = stream_reply(
        chunk(tool_calls=[tool_delta(0, id="c", name="ls", arguments="{}")]), chunk(finish="stop")
    )
    async with FakeOpenAI([reply]) as server:
        events = await stream_once(server)
    assert events == [
        ToolCallStart("c", "ls"),
        ToolCallArguments("c", "{}"),
        ToolCallRequest("c", "ls", "{}"),
        Finish("tool_calls"),
    ]


async def test_unknown_context_window_gives_usage_without_size() -> None:
    reply = stream_reply(chunk("x", finish="stop"), chunk(usage=(5, 6), choices=False))
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server, context_window=None))
        try:
            events = await collect(model)
        finally:
            await model.aclose()
    assert Usage(5, 6, None) in events


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_key_is_an_auth_error_naming_the_variables(status: int) -> None:
    async with FakeOpenAI([error_reply(status, "Authentication Fails")]) as server:
        model = OpenAIModel(settings_for(server), sleep=Sleeps())
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert isinstance(error, ModelAuthError)
    message = str(error)
    assert "\n" not in message
    assert f"HTTP {status}" in message
    assert "set DSH_API_KEY (or DEEPSEEK_API_KEY)" in message
    assert "key from DSH_API_KEY" in message
    assert len(server.requests) == 1  # never retried


async def test_missing_key_auth_error_says_one_is_wanted() -> None:
    async with FakeOpenAI([error_reply(401, "no key")]) as server:
        model = OpenAIModel(settings_for(server, api_key=None, key_source=None))
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert isinstance(error, ModelAuthError)
    assert "wants an API key (HTTP 401: no key): set DSH_API_KEY" in str(error)


async def test_429_then_success_honours_retry_after() -> None:
    replies = [
        error_reply(429, "slow down", headers={"Retry-After": "2"}),
        stream_reply(chunk("ok", finish="stop")),
    ]
    sleeps = Sleeps()
    async with FakeOpenAI(replies) as server:
        model = OpenAIModel(settings_for(server), sleep=sleeps)
        try:
            events = await collect(model)
        finally:
            await model.aclose()
    assert events == [TextDelta("ok"), Finish("stop")]
    assert len(server.requests) == 2
    assert sleeps.delays == [2.0]


async def test_retry_after_ms_is_understood() -> None:
    replies = [
        error_reply(503, "busy", headers={"retry-after-ms": "250"}),
        stream_reply(chunk(finish="stop")),
    ]
    sleeps = Sleeps()
    async with FakeOpenAI(replies) as server:
        model = OpenAIModel(settings_for(server), sleep=sleeps)
        try:
            await collect(model)
        finally:
            await model.aclose()
    assert sleeps.delays == [0.25]


async def test_5xx_is_retried_with_exponential_backoff_then_fails() -> None:
    sleeps = Sleeps()
    async with FakeOpenAI([error_reply(500, "boom")] * 10) as server:
        model = OpenAIModel(
            settings_for(server, max_retries=3, retry_base_delay=1.0), sleep=sleeps, jitter=lambda: 1.0
        )
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert not isinstance(error, ModelAuthError)
    assert len(server.requests) == 4
    assert sleeps.delays == [1.0, 2.0, 4.0]
    assert str(error) == f"the API at {server.base_url} failed (HTTP 500: boom); gave up after 4 attempt(s)"


async def test_backoff_has_jitter_and_a_ceiling() -> None:
    sleeps = Sleeps()
    async with FakeOpenAI([error_reply(502, "bad gateway")] * 10) as server:
        settings = settings_for(
            server, max_retries=5, retry_base_delay=1.0, retry_max_delay=3.0, retry_budget=100
        )
        model = OpenAIModel(settings, sleep=sleeps, jitter=lambda: 0.0)
        try:
            await collect_until_error(model)
        finally:
            await model.aclose()
    assert sleeps.delays == [0.5, 1.0, 1.5, 1.5, 1.5]  # half of min(3, 2**n): the jitter's floor


async def test_retry_budget_bounds_the_total_wait() -> None:
    sleeps = Sleeps()
    async with FakeOpenAI([error_reply(429, "quota", headers={"Retry-After": "600"})]) as server:
        model = OpenAIModel(settings_for(server, retry_budget=90), sleep=sleeps)
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert sleeps.delays == []
    assert len(server.requests) == 1
    assert "HTTP 429: quota" in str(error)
    assert "it asked to wait 600 s" in str(error)


async def test_backoff_sleep_is_cancellable() -> None:
    async with FakeOpenAI([error_reply(503, "busy")]) as server:
        model = OpenAIModel(settings_for(server, retry_base_delay=30.0))  # the real anyio.sleep
        started = time.monotonic()
        try:
            with anyio.move_on_after(0.2) as scope:
                await collect(model)
        finally:
            await model.aclose()
    assert scope.cancelled_caught
    assert time.monotonic() - started < 5


async def test_connection_lost_before_the_answer_is_retried() -> None:
    replies = [Reply(then="close_before_answer"), stream_reply(chunk("ok", finish="stop"))]
    sleeps = Sleeps()
    async with FakeOpenAI(replies) as server:
        model = OpenAIModel(settings_for(server), sleep=sleeps)
        try:
            events = await collect(model)
        finally:
            await model.aclose()
    assert events == [TextDelta("ok"), Finish("stop")]
    assert len(server.requests) == 2
    assert len(sleeps.delays) == 1


async def test_other_4xx_fails_at_once_with_the_provider_message() -> None:
    async with FakeOpenAI([error_reply(400, "messages[1]: unknown variant `image_url`")]) as server:
        model = OpenAIModel(settings_for(server), sleep=Sleeps())
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert str(error) == (
        f"the API at {server.base_url} refused the request"
        " (HTTP 400: messages[1]: unknown variant `image_url`)"
    )
    assert len(server.requests) == 1


async def test_404_hints_at_model_and_base_url() -> None:
    async with FakeOpenAI([error_reply(404, "Model Not Exist")]) as server:
        model = OpenAIModel(settings_for(server))
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert "HTTP 404: Model Not Exist" in str(error)
    assert "'deepseek-chat'" in str(error)


async def test_stream_dropped_midway() -> None:
    reply = Reply(chunks=sse(chunk("partial "), chunk("answer"), done=False), then="drop")
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server))
        try:
            seen, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert seen == [TextDelta("partial "), TextDelta("answer")]
    assert "dropped mid-response" in str(error)


async def test_stream_closed_without_done_or_finish() -> None:
    reply = Reply(chunks=sse(chunk("partial"), done=False), chunked=False)  # ends by closing
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server))
        try:
            seen, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert seen == [TextDelta("partial")]
    assert str(error) == f"the response from {server.base_url} ended before it was complete"


async def test_stream_closed_after_finish_without_done_is_accepted() -> None:
    reply = Reply(chunks=sse(chunk("all", finish="stop"), done=False), chunked=False)
    async with FakeOpenAI([reply]) as server:
        events = await stream_once(server)
    assert events == [TextDelta("all"), Finish("stop")]


async def test_stalled_stream_ends_within_the_stall_timeout() -> None:
    reply = Reply(chunks=sse(chunk("thinking..."), done=False), then="stall")
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server, stall_timeout=0.3))
        started = time.monotonic()
        try:
            with anyio.fail_after(5):
                seen, error = await collect_until_error(model)
        finally:
            await model.aclose()
    elapsed = time.monotonic() - started
    assert seen == [TextDelta("thinking...")]
    assert str(error) == f"the API at {server.base_url} stopped streaming: nothing for 0.3 s"
    assert 0.25 <= elapsed < 2


async def test_no_answer_at_all_ends_within_the_first_event_timeout() -> None:
    async with FakeOpenAI([Reply(then="no_answer")]) as server:
        model = OpenAIModel(settings_for(server, stall_timeout=0.1, first_event_timeout=0.3))
        started = time.monotonic()
        try:
            with anyio.fail_after(5):
                _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert str(error) == (
        f"the API at {server.base_url} did not begin its answer within 0.3 s"
        " (a local server may still be reading a long prompt: raise first_event_timeout)"
    )
    assert 0.25 <= time.monotonic() - started < 2


async def test_the_stall_timer_does_not_count_prompt_processing() -> None:
    # llama.cpp answers 200 at once and streams nothing until it has read the prompt.
    reply = stream_reply(chunk("late"), chunk(finish="stop"), first_delay=0.6)
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server, stall_timeout=0.2, first_event_timeout=3))
        try:
            events = await collect(model)
        finally:
            await model.aclose()
    assert events == [TextDelta("late"), Finish("stop")]


async def test_a_first_event_later_than_its_timeout_fails() -> None:
    reply = stream_reply(chunk("late"), chunk(finish="stop"), first_delay=2)
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server, stall_timeout=5, first_event_timeout=0.3))
        try:
            with anyio.fail_after(5):
                _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert "did not begin its answer within 0.3 s" in str(error)


@pytest.mark.parametrize("llama", [True, False])
async def test_progress_events_extend_the_first_event_timeout(llama: bool) -> None:
    # A llama.cpp server (known from /v1/models) is asked for prompt_progress; each one restarts
    # the wait. A server not known to send them is not asked, and the same wait is too long.
    reply = stream_reply(chunk("read it"), chunk(finish="stop"), first_delay=1.2, progress=6)
    async with FakeOpenAI([reply], n_ctx=4096, models_style="llama.cpp" if llama else "none") as server:
        model = OpenAIModel(
            settings_for(server, context_window=None, stall_timeout=5, first_event_timeout=0.6)
        )
        try:
            with anyio.fail_after(5):
                if llama:
                    assert await collect(model) == [TextDelta("read it"), Finish("stop")]
                else:
                    _, error = await collect_until_error(model)
                    assert "did not begin its answer" in str(error)
        finally:
            await model.aclose()
    assert ("return_progress" in server.requests[0].json) is llama


async def test_keep_alives_forever_end_at_the_request_timeout() -> None:
    reply = Reply(chunks=sse(chunk("x"), done=False), then="trickle", interval=0.05)
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server, stall_timeout=0.3, request_timeout=0.6))
        started = time.monotonic()
        try:
            with anyio.fail_after(5):
                _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert str(error) == f"the response from {server.base_url} took longer than 0.6 s"
    assert time.monotonic() - started < 3


async def test_a_long_error_keeps_its_cause() -> None:
    cause = "request (1045 tokens) exceeds the available context size (1024 tokens), try increasing it"
    message = "Error while processing the chat template: " + "x" * 3000 + " " + cause
    async with FakeOpenAI([error_reply(400, message)]) as server:
        model = OpenAIModel(settings_for(server))
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    text = str(error)
    assert text.endswith(cause + ")")
    assert "Error while processing the chat template" in text
    assert "characters …]" in text
    assert len(text) < 1400


async def test_cancelling_the_consumer_stops_a_stalled_stream() -> None:
    reply = Reply(chunks=sse(chunk("x"), done=False), then="stall")
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server, stall_timeout=60))
        try:
            with anyio.fail_after(5), anyio.move_on_after(0.2) as scope:
                await collect(model)
        finally:
            await model.aclose()
    assert scope.cancelled_caught


async def test_a_consumer_that_stops_early_closes_the_response_at_once() -> None:
    reply = Reply(chunks=sse(chunk("x"), done=False), then="trickle", interval=0.02)
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server, stall_timeout=60))
        try:
            with anyio.fail_after(5):
                events = model.stream(REQUEST)
                assert await anext(events) == TextDelta("x")
                await events.aclose()  # not left to the garbage collector
                closed = time.monotonic()
                await server.departed.wait()  # its next keep-alive finds the connection closed
            # At once: a server may go on generating (and billing) for as long as it is read.
            assert time.monotonic() - closed < 0.5
        finally:
            await model.aclose()


async def test_invalid_json_chunk() -> None:
    reply = Reply(chunks=[*sse(chunk("ok"), done=False), b'data: {"choices": [\n\n'])
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server))
        try:
            seen, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert seen == [TextDelta("ok")]
    assert "malformed stream chunk (invalid JSON)" in str(error)


async def test_error_event_mid_stream() -> None:
    reply = stream_reply(chunk("ok"), {"error": {"message": "overloaded", "type": "server_error"}})
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server))
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert str(error) == f"the API at {server.base_url} reported an error mid-response: overloaded"


async def test_a_json_answer_instead_of_a_stream() -> None:
    reply = Reply(body=b'{"choices": []}', content_type="application/json", chunked=False)
    async with FakeOpenAI([reply]) as server:
        model = OpenAIModel(settings_for(server))
        try:
            _, error = await collect_until_error(model)
        finally:
            await model.aclose()
    assert "answered with application/json, not an event stream" in str(error)


async def test_connection_refused() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIModel(
        ModelSettings(model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY), sleep=Sleeps()
    )
    try:
        with anyio.fail_after(5):
            _, error = await collect_until_error(model)
    finally:
        await model.aclose()
    assert str(error).startswith(f"cannot connect to http://127.0.0.1:{port}/v1: ")


# -- the key stays secret ---------------------------------------------------------------------


def _everywhere(error: BaseException) -> str:
    return "\n".join([str(error), repr(error), "".join(traceback.format_exception(error))])


async def test_the_key_never_appears_in_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    scenarios = [
        [error_reply(401, f"Incorrect API key provided: {KEY}")],
        [error_reply(400, f"bad request from key {KEY}")],
        [error_reply(500, f"upstream said {KEY}")] * 3,
        [error_reply(429, f"rate limit for {KEY}", headers={"Retry-After": "0"})] * 3,
        [Reply(chunks=[f"data: {{not json {KEY}\n\n".encode()])],
        [stream_reply({"error": {"message": f"key {KEY} revoked"}})],
        [Reply(chunks=sse(chunk("x"), done=False), then="drop")],
        [Reply(then="no_answer")],
    ]
    texts: list[str] = []
    for replies in scenarios:
        async with FakeOpenAI(replies) as server:
            model = OpenAIModel(
                settings_for(server, max_retries=2, stall_timeout=0.3, first_event_timeout=0.3)
            )
            try:
                with anyio.fail_after(5):
                    _, error = await collect_until_error(model)
            finally:
                await model.aclose()
        texts.append(_everywhere(error))
    assert len(texts) == len(scenarios)
    for text in texts:
        assert KEY not in text
    assert any("[redacted]" in text for text in texts)
    assert caplog.records, "the retries should have been logged"
    assert KEY not in caplog.text
    for record in caplog.records:
        assert KEY not in record.getMessage()
    assert KEY not in repr(settings_for(server))


def test_importing_the_module_does_not_import_the_http_client() -> None:
    code = (
        "import sys, dsh_acp.models._openai, dsh_acp.models._settings; "
        "names = ('httptools', 'dsh_acp.models._http1', 'dsh_acp.models._http1_client', 'aiohttp'); "
        "assert not [name for name in names if name in sys.modules], sys.modules.keys()"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_name_and_image_support_come_from_the_settings() -> None:
    model = OpenAIModel(
        ModelSettings(model="gpt-4o", base_url="https://api.openai.com/v1", accepts_images=True)
    )
    assert model.name == "openai:gpt-4o"
    assert model.accepts_images is True


async def test_a_netrc_entry_for_the_host_does_not_break_a_keyed_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # With a key the Authorization header is ours; a .netrc entry for the same host must not turn
    # every request into "cannot combine Authorization header with auth".
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    async with FakeOpenAI([stream_reply(chunk("ok", finish="stop"))] * 2) as server:
        for key in (KEY, None):
            model = OpenAIModel(settings_for(server, api_key=key))
            try:
                assert await collect(model) == [TextDelta("ok"), Finish("stop")]
            finally:
                await model.aclose()
    keyed, bare = server.requests
    assert keyed.headers["authorization"] == f"Bearer {KEY}"
    # Without a key, the credentials of .netrc go as Basic auth (what curl --netrc does).
    assert bare.headers["authorization"] == "Basic " + base64.b64encode(b"someone:secret").decode()


async def test_the_proxys_credentials_and_no_proxy_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_proxies(monkeypatch)
    async with FakeOpenAI([stream_reply(chunk("ok", finish="stop"))] * 2) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://user:pw@127.0.0.1:{proxy.port}")
        proxied = OpenAIModel(settings_for(proxy, base_url="http://models.example:8000/v1"))
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct = OpenAIModel(settings_for(proxy))  # the fake itself, not through the proxy
        try:
            assert await collect(proxied) == [TextDelta("ok"), Finish("stop")]
            assert await collect(direct) == [TextDelta("ok"), Finish("stop")]
        finally:
            await proxied.aclose()
            await direct.aclose()
    through, bypassed = proxy.requests

    assert through.path == "http://models.example:8000/v1/chat/completions"
    assert through.headers["proxy-authorization"] == "Basic " + base64.b64encode(b"user:pw").decode()
    assert bypassed.path == "/v1/chat/completions"
    assert "proxy-authorization" not in bypassed.headers


async def test_the_api_key_is_not_given_to_an_https_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # Through a proxy an HTTPS request begins with a CONNECT the proxy reads: the key must not be
    # in it (aiohttp would send a session's default Authorization there as Proxy-Authorization).
    _without_proxies(monkeypatch)
    async with FakeOpenAI([stream_reply(chunk("ok", finish="stop"))]) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        model = OpenAIModel(settings_for(proxy, base_url="https://models.example/v1"))
        try:
            with pytest.raises(ModelError):  # the fake is no proxy: it answers the CONNECT itself
                await collect(model)
        finally:
            await model.aclose()
    connect = proxy.requests[0]
    assert (connect.method, connect.path) == ("CONNECT", "models.example:443")
    assert KEY not in str(connect.headers)
