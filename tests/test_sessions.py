"""Durable sessions: the event log, load with replay, resume, list, and what survives a restart."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from dsh_acp import RpcError
from dsh_acp.session._events import UserPrompt
from dsh_acp.session._store import Redactor, SessionBusy, SessionStore
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import (
    GenericCallView,
    TerminalCallView,
    TerminalOutput,
    TerminalResultView,
    TextBlock,
    ToolExecution,
    ToolOutput,
    ToolResult,
    define_tool,
    text,
)
from helpers import recorded

pytestmark = pytest.mark.anyio

TERMINAL = {"_meta": {"terminal_output": True}}


async def _shell(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    await execution.report(TerminalOutput("one\n"))
    await execution.report(TerminalOutput("two\n"))
    return ToolOutput(content=[text("one\ntwo\n")], meta={"exit_code": 1})


shell = define_tool(
    name="shell",
    description="Run.",
    parameters={"command": {"type": "string", "required": True}},
    execute=_shell,
    present_call=lambda a: TerminalCallView(title=a["command"]),
    present_result=lambda a, r: TerminalResultView(
        output="one\ntwo\n", exit_code=(r.meta or {}).get("exit_code")
    ),
    kind="execute",
)


async def _note(args: dict[str, Any], execution: ToolExecution) -> str:
    return "noted"


note = define_tool(
    name="note",
    description="Note.",
    parameters={"path": {"type": "string", "required": True}},
    execute=_note,
    present_call=lambda a: GenericCallView(title=f"Note {a['path']}", kind="read"),
    kind="read",
    read_only=True,
)

TURNS = [
    [
        {
            "thought": "let me look",
            "text": "Looking.",
            "tool_calls": [{"id": "n1", "name": "note", "arguments": {"path": "/w/a"}}],
        },
        {"tool_calls": [{"id": "s1", "name": "shell", "arguments": {"command": "make"}}]},
        {"text": "Done."},
    ],
    [{"text": "Second turn."}],
]


def config_for(tmp_path: Path) -> Any:
    config, models = recorded(TURNS, [shell, note], state_dir=tmp_path / "state")
    return config, models


def live_updates(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return client.updates(sid)


async def test_load_replays_the_same_cards_after_a_restart(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, _ = config_for(tmp_path)
    async with AcpClient.in_memory(config, schema=acp_schema) as live:
        await live.initialize(TERMINAL)
        sid = await live.new_session(str(tmp_path))
        await live.prompt(sid, "do it")
    live.assert_valid()
    live_final = _final_state(live.updates(sid))

    config2, models = config_for(tmp_path)
    async with AcpClient.in_memory(config2, schema=acp_schema) as client:
        await client.initialize(TERMINAL)
        answer = await client.request(
            "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        )
        assert answer["modes"]["currentModeId"] == "bypass"
        replay = client.updates(sid)
        assert replay[0] == {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "do it"},
            "messageId": replay[0]["messageId"],
        }
        assert _final_state(replay) == live_final
        # The output that streamed in chunks replays as one chunk, before the exit.
        outputs = [
            u["_meta"]["terminal_output"]["data"] for u in replay if "terminal_output" in u.get("_meta", {})
        ]
        assert outputs == ["one\ntwo\n"]
        # The conversation continues from the log: the model sees the whole history.
        assert await client.prompt(sid, "more") == {"stopReason": "end_turn"}
        kinds = [type(m).__name__ for m in models[0].requests[-1].messages]
        assert kinds == [
            "UserMessage",
            "AssistantMessage",
            "ToolResultMessage",
            "AssistantMessage",
            "ToolResultMessage",
            "AssistantMessage",
            "UserMessage",
        ]
    client.assert_valid()


def _final_state(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """What an editor shows at the end: each call's merged fields, and the text per message."""
    calls: dict[str, dict[str, Any]] = {}
    text: dict[str, str] = {}
    for u in updates:
        kind = u["sessionUpdate"]
        if kind in ("tool_call", "tool_call_update"):
            card = calls.setdefault(u["toolCallId"], {})
            for key, value in u.items():
                if key == "_meta":
                    for meta_key, meta_value in value.items():
                        if meta_key in ("terminal_output", "terminal_output_delta"):
                            card["output"] = card.get("output", "") + meta_value["data"]
                        else:
                            card[meta_key] = meta_value
                elif key != "sessionUpdate":
                    card[key] = value
        elif kind in ("agent_message_chunk", "agent_thought_chunk"):
            key = f"{kind}:{u.get('messageId')}"
            text[key] = text.get(key, "") + u["content"]["text"]
    return {"calls": calls, "text": sorted(text.values())}


async def test_resume_restores_without_replay(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, _ = config_for(tmp_path)
    async with AcpClient.in_memory(config, schema=acp_schema) as live:
        await live.initialize()
        sid = await live.new_session(str(tmp_path))
        await live.prompt(sid, "do it")
    config2, models = config_for(tmp_path)
    async with AcpClient.in_memory(config2, schema=acp_schema) as client:
        await client.initialize()
        await client.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        assert client.updates(sid) == [
            {
                "sessionUpdate": "available_commands_update",
                "availableCommands": client.updates(sid)[0]["availableCommands"],
            }
        ]  # no replay: only the commands the session offers
        await client.prompt(sid, "more")
        assert len(models[0].requests[-1].messages) == 7
    client.assert_valid()


async def test_list_sessions_filters_and_pages(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, _ = config_for(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        a = await client.new_session(str(tmp_path))
        b = await client.new_session(str(other))
        unprompted = await client.new_session(str(other))
        for sid in (a, b):
            await client.prompt(sid, "/tools")
        listed = await client.request("session/list", {})
        assert {s["sessionId"] for s in listed["sessions"]} == {a, b}  # not the one never prompted
        only = await client.request("session/list", {"cwd": str(other)})
        assert [s["sessionId"] for s in only["sessions"]] == [b]
        assert only["sessions"][0]["cwd"] == str(other)
        # No title yet (a command names none): the field is left out, never null.
        assert set(only["sessions"][0]) == {"sessionId", "cwd", "updatedAt"}
        assert unprompted not in {s["sessionId"] for s in listed["sessions"]}
        with pytest.raises(RpcError, match="cursor"):
            await client.request("session/list", {"cursor": "nonsense"})
    client.assert_valid()


async def test_unknown_session_load_is_not_found(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, _ = config_for(tmp_path)
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        for method in ("session/load", "session/resume"):
            with pytest.raises(RpcError) as info:
                await client.request(method, {"sessionId": "nope", "cwd": str(tmp_path), "mcpServers": []})
            assert info.value.code == -32002
    client.assert_valid()


async def test_sessions_without_a_state_dir_do_not_offer_load(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, _ = recorded(TURNS, [shell, note])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        result = await client.initialize()
        assert result["agentCapabilities"]["loadSession"] is False
        with pytest.raises(RpcError) as info:
            await client.request("session/list", {})
        assert info.value.code == -32601


# -- the store itself ----------------------------------------------------------------------------


def test_log_is_private_locked_and_survives_a_torn_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T")
    log = store.create("s1", "/w", [])
    log.append(UserPrompt((TextBlock(text="hi"),)))
    assert stat.S_IMODE(os.stat(log.path).st_mode) == 0o600
    with pytest.raises(SessionBusy, match="open in another dsh-acp process"):
        store.open("s1")
    with open(log.path, "ab") as handle:
        handle.write(b'{"type": "assistant", "te')  # the agent died mid-write
    loaded = store.load("s1")
    assert [type(e) for e in loaded.events] == [UserPrompt]
    assert "torn" in caplog.text
    log.close()
    store.open("s1").close()  # unlocked now


def test_a_listing_is_written_again_on_open_only_when_it_lags(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T")
    log = store.create("s1", "/w", [])
    log.append(UserPrompt((TextBlock(text="hi"),)))
    log.close()
    listing = tmp_path / "sessions" / "s1.listing.json"
    listing.unlink()  # a log of an earlier format: no listing
    store.open("s1").close()
    written = listing.stat()
    assert json.loads(listing.read_text())["size"] == log.path.stat().st_size
    store.open("s1").close()  # current: not written again
    assert listing.stat().st_ino == written.st_ino
    assert listing.stat().st_mtime_ns == written.st_mtime_ns
    with open(log.path, "ab") as handle:  # another agent's line, after the listing was written
        handle.write(b'{"type":"title","title":"later","ts":"T"}\n')
    store.open("s1").close()
    assert json.loads(listing.read_text())["size"] == log.path.stat().st_size
    store.close()


def test_only_prompted_sessions_are_listed_even_from_a_stale_or_old_listing(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T")
    store.create("idle", "/w", []).close()
    prompted = store.create("talked", "/w", [])
    prompted.append(UserPrompt((TextBlock(text="hi"),)))  # the listing is not rewritten for it
    prompted.close()
    assert [s.session_id for s in store.list()] == ["talked"]
    old = tmp_path / "sessions" / "idle.listing.json"
    listing = json.loads(old.read_text())
    del listing["prompted"]  # written before the key existed: listed, as it was then
    old.write_text(json.dumps(listing))
    assert sorted(s.session_id for s in store.list()) == ["idle", "talked"]
    store.close()


def _every_line_listing(data: bytes) -> tuple[str | None, str]:
    """What catching up gives, read the plain way: every line parsed, in order."""
    title, updated = None, ""
    for line in data.split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("type") == "title" and isinstance(record.get("title"), str) and record["title"]:
            title = record["title"]
        if isinstance(record.get("ts"), str):
            updated = record["ts"]
    return title, updated


@pytest.mark.parametrize(
    "lines",
    [
        [
            b'{"type":"title","title":"first","ts":"1"}',
            b'{"type":"tool_call","view":{"title":"Read a"},"ts":"2"}',
        ],
        [b'{"type":"title","title":"a","ts":"1"}', b'{"type": "title", "title": "b"}', b'{"ts": 3}', b"[1]"],
        [b'{"title":"x","type":"title","ts":"1"}', b'{"type":"title","title":"","ts":"2"}', b'{"type":"ti'],
        [b'{"type":"user","content":[{"text":"say \\"title\\" twice: \\"title\\""}],"ts":"9"}', b""],
        [b'{"type":"title","title":"only"}', b"not json", b'"ts"'],
    ],
)
def test_a_stale_listing_catches_up_as_reading_every_line_would(lines: list[bytes]) -> None:
    from dsh_acp.session._listing import Listing

    data = b"\n".join(lines) + b"\n"
    listing = Listing("/w", [], None, "")
    listing.catch_up(data)
    assert (listing.title, listing.updated_at) == _every_line_listing(data)


def test_unknown_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "s1.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"type": "session", "version": 99, "session_id": "s1", "cwd": "/w"}) + "\n")
    with pytest.raises(ValueError, match="format 99 is not supported"):
        SessionStore(tmp_path, clock=lambda: "T").load("s1")


def test_secrets_never_reach_the_log(tmp_path: Path) -> None:
    redact = Redactor(
        ["sk-live-abcdef123456"], environ={"GITHUB_TOKEN": "ghp_verysecretvalue", "HOME": "/root"}
    )
    store = SessionStore(tmp_path, clock=lambda: "T", redact=redact)
    log = store.create("s1", "/root", [])
    log.append(UserPrompt((TextBlock(text="key sk-live-abcdef123456 and ghp_verysecretvalue"),)))
    log.close()
    raw = (tmp_path / "sessions" / "s1.jsonl").read_text()
    assert "sk-live" not in raw
    assert "ghp_" not in raw
    assert "[REDACTED]" in raw
    assert "/root" in raw  # ordinary values stay


def test_session_ids_cannot_escape_the_store(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T")
    assert not store.exists("../../etc/passwd")
    with pytest.raises(KeyError):
        store.load("../x")


async def test_a_call_left_open_by_a_crash_replays_failed(acp_schema: AcpSchema, tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state", clock=lambda: "T")
    log = store.create("crashed", str(tmp_path), [])
    # Lines as the agent of format 1 wrote them.
    log.write_record({"type": "user", "content": [{"type": "text", "text": "go"}], "message_id": "m1"})
    log.write_record(
        {"type": "assistant", "text": "", "tool_calls": [{"id": "c1", "name": "note", "arguments": "{}"}]}
    )
    log.write_record(
        {
            "type": "tool_call",
            "call_id": "c1",
            "name": "note",
            "arguments": {"path": "/w"},
            "kind": "read",
            "view": {"card": "generic", "title": "Note /w", "kind": "read"},
        }
    )
    log.close()
    config, models = config_for(tmp_path)
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        await client.request("session/load", {"sessionId": "crashed", "cwd": str(tmp_path), "mcpServers": []})
        statuses = [
            (u["sessionUpdate"], u.get("status"))
            for u in client.updates("crashed", ("user_message_chunk", "tool_call", "tool_call_update"))
        ]
        assert statuses == [
            ("user_message_chunk", None),
            ("tool_call", "in_progress"),
            ("tool_call_update", "failed"),
        ]
    client.assert_valid()
    del models


def test_tool_result_view_round_trips(tmp_path: Path) -> None:
    # What the replay rebuilds from a logged view is the view the presenter gave.
    view = TerminalResultView(output="x", exit_code=2, signal=None)
    from dsh_acp.loop._call_lifecycle import view_json

    assert TerminalResultView.model_validate(view_json(view)) == view
    assert ToolResult(content=()).meta is None


def test_a_secret_learned_later_is_redacted_too(tmp_path: Path) -> None:
    redact = Redactor(environ={})
    store = SessionStore(tmp_path, clock=lambda: "T", redact=redact)
    log = store.create("s1", "/w", [])
    redact.add("sk-stored-by-login-123")
    log.append(UserPrompt((TextBlock(text="cat config: sk-stored-by-login-123"),)))
    log.close()
    raw = (tmp_path / "sessions" / "s1.jsonl").read_text()
    assert "sk-stored" not in raw
    assert "[REDACTED]" in raw
