"""The ``task`` tool: a subagent with a fresh conversation, the session's tools but ``task``, the
session's gate, its own limit, its cost counted into the session's, its steps shown in (or
under) the task's card, and a cancel that stops it and everything it started.

The goldens (``fixtures/wire/task_*``) pin what the client sees; these tests pin what the model
is sent, the limits, the cost, parallel tasks and dead processes, through the real process where
a process is what matters."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from dsh_acp import (
    AgentConfig,
    ContextMessage,
    Model,
    ModelChoice,
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    ToolResultMessage,
    UserMessage,
    build_config,
)
from dsh_acp.loop._subagent import TASK_RULES
from dsh_acp.models._cost import request_cost
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import TextBlock
from helpers import RecordingModel

pytestmark = pytest.mark.anyio


def _task(call_id: str, prompt: str, description: str = "Look around") -> dict[str, Any]:
    arguments = {"description": description, "prompt": prompt}
    return {"tool_calls": [{"id": call_id, "name": "task", "arguments": arguments}]}


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def _config(
    turns: list[Any], tasks: dict[str, Any], *args: str, model: Any = None
) -> tuple[AgentConfig, list[RecordingModel]]:
    """The CLI's agent (reference tools and ``task``) with a recorded scripted model."""
    config = build_config(["--deterministic", "--mode", "bypass", *args])
    models: list[RecordingModel] = []

    def build() -> RecordingModel:
        models.append(_Recording(model or ScriptedModel(turns, tasks=tasks, source="test")))
        return models[-1]

    config.models = [ModelChoice("script", "Test script", build)]
    config.state_dir = None
    return config, models


class _Recording(RecordingModel):
    """A recorded model that passes on what the loop reads of the model it wraps."""

    @property
    def price_ref(self) -> tuple[str, str] | None:
        return self.inner.price_ref  # type: ignore[no-any-return]

    @property
    def context_window(self) -> int | None:
        return self.inner.context_window  # type: ignore[no-any-return]


def _requests_of(model: RecordingModel, task: str | None) -> list[ModelRequest]:
    return [r for r in model.requests if r.metadata.get("task") == task]


async def test_a_subagent_starts_fresh_with_the_sessions_tools_but_task_and_its_answer_is_the_result(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n")
    turns = [[_task("t1", "What is in notes.txt?"), {"text": "It says alpha."}]]
    tasks = {"t1": [_call("r1", "read", file_path="notes.txt"), {"text": "notes.txt says alpha."}]}
    config, models = _config(turns, tasks)
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "Ask a subagent") == {"stopReason": "end_turn"}
    (model,) = models
    child = _requests_of(model, "t1")
    assert len(child) == 2  # the subagent's own requests: one per step
    first = child[0]
    assert first.messages == [UserMessage((TextBlock(text="What is in notes.txt?"),))]
    names = [tool.name for tool in first.tools]
    assert "task" not in names
    assert "read" in names
    assert first.system.endswith(TASK_RULES)
    parent = _requests_of(model, None)
    assert "task" in [tool.name for tool in parent[0].tools]
    assert TASK_RULES not in parent[0].system
    # The parent's next request holds the subagent's answer as the task's result, and nothing
    # of the subagent's own conversation.
    (result,) = [m for m in parent[1].messages if isinstance(m, ToolResultMessage)]
    assert result.content == (TextBlock(text="notes.txt says alpha."),)
    assert not result.is_error
    assert len(parent[1].messages) == 3


async def test_no_task_tool_when_a_subagent_may_make_no_request(tmp_path: Path) -> None:
    # Offered, it could only fail; not offered, every request is smaller by its schema.
    config, models = _config([[{"text": "Done."}]], {}, "--max-task-requests", "0")
    async with AcpClient.in_memory(config) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "Look") == {"stopReason": "end_turn"}
    names = [tool.name for tool in models[0].requests[0].tools]
    assert "task" not in names
    assert "read" in names


async def test_a_subagent_at_its_limit_fails_the_task_and_the_turn_goes_on(tmp_path: Path) -> None:
    turns = [[_task("t1", "Keep looking"), {"text": "The subagent gave up."}]]
    looking = [_call(f"l{n}", "ls") for n in range(3)]
    config, models = _config(turns, {"t1": looking}, "--max-task-requests", "2")
    async with AcpClient.in_memory(config) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "Look") == {"stopReason": "end_turn"}
        (closed,) = [
            u for u in client.updates(sid, {"tool_call_update"}) if u["toolCallId"] == "t1" and "status" in u
        ]
    assert len(_requests_of(models[0], "t1")) == 2
    assert closed["status"] == "failed"
    text = closed["content"][-1]["content"]["text"]
    assert text == "Error: the subagent reached its limit of 2 model requests before it answered."


async def test_a_subagent_in_plan_mode_only_reads(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n")
    turns = [[_task("t1", "Change the notes"), {"text": "It could not."}]]
    tasks = {
        "t1": [
            _call("r1", "read", file_path="notes.txt"),
            _call("w1", "write", file_path="notes.txt", content="changed\n"),
            {"text": "Plan mode: I could only read."},
        ]
    }
    config, models = _config(turns, tasks, "--mode", "plan")
    async with AcpClient.in_memory(config) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "Change") == {"stopReason": "end_turn"}
    assert (tmp_path / "notes.txt").read_text() == "alpha\n"
    denied = _requests_of(models[0], "t1")[2].messages[-1]
    assert isinstance(denied, ToolResultMessage)
    assert denied.is_error
    assert "plan mode" in denied.content[0].text  # type: ignore[union-attr]


async def test_a_subagent_cannot_start_a_subagent(tmp_path: Path) -> None:
    turns = [[_task("t1", "Delegate"), {"text": "Done."}]]
    tasks = {"t1": [_task("t2", "Deeper"), {"text": "I could not delegate."}]}
    config, models = _config(turns, tasks)
    async with AcpClient.in_memory(config) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "Go") == {"stopReason": "end_turn"}
    refused = _requests_of(models[0], "t1")[1].messages[-1]
    assert isinstance(refused, ToolResultMessage)
    assert refused.content == (TextBlock(text='Error: unknown tool "task"'),)


class _Priced(Model):
    """A scripted model with a known price and window: each request reports its usage."""

    price: tuple[str, str] | None = ("gpt-4o", "openai")
    window = 128_000

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return "priced"

    @property
    def accepts_images(self) -> bool:
        return False

    @property
    def price_ref(self) -> tuple[str, str] | None:
        return self.price

    @property
    def context_window(self) -> int | None:
        return self.window

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self.inner.stream(request)


async def test_a_subagents_cost_counts_into_the_sessions_and_its_context_is_not_the_meter(
    tmp_path: Path,
) -> None:
    used = {"input": 1000, "output": 100, "context_window": 128_000}
    child = {"input": 3000, "output": 300, "context_window": 128_000}
    turns = [[{**_task("t1", "Look"), "usage": used}, {"text": "Done.", "usage": used}]]
    tasks = {"t1": [{**_call("l1", "ls"), "usage": child}, {"text": "Nothing there.", "usage": child}]}
    model = _Priced(ScriptedModel(turns, tasks=tasks, source="test"))
    config, _ = _config(turns, tasks, model=model)
    async with AcpClient.in_memory(config) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "Go")
        meters = client.updates(sid, {"usage_update"})
    mine, its = request_cost("gpt-4o", "openai", 1000, 100), request_cost("gpt-4o", "openai", 3000, 300)
    assert mine is not None
    assert its is not None
    costs = [m["cost"]["amount"] for m in meters]
    expected = [mine, mine + its, mine + 2 * its, 2 * mine + 2 * its]  # the subagent's requests too
    assert costs == [pytest.approx(float(cost)) for cost in expected]
    assert {m["used"] for m in meters} == {1100}  # the meter is the session's context alone


async def test_parallel_tasks_run_at_once_and_a_nesting_client_sees_both_subagents_cards(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    # Each subagent's command waits for the other's: only tasks that run at once both finish.
    wait_for = "touch {mine}; for i in $(seq 200); do [ -e {other} ] && exit 0; sleep 0.05; done; exit 1"
    turns = [
        [
            {
                "tool_calls": [
                    _task("ta", "First half", "First half")["tool_calls"][0],
                    _task("tb", "Second half", "Second half")["tool_calls"][0],
                ]
            },
            {"text": "Both halves done."},
        ]
    ]
    tasks = {
        "ta": [
            _call("a1", "bash", command=wait_for.format(mine="a", other="b"), description="A"),
            {"text": "A"},
        ],
        "tb": [
            _call("b1", "bash", command=wait_for.format(mine="b", other="a"), description="B"),
            {"text": "B"},
        ],
    }
    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps({"turns": turns, "tasks": tasks}))
    work = tmp_path / "work"
    work.mkdir()
    args = [
        "--model",
        f"script:{script}",
        "--deterministic",
        "--mode",
        "bypass",
        "--state-dir",
        str(tmp_path / "s"),
    ]
    async with AcpClient.subprocess(args, schema=acp_schema) as client:
        await client.initialize({"_meta": {"parentToolCallId": True}})
        sid = await client.new_session(str(work))
        with anyio.fail_after(30):
            assert await client.prompt(sid, "Both halves") == {"stopReason": "end_turn"}
        cards = client.updates(sid, {"tool_call", "tool_call_update"})
    final = {u["toolCallId"]: u["status"] for u in cards if u.get("status") in ("completed", "failed")}
    assert final == {"a1": "completed", "b1": "completed", "ta": "completed", "tb": "completed"}
    parents = {u["toolCallId"]: u.get("_meta", {}).get("parentToolCallId") for u in cards}
    assert parents == {"ta": None, "tb": None, "a1": "ta", "b1": "tb"}


def _running(marker: bytes) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except (OSError, ValueError):
            continue
    return found


async def _within(seconds: float, condition: Callable[[], bool]) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (looked at every 20 ms)."""
    for _ in range(int(seconds / 0.02)):
        if condition():
            return True
        await anyio.sleep(0.02)
    return condition()


@pytest.mark.slow
async def test_a_cancel_stops_the_subagent_and_its_processes(tmp_path: Path, acp_schema: AcpSchema) -> None:
    stamp = b"sleep\x0047.3125"  # the two sleeps' command lines, not the shell's
    turns = [[_task("t1", "Wait")]]
    command = "sleep 47.3125 & sleep 47.3125; wait"
    tasks = {"t1": [_call("s1", "bash", command=command, description="Wait")]}
    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps({"turns": turns, "tasks": tasks}))
    args = [
        "--model",
        f"script:{script}",
        "--deterministic",
        "--mode",
        "bypass",
        "--state-dir",
        str(tmp_path / "s"),
    ]
    async with AcpClient.subprocess(args, schema=acp_schema, permission_answers=deque()) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        async with anyio.create_task_group() as group:
            answer: list[Any] = []

            async def prompt() -> None:
                answer.append(await client.prompt(sid, "Wait"))

            group.start_soon(prompt)
            assert await _within(15, lambda: len(_running(stamp)) == 2)
            await client.cancel(sid)
        assert answer == [{"stopReason": "cancelled"}]
        assert await _within(5, lambda: not _running(stamp))
        closed = [u for u in client.updates(sid, {"tool_call_update"}) if u.get("status")]
    assert [u["status"] for u in closed] == ["failed"]  # the task's card, with its line
    assert closed[0]["content"][0]["content"]["text"] == f"- ✗ {command}"


class _Windowed(_Priced):
    """A scripted model whose window is small: a subagent that reads much must compact."""

    price = None
    window = 4000


async def test_a_subagent_compacts_its_own_conversation_and_the_session_shows_none_of_it(
    tmp_path: Path,
) -> None:
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("".join(f"{name} line {n}\n" for n in range(190)))
    turns = [[_task("t1", "Read both"), {"text": "Read."}]]
    tasks = {
        "t1": [
            _call("r1", "read", file_path="a.txt"),
            _call("r2", "read", file_path="b.txt"),
            {"text": "a.txt holds lines 0-189."},  # the summary of what came before
            {"text": "Both hold 190 lines."},
        ]
    }
    model = _Windowed(ScriptedModel(turns, tasks=tasks, source="test"))
    config, models = _config(turns, tasks, model=model)
    async with AcpClient.in_memory(config) as client:
        await client.initialize({"session": {"compaction": {}, "notices": {}}})
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "Read them") == {"stopReason": "end_turn"}
        kinds = {u["sessionUpdate"] for u in client.updates(sid)}
    child = _requests_of(models[0], "t1")
    assert len(child) == 4
    last = child[3].messages
    assert isinstance(last[0], ContextMessage)
    assert "a.txt holds lines 0-189." in last[0].text
    assert "a.txt line 7" not in str(last)  # what was summarised is gone from its context
    assert "b.txt line 7" in str(last)
    assert "compaction_update" not in kinds  # the session's conversation was not compacted
    assert "notice" not in kinds
    parent = _requests_of(models[0], None)
    assert not any(isinstance(m, ContextMessage) for m in parent[1].messages)


async def test_undo_takes_back_what_a_subagent_wrote_in_its_turn(tmp_path: Path) -> None:
    turns = [[_task("t1", "Rewrite the notes"), {"text": "Rewritten."}], []]
    tasks = {
        "t1": [
            _call("r1", "read", file_path="notes.txt"),
            _call("w1", "write", file_path="notes.txt", content="after\n"),
            _call("w2", "write", file_path="new.txt", content="made by the subagent\n"),
            {"text": "Rewrote notes.txt and made new.txt."},
        ]
    }
    config, _ = _config(turns, tasks)
    config.state_dir = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("before\n")
    async with AcpClient.in_memory(config) as client:
        await client.initialize()
        sid = await client.new_session(str(work))
        assert await client.prompt(sid, "Rewrite") == {"stopReason": "end_turn"}
        assert (work / "notes.txt").read_text() == "after\n"
        assert await client.prompt(sid, "/undo") == {"stopReason": "end_turn"}
    assert (work / "notes.txt").read_text() == "before\n"
    assert not (work / "new.txt").exists()
