"""``/undo`` end to end in memory: a turn's file changes taken back byte for byte, the turn
before on the next ``/undo``, the model told, the card; and the races where a file changed
after the agent wrote it, which must never lose what the user did."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from dsh_acp import AgentConfig, ContextMessage
from dsh_acp.testing import AcpClient, AcpSchema
from helpers import recorded
from reference_tools import fs_tools, install_policies

pytestmark = pytest.mark.anyio

UNDO: list[dict[str, Any]] = []
"""The script's turn for a ``/undo`` prompt (a scripted model counts every prompt; commands
never reach it)."""

ORIGINAL = "\ufeffdef add(a, b):\r\n    return a - b\r\n\r\nprint(add(1, 2))\r\n".encode()
"""A file with a byte-order mark and CRLF line ends: it must come back exactly."""


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def _config(tmp_path: Path, turns: list[list[dict[str, Any]]]) -> tuple[AgentConfig, list[Any]]:
    config, models = recorded(turns, fs_tools(), state_dir=tmp_path / "state")
    config.configure_registry = install_policies
    return config, models


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = Path(os.path.realpath(tmp_path)) / "ws"
    workspace.mkdir()
    (workspace / "calc.py").write_bytes(ORIGINAL)
    (workspace / "notes.md").write_text("# Notes\n")
    return workspace


def _fix_turn(ws: Path, n: int = 1) -> list[dict[str, Any]]:
    """A turn that edits calc.py, writes notes.md over and creates new.txt."""
    return [
        _call(f"r{n}", "read", file_path=str(ws / "calc.py")),
        _call(f"e{n}", "edit", file_path=str(ws / "calc.py"), old_string="a - b", new_string="a + b"),
        _call(f"rn{n}", "read", file_path=str(ws / "notes.md")),
        _call(f"w{n}", "write", file_path=str(ws / "notes.md"), content="# Notes\n\n- add() fixed\n"),
        _call(f"c{n}", "write", file_path=str(ws / "new.txt"), content="created\n"),
        {"text": "Fixed."},
    ]


async def _session(client: AcpClient, ws: Path) -> str:
    await client.initialize()
    return await client.new_session(str(ws))


def _undo_cards(client: AcpClient) -> list[dict[str, Any]]:
    return [u for u in client.updates(None, {"tool_call"}) if u.get("name") == "undo"]


async def test_undo_takes_back_a_turn_byte_for_byte_and_tells_the_model(
    ws: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    config, models = _config(tmp_path, [_fix_turn(ws), UNDO, [{"text": "Understood."}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        session = await _session(client, ws)
        await client.prompt(session, "Fix add()")
        assert (ws / "calc.py").read_bytes() != ORIGINAL
        assert await client.prompt(session, "/undo") == {"stopReason": "end_turn"}
        assert (ws / "calc.py").read_bytes() == ORIGINAL
        assert (ws / "notes.md").read_text() == "# Notes\n"
        assert not (ws / "new.txt").exists()
        (card,) = _undo_cards(client)
        assert card["kind"] == "edit"
        assert card["status"] == "completed"
        assert card["title"] == "Undo the file changes of “Fix add()”"
        notice, *diffs = card["content"]
        assert notice["content"]["text"] == (
            "Restored 2 files to what they held before.\nRemoved 1 file the turn created."
        )
        assert [(d["path"], d["oldText"], d["newText"]) for d in diffs] == [
            (str(ws / "calc.py"), ORIGINAL.decode().replace("a - b", "a + b"), ORIGINAL.decode()),
            (str(ws / "notes.md"), "# Notes\n\n- add() fixed\n", "# Notes\n"),
            (str(ws / "new.txt"), "created\n", ""),
        ]
        await client.prompt(session, "What now?")
    client.assert_valid()
    told = [m for m in models[0].requests[-1].messages if isinstance(m, ContextMessage)]
    assert told[-1].text == (
        "The user took back (/undo) the file changes of an earlier turn of yours: restored to what "
        f"they held before it: {ws / 'calc.py'}, {ws / 'notes.md'}; removed (it had created them): "
        f"{ws / 'new.txt'}. Read a file again before you change it."
    )


async def test_undo_again_takes_back_the_turn_before(ws: Path, tmp_path: Path, acp_schema: AcpSchema) -> None:
    second = [
        _call("r2", "read", file_path=str(ws / "calc.py")),
        _call(
            "e2",
            "edit",
            file_path=str(ws / "calc.py"),
            old_string="print(add(1, 2))",
            new_string="print(add(2, 2))",
        ),
        {"text": "Done."},
    ]
    config, _ = _config(tmp_path, [_fix_turn(ws), [{"text": "A question answered."}], second, UNDO, UNDO])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        session = await _session(client, ws)
        await client.prompt(session, "Fix add()")
        after_first = (ws / "calc.py").read_bytes()
        await client.prompt(session, "What does add do?")  # a turn that changed no file
        await client.prompt(session, "Print 2 + 2")
        await client.prompt(session, "/undo")
        assert (ws / "calc.py").read_bytes() == after_first
        await client.prompt(session, "/undo")
        assert (ws / "calc.py").read_bytes() == ORIGINAL
        assert not (ws / "new.txt").exists()
        await client.prompt(session, "/undo")
        said = client.updates(session, {"agent_message_chunk"})[-1]["content"]["text"]
        assert said == "Every turn's file changes were taken back already."
        assert [c["title"] for c in _undo_cards(client)] == [
            "Undo the file changes of “Print 2 + 2”",
            "Undo the file changes of “Fix add()”",
        ]
    client.assert_valid()


async def test_nothing_to_undo_is_said(ws: Path, tmp_path: Path, acp_schema: AcpSchema) -> None:
    config, _ = _config(tmp_path, [])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        session = await _session(client, ws)
        await client.prompt(session, "/undo")
        said = client.updates(session, {"agent_message_chunk"})[-1]["content"]["text"]
    assert said == "There is nothing to undo: no turn of this session changed files through the file tools."
    assert (ws / "calc.py").read_bytes() == ORIGINAL


# -- the races: what changed after the agent wrote it is the user's, and stays --------------------


def _user_edits(ws: Path) -> None:
    (ws / "calc.py").write_bytes(b"# the user's own version\n")


def _user_deletes(ws: Path) -> None:
    (ws / "calc.py").unlink()


def _turns_binary(ws: Path) -> None:
    (ws / "calc.py").write_bytes(b"\x00\x01binary\xff")


def _becomes_a_link(ws: Path) -> None:
    (ws / "elsewhere.py").write_bytes((ws / "calc.py").read_bytes())
    (ws / "calc.py").unlink()
    (ws / "calc.py").symlink_to(ws / "elsewhere.py")


def _becomes_a_folder(ws: Path) -> None:
    (ws / "calc.py").unlink()
    (ws / "calc.py").mkdir()


def _listing(ws: Path) -> dict[str, tuple[bool, bytes | None]]:
    return {p.name: (p.is_symlink(), p.read_bytes() if p.is_file() else None) for p in ws.iterdir()}


@pytest.mark.parametrize(
    ("race", "why"),
    [
        (_user_edits, "it changed since"),
        (_user_deletes, "it was deleted since"),
        (_turns_binary, "it changed since"),
        (_becomes_a_link, "it is a symbolic link now"),
        (_becomes_a_folder, "it is no longer a regular file"),
    ],
    ids=["user-edit", "deleted", "binary", "symlink", "directory"],
)
async def test_a_file_changed_since_the_turn_is_left_and_the_others_restored(
    race: Any, why: str, ws: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    config, models = _config(tmp_path, [_fix_turn(ws), UNDO, [{"text": "ok"}]])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        session = await _session(client, ws)
        await client.prompt(session, "Fix add()")
        race(ws)
        before = _listing(ws)
        await client.prompt(session, "/undo")
        (card,) = _undo_cards(client)
        assert card["content"][0]["content"]["text"] == (
            f"Restored 1 file to what it held before.\nRemoved 1 file the turn created.\n"
            f"Left `{ws / 'calc.py'}` as it is: {why}."
        )
        await client.prompt(session, "next")
    # calc.py (and what a link points to) are exactly as the user left them.
    after = _listing(ws)
    for name in ("calc.py", "elsewhere.py"):
        assert after.get(name) == before.get(name)
    assert (ws / "notes.md").read_text() == "# Notes\n"
    assert not (ws / "new.txt").exists()
    told = [m for m in models[0].requests[-1].messages if isinstance(m, ContextMessage)][-1].text
    assert f"left as they are: {ws / 'calc.py'} ({why})" in told
    client.assert_valid()


async def test_undo_goes_through_the_editor_when_the_edits_did(
    ws: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    # The editor has calc.py open with unsaved text: the turn edits its buffer, the undo puts the
    # buffer back with fs/write_text_file; new.txt, created through the editor (which saved it),
    # is removed from the disk (no ACP request deletes a file).
    buffer = "def add(a, b):\n    return a - b  # unsaved\n"
    turn = [
        _call("r1", "read", file_path=str(ws / "calc.py")),
        _call("e1", "edit", file_path=str(ws / "calc.py"), old_string="a - b", new_string="a + b"),
        _call("c1", "write", file_path=str(ws / "new.txt"), content="created\n"),
        {"text": "Fixed."},
    ]
    config, _ = _config(tmp_path, [turn])
    editor = {"fs": {"readTextFile": True, "writeTextFile": True}}
    async with AcpClient.in_memory(config, schema=acp_schema, files={str(ws / "calc.py"): buffer}) as client:
        await client.initialize(editor)
        session = await client.new_session(str(ws))
        await client.prompt(session, "Fix add()")
        assert client.files[str(ws / "calc.py")] == buffer.replace("a - b", "a + b")
        await client.prompt(session, "/undo")
        assert client.files[str(ws / "calc.py")] == buffer
        writes = [r["params"] for r in client.agent_requests if r["method"] == "fs/write_text_file"]
    assert writes[-1] == {"sessionId": session, "path": str(ws / "calc.py"), "content": buffer}
    assert (ws / "calc.py").read_bytes() == ORIGINAL  # the disk was never the agent's to change
    assert not (ws / "new.txt").exists()
    client.assert_valid()


async def test_the_undo_survives_a_reload(ws: Path, tmp_path: Path, acp_schema: AcpSchema) -> None:
    config, _ = _config(tmp_path, [_fix_turn(ws), _fix_turn(ws, 2)])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        session = await _session(client, ws)
        await client.prompt(session, "Fix add()")
        await client.prompt(session, "/undo")
        live = _undo_cards(client)
    # A new agent over the same state: the load replays the undo's card as it was shown.
    config, _ = _config(tmp_path, [_fix_turn(ws, 2)])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        await client.request("session/load", {"sessionId": session, "cwd": str(ws), "mcpServers": []})
        assert _undo_cards(client) == live
        # The turn it took back stays taken back: the next /undo has nothing left.
        await client.prompt(session, "/undo")
        said = client.updates(session, {"agent_message_chunk"})[-1]["content"]["text"]
        assert said == "Every turn's file changes were taken back already."
    client.assert_valid()


async def test_a_file_written_twice_in_a_turn_goes_back_to_before_the_first_write(
    ws: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    turn = [
        _call("r1", "read", file_path=str(ws / "calc.py")),
        _call("e1", "edit", file_path=str(ws / "calc.py"), old_string="a - b", new_string="a + b"),
        _call("e2", "edit", file_path=str(ws / "calc.py"), old_string="a + b", new_string="b + a"),
        _call("w1", "write", file_path=str(ws / "calc.py"), content="print('rewritten')\n"),
        {"text": "Done."},
    ]
    config, _ = _config(tmp_path, [turn])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        session = await _session(client, ws)
        await client.prompt(session, "Rework calc")
        await client.prompt(session, "/undo")
    assert (ws / "calc.py").read_bytes() == ORIGINAL
    kept = list((tmp_path / "state" / "sessions" / f"{session}.files").iterdir())
    assert len(kept) == 1, "the file is kept once per turn"
    log = [
        json.loads(line)
        for line in (tmp_path / "state" / "sessions" / f"{session}.jsonl").read_text().splitlines()
    ]
    assert [e.get("path") for e in log if e["type"] == "file"] == [str(ws / "calc.py")] * 3
    assert [e["restored"] for e in log if e["type"] == "undo"] == [[str(ws / "calc.py")]]
