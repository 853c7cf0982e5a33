"""The OpenAI-compatible model wired into the agent: auth methods, -32000 without a key, and a
whole turn against a local fake server through the CLI's own configuration."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, chunk, error_reply, stream_reply, tool_delta

from dsh_acp import RpcError, build_config
from dsh_acp.testing import AcpClient, AcpSchema

pytestmark = pytest.mark.anyio


async def test_without_a_key_the_agent_offers_auth_and_asks_for_it(
    acp_schema: AcpSchema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DSH_API_KEY", raising=False)
    config = build_config(["--model", "openai:gpt-4o", "--state-dir", str(tmp_path / "state")])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        plain = await client.initialize()
        assert [m["id"] for m in plain["authMethods"]] == ["api-key"]
        terminal = await client.initialize({"auth": {"terminal": True}})
        methods = {m["id"]: m for m in terminal["authMethods"]}
        assert methods["login"]["type"] == "terminal"
        assert methods["login"]["args"] == ["login"]
        for method, params in (
            ("session/new", {"cwd": str(tmp_path), "mcpServers": []}),
            ("authenticate", {"methodId": "api-key"}),
        ):
            with pytest.raises(RpcError) as info:
                await client.request(method, params)
            assert info.value.code == -32000
            assert "DSH_API_KEY" in info.value.message
            # Toad shows only error.data: the message must be there too.
            assert info.value.data == {"details": info.value.message}
    client.assert_valid()


async def test_a_key_in_the_environment_authenticates(
    acp_schema: AcpSchema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_API_KEY", "sk-test-not-real-0000")
    config = build_config(["--model", "openai:gpt-4o", "--state-dir", str(tmp_path / "state")])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        assert await client.request("authenticate", {"methodId": "api-key"}) == {}
        session = await client.new_session(str(tmp_path))
        assert session
    client.assert_valid()


async def test_a_turn_against_a_local_server(
    acp_schema: AcpSchema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hello.txt").write_text("hi\n")
    replies = [
        stream_reply(
            chunk(reasoning="Let me list the files."),
            chunk(tool_calls=[tool_delta(0, id="call_1", name="ls", arguments='{"pa')]),
            chunk(tool_calls=[tool_delta(0, arguments='th": "."}')]),
            chunk(finish="tool_calls"),
            chunk(choices=False, usage=(1000, 20)),
        ),
        stream_reply(chunk("There is "), chunk("one file."), chunk(finish="stop")),
        stream_reply(chunk('"Files in the '), chunk('folder"'), chunk(finish="stop")),  # the title
    ]
    async with FakeOpenAI(replies) as server:
        # A server on localhost needs no key; the model's context window comes from the config file.
        config_dir = tmp_path / "config" / "dsh-acp"
        config_dir.mkdir(parents=True)
        (config_dir / "config.toml").write_text('[models."fake-coder"]\ncontext_window = 32768\n')
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
        args = [
            "--model",
            "openai:fake-coder",
            "--base-url",
            server.base_url,
            "--state-dir",
            str(tmp_path / "s"),
        ]
        config = build_config(args)
        async with AcpClient.in_memory(config, schema=acp_schema) as client:
            await client.initialize({"_meta": {"terminal_output": True}})
            sid = await client.new_session(str(tmp_path))
            assert await client.prompt(sid, "What is here?") == {"stopReason": "end_turn"}
            answered = len(client.agent_messages)
            # The model names the session after the answer: the user did not wait for it.
            await client.wait_for(lambda _: bool(client.updates(sid, ["session_info_update"])))
            assert client.agent_messages[answered - 1]["result"] == {"stopReason": "end_turn"}
            updates = client.updates(sid)
        client.assert_valid()
    kinds = [u["sessionUpdate"] for u in updates if u["sessionUpdate"] != "available_commands_update"]
    assert kinds == [
        "agent_thought_chunk",
        "tool_call",  # announced as soon as its name streamed in, while its arguments still came
        "tool_call_update",  # retitled by its presenter ("List .") once its path had streamed
        "usage_update",
        "tool_call_update",  # its details, now that its arguments are complete
        "tool_call_update",
        "agent_message_chunk",
        "agent_message_chunk",
        "session_info_update",
    ]
    usage = next(u for u in updates if u["sessionUpdate"] == "usage_update")
    assert (usage["used"], usage["size"]) == (1020, 32768)
    call = next(u for u in updates if u["sessionUpdate"] == "tool_call")
    assert (call["toolCallId"], call["name"], call["kind"], call["status"]) == (
        "call_1",
        "ls",
        "read",
        "pending",
    )
    retitled, *details = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert retitled == {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "title": "List ."}
    assert details[0]["rawInput"] == {"path": "."}
    assert details[-1]["status"] == "completed"
    assert next(u for u in updates if u["sessionUpdate"] == "session_info_update")["title"] == (
        "Files in the folder"
    )
    first, second, title = (request.json for request in server.requests)
    assert "What is here?" in json.dumps(title["messages"])
    assert "tools" not in title or title["tools"] == []
    assert first["stream"] is True
    assert str(tmp_path) in first["messages"][0]["content"]  # the system prompt names the cwd
    assert {tool["function"]["name"] for tool in first["tools"]} >= {"bash", "read", "edit", "ls"}
    assert second["messages"][-1]["role"] == "tool"
    assert "hello.txt" in json.dumps(second["messages"][-1])


async def test_a_rejected_key_ends_the_prompt_with_authentication_required(
    acp_schema: AcpSchema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_API_KEY", "sk-test-not-real-0000")
    async with FakeOpenAI([error_reply(401, "bad key")]) as server:
        config = build_config(
            ["--model", "openai:fake", "--base-url", server.base_url, "--state-dir", str(tmp_path / "s")]
        )
        async with AcpClient.in_memory(config, schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            with pytest.raises(RpcError) as info:
                await client.prompt(sid, "hi")
            assert info.value.code == -32000
            assert "sk-test" not in info.value.message
            raw: Any = [line.raw for line in client.lines]
            assert not any(b"sk-test" in line for line in raw)
        client.assert_valid()


@pytest.mark.parametrize("notices", [True, False], ids=["notices", "plain"])
async def test_a_rate_limited_request_is_a_notice_where_the_client_shows_them(
    acp_schema: AcpSchema, tmp_path: Path, notices: bool
) -> None:
    replies = [
        error_reply(429, "slow down", headers={"retry-after-ms": "200"}),
        stream_reply(chunk("Done."), chunk(finish="stop")),
        error_reply(400, "no titles today"),  # the title request: the prompt's words instead
    ]
    async with FakeOpenAI(replies) as server:
        args = ["--model", "openai:fake", "--base-url", server.base_url, "--state-dir", str(tmp_path / "s")]
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "DSH_API_KEY": ""}
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize({"session": {"notices": {}}} if notices else {})
            sid = await client.new_session(str(tmp_path))
            assert await client.prompt(sid, "hi") == {"stopReason": "end_turn"}
            await client.wait_for(lambda _: bool(client.updates(sid, ["session_info_update"])))
            updates = [u for u in client.updates(sid) if u["sessionUpdate"] != "available_commands_update"]
        client.assert_valid()
    assert updates[-1]["title"] == "hi"  # the model wrote none: the first prompt's words
    said = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert said == ["Done."]  # the retry is never part of the conversation
    shown = [u for u in updates if u["sessionUpdate"] == "notice"]
    if notices:
        (notice,) = shown
        assert notice["severity"] == "warning"
        assert notice["title"] == "Rate limited; retrying in 0.2 s"
        assert "HTTP 429: slow down" in notice["description"]
        assert updates.index(notice) < updates.index(next(u for u in updates if u.get("content")))
    else:
        assert shown == []


async def test_logout_forgets_the_stored_key_and_keeps_the_rest(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    config_dir = tmp_path / "config" / "dsh-acp"
    config_dir.mkdir(parents=True)
    config_file = config_dir / "config.toml"
    config_file.write_text(
        '# mine\napi_key = "sk-stored-not-real-1111"\n\n[models."gpt-4o"]\ncontext_window = 128000\n'
    )
    args = ["--model", "openai:gpt-4o", "--state-dir", str(tmp_path / "s")]
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "DSH_API_KEY": ""}
    async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
        answer = await client.initialize()
        assert answer["agentCapabilities"]["auth"] == {"logout": {}}
        assert await client.new_session(str(tmp_path))  # the stored key authenticates
        assert await client.request("logout", {}) == {}
        with pytest.raises(RpcError) as info:
            await client.new_session(str(tmp_path))
        assert info.value.code == -32000  # no key any more: the editor offers its auth methods
        assert await client.request("logout", {}) == {}  # nothing stored: still fine
    client.assert_valid()
    text = config_file.read_text()
    assert "sk-stored" not in text
    assert text.startswith("# mine\n")
    assert '[models."gpt-4o"]\ncontext_window = 128000\n' in text


async def test_the_meter_shows_the_cost_when_the_price_is_known(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    replies = [
        stream_reply(chunk("Hi."), chunk(finish="stop"), chunk(choices=False, usage=(1000, 100))),
        stream_reply(chunk("Hi."), chunk(finish="stop")),  # the title
        stream_reply(chunk("Again."), chunk(finish="stop"), chunk(choices=False, usage=(2000, 100))),
    ]
    async with FakeOpenAI(replies) as server:
        # A local proxy in front of OpenAI: its prices are OpenAI's, as the config says.
        config_dir = tmp_path / "config" / "dsh-acp"
        config_dir.mkdir(parents=True)
        (config_dir / "config.toml").write_text(
            '[models."gpt-4o"]\ncontext_window = 128000\nprice_provider = "openai"\n'
        )
        args = ["--model", "openai:gpt-4o", "--base-url", server.base_url, "--state-dir", str(tmp_path / "s")]
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "DSH_API_KEY": ""}
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            await client.prompt(sid, "hi")
            await client.wait_for(lambda _: bool(client.updates(sid, ["session_info_update"])))
            await client.prompt(sid, "again")
            meters = client.updates(sid, ["usage_update"])
        client.assert_valid()
        # gpt-4o: $2.50 per million input tokens, $10 per million output tokens; the cost is the
        # session's running total.
        assert [m["cost"] for m in meters] == [
            {"amount": pytest.approx(0.0035), "currency": "USD"},
            {"amount": pytest.approx(0.0035 + 0.006), "currency": "USD"},
        ]
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            await client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
            replayed = client.updates(sid, ["usage_update"])
        assert replayed == meters  # the meter replays with its cost


async def test_no_cost_where_the_price_is_unknown(acp_schema: AcpSchema, tmp_path: Path) -> None:
    replies = [stream_reply(chunk("Hi."), chunk(finish="stop"), chunk(choices=False, usage=(1000, 100)))]
    async with FakeOpenAI(replies) as server:
        config_dir = tmp_path / "config" / "dsh-acp"
        config_dir.mkdir(parents=True)
        (config_dir / "config.toml").write_text('[models."my-local"]\ncontext_window = 8192\n')
        args = [
            "--model",
            "openai:my-local",
            "--base-url",
            server.base_url,
            "--state-dir",
            str(tmp_path / "s"),
        ]
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "DSH_API_KEY": ""}
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            await client.prompt(sid, "hi")
            (meter,) = client.updates(sid, ["usage_update"])
        client.assert_valid()
    assert meter == {"sessionUpdate": "usage_update", "used": 1100, "size": 8192}


@pytest.mark.parametrize(("model", "picker"), [("gpt-5", True), ("o4-mini", True), ("gpt-4o", False)])
async def test_the_reasoning_effort_picker_for_models_that_take_it(
    acp_schema: AcpSchema, tmp_path: Path, model: str, picker: bool
) -> None:
    replies = [
        stream_reply(chunk("One."), chunk(finish="stop")),
        stream_reply(chunk("Title"), chunk(finish="stop")),
        stream_reply(chunk("Two."), chunk(finish="stop")),
    ]
    async with FakeOpenAI(replies) as server:
        args = [
            "--model",
            f"openai:{model}",
            "--base-url",
            server.base_url,
            "--state-dir",
            str(tmp_path / "s"),
        ]
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "DSH_API_KEY": ""}
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            created = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            sid = created["sessionId"]
            options = {o["id"]: o for o in created["configOptions"]}
            assert ("reasoning_effort" in options) is picker
            await client.prompt(sid, "one")
            await client.wait_for(lambda _: bool(client.updates(sid, ["session_info_update"])))
            if not picker:
                with pytest.raises(RpcError):
                    await client.request(
                        "session/set_config_option",
                        {"sessionId": sid, "configId": "reasoning_effort", "value": "high"},
                    )
                return
            effort = options["reasoning_effort"]
            assert (effort["category"], effort["type"], effort["currentValue"]) == (
                "thought_level",
                "select",
                "medium",
            )
            assert [o["value"] for o in effort["options"]] == ["low", "medium", "high"]
            answer = await client.request(
                "session/set_config_option",
                {"sessionId": sid, "configId": "reasoning_effort", "value": "high"},
            )
            assert {o["id"]: o["currentValue"] for o in answer["configOptions"]}["reasoning_effort"] == "high"
            await client.prompt(sid, "two")
        client.assert_valid()
        first, _, second = (request.json for request in server.requests)
        assert "reasoning_effort" not in first  # the model's default until one is picked
        assert second["reasoning_effort"] == "high"  # effective from the next request
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            resumed = await client.request(
                "session/resume", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
            )
        current = {o["id"]: o["currentValue"] for o in resumed["configOptions"]}
        assert current["reasoning_effort"] == "high"  # kept with the session


async def test_a_cost_without_a_window_is_logged_and_survives_a_reload(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    """A request whose usage says nothing of the model's window shows no meter, but its price is
    the session's: the log keeps it, so a reloaded session's next meter counts it."""
    replies = [
        stream_reply(chunk("Hi."), chunk(finish="stop"), chunk(choices=False, usage=(1000, 100))),
        stream_reply(chunk("Hi."), chunk(finish="stop")),  # the title
        stream_reply(chunk("Again."), chunk(finish="stop"), chunk(choices=False, usage=(2000, 100))),
    ]
    async with FakeOpenAI(replies) as server:
        config_dir = tmp_path / "config" / "dsh-acp"
        config_dir.mkdir(parents=True)
        config = config_dir / "config.toml"
        config.write_text('[models."gpt-3.5-turbo"]\nprice_provider = "openai"\n')  # no window known
        state = str(tmp_path / "s")
        args = ["--model", "openai:gpt-3.5-turbo", "--base-url", server.base_url, "--state-dir", state]
        env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "DSH_API_KEY": ""}
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            await client.prompt(sid, "hi")
            await client.wait_for(lambda _: bool(client.updates(sid, ["session_info_update"])))
            assert client.updates(sid, ["usage_update"]) == []  # no window: no meter
        config.write_text('[models."gpt-3.5-turbo"]\ncontext_window = 16385\nprice_provider = "openai"\n')
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            await client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
            await client.prompt(sid, "again")
            (meter,) = client.updates(sid, ["usage_update"])
        client.assert_valid()
    # gpt-3.5-turbo: $0.50 per million input tokens, $1.50 per million output: both requests count.
    assert meter["cost"] == {"amount": pytest.approx(0.00065 + 0.00115), "currency": "USD"}


async def test_a_server_that_is_not_running_is_named_with_the_systems_reason(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    # The first thing many users meet (the local server not started yet): what they read must
    # be the URL and why, not the HTTP library's "ssl:default [Connect call failed (...)]".
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    args = ["--model", "openai:fake", "--base-url", url, "--state-dir", str(tmp_path / "state")]
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "DSH_API_KEY": ""}
    async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        for prompt in ("hi", "again"):  # and it keeps serving
            with pytest.raises(RpcError) as info:
                await client.prompt(sid, prompt)
            assert info.value.message == f"cannot connect to {url}: connection refused"
    client.assert_valid()
