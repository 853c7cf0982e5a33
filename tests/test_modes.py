"""Permission modes: a policy on declared kinds that wraps the others, set per session."""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from dsh_acp import RpcError
from dsh_acp.permissions._mode_gate import mode_gate
from dsh_acp.permissions._modes import PermissionState
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import (
    Ask,
    CommandSubject,
    Deny,
    PreNext,
    PreToolDecision,
    Services,
    TextBlock,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    define_tool,
)
from helpers import recorded

pytestmark = pytest.mark.anyio


async def _ok(args: dict[str, Any], execution: ToolExecution) -> str:
    return "ok"


def _command(args: Any, execution: ToolExecution) -> CommandSubject:
    return CommandSubject(args["command"], os.path.realpath(execution.cwd or "/"))


def tool(name: str, kind: Any, read_only: bool = False, **params: Any) -> ToolDefinition:
    return define_tool(
        name=name,
        description=name,
        parameters=params,
        execute=_ok,
        kind=kind,
        read_only=read_only,
        approval_subject=_command if "command" in params else None,
    )


TOOLS = [
    tool("reader", "read", read_only=True),
    tool("finder", "search", read_only=True),
    tool("editor", "edit"),
    tool("shell", "execute", command={"type": "string"}),
    tool("mystery", "other"),
]


def registry_with(inner: PreToolDecision | None = None) -> ToolRegistry:
    registry = ToolRegistry()
    registry.on_pre_execute(mode_gate(registry))
    if inner is not None:

        async def policy(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
            return inner

        registry.on_pre_execute(policy)
    for definition in TOOLS:
        registry.register(definition)
    return registry


async def outcome(registry: ToolRegistry, mode: str, name: str) -> str:
    result = await registry.execute(
        ToolExecution(call_id="c", name=name, arguments={}, services=Services(PermissionState(mode=mode)))
    )
    block = result.content[0]
    assert isinstance(block, TextBlock)
    if not result.is_error:
        return "run"
    return "ask" if "needs approval" in block.text else "deny"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("default", {"reader": "run", "finder": "run", "editor": "ask", "shell": "ask", "mystery": "ask"}),
        (
            "accept_edits",
            {"reader": "run", "finder": "run", "editor": "run", "shell": "ask", "mystery": "ask"},
        ),
        ("plan", {"reader": "run", "finder": "run", "editor": "deny", "shell": "deny", "mystery": "deny"}),
        ("bypass", {"reader": "run", "finder": "run", "editor": "run", "shell": "run", "mystery": "run"}),
    ],
)
async def test_modes_key_on_kinds(mode: str, expected: dict[str, str]) -> None:
    registry = registry_with()
    assert {name: await outcome(registry, mode, name) for name in expected} == expected


async def test_plan_mode_tells_the_model_why() -> None:
    registry = registry_with()
    result = await registry.execute(
        ToolExecution(
            call_id="c", name="editor", arguments={}, services=Services(PermissionState(mode="plan"))
        )
    )
    assert "plan mode" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["default", "accept_edits", "plan", "bypass"])
async def test_other_policies_denials_hold_in_every_mode(mode: str) -> None:
    registry = registry_with(Deny("read the file before editing it"))
    assert await outcome(registry, mode, "reader") == "deny"


@pytest.mark.parametrize(
    ("mode", "expected"), [("default", "ask"), ("accept_edits", "ask"), ("plan", "ask"), ("bypass", "run")]
)
async def test_asks_from_other_policies_ask_in_every_mode_but_bypass(mode: str, expected: str) -> None:
    registry = registry_with(Ask("outside the workspace"))
    assert await outcome(registry, mode, "reader") == expected


def step(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in calls]}


async def test_allow_always_remembers_the_command_not_every_command(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    turns = [
        [
            step(("a", "shell", {"command": "npm test"})),
            step(("b", "shell", {"command": "npm test --watch"})),
            step(("c", "shell", {"command": "npm publish"})),
            {"text": "done"},
        ],
        [step(("d", "shell", {"command": "npm test"})), {"text": "again"}],
    ]
    config, _ = recorded(turns, TOOLS, default_mode="default", state_dir=tmp_path / "state")
    async with AcpClient.in_memory(
        config, schema=acp_schema, permission_answers=deque(["allow_always", "reject_once"])
    ) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "go")
        asked = [r["params"]["toolCall"]["toolCallId"] for r in client.agent_requests]
        assert asked == ["a", "c"]
    # The answer persists in the session log: after a restart, `npm test` still runs unasked.
    config2, _ = recorded(turns, TOOLS, default_mode="default", state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config2, schema=acp_schema) as client2:
        await client2.initialize()
        await client2.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        await client2.prompt(sid, "again")
        assert client2.agent_requests == []
        statuses = [u.get("status") for u in client2.updates(sid) if u.get("toolCallId") == "d"]
        assert statuses == ["in_progress", "completed"]
    client.assert_valid()
    client2.assert_valid()


async def test_set_mode(acp_schema: AcpSchema, tmp_path: Path) -> None:
    turns = [[step(("e", "editor", {})), {"text": "done"}]]
    config, _ = recorded(turns, TOOLS, default_mode="default", state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.request("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"}) == {}
        with pytest.raises(RpcError, match="unknown mode"):
            await client.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
        await client.prompt(sid, "edit")
        assert client.agent_requests == []  # accept_edits: the edit ran unasked
    config2, _ = recorded(turns, TOOLS, state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config2, schema=acp_schema) as client2:
        await client2.initialize()
        answer = await client2.request("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        assert answer["modes"]["currentModeId"] == "accept_edits"
    client.assert_valid()
