"""Cards cannot lie: every title, description, notice, option name, plan entry and session title
the agent shows escapes what would make it show something else (control characters, escape
sequences, carriage returns, bidirectional overrides, invisible format characters), through the
real agent process; ``rawInput`` keeps the exact text."""

from __future__ import annotations

import json
import sys
import unicodedata
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_acp._safe_text import one_line, visible
from dsh_acp.testing import AcpClient, AcpSchema

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).parent / "mcp_servers"
_HIDING = ("Cc", "Cf", "Zl", "Zp", "Cs")


def _hides(char: str) -> bool:
    return unicodedata.category(char) in _HIDING


def test_every_control_format_and_separator_character_is_escaped() -> None:
    hiding = [chr(code) for code in range(0x110000) if _hides(chr(code))]
    assert len(hiding) > 2000  # C0, C1, format characters, the tag block, surrogates
    line = visible("".join(hiding))
    assert not any(_hides(char) for char in line)
    lines = visible("".join(hiding), lines=True)
    assert {char for char in lines if _hides(char)} == {"\t", "\n"}
    # Escaping is idempotent and readable.
    assert visible(line) == line
    assert visible("touch X #\rls -la") == "touch X #\\rls -la"
    assert visible("report\u202efdp.exe") == "report\\u202efdp.exe"
    assert visible("\x1b[2K\x1b[1A") == "\\x1b[2K\\x1b[1A"
    assert visible("a\tb\nc") == "a\\tb\\nc"
    assert visible("a\r\nb\tc\rd", lines=True) == "a\nb\tc\\rd"
    assert visible("name-\udcff.txt") == "name-\\xff.txt"  # a byte that was not UTF-8, as elsewhere
    assert visible("\U000e0041") == "\\U000e0041"  # a tag character (invisible text)
    # What shows as itself is left alone: letters of every script, emoji with their selectors.
    for text in ["café", "日本語", "שלום", "❤\ufe0f", "a b  c", "C:\\path"]:
        assert visible(text) == text
    assert one_line("error:\x1b[2K gone\nnext") == "error:\\x1b[2K gone next"
    assert one_line("a\tb\u202ec") == "a\tb\\u202ec"


def _strings(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, path)


# What is exact on purpose: the call's input, a command's output, a file's text, paths a client
# opens (a file name is what it is; the card's text names it escaped), the values a form answers.
_EXACT = {"rawInput", "rawOutput", "data", "oldText", "newText", "path", "cwd", "const", "enum", "default"}
_CONVERSATION = {"agent_message_chunk", "agent_thought_chunk", "user_message_chunk"}


def _shown(message: dict[str, Any]) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every string of a message the agent sent that a person reads as the agent's text (a
    completed call's content is the tool's output, as the model read it: exact too)."""
    body = message.get("params", message.get("result", {}))
    update = body.get("update", {}) if isinstance(body, dict) else {}
    if update.get("sessionUpdate") in _CONVERSATION:
        return
    exact = _EXACT | ({"content"} if update.get("status") == "completed" else set())
    for path, text in _strings(body):
        if not exact.intersection(path) and path[-1:] != ("sessionId",):
            yield path, text


@pytest.mark.slow
async def test_titles_notices_options_and_plans_are_escaped_through_the_real_agent(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    liar = "report\u202efdp.exe"

    def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
        return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}

    turns = [
        [],  # /tools
        [
            call("b", "bash", command="touch X #\rls -la", description="List\x1b[2K\x1b[1A the files"),
            call("r", "read", file_path=f"../outside/{liar}"),
            call("w", "write", file_path="../outside/x\x1b[1A\x1b[2K.txt", content="x\n"),
            call(
                "t", "todo_write", todos=[{"content": "Run\rtests \u2066hidden\u2069", "status": "pending"}]
            ),
            call("m", "mcp__toolbox__report_fdp_exe"),
            call("q", "mcp__asks__spoof"),
            {"text": "done"},
        ],
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": turns}))
    servers = [
        {"name": name, "command": sys.executable, "args": [str(SERVERS / f"{name}.py")], "env": []}
        for name in ("toolbox", "asks")
    ]
    answers = deque(["reject_once", "reject_once", "reject_once", "allow_once", "allow_once"])
    args = ["--model", f"script:{script}", "--mode", "default", "--state-dir", str(tmp_path / "state")]
    capabilities = {
        "fs": {"readTextFile": False},
        "_meta": {"terminal_output": True},
        "elicitation": {"form": {}},
    }
    async with AcpClient.subprocess(
        args,
        schema=acp_schema,
        permission_answers=answers,
        elicitation_answers=deque([{"action": "decline"}]),
        cwd=str(ws),
    ) as client:
        await client.initialize(capabilities)
        sid = await client.new_session(str(ws), mcpServers=servers)
        await client.prompt(sid, "/tools")
        await client.prompt(sid, "Show\u202e me\x1b[2K the cards")
        messages = list(client.agent_messages)
        requests = list(client.agent_requests)
    client.assert_valid()

    shown = [(path, text) for message in messages for path, text in _shown(message)]
    assert not [(path, text) for path, text in shown if any(_hides(c) and c not in "\n\t" for c in text)]
    one_line_keys = {"title", "name"}
    assert not [(p, t) for p, t in shown if one_line_keys.intersection(p[-1:]) and ("\n" in t or "\t" in t)]

    cards = {
        r["params"]["toolCall"]["toolCallId"]: r["params"]
        for r in requests
        if r["method"] == "session/request_permission"
    }
    assert cards["b"]["toolCall"]["title"] == "touch X #\\rls -la"
    assert cards["b"]["toolCall"]["rawInput"]["command"] == "touch X #\rls -la"  # the exact text
    read_notice = cards["r"]["toolCall"]["content"][0]["content"]["text"]
    assert read_notice == f"Read {outside}/report\\u202efdp.exe, which is outside the workspace"
    assert [o["name"] for o in cards["r"]["options"] if o["kind"] == "allow_always"] == [
        f"Always allow reading `{outside}/report\\u202efdp.exe`"
    ]
    write_notice = cards["w"]["toolCall"]["content"][0]["content"]["text"]
    assert write_notice.endswith("x\\x1b[1A\\x1b[2K.txt, which is outside the workspace")
    assert cards["m"]["toolCall"]["title"] == "toolbox: report\\u202efdp.exe"
    texts = [text for _, text in shown]
    assert "Run\\rtests \\u2066hidden\\u2069" in texts  # the plan entry
    assert "Show\\u202e me\\x1b[2K the cards" in texts  # the session title
    listing = next(
        u["content"]["text"]
        for m in messages
        if (u := m.get("params", {}).get("update", {})).get("sessionUpdate") == "agent_message_chunk"
        and "Tools:" in u["content"]["text"]
    )
    assert "- `mcp__toolbox__report_fdp_exe`: Harmless\\x1b[2K\n" in listing + "\n"
    (question,) = [m["params"] for m in messages if m.get("method") == "elicitation/create"]
    assert question["message"] == "Allow\\rDeny \\u2066this\\u2069?"
    target = question["requestedSchema"]["properties"]["target"]
    assert (target["title"], target["description"]) == ("Target\\rProduction", "Where\\x1b[2K to")
    assert target["oneOf"] == [{"const": "prod", "title": "staging\\u202e"}]
