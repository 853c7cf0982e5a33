"""``session/fork``: a new session that starts with a stored session's history (its log's events up
to now, copied); after it the two diverge, each loads on its own, and the source is untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_acp import RpcError, UserMessage
from dsh_acp.session._events import AssistantReply, TitleSet, UserPrompt
from dsh_acp.session._store import SessionStore
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import TextBlock
from helpers import RecordingModel, recorded

pytestmark = pytest.mark.anyio

TURNS = [[{"text": "First answer."}], [{"text": "Second answer."}], [{"text": "Third answer."}]]


def _prompts(model: RecordingModel) -> list[str]:
    """The user's prompts in the model's last request."""
    return [m.content[0].text for m in model.requests[-1].messages if isinstance(m, UserMessage)]


def _header(path: Path) -> dict[str, object]:
    header: dict[str, object] = json.loads(path.read_text().splitlines()[0])
    return header


def test_a_fork_copies_the_events_under_a_header_of_its_own(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T1")
    log = store.create("source", "/w", [])
    log.append(UserPrompt((TextBlock(text="hi"),), "m1"))
    log.append(AssistantReply("hello", text_id="m2"))
    log.append(TitleSet("Greeting", "T1"))
    source = log.path.read_bytes()
    store.clock = lambda: "T2"
    store.fork("source", "copy", "/elsewhere", ["/extra"])
    assert log.path.read_bytes() == source  # the source is only read
    copy = tmp_path / "sessions" / "copy.jsonl"
    assert copy.read_bytes().split(b"\n", 1)[1] == source.split(b"\n", 1)[1]
    header = _header(copy)
    assert header["session_id"] == "copy"
    assert (header["cwd"], header["additional_directories"]) == ("/elsewhere", ["/extra"])
    assert (header["forked_from"], header["version"], header["created"]) == ("source", 2, "T2")
    assert [type(e) for e in store.load("copy").events] == [UserPrompt, AssistantReply, TitleSet]
    listed = {s.session_id: s for s in store.list()}
    copy_listed = listed["copy"]
    assert (copy_listed.title, copy_listed.updated_at, copy_listed.cwd) == ("Greeting", "T2", "/elsewhere")
    assert [s.session_id for s in store.list()] == ["copy", "source"]  # the fork is the newest
    # After the fork the two diverge.
    log.append(UserPrompt((TextBlock(text="only in the source"),)))
    assert len(store.load("copy").events) == 3
    log.close()


def test_a_line_being_written_is_not_copied_and_the_format_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "old.jsonl"
    path.parent.mkdir()
    header = {"type": "session", "version": 1, "session_id": "old", "cwd": "/w", "ts": "T0"}
    prompt = {"type": "user", "content": [{"type": "text", "text": "hi"}], "message_id": "m1", "ts": "T0"}
    path.write_bytes(
        json.dumps(header).encode() + b"\n" + json.dumps(prompt).encode() + b'\n{"type": "assistant", "te'
    )
    store = SessionStore(tmp_path, clock=lambda: "T1")
    store.fork("old", "new", "/w", [])
    loaded = store.load("new")
    assert loaded.header["version"] == 1  # a format-1 log's events are read as format 1
    assert [type(e) for e in loaded.events] == [UserPrompt]
    assert loaded.skipped == []  # the half-written line was left behind
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_forking_what_is_not_there_fails_and_leaves_nothing(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T")
    store.create("s1", "/w", []).close()
    with pytest.raises(KeyError):
        store.fork("missing", "s2", "/w", [])
    with pytest.raises(KeyError):
        store.fork("s1", "../escape", "/w", [])
    assert sorted(p.name for p in (tmp_path / "sessions").iterdir() if p.suffix == ".jsonl") == ["s1.jsonl"]


async def test_fork_through_the_agent(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, models = recorded(TURNS, [], state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        result = await client.initialize()
        assert result["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
        source = await client.new_session(str(tmp_path))
        await client.prompt(source, "one")
        forked = await client.request("session/fork", {"sessionId": source, "cwd": str(tmp_path)})
        fork = forked["sessionId"]
        assert fork != source
        assert forked["modes"]["currentModeId"] == "bypass"  # the source's mode (the test config's)
        assert client.updates(fork, {"user_message_chunk", "agent_message_chunk"}) == []  # no replay
        await client.prompt(fork, "two")
        # The fork's model saw the source's conversation before its own prompt.
        assert _prompts(models[-1]) == ["one", "two"]
        await client.prompt(source, "three")
        assert _prompts(models[0]) == ["one", "three"]  # not the fork's "two"
        listed = await client.request("session/list", {"cwd": str(tmp_path)})
        assert {s["sessionId"] for s in listed["sessions"]} == {source, fork}
        with pytest.raises(RpcError) as info:
            await client.request("session/fork", {"sessionId": "nope", "cwd": str(tmp_path)})
        assert info.value.code == -32002
        with pytest.raises(RpcError) as info:
            await client.request("session/fork", {"sessionId": source, "cwd": "relative"})
        assert info.value.code == -32602
    client.assert_valid()


async def test_fork_needs_a_session_store(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, _ = recorded(TURNS, [])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        result = await client.initialize()
        assert "fork" not in result["agentCapabilities"]["sessionCapabilities"]
        with pytest.raises(RpcError) as info:
            await client.request("session/fork", {"sessionId": "s", "cwd": str(tmp_path)})
        assert info.value.code == -32601
    client.assert_valid()
