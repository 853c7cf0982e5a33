"""Replay draws each card with its tool's presenters, and with the logged view only when the tool
is gone: the log of a finished session is edited so the two sources disagree, and each load shows
which one it used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import GenericCallView, GenericResultView, ToolExecution, ToolOutput, define_tool, text
from helpers import recorded

pytestmark = pytest.mark.anyio


async def _count(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    return ToolOutput(content=[text("3 words")], meta={"words": 3})


count = define_tool(
    name="count",
    description="Count.",
    parameters={"path": {"type": "string", "required": True}},
    execute=_count,
    present_call=lambda a: GenericCallView(title=f"Count {a['path']}", kind="read"),
    present_result=lambda a, r: GenericResultView(title=f"{a['path']}: {r.meta['words']} words"),
    kind="read",
    read_only=True,
)
TURNS = [[{"tool_calls": [{"id": "c1", "name": "count", "arguments": {"path": "a.md"}}]}, {"text": "Three."}]]


async def _cards(state: Path, cwd: str, tools: list[Any]) -> list[dict[str, Any]]:
    config, _ = recorded(TURNS, tools, state_dir=state)
    async with AcpClient.in_memory(config) as client:
        await client.initialize()
        await client.request("session/load", {"sessionId": "sess-1", "cwd": cwd, "mcpServers": []})
        return client.updates("sess-1", ("tool_call", "tool_call_update"))


async def test_replay_presents_again_and_falls_back_to_the_logged_view(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    config, _ = recorded(TURNS, [count], state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "count")
        live = client.updates(sid, ("tool_call", "tool_call_update"))
    assert [u.get("title") for u in live] == ["Count a.md", "a.md: 3 words"]
    # The log's views say something else than the presenters would.
    log = tmp_path / "state" / "sessions" / f"{sid}.jsonl"
    records = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    for record in records:
        if record.get("type") in ("tool_call", "tool_result"):
            record["view"]["title"] = "from the log"
    log.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))

    registered = await _cards(tmp_path / "state", str(tmp_path), [count])
    assert [u.get("title") for u in registered] == ["Count a.md", "a.md: 3 words"]  # the presenters
    gone = await _cards(tmp_path / "state", str(tmp_path), [])
    assert [u.get("title") for u in gone] == ["from the log", "from the log"]  # the tool is gone


def test_a_task_the_agent_died_in_replays_closed_with_its_subagents_calls() -> None:
    from dsh_acp.session._events import TaskEvent, ToolCalled, ToolFinished
    from dsh_acp.session._replay import replay_updates
    from dsh_acp.wire._render_context import RenderContext
    from dsh_tools import TextBlock

    events = [
        ToolCalled(
            "t1",
            "task",
            {"description": "Look", "prompt": "Look"},
            "think",
            {"card": "generic", "title": "Look"},
        ),
        TaskEvent("t1", ToolCalled("c1", "ls", {}, "read", {"card": "generic", "title": "List ."})),
        TaskEvent("t1", ToolFinished("c1", (TextBlock(text="a.txt"),))),
        TaskEvent(
            "t1", ToolCalled("c2", "ls", {"path": "sub"}, "read", {"card": "generic", "title": "List sub"})
        ),
    ]  # and the agent was killed
    plain = list(replay_updates(events, RenderContext("/w")))
    assert [(u["sessionUpdate"], u["toolCallId"], u.get("status")) for u in plain] == [  # type: ignore[typeddict-item]
        ("tool_call", "t1", "in_progress"),
        ("tool_call_update", "t1", "failed"),
    ]
    assert plain[-1]["content"] == [  # type: ignore[typeddict-item]
        {"type": "content", "content": {"type": "text", "text": "- ✓ List .\n- ✗ List sub"}}
    ]
    nesting = list(replay_updates(events, RenderContext("/w", nested_calls=True)))
    shown = [(u["toolCallId"], u.get("status"), u.get("_meta")) for u in nesting]  # type: ignore[typeddict-item]
    parent = {"parentToolCallId": "t1"}
    assert shown == [
        ("t1", "in_progress", None),
        ("c1", "in_progress", parent),
        ("c1", "completed", parent),
        ("c2", "in_progress", parent),
        ("c2", "failed", parent),  # its calls close before it does
        ("t1", "failed", None),
    ]
