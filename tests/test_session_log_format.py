"""A session log written by an earlier dsh-acp still loads, replays and continues as it did.

``fixtures/session_logs/format_1.jsonl`` was written by the agent of the first log format
(``python tests/test_session_log_format.py --write-format-1`` made it, before the log became typed
events): several turns with tool calls, a remembered permission and its removal, mode, model,
effort and reasoning changes, a compaction, a title, usage, context a tool added, slash commands
and a cancelled call. Beside it are what a ``session/load`` of it replayed to two kinds of client
and the conversation the model was sent on the next prompt. Whatever the log format becomes,
loading this file must give exactly those.
"""

from __future__ import annotations

import shutil
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import anyio
import orjson
import pytest

from dsh_acp import (
    AssistantMessage,
    ContextMessage,
    Message,
    ModelChoice,
    ScriptedModel,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from dsh_acp.session._event_lines import event_json, parse_event
from dsh_acp.session._events import (
    AssistantReply,
    Compacted,
    ConfigChanged,
    CostReported,
    FileChanged,
    FilesRestored,
    ModeChanged,
    PermissionAnswered,
    PermissionRemoved,
    SessionEvent,
    TaskEvent,
    TitleSet,
    ToolCalled,
    ToolCancelled,
    ToolContext,
    ToolFinished,
    TurnStopped,
    UsageReported,
    UserPrompt,
)
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import (
    Accept,
    GenericCallView,
    TerminalCallView,
    TerminalResultView,
    TextBlock,
    ToolExecution,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text,
)
from helpers import RecordingModel, scripted

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent.parent / "fixtures" / "session_logs"
SESSION_ID = "sess-1"
CWD = "/fixture/project"
"""The session's folder as logged (the tools never touch it)."""
PLAIN: dict[str, Any] = {}
RICH: dict[str, Any] = {
    "_meta": {"terminal_output": True},
    "session": {"compaction": {}, "notices": {}, "configOptions": {"boolean": {}}},
}


async def _shell(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    return ToolOutput(content=[text(f"ran {args['command']}\n")], meta={"exit_code": 2})


shell = define_tool(
    name="shell",
    description="Run.",
    parameters={"command": {"type": "string", "required": True}},
    execute=_shell,
    present_call=lambda a: TerminalCallView(title=a["command"]),
    present_result=lambda a, r: TerminalResultView(
        output=f"ran {a['command']}\n", exit_code=(r.meta or {}).get("exit_code")
    ),
    kind="execute",
)


async def _note(args: dict[str, Any], execution: ToolExecution) -> str:
    return f"noted {args['path']}"


note = define_tool(
    name="note",
    description="Note.",
    parameters={"path": {"type": "string", "required": True}},
    execute=_note,
    present_call=lambda a: GenericCallView(title=f"Note {a['path']}", kind="read"),
    kind="read",
    read_only=True,
)


async def _wait(args: dict[str, Any], execution: ToolExecution) -> str:
    await anyio.sleep_forever()
    return "never"


wait = define_tool(
    name="wait",
    description="Wait.",
    parameters={},
    execute=_wait,
    present_call=lambda a: GenericCallView(title="Wait", kind="other"),
    read_only=True,
)

TOOLS = [shell, note, wait]


def _usage(used: int) -> dict[str, int]:
    return {"input": used, "output": 10, "context_window": 8000}


TURNS: list[list[dict[str, Any]]] = [
    [  # 0: a read, then a command that asks (allowed always), then the answer
        {
            "thought": "Notes first.",
            "text": "Looking at the notes.",
            "tool_calls": [{"id": "n1", "name": "note", "arguments": {"path": "a.md"}}],
            "usage": _usage(900),
        },
        {
            "tool_calls": [{"id": "s1", "name": "shell", "arguments": {"command": "make"}}],
            "usage": _usage(1100),
        },
        {"text": "Built, with warnings.", "usage": _usage(1200)},
    ],
    [{"text": "(the /tools command)"}],  # 1
    [{"text": "(the /mode command)"}],  # 2
    [  # 3: two calls in one step (the command is allowed by the rule now), context from a tool
        {
            "tool_calls": [
                {"id": "s2", "name": "shell", "arguments": {"command": "make test"}},
                {"id": "n2", "name": "note", "arguments": {"path": "b.md"}},
            ],
            "usage": _usage(1500),
        },
        {"thought": "Tests fail.", "text": "The tests fail in b.", "usage": _usage(1700)},
    ],
    [{"text": "We built the project; the tests fail in b.", "usage": _usage(300)}],  # 4: /compact
    [  # 5: cancelled while its call runs
        {
            "text": "Waiting.",
            "tool_calls": [{"id": "w1", "name": "wait", "arguments": {}}],
            "usage": _usage(400),
        },
    ],
    [{"text": "(the /permissions command)"}],  # 6
    [
        {"thought": "Hidden thought.", "text": "AGENTS.md is not needed here.", "usage": _usage(500)}
    ],  # 7: /init
    [{"text": "Bye.", "usage": _usage(600)}],  # 8: the first prompt after a load
]


def config_for(state: Path) -> tuple[Any, list[RecordingModel]]:
    models: list[RecordingModel] = []

    def build() -> RecordingModel:
        model = RecordingModel(ScriptedModel(TURNS, source="test-script"))
        models.append(model)
        return model

    def context(registry: ToolRegistry) -> None:
        async def listener(execution: ToolExecution, result: Any, proceed: Callable[[], Any]) -> Any:
            decision = await proceed()
            if execution.name == "note" and execution.arguments.get("path") == "b.md":
                return Accept(additional_context="b.md is generated.")
            return decision

        registry.on_post_execute(listener)

    config = scripted(
        TURNS,
        TOOLS,
        state_dir=state,
        default_mode="default",
        clock=lambda: "2026-01-01T00:00:00Z",
        configure_registry=context,
    )
    config.models = [
        ModelChoice("script", "Test script", build, accepts_images=True, efforts=("low", "high")),
        ModelChoice("script-b", "Test script B", build, accepts_images=True, efforts=("low", "high")),
    ]
    return config, models


async def write_format_1(state: Path) -> None:
    """Drive a session through the turns above; its log is what ``state`` keeps."""
    config, _ = config_for(state)
    answers = deque(["allow_always"])
    async with AcpClient.in_memory(config, permission_answers=answers) as client:
        await client.initialize(RICH)
        sid = await client.new_session(CWD)
        assert sid == SESSION_ID
        assert await client.prompt(sid, "Build the notes") == {"stopReason": "end_turn"}
        await client.prompt(sid, "/tools")
        await client.request("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        await client.prompt(sid, "/mode default")
        for config_id, value in (
            ("model", "script-b"),
            ("reasoning_effort", "high"),
            ("show_reasoning", False),
        ):
            await client.request(
                "session/set_config_option", {"sessionId": sid, "configId": config_id, "value": value}
            )
        assert await client.prompt(sid, "Run the tests") == {"stopReason": "end_turn"}
        await client.prompt(sid, "/compact")
        async with anyio.create_task_group() as group:
            answer: list[Any] = []

            async def waiting() -> None:
                answer.append(await client.prompt(sid, "Wait for it"))

            group.start_soon(waiting)
            await client.wait_until(
                lambda: any(
                    u.get("toolCallId") == "w1" and u.get("status") == "in_progress"
                    for u in client.updates(sid)
                )
            )
            await client.cancel(sid)
        assert answer == [{"stopReason": "cancelled"}]
        await client.prompt(sid, "/permissions remove 1")
        await client.prompt(sid, "/init")


def _message_json(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"user": [block.model_dump(mode="json", exclude_none=True) for block in message.content]}
    if isinstance(message, ContextMessage):
        return {"context": message.text}
    if isinstance(message, AssistantMessage):
        calls = [[c.id, c.name, c.arguments] for c in message.tool_calls]
        return {"assistant": message.text, "reasoning": message.reasoning, "tool_calls": calls}
    assert isinstance(message, ToolResultMessage)
    blocks = [block.model_dump(mode="json", exclude_none=True) for block in message.content]
    return {"result": message.call_id, "name": message.name, "content": blocks, "is_error": message.is_error}


async def loaded_transcript(
    state: Path, capabilities: dict[str, Any], schema: AcpSchema | None
) -> dict[str, Any]:
    """What a client sees loading the session in ``state``, and what the model is sent next."""
    config, models = config_for(state)
    async with AcpClient.in_memory(config, schema=schema) as client:
        await client.initialize(capabilities)
        answer = await client.request("session/load", {"sessionId": SESSION_ID, "cwd": CWD, "mcpServers": []})
        replay = client.updates(SESSION_ID)
        listed = await client.request("session/list", {})
        assert await client.prompt(SESSION_ID, "Thanks") == {"stopReason": "end_turn"}
        request = models[-1].requests[-1]
    if schema is not None:
        client.assert_valid()
    return {
        "answer": answer,
        "replay": replay,
        "list": listed,
        "model": request.metadata,
        "effort": request.reasoning_effort,
        "conversation": [_message_json(m) for m in request.messages],
    }


def _golden_path(name: str) -> Path:
    return FIXTURES / f"format_1.{name}.json"


@pytest.mark.parametrize("client", ["plain", "rich"])
async def test_a_format_1_log_loads_replays_and_continues_as_it_did(
    client: str, acp_schema: AcpSchema, tmp_path: Path
) -> None:
    (tmp_path / "sessions").mkdir()
    shutil.copy(FIXTURES / "format_1.jsonl", tmp_path / "sessions" / f"{SESSION_ID}.jsonl")
    got = await loaded_transcript(tmp_path, PLAIN if client == "plain" else RICH, acp_schema)
    expected = orjson.loads(_golden_path(client).read_bytes())
    assert got == expected


async def _write_fixtures() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        state = Path(folder)
        await write_format_1(state)
        FIXTURES.mkdir(parents=True, exist_ok=True)
        shutil.copy(state / "sessions" / f"{SESSION_ID}.jsonl", FIXTURES / "format_1.jsonl")
    for name, capabilities in (("plain", PLAIN), ("rich", RICH)):
        with tempfile.TemporaryDirectory() as folder:
            state = Path(folder)
            (state / "sessions").mkdir()
            shutil.copy(FIXTURES / "format_1.jsonl", state / "sessions" / f"{SESSION_ID}.jsonl")
            got = await loaded_transcript(state, capabilities, None)
            _golden_path(name).write_bytes(orjson.dumps(got, option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__" and sys.argv[1:] == ["--write-format-1"]:
    anyio.run(_write_fixtures)


def test_a_cost_event_reads_back_and_a_bad_one_is_skipped(tmp_path: Path) -> None:
    from dsh_acp.session._event_lines import event_json
    from dsh_acp.session._events import CostReported, UserPrompt
    from dsh_acp.session._state import SessionState
    from dsh_acp.session._store import SessionStore

    store = SessionStore(tmp_path, clock=lambda: "T")
    log = store.create("s1", "/w", [])
    log.append(UserPrompt(()))
    log.append(CostReported("0.0123"))
    log.close()
    assert event_json(CostReported("0.0123")) == {"type": "cost", "cost": "0.0123"}
    with open(log.path, "ab") as handle:
        handle.write(b'{"type": "cost", "cost": "a lot"}\n')
    loaded = store.load("s1")
    assert loaded.events[1:] == [CostReported("0.0123")]
    assert loaded.skipped == ["line 4 (not a complete event)"]
    state = SessionState()
    state.apply_all(loaded.events)
    assert str(state.cost) == "0.0123"
    store.close()


def test_every_event_type_round_trips_through_its_log_line() -> None:
    """Each event of the union, written and read back, is the event it was; a new event type
    needs an example here (and ``mypy`` names the other places it must reach)."""
    text = (TextBlock(text="hi"),)
    examples: list[Any] = [
        UserPrompt(text, "m1", "/init", text),
        UserPrompt(text),
        AssistantReply("t", "r", "t1", "r1", (ToolCallRequest("c1", "read", '{"a": 1}'),)),
        AssistantReply("aside", aside=True),
        ToolContext("context"),
        ToolCalled("c1", "read", {"a": 1}, "read", {"card": "generic", "title": "x"}, "outside", "/w"),
        ToolFinished("c1", text, True, {"code": 1}, {"m": 1}, {"card": "generic"}),
        ToolCancelled("c1"),
        PermissionAnswered("allow", {"tool": "bash"}),
        PermissionRemoved("reject", {"tool": "bash"}),
        ModeChanged("plan"),
        ConfigChanged("m", False, "high"),
        Compacted("summary", "t2", "k1", 3),
        UsageReported(10, 100, "0.5"),
        CostReported("0.25"),
        TitleSet("A title", "2026-01-01T00:00:00Z"),
        TurnStopped("end_turn"),
        FileChanged("/w/a.py", "ab12", "cd34"),
        FileChanged("/w/big.bin", "", None, "it is larger than 16 MiB"),
        FilesRestored(
            2,
            "undo-1",
            ("/w/a.py",),
            ("/w/new.py",),
            (("/w/b.py", "it changed since"),),
            {"card": "generic"},
            "Restored",
        ),
        TaskEvent("t1", ToolCalled("c2", "ls", {}, "read", None, None, None)),
    ]
    assert {type(event) for event in examples} == set(get_args(SessionEvent))
    for event in examples:
        line = orjson.loads(orjson.dumps(event_json(event)))
        assert parse_event(line) == event, line


def test_a_subagents_events_read_back_in_their_task_and_are_not_the_sessions(tmp_path: Path) -> None:
    from dsh_acp.session._state import SessionState
    from dsh_acp.session._store import SessionStore

    task = ToolCallRequest("t1", "task", '{"description": "Look", "prompt": "Look"}')
    inner = ToolCallRequest("c1", "ls", "{}")
    events = [
        UserPrompt((TextBlock(text="Go"),)),
        AssistantReply(tool_calls=(task,)),
        ToolCalled("t1", "task", {"description": "Look", "prompt": "Look"}, "think"),
        TaskEvent("t1", UserPrompt((TextBlock(text="Look"),))),
        TaskEvent("t1", AssistantReply(tool_calls=(inner,))),
        TaskEvent("t1", ToolCalled("c1", "ls", {}, "read")),
        TaskEvent("t1", ToolFinished("c1", (TextBlock(text="a.txt"),))),
        TaskEvent("t1", AssistantReply("There is a.txt.")),
        ToolFinished("t1", (TextBlock(text="There is a.txt."),)),
    ]
    store = SessionStore(tmp_path, clock=lambda: "T")
    log = store.create("s1", "/w", [])
    for event in events:
        log.append(event)
    log.close()
    with open(log.path, "ab") as handle:  # a task inside a task, an event of a later kind inside one
        handle.write(b'{"type": "task", "task_id": "t1", "event": {"type": "task", "task_id": "t2"}}\n')
        handle.write(b'{"type": "task", "task_id": "t1", "event": {"type": "from_the_future"}}\n')
    loaded = store.load("s1")
    assert loaded.events == events
    assert loaded.skipped == ["line 11 (not a complete event)"]
    state = SessionState()
    state.apply_all(loaded.events)
    assert [type(m).__name__ for m in state.history] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    store.close()
