"""bash in the client's own terminals (terminal/*) when the client offers them: the card embeds
the client's terminal, the model's view is bounded, timeouts and cancels kill through the client,
each terminal is released exactly once, and a client that fails falls back to running locally."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import reference_tools
from dsh_acp import ToolResultMessage
from dsh_acp.testing import AcpClient, AcpSchema
from helpers import recorded
from reference_tools.bash import bash_tools

pytestmark = pytest.mark.anyio

GUARD = str(Path(reference_tools.__file__).resolve().parent / "_guard.py")

TOAD = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}


def bash(call_id: str, command: str, **extra: Any) -> dict[str, Any]:
    arguments = {"command": command, "description": f"Run {call_id}", **extra}
    return {"tool_calls": [{"id": call_id, "name": "bash", "arguments": arguments}]}


def requests(client: AcpClient, prefix: str = "terminal/") -> list[tuple[str, Any]]:
    return [(r["method"], r["params"]) for r in client.agent_requests if r["method"].startswith(prefix)]


def calls_of(client: AcpClient, call_id: str) -> list[dict[str, Any]]:
    return [u for u in client.updates() if u.get("toolCallId") == call_id]


async def test_commands_run_in_the_clients_terminal(acp_schema: AcpSchema, tmp_path: Path) -> None:
    steps = [
        bash("ok", "printf 'hello\\n'; printf 'warn\\n' >&2"),
        bash("bad", "echo failing; exit 3"),
        {"text": "done"},
    ]
    config, models = recorded([steps], bash_tools())
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize(TOAD)
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "go") == {"stopReason": "end_turn"}
    client.assert_valid()
    made = [params for method, params in requests(client) if method == "terminal/create"]
    assert made[0] == {
        "sessionId": sid,
        "command": sys.executable,  # the guard that takes the command's process group down with it
        "args": ["-I", "-S", GUARD, "bash", "-c", "printf 'hello\\n'; printf 'warn\\n' >&2"],
        "cwd": str(tmp_path),
        "env": [
            {"name": "NO_COLOR", "value": "1"},
            {"name": "TERM", "value": "dumb"},
            {"name": "PAGER", "value": "cat"},
            {"name": "GIT_PAGER", "value": "cat"},
        ],
        "outputByteLimit": 60 * 1024,
    }
    assert client.terminals.released == ["term-1", "term-2"]  # each exactly once
    announce, attach, done = calls_of(client, "ok")
    assert "_meta" not in announce  # no Zed convention: the client shows its own terminal
    assert announce["rawInput"]["command"].startswith("printf")
    assert attach["content"] == [
        {"type": "content", "content": {"type": "text", "text": "Run ok"}},
        {"type": "terminal", "terminalId": "term-1"},
    ]
    assert done["status"] == "completed"
    assert done["content"] == attach["content"]
    bad = calls_of(client, "bad")[-1]
    assert bad["status"] == "failed"
    assert bad["title"].endswith(" (exit code 3)")
    assert bad["content"][-1] == {"type": "content", "content": {"type": "text", "text": "Exit code 3"}}
    seen = {
        m.call_id: m.content[0].text  # type: ignore[union-attr]
        for request in models[0].requests
        for m in request.messages
        if isinstance(m, ToolResultMessage)
    }
    assert seen["ok"] == "hello\nwarn\n[exit code 0]"
    assert seen["bad"] == "failing\n[exit code 3]"


async def test_timeout_kills_through_the_client_and_keeps_the_output(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    # A second: the command starts in the sandbox (the guard confines itself first), which a busy
    # machine can make take longer than a few hundred milliseconds.
    steps = [bash("slow", "echo started; sleep 30; echo never", timeout_ms=1000), {"text": "done"}]
    config, models = recorded([steps], bash_tools())
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize(TOAD)
        sid = await client.new_session(str(tmp_path))
        with anyio.fail_after(10):
            await client.prompt(sid, "go")
    client.assert_valid()
    assert client.terminals.killed == ["term-1"]
    assert client.terminals.released == ["term-1"]
    done = calls_of(client, "slow")[-1]
    assert done["status"] == "failed"
    assert done["content"][-1]["content"]["text"].endswith("timed out after 1 s")
    result = next(m for r in models[0].requests for m in r.messages if isinstance(m, ToolResultMessage))
    assert result.content[0].text.startswith("started\n[timed out after 1 s")  # type: ignore[union-attr]


async def test_cancel_kills_and_releases_and_the_card_keeps_the_terminal(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    config, _ = recorded([[bash("long", "echo started; sleep 30"), {"text": "never"}]], bash_tools())
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize(TOAD)
        sid = await client.new_session(str(tmp_path))
        async with anyio.create_task_group() as group:

            async def prompt() -> None:
                assert await client.prompt(sid, "go") == {"stopReason": "cancelled"}

            group.start_soon(prompt)
            await client.wait_for(lambda _: any("content" in u for u in calls_of(client, "long")[1:]))
            with anyio.fail_after(10):
                while b"started" not in client.terminals.output_of("term-1"):  # noqa: ASYNC110 (not on the wire: polled)
                    await anyio.sleep(0.02)
                await client.cancel(sid)
    client.assert_valid()
    assert client.terminals.killed == ["term-1"]
    assert client.terminals.released == ["term-1"]
    # Its output is fetched before the release frees it: the card keeps what it printed (acpx
    # shows a call's output only from the card).
    methods = [method for method, _ in requests(client)]
    assert methods[-3:] == ["terminal/kill", "terminal/output", "terminal/release"]
    last = calls_of(client, "long")[-1]
    assert last["status"] == "failed"
    assert {"type": "terminal", "terminalId": "term-1"} in last["content"]
    assert last["rawOutput"] == {"output": "started\n"}


def _running(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                if marker.encode() in file.read():
                    found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds processes through /proc")
async def test_nothing_a_cancelled_command_started_outlives_it(acp_schema: AcpSchema, tmp_path: Path) -> None:
    # The test client, like Toad and acpx, kills only the process it started: the guard must take
    # the command's children (two sleeps here) down with it.
    command = "sleep 28.25 & sleep 28.5; wait"
    config, _ = recorded([[bash("tree", command), {"text": "never"}]], bash_tools())
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize(TOAD)
        sid = await client.new_session(str(tmp_path))
        async with anyio.create_task_group() as group:

            async def prompt() -> None:
                assert await client.prompt(sid, "go") == {"stopReason": "cancelled"}

            group.start_soon(prompt)
            await client.wait_for(lambda _: any("content" in u for u in calls_of(client, "tree")[1:]))
            for _ in range(500):  # the sleeps have started
                if len(_running("sleep\x0028.")) == 2:
                    break
                await anyio.sleep(0.01)
            assert len(_running("sleep\x0028.")) == 2
            with anyio.fail_after(10):
                await client.cancel(sid)
        # Still connected: the test client's terminal would wait for the sleeps' pipe otherwise.
        for _ in range(500):  # SIGTERM from the guard's watchdog, at once
            if not _running("sleep\x0028."):
                break
            await anyio.sleep(0.01)
        assert _running("sleep\x0028.") == []


async def test_a_client_that_fails_falls_back_to_local_with_one_log_line(
    acp_schema: AcpSchema, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    steps = [bash("a", "echo one"), bash("b", "echo two"), {"text": "done"}]
    config, models = recorded([steps], bash_tools())

    async def refuse(method: str, params: Any) -> Any:
        from dsh_acp import RpcError

        raise RpcError(-32603, "no terminals here " + "x" * 2000)

    async with AcpClient.in_memory(
        config,
        schema=acp_schema,
        on_agent_request=lambda m, p: refuse(m, p) if m == "terminal/create" else None,
    ) as client:
        await client.initialize(TOAD)
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "go")
    client.assert_valid()
    assert [m for m, _ in requests(client)] == ["terminal/create"]  # asked once, then local
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1
    assert "no terminals here" in lines[0]
    assert len(lines[0]) < 500
    seen = [m for m in models[0].requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert [m.content[0].text for m in seen] == ["one\n[exit code 0]", "two\n[exit code 0]"]  # type: ignore[union-attr]


async def test_background_tasks_still_work(acp_schema: AcpSchema, tmp_path: Path) -> None:
    steps = [
        bash("bg", "echo built", run_in_background=True),
        {
            "tool_calls": [{"id": "out", "name": "bash_output", "arguments": {"task_id": "bg-1"}}],
            "delay_ms": 300,
        },
        {"text": "done"},
    ]
    config, models = recorded([steps], bash_tools())
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize(TOAD)
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "go")
    client.assert_valid()
    assert requests(client) == []  # a background task outlives its card: it runs in the agent
    seen = [m for r in models[0].requests for m in r.messages if isinstance(m, ToolResultMessage)]
    assert "built" in seen[-1].content[0].text  # type: ignore[union-attr]


async def test_a_plain_client_sees_what_a_cancelled_command_printed(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    # No terminal of any kind: the output comes once at the end, and a cancel is an end too.
    marker = tmp_path / "printed"
    command = f"echo started; touch {marker}; sleep 30"
    config, _ = recorded([[bash("long", command), {"text": "never"}]], bash_tools())
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize({})
        sid = await client.new_session(str(tmp_path))
        async with anyio.create_task_group() as group:

            async def prompt() -> None:
                assert await client.prompt(sid, "go") == {"stopReason": "cancelled"}

            group.start_soon(prompt)
            for _ in range(1000):  # at most 10 s for "started" to be printed (then the marker is)
                if await anyio.Path(marker).exists():
                    break
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)  # let the agent read the pipe: the output is in flight
            await client.cancel(sid)
    client.assert_valid()
    last = calls_of(client, "long")[-1]
    assert last["status"] == "failed"
    assert last["content"][0]["content"]["text"] == "```console\nstarted\n```\n\ncancelled"
