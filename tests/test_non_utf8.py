"""Bytes that are not UTF-8 (file names, file contents, command output) through the real agent:
every tool shows them as ``\\xNN`` escapes, the prompt succeeds, the wire and the session log hold
valid UTF-8, and a restarted agent replays the same cards."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_acp import ToolResultMessage
from dsh_acp.rpc._framing import encode_message, json_bytes
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import (
    GenericResultView,
    ToolExecution,
    ToolOutput,
    ToolResult,
    define_tool,
    shown_bytes,
    shown_text,
    text,
)
from helpers import recorded

pytestmark = pytest.mark.anyio

NAME = b"name-\xff\xfe.txt"
SHOWN = "name-\\xff\\xfe.txt"


def _step(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    with open(os.path.join(os.fsencode(root), NAME), "wb") as handle:
        handle.write(b"needle in a badly named file\n")
    (root / "sub" / "latin1.txt").write_bytes(b"caf\xe9 needle\n")
    (root / "plain.txt").write_text("needle\n")
    return root


def _final_texts(updates: list[dict[str, Any]]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for update in updates:
        if update.get("sessionUpdate") == "tool_call_update" and update.get("status") in (
            "completed",
            "failed",
        ):
            texts[update["toolCallId"]] = "".join(
                item["content"]["text"]
                for item in update.get("content") or []
                if item.get("type") == "content"
            )
    return texts


async def test_non_utf8_names_contents_and_output_are_escaped_end_to_end(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    root = _workspace(tmp_path)
    script = tmp_path / "script.json"
    turn = [
        _step("glob", "glob", {"pattern": "**/*.txt"}),
        _step("grep", "grep", {"pattern": "needle"}),
        _step("ls", "ls", {"path": "."}),
        _step("read", "read", {"file_path": SHOWN}),  # the name as the tools showed it
        _step(
            "bash",
            "bash",
            {"description": "bytes", "command": "printf 'out-\\377\\376\\n'; printf 'err-\\377\\n' >&2; ls"},
        ),
        {"text": "done"},
    ]
    script.write_text(json.dumps({"turns": [turn]}))
    args = ["--model", f"script:{script}", "--state-dir", str(tmp_path / "state"), "--mode", "bypass"]
    async with AcpClient.subprocess([*args, "--deterministic"], schema=acp_schema) as client:
        await client.initialize()
        session_id = await client.new_session(str(root))
        answer = await client.prompt(session_id, {"type": "text", "text": "search"})
        assert answer == {"stopReason": "end_turn"}
        texts = _final_texts(client.updates(session_id))
        raw = [line.raw for line in client.lines if line.direction == "agent"]
    client.assert_valid()
    for line in raw:
        line.decode("utf-8")  # every line on the wire is valid UTF-8
    assert f"{root}/{SHOWN}" in texts["glob"]
    assert f"{root}/{SHOWN}:1:needle in a badly named file" in texts["grep"]
    assert f"{root}/sub/latin1.txt:1:caf\\xe9 needle" in texts["grep"]
    assert f"  {SHOWN}\n" in texts["ls"]
    assert "1\tneedle in a badly named file" in texts["read"]
    assert "out-\\xff\\xfe" in texts["bash"]
    assert "err-\\xff" in texts["bash"]
    assert SHOWN in texts["bash"]  # ls run by bash
    logs = list((tmp_path / "state").rglob("*.jsonl"))
    assert logs
    for log in logs:
        for line in log.read_bytes().splitlines():
            orjson.loads(line)  # valid UTF-8 JSON, line by line

    # A restarted agent replays the same cards from the log.
    async with AcpClient.subprocess(
        [*args, "--deterministic", "--id-prefix", "b-"], schema=acp_schema
    ) as again:
        await again.initialize()
        await again.request("session/load", {"sessionId": session_id, "cwd": str(root), "mcpServers": []})
        replayed = _final_texts(again.updates(session_id))
    again.assert_valid()
    assert replayed == texts


async def _surrogates(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    return ToolOutput([text("raw-\udcff and \ud800")], meta={"name": "meta-\udcfe"})


def _present_surrogates(args: dict[str, Any], result: ToolResult) -> GenericResultView:
    meta = result.meta if isinstance(result.meta, dict) else {}
    # The title carries a surrogate past every tool-side escape: the wire and the log must cope.
    return GenericResultView(title="title-\udcfd", content=(text(str(meta.get("name"))),))


SURROGATES = define_tool(
    name="surrogates",
    description="Returns text with lone surrogates, as a careless tool might.",
    parameters={},
    execute=_surrogates,
    present_result=_present_surrogates,
)


async def test_a_tool_returning_surrogates_cannot_fail_the_turn(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    config, models = recorded([[_step("s1", "surrogates", {}), {"text": "done"}]], [SURROGATES])
    config.state_dir = tmp_path / "state"
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        session_id = await client.new_session(str(tmp_path))
        assert await client.prompt(session_id, "go") == {"stopReason": "end_turn"}
    client.assert_valid()
    done = [u for u in client.updates(session_id) if u.get("status") == "completed"]
    assert done[-1]["title"] == "title-\\xfd"
    assert done[-1]["content"][0]["content"]["text"] == "meta-\\xfe"
    seen = models[0].requests[1].messages[-1]
    assert isinstance(seen, ToolResultMessage)
    assert seen.content == (text("raw-\\xff and \\ud800"),)
    (log,) = (tmp_path / "state").rglob("*.jsonl")
    assert b"title-\\\\xfd" in log.read_bytes()


def test_json_bytes_escapes_surrogates_and_still_rejects_what_is_not_json() -> None:
    assert json_bytes({"k\udcff": ["v\udc80", 1]}) == b'{"k\\\\xff":["v\\\\x80",1]}'
    assert encode_message({"a": "\udcff"}) == b'{"a":"\\\\xff"}\n'
    with pytest.raises(TypeError):
        json_bytes({"a": object()})


def test_shown_text_and_shown_bytes_agree() -> None:
    raw = b"caf\xe9-\xff\xfe-\xe2\x82\xac"
    assert shown_text(os.fsdecode(raw)) == shown_bytes(raw) == "caf\\xe9-\\xff\\xfe-€"
    plain = "plain-é"
    assert shown_text(plain) is plain
