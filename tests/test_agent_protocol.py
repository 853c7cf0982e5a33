"""The ACP methods end to end over in-memory pipes, every agent message schema-validated."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import orjson
import pytest

from dsh_acp import AgentConfig, RpcError
from dsh_acp.testing import AcpClient, AcpSchema
from helpers import scripted

CHUNKS = ("agent_message_chunk", "agent_thought_chunk")

pytestmark = pytest.mark.anyio


async def test_initialize_negotiates_version_and_advertises(acp_schema: AcpSchema, tmp_path: Any) -> None:
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        result = await client.initialize(version=1)
        assert result["protocolVersion"] == 1
        assert result["agentInfo"]["name"] == "dsh-acp"
        assert [m["id"] for m in result["authMethods"]] == ["api-key"]  # never empty
        assert result["agentCapabilities"]["promptCapabilities"]["embeddedContext"] is True
        assert (await client.initialize(version=1))["protocolVersion"] == 1  # again: the same
        with pytest.raises(RpcError) as info:  # a connection's sessions are of one version
            await client.initialize(version=2)
        assert info.value.code == -32600
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        newest = await client.initialize(version=65535)
        assert newest["protocolVersion"] == 2  # the newest this agent speaks, never the number echoed
        assert newest["info"]["name"] == "dsh-acp"
    client.assert_valid()


@pytest.mark.parametrize("version", ["1", "one", "", "2025-01-13"])
async def test_initialize_takes_a_string_version_as_version_0(acp_schema: AcpSchema, version: str) -> None:
    # A version that cannot be parsed as an integer is version 0 (the Rust reference library's rule):
    # answered with the version we speak, and the client decides.
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        result = await client.request("initialize", {"protocolVersion": version})
        assert result["protocolVersion"] == 1
        assert result["agentInfo"]["name"] == "dsh-acp"
    client.assert_valid()


@pytest.mark.parametrize("version", [None, 1.5, -1, 65536, True, [1], {"v": 1}])
async def test_initialize_rejects_a_version_that_is_no_version(acp_schema: AcpSchema, version: Any) -> None:
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        with pytest.raises(RpcError) as info:
            await client.request("initialize", {"protocolVersion": version})
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
        kinds = [u["sessionUpdate"] for u in client.updates(sid, CHUNKS)]
        assert kinds == ["agent_thought_chunk", "agent_message_chunk", "agent_message_chunk"]
        texts = [u["content"]["text"] for u in client.updates(sid, CHUNKS)]
        assert texts == ["thinking", "Hello", ", world"]
        ids = [u["messageId"] for u in client.updates(sid, CHUNKS)]
        assert ids[1] == ids[2] != ids[0]
    client.assert_valid()


async def test_no_model_explains_how_to_configure(acp_schema: AcpSchema, tmp_path: Any) -> None:
    async with AcpClient.in_memory(AgentConfig(), schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "hello?") == {"stopReason": "end_turn"}
        (update,) = client.updates(sid, CHUNKS)
        assert "--model" in update["content"]["text"]
    client.assert_valid()


@pytest.mark.parametrize(
    ("params", "code", "message"),
    [
        (
            {"cwd": "relative/path", "mcpServers": []},
            -32602,
            "Invalid params: cwd: Value error, must be an absolute path",
        ),
        ({"mcpServers": []}, -32602, "Invalid params: cwd: Field required"),
        ({"cwd": 3, "mcpServers": []}, -32602, "Invalid params: cwd: Input should be a valid string"),
        (
            {"cwd": "/tmp", "mcpServers": [], "additionalDirectories": ["x"]},
            -32602,
            "Invalid params: additionalDirectories.0: Value error, must be an absolute path, not 'x'",
        ),
    ],
)
async def test_new_session_validation(acp_schema: AcpSchema, params: Any, code: int, message: str) -> None:
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        await client.initialize()
        with pytest.raises(RpcError) as info:
            await client.request("session/new", params)
        assert info.value.code == code
        assert str(info.value.message).startswith(message)
        assert "\n" not in info.value.message
        assert info.value.data["errors"]
    client.assert_valid()


async def test_session_ids_are_distinct_and_sessions_interleave(acp_schema: AcpSchema, tmp_path: Any) -> None:
    config = scripted([[{"text": "first", "delay_ms": 30}], [{"text": "second"}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        a = await client.new_session(str(tmp_path))
        b = await client.new_session(str(tmp_path))
        assert a != b
        assert a
        results: dict[str, Any] = {}

        async def prompt(sid: str) -> None:
            results[sid] = await client.prompt(sid, "go")

        async with anyio.create_task_group() as group:
            group.start_soon(prompt, a)
            group.start_soon(prompt, b)
        assert results == {a: {"stopReason": "end_turn"}, b: {"stopReason": "end_turn"}}
        assert [u["content"]["text"] for u in client.updates(a, CHUNKS)] == ["first"]
        # Each session plays its own copy of the script.
        assert [u["content"]["text"] for u in client.updates(b, CHUNKS)] == ["first"]
    client.assert_valid()


async def test_unknown_session_is_resource_not_found(acp_schema: AcpSchema) -> None:
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        await client.initialize()
        for method in ("session/prompt", "session/close"):
            with pytest.raises(RpcError) as info:
                await client.request(method, {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]})
            assert info.value.code == -32002
            assert info.value.message == 'Resource not found: session "nope"'
    client.assert_valid()


async def test_prompt_errors(acp_schema: AcpSchema, tmp_path: Any) -> None:
    config = scripted([[{"hang": True}]])
    config.models = [replace(config.models[0], accepts_images=False)]
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        with pytest.raises(RpcError, match="prompt is empty") as info:
            await client.request("session/prompt", {"sessionId": sid, "prompt": []})
        assert info.value.code == -32602
        image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        with pytest.raises(RpcError, match="does not take images"):
            await client.prompt(sid, image)
        audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
        with pytest.raises(RpcError, match="audio"):
            await client.prompt(sid, audio)
        with pytest.raises(RpcError, match=r"Invalid params: prompt\.0"):
            await client.prompt(sid, {"type": "video"})

    client.assert_valid()


async def test_a_prompt_sent_while_a_turn_runs_is_queued(acp_schema: AcpSchema, tmp_path: Any) -> None:
    config = scripted([[{"delay_ms": 200, "text": "first"}], [{"text": "second"}], [{"text": "third"}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        assert (await client.initialize())["agentCapabilities"]["_meta"]["promptQueueing"] is True
        sid = await client.new_session(str(tmp_path))
        answers: list[tuple[str, Any]] = []

        async def send(text: str) -> None:
            answers.append((text, await client.prompt(sid, text)))

        async with anyio.create_task_group() as group:
            for text in ("one", "two", "three"):
                group.start_soon(send, text)
                await anyio.wait_all_tasks_blocked()
        assert answers == [(t, {"stopReason": "end_turn"}) for t in ("one", "two", "three")]
        # Each prompt's text comes after the answer to the one before it, never mixed.
        order = [
            m["params"]["update"]["content"]["text"] if "method" in m else m["id"]
            for m in client.agent_messages
            if m.get("id") in (2, 3, 4) or m.get("params", {}).get("update", {}).get("content")
        ]
        assert order == ["first", 2, "second", 3, "third", 4]
    client.assert_valid()


async def test_cancel_empties_the_queue_and_a_cancelled_request_leaves_it(
    acp_schema: AcpSchema, tmp_path: Any
) -> None:
    config = scripted([[{"hang": True}], [{"text": "ran"}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        answers: dict[str, Any] = {}

        async def send(text: str) -> None:
            try:
                answers[text] = await client.prompt(sid, text)
            except RpcError as error:
                answers[text] = error.code

        async with anyio.create_task_group() as group:
            for text in ("hang", "queued", "withdrawn"):
                group.start_soon(send, text)
                await anyio.wait_all_tasks_blocked()
            # The editor withdraws one queued prompt ($/cancel_request): only that one leaves.
            await client.notify("$/cancel_request", {"requestId": 4})
            await anyio.wait_all_tasks_blocked()
            assert answers == {"withdrawn": -32800}
            await client.cancel(sid)
        assert answers == {
            "hang": {"stopReason": "cancelled"},
            "queued": {"stopReason": "cancelled"},
            "withdrawn": -32800,
        }
        # The queued prompts never ran: the next prompt plays the script's second turn.
        assert await client.prompt(sid, "next") == {"stopReason": "end_turn"}
        assert [u["content"]["text"] for u in client.updates(sid, CHUNKS)] == ["ran"]
    client.assert_valid()


async def test_a_prompt_cancelled_before_its_turn_started_still_counts(
    acp_schema: AcpSchema, tmp_path: Any
) -> None:
    # The prompt and its cancel arrive in one read: the prompt found the session idle, so it is a
    # turn that ran (and was cancelled), and the next prompt plays the script's next turn.
    config = scripted([[{"hang": True}], [{"text": "second"}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        lines = [
            {"jsonrpc": "2.0", "id": "early", "method": "session/prompt", "params": prompt},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}},
        ]
        await client.send_raw(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        await client.wait_for(lambda messages: any(m.get("id") == "early" for m in messages))
        assert next(m for m in client.agent_messages if m.get("id") == "early")["result"] == {
            "stopReason": "cancelled"
        }
        with anyio.fail_after(10):  # the cancelled turn not counted would replay the hang
            assert await client.prompt(sid, "again") == {"stopReason": "end_turn"}
        assert [u["content"]["text"] for u in client.updates(sid, CHUNKS)] == ["second"]
    client.assert_valid()


async def test_closing_a_session_answers_its_queued_prompts(acp_schema: AcpSchema, tmp_path: Any) -> None:
    config = scripted([[{"hang": True}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        answers: list[Any] = []

        async def send(text: str) -> None:
            answers.append(await client.prompt(sid, text))

        async with anyio.create_task_group() as group:
            for text in ("hang", "queued"):
                group.start_soon(send, text)
                await anyio.wait_all_tasks_blocked()
            assert await client.request("session/close", {"sessionId": sid}) == {}
            assert answers == [{"stopReason": "cancelled"}] * 2
    client.assert_valid()


@pytest.mark.parametrize("step", [{"hang": True}, {"delay_ms": 60_000, "text": "late"}])
async def test_cancel_answers_cancelled_and_nothing_follows(
    acp_schema: AcpSchema, tmp_path: Any, step: dict[str, Any]
) -> None:
    config = scripted([[step]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        result: dict[str, Any] = {}

        async def run() -> None:
            result.update(await client.prompt(sid, "go"))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await anyio.wait_all_tasks_blocked()
                await client.cancel(sid)
        assert result == {"stopReason": "cancelled"}
        answered_at = len(client.agent_messages)
        await client.initialize()  # a round trip: anything the turn still sent would be here
        later = client.agent_messages[answered_at:]
        assert [m.get("method") for m in later] == [None]
    client.assert_valid()


async def test_cancel_request_cancels_the_handler(acp_schema: AcpSchema, tmp_path: Any) -> None:
    config = scripted([[{"hang": True}], [{"text": "free again"}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        errors: list[RpcError] = []

        async def run() -> None:
            try:
                await client.prompt(sid, "go")
            except RpcError as error:
                errors.append(error)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await anyio.wait_all_tasks_blocked()
                prompt_id = next(
                    line.message["id"]
                    for line in client.lines
                    if line.direction == "client" and line.message.get("method") == "session/prompt"
                )
                await client.notify("$/cancel_request", {"requestId": prompt_id})
        assert [e.code for e in errors] == [-32800]
        assert await client.prompt(sid, "next") == {"stopReason": "end_turn"}
    client.assert_valid()


async def test_close_session_cancels_its_prompt(acp_schema: AcpSchema, tmp_path: Any) -> None:
    config = scripted([[{"hang": True}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        results: list[Any] = []

        async def run() -> None:
            results.append(await client.prompt(sid, "go"))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await anyio.wait_all_tasks_blocked()
                assert await client.request("session/close", {"sessionId": sid}) == {}
        assert results == [{"stopReason": "cancelled"}]
        with pytest.raises(RpcError) as info:
            await client.prompt(sid, "again")
        assert info.value.code == -32002
    client.assert_valid()


@pytest.mark.parametrize(
    ("step", "stop"),
    [({"text": "cut", "finish": "length"}, "max_tokens"), ({"text": "no", "finish": "refusal"}, "refusal")],
)
async def test_finish_reasons(acp_schema: AcpSchema, tmp_path: Any, step: dict[str, Any], stop: str) -> None:
    async with AcpClient.in_memory(scripted([[step]]), schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "go") == {"stopReason": stop}
    client.assert_valid()


async def test_max_turn_requests(acp_schema: AcpSchema, tmp_path: Any) -> None:
    steps = [{"tool_calls": [{"id": f"c{i}", "name": "missing_tool", "arguments": {}}]} for i in range(3)]
    config = scripted([steps], max_model_requests=2)
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "go") == {"stopReason": "max_turn_requests"}
        ids = {u["toolCallId"] for u in client.updates(sid, ("tool_call", "tool_call_update"))}
        assert ids == {"c0", "c1"}
    client.assert_valid()


async def test_script_exhausted_is_a_one_line_internal_error(acp_schema: AcpSchema, tmp_path: Any) -> None:
    async with AcpClient.in_memory(scripted([[{"text": "only turn"}]]), schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "one")
        with pytest.raises(RpcError) as info:
            await client.prompt(sid, "two")
        assert info.value.code == -32603
        assert info.value.message == "script test-script has no turn 2 (it has 1)"
        # The session survives: a third prompt is answered (with the same error, not a hang).
        with pytest.raises(RpcError):
            await client.prompt(sid, "three")
    client.assert_valid()


async def test_prompt_accepts_resource_links_and_embedded_resources(
    acp_schema: AcpSchema, tmp_path: Any
) -> None:
    async with AcpClient.in_memory(scripted([[{"text": "ok"}]]), schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        link = {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"}
        embedded = {
            "type": "resource",
            "resource": {"uri": "file:///w/b.py", "text": "print(1)", "mimeType": "text/x-python"},
        }
        assert await client.prompt(sid, "look", link, embedded) == {"stopReason": "end_turn"}
    client.assert_valid()


async def test_unknown_methods(acp_schema: AcpSchema) -> None:
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        await client.initialize()
        for method in ("session/unknown", "_vendor/thing"):
            with pytest.raises(RpcError) as info:
                await client.request(method, {})
            assert info.value.code == -32601
        await client.notify("_vendor/ping", {})
        await client.notify("session/unknown", {})
        count = len(client.agent_messages)
        await client.initialize()
        assert len(client.agent_messages) == count + 1  # notifications were never answered
    client.assert_valid()


async def test_authenticate_succeeds_when_the_model_needs_nothing(acp_schema: AcpSchema) -> None:
    # A scripted model needs no key: clients that authenticate with the first method offered
    # (CodeCompanion) must get through; an unknown method is still refused.
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:
        initialized = await client.initialize()
        assert [m["id"] for m in initialized["authMethods"]] == ["api-key"]
        assert await client.request("authenticate", {"methodId": "api-key"}) == {}
        with pytest.raises(RpcError) as info:
            await client.request("authenticate", {"methodId": "x"})
        assert info.value.code == -32602
        assert info.value.message == 'Invalid params: unknown auth method "x"'
    client.assert_valid()


async def test_every_invalid_params_error_names_its_fields(acp_schema: AcpSchema, tmp_path: Any) -> None:
    """Whatever refused the params (a model, or the handler itself), a -32602 carries one data
    shape: the message as ``details`` and each field that was wrong under ``errors``."""
    config = replace(scripted([]), state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        failures: list[RpcError] = []

        async def refused(method: str, params: Any) -> None:
            with pytest.raises(RpcError) as info:
                await client.request(method, params)
            assert info.value.code == -32602, (method, info.value)
            failures.append(info.value)

        await refused("initialize", {"protocolVersion": -1})
        await refused("initialize", [])
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await refused("session/new", {"cwd": "relative", "mcpServers": []})
        await refused("authenticate", {"methodId": "nope"})
        await refused("session/set_mode", {"sessionId": sid, "modeId": "nope"})
        await refused("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "nope"})
        await refused("session/set_config_option", {"sessionId": sid, "configId": "nope", "value": "x"})
        await refused("session/prompt", {"sessionId": sid, "prompt": []})
        await refused("session/list", {"cursor": "not-a-cursor"})
        for error in failures:
            assert error.data["details"] == error.message
            assert error.data["errors"], error
            for field in error.data["errors"]:
                assert set(field) == {"loc", "msg", "type"}, error
                assert isinstance(field["loc"], list), error
                assert isinstance(field["msg"], str), error
                assert isinstance(field["type"], str), error
        fields = [error.data["errors"][0]["loc"] for error in failures]
        assert fields == [
            ["protocolVersion"],
            [],
            ["cwd"],
            ["methodId"],
            ["modeId"],
            ["value"],
            ["value"],
            ["prompt"],
            ["cursor"],
        ]
    client.assert_valid()
