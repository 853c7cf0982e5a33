"""Tool calls on the wire, end to end in memory: each card kind for each kind of client, the
permission flow, failures of every sort, parallel calls and cancellation."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import anyio
import pytest

from dsh_acp import AssistantMessage, ContextMessage, RpcError, ToolResultMessage
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import (
    Accept,
    Ask,
    DiffCallView,
    DiffResultView,
    FileDiff,
    GenericCallView,
    Location,
    PostNext,
    PostToolDecision,
    PreNext,
    PreToolDecision,
    TerminalCallView,
    TerminalOutput,
    TerminalResultView,
    TextBlock,
    ToolError,
    ToolExecution,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    define_tool,
    text,
)
from helpers import recorded, scripted

pytestmark = pytest.mark.anyio

TERMINAL_CLIENT = {"_meta": {"terminal_output": True}}
DELTA_CLIENT = {"_meta": {"terminal_output_delta": True}}
PLAIN_CLIENT: dict[str, Any] = {}

# -- small test tools --------------------------------------------------------------------------


async def _look(args: dict[str, Any], execution: ToolExecution) -> list[TextBlock]:
    return [text(f"looked at {args['path']}")]


look = define_tool(
    name="look",
    description="Look at a file.",
    parameters={"path": {"type": "string", "required": True}},
    execute=_look,
    present_call=lambda a: GenericCallView(
        title=f"Look at {a['path']}", kind="read", locations=(Location(path=a["path"], line=1),)
    ),
    kind="read",
    read_only=True,
)


async def _run(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    if args.get("fail"):
        raise ToolError(args["fail"])
    for chunk in args["chunks"]:
        await execution.report(TerminalOutput(chunk))
        if args.get("hang_after_first"):
            await anyio.sleep_forever()
    output = "".join(args["chunks"])
    code = args.get("code", 0)
    return ToolOutput(
        content=[text(f"{output}\n[exit code {code}]")], meta={"exit_code": code, "output": output}
    )


def _run_result(args: dict[str, Any], result: ToolResult) -> TerminalResultView:
    meta = result.meta or {}
    return TerminalResultView(output=meta.get("output"), exit_code=meta.get("exit_code"))


run = define_tool(
    name="run",
    description="Pretend to run a command.",
    parameters={
        "command": {"type": "string", "required": True},
        "chunks": {"type": "array", "items": {"type": "string"}, "required": True},
        "code": {"type": "integer"},
        "hang_after_first": {"type": "boolean"},
        "fail": {"type": "string"},
    },
    execute=_run,
    present_call=lambda a: TerminalCallView(title=a["command"], description="Runs it"),
    present_result=_run_result,
    kind="execute",
)


async def _patch(args: dict[str, Any], execution: ToolExecution) -> str:
    return "patched"


patch = define_tool(
    name="patch",
    description="Replace text.",
    parameters={
        "path": {"type": "string", "required": True},
        "old": {"type": "string", "required": True},
        "new": {"type": "string", "required": True},
    },
    execute=_patch,
    present_call=lambda a: DiffCallView(
        title=f"Edit {a['path']}", diffs=(FileDiff(path=a["path"], old_text=a["old"], new_text=a["new"]),)
    ),
    present_result=lambda a, r: DiffResultView(
        diffs=(FileDiff(path=a["path"], old_text=f"ctx\n{a['old']}", new_text=f"ctx\n{a['new']}"),),
        locations=(Location(path=a["path"], line=2),),
    ),
    kind="edit",
)


async def _boom(args: dict[str, Any], execution: ToolExecution) -> str:
    raise RuntimeError("the tool exploded")


boom = define_tool(name="boom", description="Fails.", parameters={}, execute=_boom)


def _raising_presenter(args: dict[str, Any]) -> GenericCallView:
    raise ValueError("presenter bug")


bad_view = define_tool(
    name="bad_view",
    description="Its presenter raises.",
    parameters={},
    execute=_look,
    present_call=_raising_presenter,
)

TOOLS = [look, run, patch, boom, bad_view]


def step(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in calls]}


async def one_turn(
    acp_schema: AcpSchema,
    cwd: str,
    steps: list[dict[str, Any]],
    capabilities: dict[str, Any],
    *,
    answers: list[str] = (),  # type: ignore[assignment]
    gate: bool = False,
    **overrides: Any,
) -> tuple[AcpClient, dict[str, Any], Any]:
    config, models = recorded([[*steps, {"text": "done"}]], TOOLS, **overrides)
    if gate:
        config.default_mode = "default"  # edits and commands ask
    async with AcpClient.in_memory(config, schema=acp_schema, permission_answers=deque(answers)) as client:
        await client.initialize(capabilities)
        sid = await client.new_session(cwd)
        result = await client.prompt(sid, "go")
    client.assert_valid()
    return client, result, models[0]


def tool_updates(client: AcpClient) -> list[dict[str, Any]]:
    return [u for u in client.updates() if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


# -- cards ----------------------------------------------------------------------------------


async def test_generic_card_lifecycle(acp_schema: AcpSchema, tmp_path: Any) -> None:
    path = str(tmp_path / "src" / "a.py")
    client, result, model = await one_turn(
        acp_schema, str(tmp_path), [step(("c1", "look", {"path": path}))], PLAIN_CLIENT
    )
    assert result == {"stopReason": "end_turn"}
    call, done = tool_updates(client)
    assert call == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "Look at src/a.py",
        "name": "look",
        "kind": "read",
        "content": [],
        "locations": [{"path": path, "line": 1}],
        "status": "in_progress",
    }
    assert done == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": f"looked at {path}"}}],
    }
    # The model saw the result after the call.
    messages = model.requests[1].messages
    assert isinstance(messages[-1], ToolResultMessage)
    assert messages[-1].content == (text(f"looked at {path}"),)


@pytest.mark.parametrize(
    ("capabilities", "key"), [(TERMINAL_CLIENT, "terminal_output"), (DELTA_CLIENT, "terminal_output_delta")]
)
async def test_terminal_card_streams_output(
    acp_schema: AcpSchema, tmp_path: Any, capabilities: dict[str, Any], key: str
) -> None:
    chunks = ["line 1\n", "line 2\n", "line 3\n"]
    client, _, model = await one_turn(
        acp_schema,
        str(tmp_path),
        [step(("t1", "run", {"command": "make test", "chunks": chunks, "code": 3}))],
        capabilities,
        coalesce_bytes=8,
    )
    updates = tool_updates(client)
    assert updates[0]["_meta"] == {"terminal_info": {"terminal_id": "t1", "cwd": str(tmp_path)}}
    assert updates[0]["content"][-1] == {"type": "terminal", "terminalId": "t1"}
    streamed = [u["_meta"][key]["data"] for u in updates[1:-1]]
    assert "".join(streamed) == "".join(chunks)  # every byte exactly once
    assert len(streamed) >= 2
    assert all("content" not in u for u in updates[1:])
    assert updates[-1] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t1",
        "status": "failed",  # it exits 3: drawn as a failure
        "_meta": {"terminal_exit": {"terminal_id": "t1", "exit_code": 3, "signal": None}},
    }
    assert model.requests[1].messages[-1].content[0].text.endswith("[exit code 3]")


async def test_terminal_card_for_a_plain_client_is_fenced_once(acp_schema: AcpSchema, tmp_path: Any) -> None:
    chunks = ["```\n", "# not a title\n"]
    client, _, _ = await one_turn(
        acp_schema, str(tmp_path), [step(("t1", "run", {"command": "cat x", "chunks": chunks}))], PLAIN_CLIENT
    )
    call, done = tool_updates(client)
    assert "_meta" not in call
    assert call["content"] == [{"type": "content", "content": {"type": "text", "text": "Runs it"}}]
    assert done["content"] == [
        {"type": "content", "content": {"type": "text", "text": "````console\n```\n# not a title\n````"}}
    ]


async def test_diff_card_call_and_applied_hunks(acp_schema: AcpSchema, tmp_path: Any) -> None:
    path = str(tmp_path / "a.py")
    client, _, _ = await one_turn(
        acp_schema,
        str(tmp_path),
        [step(("d1", "patch", {"path": path, "old": "x = 1", "new": "x = 2"}))],
        TERMINAL_CLIENT,
    )
    call, done = tool_updates(client)
    assert call["kind"] == "edit"
    assert call["title"] == "Edit a.py"
    assert call["content"] == [{"type": "diff", "path": path, "oldText": "x = 1", "newText": "x = 2"}]
    assert call["locations"] == [{"path": path}]
    assert done["content"] == [
        {"type": "diff", "path": path, "oldText": "ctx\nx = 1", "newText": "ctx\nx = 2"}
    ]
    assert done["locations"] == [{"path": path, "line": 2}]


# -- failures -------------------------------------------------------------------------------


async def test_invalid_arguments_to_a_terminal_tool_get_the_generic_card(
    acp_schema: AcpSchema, tmp_path: Any
) -> None:
    client, _, _ = await one_turn(
        acp_schema, str(tmp_path), [step(("t1", "run", {"command": "x", "chunks": "no"}))], TERMINAL_CLIENT
    )
    call, done = tool_updates(client)
    assert call["title"] == "run"  # the presenter cannot draw what did not validate
    assert call["status"] == "pending"
    assert "_meta" not in call
    assert done["content"][0]["content"]["text"] == 'Error: invalid arguments: "chunks" must be an array'


async def test_tool_failures_reach_panel_and_model(acp_schema: AcpSchema, tmp_path: Any) -> None:
    steps = [
        step(("e1", "boom", {})),
        step(("e2", "no_such_tool", {"x": 1})),
        step(("e3", "look", {"path": 42})),
        step(("e4", "look", '{"path": "unterminated')),
        step(("e5", "bad_view", {"path": "/p"})),
    ]
    client, result, model = await one_turn(acp_schema, str(tmp_path), steps, TERMINAL_CLIENT)
    assert result == {"stopReason": "end_turn"}
    updates = tool_updates(client)
    by_call: dict[str, list[dict[str, Any]]] = {}
    for update in updates:
        by_call.setdefault(update["toolCallId"], []).append(update)

    def final_text(call_id: str) -> str:
        final = by_call[call_id][-1]
        return str(final["content"][0]["content"]["text"])

    assert by_call["e1"][-1]["status"] == "failed"
    assert final_text("e1") == "Error: RuntimeError: the tool exploded"
    assert by_call["e2"][0]["title"] == "no_such_tool"
    assert by_call["e2"][0]["status"] == "pending"  # it never ran
    assert final_text("e2") == 'Error: unknown tool "no_such_tool"'
    assert final_text("e3") == 'Error: invalid arguments: "path" must be a string'
    assert by_call["e4"][0]["rawInput"] == {"arguments": '{"path": "unterminated'}
    assert final_text("e4") == 'Error: invalid arguments: "arguments" must be an object'
    assert by_call["e5"][0]["title"] == "bad_view"  # the generic card
    assert by_call["e5"][-1]["status"] == "completed"
    seen = [m for request in model.requests for m in request.messages if isinstance(m, ToolResultMessage)]
    texts = {m.call_id: m.content[0].text for m in seen}  # type: ignore[union-attr]
    assert texts["e3"] == 'Error: invalid arguments: "path" must be a string'
    assert all(m.is_error for m in seen if m.call_id != "e5")


async def test_failed_terminal_call_keeps_its_terminal(acp_schema: AcpSchema, tmp_path: Any) -> None:
    client, _, _ = await one_turn(
        acp_schema,
        str(tmp_path),
        [step(("t1", "run", {"command": "x", "chunks": [], "fail": "cannot start: no dir /nope"}))],
        TERMINAL_CLIENT,
    )
    call, reason, done = tool_updates(client)
    assert call["status"] == "in_progress"
    assert reason["_meta"]["terminal_output"]["data"] == "[cannot start: no dir /nope]\n"
    assert done["status"] == "failed"
    assert "content" not in done
    assert done["_meta"]["terminal_exit"]["terminal_id"] == "t1"


# -- permissions ----------------------------------------------------------------------------


async def test_permission_allow_once(acp_schema: AcpSchema, tmp_path: Any) -> None:
    path = str(tmp_path / "a.py")
    client, _, _ = await one_turn(
        acp_schema,
        str(tmp_path),
        [step(("d1", "patch", {"path": path, "old": "a", "new": "b"}))],
        TERMINAL_CLIENT,
        answers=["allow_once"],
        gate=True,
    )
    (request,) = client.agent_requests
    assert request["method"] == "session/request_permission"
    assert [o["kind"] for o in request["params"]["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert request["params"]["toolCall"]["toolCallId"] == "d1"
    kinds = [(u["sessionUpdate"], u.get("status")) for u in tool_updates(client)]
    assert kinds == [
        ("tool_call", "pending"),
        ("tool_call_update", "in_progress"),
        ("tool_call_update", "completed"),
    ]
    # The permission request came after the pending announcement, before in_progress.
    order = [m.get("method") or ("response" if "id" in m else "?") for m in client.agent_messages]
    first_update = order.index("session/update")
    assert order.index("session/request_permission") > first_update


async def test_permission_allow_always_is_remembered(acp_schema: AcpSchema, tmp_path: Any) -> None:
    path = str(tmp_path / "a.py")
    client, _, _ = await one_turn(
        acp_schema,
        str(tmp_path),
        [
            step(("d1", "patch", {"path": path, "old": "a", "new": "b"})),
            step(("d2", "patch", {"path": path, "old": "b", "new": "c"})),
        ],
        TERMINAL_CLIENT,
        answers=["allow_always"],
        gate=True,
    )
    assert len(client.agent_requests) == 1
    statuses = [(u["toolCallId"], u.get("status")) for u in tool_updates(client)]
    assert statuses == [
        ("d1", "pending"),
        ("d1", "in_progress"),
        ("d1", "completed"),
        ("d2", "in_progress"),
        ("d2", "completed"),
    ]


@pytest.mark.parametrize("answer", ["reject_once", "error"])
async def test_permission_rejected(acp_schema: AcpSchema, tmp_path: Any, answer: str) -> None:
    path = str(tmp_path / "a.py")
    client, result, model = await one_turn(
        acp_schema,
        str(tmp_path),
        [step(("d1", "patch", {"path": path, "old": "a", "new": "b"}))],
        TERMINAL_CLIENT,
        answers=[answer],
        gate=True,
    )
    assert result == {"stopReason": "end_turn"}
    statuses = [u.get("status") for u in tool_updates(client)]
    assert statuses == ["pending", "failed"]
    seen = model.requests[1].messages[-1]
    assert isinstance(seen, ToolResultMessage)
    assert seen.is_error
    expected = "declined this call" if answer == "reject_once" else "declined to ask for permission"
    assert expected in seen.content[0].text  # type: ignore[union-attr]


async def test_permission_cancelled_outcome_cancels_the_turn(acp_schema: AcpSchema, tmp_path: Any) -> None:
    path = str(tmp_path / "a.py")
    client, result, _ = await one_turn(
        acp_schema,
        str(tmp_path),
        [step(("d1", "patch", {"path": path, "old": "a", "new": "b"}))],
        TERMINAL_CLIENT,
        answers=["cancelled"],
        gate=True,
    )
    assert result == {"stopReason": "cancelled"}
    statuses = [u.get("status") for u in tool_updates(client)]
    assert statuses == ["pending", "failed"]


# -- parallel calls, context, cancellation ------------------------------------------------------


async def test_two_parallel_safe_calls_in_one_step(acp_schema: AcpSchema, tmp_path: Any) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    client, _, model = await one_turn(
        acp_schema,
        str(tmp_path),
        [step(("p1", "look", {"path": a}), ("p2", "look", {"path": b}))],
        PLAIN_CLIENT,
    )
    assert {u["toolCallId"] for u in tool_updates(client)} == {"p1", "p2"}
    results = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [m.call_id for m in results] == ["p1", "p2"]


async def test_additional_context_follows_all_results(acp_schema: AcpSchema, tmp_path: Any) -> None:
    def configure(registry: ToolRegistry) -> None:
        async def post(
            execution: ToolExecution, result: ToolExecutionResult, next_: PostNext
        ) -> PostToolDecision:
            return Accept(additional_context=f"note about {execution.call_id}")

        registry.on_post_execute(post)

    steps = [step(("p1", "look", {"path": "/a"}), ("p2", "look", {"path": "/b"}))]
    config, models = recorded([[*steps, {"text": "done"}]], TOOLS)
    config.configure_registry = configure
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "go")
    messages = models[0].requests[1].messages
    assert [type(m).__name__ for m in messages[-3:]] == [
        "ToolResultMessage",
        "ToolResultMessage",
        "ContextMessage",
    ]
    context = messages[-1]
    assert isinstance(context, ContextMessage)
    assert context.text == "note about p1\n\nnote about p2"


async def test_model_output_budget(acp_schema: AcpSchema, tmp_path: Any) -> None:
    big = "x" * 100_000
    steps = [step(("t1", "run", {"command": "big", "chunks": [big]}))]
    config, models = recorded([[*steps, {"text": "done"}]], TOOLS)
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "go")
    seen = models[0].requests[1].messages[-1]
    assert isinstance(seen, ToolResultMessage)
    body = seen.content[0].text  # type: ignore[union-attr]
    assert len(body) < 70_000
    assert "bytes omitted" in body


async def test_cancel_while_a_tool_streams(acp_schema: AcpSchema, tmp_path: Any) -> None:
    steps = [
        step(
            (
                "t1",
                "run",
                {"command": "tail -f log", "chunks": ["first\n", "never"], "hang_after_first": True},
            )
        )
    ]
    config = scripted([steps], TOOLS)
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize(TERMINAL_CLIENT)
        sid = await client.new_session(str(tmp_path))
        result: dict[str, Any] = {}

        async def prompt() -> None:
            result.update(await client.prompt(sid, "go"))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                await client.wait_for(lambda m: any(x.get("method") == "session/update" for x in m))
                await anyio.wait_all_tasks_blocked()
                await client.cancel(sid)
        assert result == {"stopReason": "cancelled"}
        updates = tool_updates(client)
        assert updates[0]["status"] == "in_progress"
        streamed = "".join(
            u["_meta"]["terminal_output"]["data"] for u in updates if "terminal_output" in u.get("_meta", {})
        )
        assert streamed == "first\n[cancelled]\n"
        assert updates[-1]["status"] == "failed"
        assert updates[-1]["_meta"]["terminal_exit"]["terminal_id"] == "t1"
        # Nothing of the session after the answer.
        answer_index = next(
            i for i, m in enumerate(client.agent_messages) if m.get("result") == {"stopReason": "cancelled"}
        )
        assert all(m.get("method") != "session/update" for m in client.agent_messages[answer_index:])
    client.assert_valid()


async def test_concurrent_permission_requests_answered_out_of_order(
    acp_schema: AcpSchema, tmp_path: Any
) -> None:
    # Two parallel calls both ask; the person answers the second one first. Each call must get
    # its own answer, whatever the order of the responses.
    first, second = str(tmp_path / "a.py"), str(tmp_path / "b.py")
    config, _ = recorded(
        [[step(("p1", "look", {"path": first}), ("p2", "look", {"path": second})), {"text": "done"}]], TOOLS
    )
    config.default_mode = "default"

    def gate(registry: ToolRegistry) -> None:
        async def ask(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
            return Ask("looking needs approval here")

        registry.on_pre_execute(ask)

    config.configure_registry = gate
    pending: dict[str, anyio.Event] = {"p1": anyio.Event(), "p2": anyio.Event()}
    order: list[str] = []

    async def answer(method: str, params: Any) -> Any:
        call_id = params["toolCall"]["toolCallId"]
        if call_id == "p1":
            with anyio.fail_after(5):
                await pending["p2"].wait()  # answer p1 only after p2 was answered
        order.append(call_id)
        pending[call_id].set()
        option = "allow_once" if call_id == "p1" else "reject_once"
        return {"outcome": {"outcome": "selected", "optionId": option}}

    async with AcpClient.in_memory(
        config,
        schema=acp_schema,
        on_agent_request=lambda m, p: answer(m, p) if m.endswith("permission") else None,
    ) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "look at both") == {"stopReason": "end_turn"}
        finals = {
            u["toolCallId"]: u["status"]
            for u in tool_updates(client)
            if u.get("status") in ("completed", "failed")
        }
    assert order == ["p2", "p1"]
    assert finals == {"p1": "completed", "p2": "failed"}
    client.assert_valid()


async def test_cancel_while_a_person_is_asked(acp_schema: AcpSchema, tmp_path: Any) -> None:
    # The editor never answers the permission request; the user cancels the turn instead. The
    # agent withdraws its request ($/cancel_request), closes the pending call as failed, and
    # answers the prompt `cancelled`.
    path = str(tmp_path / "a.py")
    config, _ = recorded([[step(("d1", "patch", {"path": path, "old": "a", "new": "b"}))]], TOOLS)
    config.default_mode = "default"
    asked = anyio.Event()

    async def never_answer(method: str, params: Any) -> Any:
        asked.set()
        await anyio.sleep_forever()

    async with AcpClient.in_memory(
        config,
        schema=acp_schema,
        on_agent_request=lambda m, p: never_answer(m, p) if m.endswith("permission") else None,
    ) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        result: dict[str, Any] = {}

        async def prompt() -> None:
            result.update(await client.prompt(sid, "edit it"))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                await asked.wait()
                await client.cancel(sid)
        assert result == {"stopReason": "cancelled"}
        statuses = [u.get("status") for u in tool_updates(client)]
        assert statuses == ["pending", "failed"]
        withdrawn = [m for m in client.agent_messages if m.get("method") == "$/cancel_request"]
        permission_id = next(
            m["id"] for m in client.agent_messages if m.get("method") == "session/request_permission"
        )
        assert [m["params"]["requestId"] for m in withdrawn] == [permission_id]
    client.assert_valid()


async def test_a_rejected_call_fails_on_its_own_card_and_the_model_hears_why(
    acp_schema: AcpSchema, tmp_path: Any
) -> None:
    deep = '{"path": ' + "[" * 100 + "]" * 100 + "}"
    calls = [("d1", "look", deep), ("ok", "look", {"path": "/a"}), ("ok", "look", {"path": "/b"})]
    client, result, model = await one_turn(acp_schema, str(tmp_path), [step(*calls)], PLAIN_CLIENT)
    assert result == {"stopReason": "end_turn"}
    updates = tool_updates(client)
    announced = [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]
    assert announced == ["d1", "ok", "ok-2"]
    for update in updates:  # every update is for a card announced before it
        assert update["toolCallId"] in announced[: announced.index(update["toolCallId"]) + 1]
    failed = [u for u in updates if u.get("status") == "failed"]
    assert [u["toolCallId"] for u in failed] == ["d1"]
    messages = model.requests[1].messages
    assistant = next(m for m in messages if isinstance(m, AssistantMessage) and m.tool_calls)
    assert [c.id for c in assistant.tool_calls] == ["d1", "ok", "ok-2"]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [r.call_id for r in results] == ["d1", "ok", "ok-2"]
    assert "nested deeper than" in results[0].content[0].text  # type: ignore[union-attr]


async def test_a_permission_prompt_that_fails_says_why_the_client_gave(
    acp_schema: AcpSchema, tmp_path: Any
) -> None:
    # acpx answers a prompt the user aborts with Ctrl+C as {"code": -32603, "message": "Internal
    # error", "data": {"details": "Aborted with Ctrl+C"}}: the card must say the details too.
    script = tmp_path / "script.json"
    call = {"id": "b1", "name": "bash", "arguments": {"command": "echo one", "description": "one"}}
    script.write_text(json.dumps({"turns": [[{"tool_calls": [call]}, {"text": "done"}]]}))

    async def abort(method: str, params: Any) -> Any:
        raise RpcError(-32603, "Internal error", {"details": "Aborted with Ctrl+C"})

    args = ["--model", f"script:{script}", "--state-dir", str(tmp_path / "state")]
    async with AcpClient.subprocess(
        args,
        schema=acp_schema,
        on_agent_request=lambda m, p: abort(m, p) if m == "session/request_permission" else None,
    ) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "go") == {"stopReason": "end_turn"}
        (failed,) = [u for u in client.updates(sid, ["tool_call_update"]) if u.get("status") == "failed"]
    client.assert_valid()
    assert "(Internal error: Aborted with Ctrl+C)" in json.dumps(failed["content"])


async def test_a_new_file_through_a_client_that_fails_missing_reads_is_asked_for_once(
    acp_schema: AcpSchema, tmp_path: Any
) -> None:
    # acpx answers fs/read_text_file for a file that does not exist with a generic internal
    # error, not "resource not found": the write must still create the file, and must not ask
    # the client a second time (each failed request is an error line in acpx's window).
    script = tmp_path / "script.json"
    target = tmp_path / "new.txt"
    call = {"id": "w1", "name": "write", "arguments": {"file_path": str(target), "content": "hi\n"}}
    script.write_text(json.dumps({"turns": [[{"tool_calls": [call]}, {"text": "done"}]]}))
    asked: list[str] = []

    async def client_fs(method: str, params: Any) -> Any:
        asked.append(method)
        if method == "fs/read_text_file":
            raise RpcError(-32603, "Internal error", {"details": "ENOENT: no such file or directory"})
        target.write_text(params["content"])
        return {}

    args = ["--model", f"script:{script}", "--state-dir", str(tmp_path / "state"), "--mode", "bypass"]
    async with AcpClient.subprocess(args, schema=acp_schema, on_agent_request=client_fs) as client:
        await client.initialize({"fs": {"readTextFile": True, "writeTextFile": True}})
        sid = await client.new_session(str(tmp_path))
        assert await client.prompt(sid, "go") == {"stopReason": "end_turn"}
        (done,) = [u for u in client.updates(sid, ["tool_call_update"]) if u.get("status") == "completed"]
    client.assert_valid()
    assert asked == ["fs/read_text_file", "fs/write_text_file"]
    assert target.read_text() == "hi\n"
    assert done["toolCallId"] == "w1"
