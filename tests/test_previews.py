"""The card a person approving a write or an edit sees: the whole file before and after, as the
call will make the change (the tool's ``preview``), or the call card when that cannot be said
for sure."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import DiffCallView, FileDiff, Services, ToolDefinition, ToolExecution, define_tool
from helpers import recorded
from reference_tools import fs_tools
from reference_tools._file_tools import WHOLE_FILE_LIMIT

pytestmark = pytest.mark.anyio

TOOLS = {tool.name: tool for tool in fs_tools()}


async def preview(tmp_path: Path, tool: str, **arguments: Any) -> tuple[FileDiff, ...] | None:
    execution = ToolExecution(
        call_id="c", name=tool, arguments=arguments, cwd=str(tmp_path), services=Services()
    )
    view = await TOOLS[tool].approval_view(execution)
    if view is None:
        return None
    assert isinstance(view, DiffCallView)
    return view.diffs


async def test_an_edit_of_a_small_file_is_shown_whole(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("one\ntwo\r\nthree\n", newline="")
    (diff,) = await preview(tmp_path, "edit", file_path="a.py", old_string="two", new_string="2") or ()
    assert (diff.path, diff.old_text, diff.new_text) == ("a.py", "one\ntwo\nthree\n", "one\n2\nthree\n")


async def test_replace_all_shows_every_replacement(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\nx = 2\n")
    diffs = await preview(
        tmp_path, "edit", file_path="a.py", old_string="x", new_string="y", replace_all=True
    )
    assert diffs == (FileDiff(path="a.py", old_text="x = 1\nx = 2\n", new_text="y = 1\ny = 2\n"),)


async def test_a_write_over_an_existing_file_shows_what_it_replaces(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    diffs = await preview(tmp_path, "write", file_path=str(tmp_path / "a.txt"), content="new\r\n")
    assert diffs == (FileDiff(path=str(tmp_path / "a.txt"), old_text="old\n", new_text="new\n"),)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("edit", {"file_path": "big.txt", "old_string": "tail", "new_string": "end"}),  # over the bound
        ("edit", {"file_path": "twice.txt", "old_string": "a", "new_string": "b"}),  # found twice
        ("edit", {"file_path": "twice.txt", "old_string": "zzz", "new_string": "b"}),  # not found
        ("edit", {"file_path": "missing.txt", "old_string": "a", "new_string": "b"}),
        ("edit", {"file_path": "bin.dat", "old_string": "a", "new_string": "b"}),  # not text
        ("write", {"file_path": "new.txt", "content": "hi\n"}),  # a new file is whole already
        ("write", {"file_path": "big.txt", "content": "hi\n"}),
    ],
)
async def test_what_cannot_be_said_for_sure_keeps_the_call_card(
    tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    (tmp_path / "big.txt").write_text("x\n" * (WHOLE_FILE_LIMIT // 2) + "tail\n")
    (tmp_path / "twice.txt").write_text("a\na\n")
    (tmp_path / "bin.dat").write_bytes(b"\x00\xff\x00")
    assert await preview(tmp_path, tool, **arguments) is None


async def test_an_edit_outside_the_workspace_is_asked_about_with_its_call_card(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    # Through the real process: the file outside is read (the user allowed it), then its edit asks;
    # the card the user is asked with must not have read the file again to show it whole.
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret.py").write_text("a = 1\nkey = 'SECRET-0451'\n")
    edit = {"file_path": "../outside/secret.py", "old_string": "a = 1", "new_string": "a = 2"}
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "turns": [
                    [
                        {
                            "tool_calls": [
                                {
                                    "id": "r",
                                    "name": "read",
                                    "arguments": {"file_path": "../outside/secret.py"},
                                }
                            ]
                        },
                        {"tool_calls": [{"id": "e", "name": "edit", "arguments": edit}]},
                        {"text": "done"},
                    ]
                ]
            }
        )
    )
    args = ["--model", f"script:{script}", "--state-dir", str(tmp_path / "state"), "--mode", "accept_edits"]
    answers = deque(["allow_once", "reject_once"])
    async with AcpClient.subprocess(args, schema=acp_schema, permission_answers=answers) as client:
        await client.initialize()
        session = await client.new_session(str(work))
        await client.prompt(session, "edit it")
        asked = {
            r["params"]["toolCall"]["toolCallId"]: r["params"]["toolCall"] for r in client.agent_requests
        }
    (diff,) = [block for block in asked["e"]["content"] if block["type"] == "diff"]
    assert (diff["oldText"], diff["newText"]) == ("a = 1", "a = 2")
    assert (outside / "secret.py").read_text() == "a = 1\nkey = 'SECRET-0451'\n"
    client.assert_valid()


def _card_tool(name: str, preview: Any) -> ToolDefinition:
    async def run(args: dict[str, Any], execution: ToolExecution) -> str:
        return "ok"

    return define_tool(
        name=name,
        description=name,
        parameters={"path": {"type": "string", "required": True}},
        execute=run,
        present_call=lambda args: DiffCallView(
            title=name, diffs=(FileDiff(path=args["path"], old_text="a", new_text="b"),)
        ),
        preview=preview,
        kind="edit",
    )


async def test_a_preview_that_fails_or_hangs_leaves_the_call_card(
    acp_schema: AcpSchema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("dsh_acp.loop._call_lifecycle.PREVIEW_SECONDS", 0.2)
    previewed: list[str] = []

    async def broken(args: dict[str, Any], execution: ToolExecution) -> Any:
        previewed.append("broken")
        raise RuntimeError("the preview has a bug")

    async def slow(args: dict[str, Any], execution: ToolExecution) -> Any:
        previewed.append("slow")
        await anyio.sleep(30)

    tools = [_card_tool("broken", broken), _card_tool("slow", slow)]
    turns = [
        [
            {"tool_calls": [{"id": "1", "name": "broken", "arguments": {"path": "a.txt"}}]},
            {"tool_calls": [{"id": "2", "name": "slow", "arguments": {"path": "a.txt"}}]},
            {"text": "done"},
        ],
        [{"tool_calls": [{"id": "3", "name": "slow", "arguments": {"path": "a.txt"}}]}, {"text": "done"}],
    ]
    config, _ = recorded(turns, tools, default_mode="default", state_dir=tmp_path / "state")
    answers = deque(["allow_once", "allow_once"])
    async with AcpClient.in_memory(config, schema=acp_schema, permission_answers=answers) as client:
        await client.initialize()
        session = await client.new_session(str(tmp_path))
        await client.prompt(session, "go")
        cards = [r["params"]["toolCall"]["content"] for r in client.agent_requests]
        assert (
            cards == [[{"type": "diff", "path": str(tmp_path / "a.txt"), "oldText": "a", "newText": "b"}]] * 2
        )
        # In bypass mode nobody is asked: no preview runs.
        await client.request("session/set_mode", {"sessionId": session, "modeId": "bypass"})
        await client.prompt(session, "again")
    assert previewed == ["broken", "slow"]
    client.assert_valid()
