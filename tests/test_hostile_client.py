"""A hostile or buggy client answering the agent's own requests, through the real ``dsh-acp``
process: whatever it answers (or never answers), no turn waits past its bounds, every card
reaches a final status, and the model is told the truth."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_acp.testing import AcpClient, AcpSchema

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TOAD = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}


def _script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"turns": [steps]}))
    return f"script:{path}"


def _never(*methods: str) -> Callable[[str, Any], Awaitable[Any] | None]:
    """A client that never answers these requests (it answers the rest as the kit does)."""

    def hook(method: str, params: Any) -> Awaitable[Any] | None:
        return anyio.sleep_forever() if method in methods else None

    return hook


def _log_text(state: Path) -> str:
    return "".join(p.read_text() for p in (state / "sessions").glob("*.jsonl"))


@pytest.mark.parametrize(
    "unanswered",
    [("terminal/wait_for_exit", "terminal/kill"), ("terminal/output",)],
    ids=["wait-and-kill", "output"],
)
async def test_a_client_terminal_cannot_hold_a_turn_past_its_timeout(
    acp_schema: AcpSchema, tmp_path: Path, unanswered: tuple[str, ...]
) -> None:
    command = "sleep 30" if "terminal/kill" in unanswered else "sleep 0.1"
    call = {
        "id": "t",
        "name": "bash",
        "arguments": {"command": command, "description": "d", "timeout_ms": 1500},
    }
    model = _script(tmp_path, [{"tool_calls": [call]}, {"text": "done"}])
    state = tmp_path / "state"
    args = ["--model", model, "--mode", "bypass", "--state-dir", str(state)]
    async with AcpClient.subprocess(args, schema=acp_schema, on_agent_request=_never(*unanswered)) as client:
        await client.initialize(TOAD)
        sid = await client.new_session(str(tmp_path))
        with anyio.fail_after(15):  # the timeout, then at most one settling bound on the client
            assert await client.prompt(sid, "go") == {"stopReason": "end_turn"}
    last = [u for u in client.updates(sid) if u.get("toolCallId") == "t"][-1]
    assert last["status"] in ("completed", "failed")
    if "terminal/kill" in unanswered:
        assert last["status"] == "failed"
        assert "timed out after 1.5 s" in json.dumps(last)
        assert "timed out after 1.5 s" in _log_text(state)  # what the model was told
    client.assert_valid()
