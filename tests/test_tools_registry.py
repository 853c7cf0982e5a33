"""The registry pipeline, definitions and presenters, through the public API."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from dsh_tools import (
    Accept,
    Allow,
    Ask,
    Block,
    Deny,
    DiffCallView,
    DuplicateToolError,
    FileDiff,
    GenericCallView,
    GenericResultView,
    PostNext,
    PostToolDecision,
    PreNext,
    PreToolDecision,
    Services,
    TerminalOutput,
    TextBlock,
    ToolArgsError,
    ToolChange,
    ToolDefinition,
    ToolDefinitionError,
    ToolError,
    ToolErrorInfo,
    ToolExecution,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    ToolResult,
    define_tool,
    text,
)

pytestmark = pytest.mark.anyio


async def echo_execute(args: dict[str, Any], execution: ToolExecution) -> list[TextBlock]:
    return [text(f"echo {args['value']}")]


def echo_tool(name: str = "echo", **kwargs: Any) -> ToolDefinition:
    return define_tool(
        name=name,
        description="Echo a value.",
        parameters={"value": {"type": "string", "required": True}},
        execute=echo_execute,
        **kwargs,
    )


def call(name: str = "echo", arguments: Any = None, call_id: str = "c1", **kwargs: Any) -> ToolExecution:
    return ToolExecution(
        call_id=call_id, name=name, arguments={"value": "hi"} if arguments is None else arguments, **kwargs
    )


def texts(result: ToolExecutionResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextBlock)]


# -- define_tool -------------------------------------------------------------------------


def test_define_tool_builds_json_schema_once() -> None:
    tool = echo_tool()
    assert tool.parameters == {
        "type": "object",
        "properties": {"value": {"type": "string"}},
        "required": ["value"],
    }
    assert tool.kind == "other"
    assert tool.read_only is False
    assert tool.parallel_safe is False


def test_read_only_tools_default_to_parallel_safe() -> None:
    assert echo_tool(read_only=True, kind="read").parallel_safe is True
    assert echo_tool(read_only=True, parallel_safe=False).parallel_safe is False


def test_malformed_definition_lists_every_problem() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        define_tool(
            name="bad name!",
            description="",
            parameters={"a": {"type": "str"}, "b": {"type": "string", "enum": "x"}},
            execute=None,  # type: ignore[arg-type]
            kind="nope",  # type: ignore[arg-type]
        )
    error = info.value
    assert error.code == "INVALID_DEFINITION"
    assert len(error.problems) == 6, error.problems
    assert str(error).startswith('invalid tool definition "bad name!": name must be')


class EditArgs(BaseModel):
    path: str
    count: int = 1


async def test_pydantic_parameters_give_a_model_instance() -> None:
    seen: list[EditArgs] = []

    async def execute(args: EditArgs, execution: ToolExecution) -> str:
        seen.append(args)
        return f"{args.path} x{args.count}"

    tool = define_tool(name="edit", description="Edit.", parameters=EditArgs, execute=execute)
    assert tool.parameters["required"] == ["path"]
    registry = ToolRegistry()
    registry.register(tool)
    result = await registry.execute(call("edit", {"path": "/a", "count": 2}))
    assert texts(result) == ["/a x2"]
    assert seen == [EditArgs(path="/a", count=2)]

    bad = await registry.execute(call("edit", {"count": "many"}))
    assert bad.is_error
    assert bad.error == ToolErrorInfo(name="ToolArgsError", code="INVALID_ARGS")
    assert texts(bad)[0].startswith('Error: invalid arguments: "path": Field required; "count":')


# -- errors ------------------------------------------------------------------------------


def test_tool_args_error_message() -> None:
    error = ToolArgsError(['missing required property "a"', '"b" must be a string'])
    assert str(error) == 'invalid arguments: missing required property "a"; "b" must be a string'
    assert error.code == "INVALID_ARGS"
    assert error.name == "ToolArgsError"
    assert error.violations == ('missing required property "a"', '"b" must be a string')


# -- registration and layers -------------------------------------------------------------


def test_register_get_dispose_and_change_events() -> None:
    registry = ToolRegistry()
    changes: list[ToolChange] = []
    registry.on_change(changes.append)
    dispose = registry.register(echo_tool())
    assert registry.get("echo") is not None
    assert "echo" in registry
    with pytest.raises(DuplicateToolError, match='tool "echo" is already registered'):
        registry.register(echo_tool())
    dispose()
    dispose()  # idempotent
    assert registry.get("echo") is None
    assert changes == [ToolChange("registered", "echo"), ToolChange("unregistered", "echo")]


def test_disposer_is_a_context_manager() -> None:
    registry = ToolRegistry()
    with registry.register(echo_tool()):
        assert "echo" in registry
    assert "echo" not in registry


def test_schemas_are_deep_copies_in_registration_order() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool("b"))
    registry.register(echo_tool("a"))
    schemas = registry.schemas()
    assert [s.name for s in schemas] == ["b", "a"]
    assert not hasattr(schemas[0], "execute")
    assert set(vars(schemas[0]) if hasattr(schemas[0], "__dict__") else schemas[0].__slots__) == {
        "name",
        "description",
        "parameters",
        "prompt_rules",  # model-facing too: the system prompt states them
    }
    schemas[0].parameters["properties"]["value"]["type"] = "integer"
    assert registry.schemas()[0].parameters["properties"]["value"]["type"] == "string"


def test_layers_see_the_stack_and_keep_names_unique() -> None:
    base = ToolRegistry()
    base.register(echo_tool("base_tool"))
    session = base.layer()
    session_changes: list[ToolChange] = []
    session.on_change(session_changes.append)
    session.register(echo_tool("mcp_tool"))
    assert [s.name for s in session.schemas()] == ["base_tool", "mcp_tool"]
    assert [s.name for s in base.schemas()] == ["base_tool"]
    with pytest.raises(DuplicateToolError):
        session.register(echo_tool("base_tool"))
    with pytest.raises(DuplicateToolError):
        base.register(echo_tool("mcp_tool"))
    base.register(echo_tool("late"))
    assert ToolChange("registered", "late") in session_changes
    session.close()
    assert [s.name for s in base.schemas()] == ["base_tool", "late"]
    assert len(session) == 2


async def test_a_layer_can_hide_tools_of_the_stack_below_it() -> None:
    base = ToolRegistry()
    base.register(echo_tool("echo"))
    base.register(echo_tool("task"))
    gated: list[str] = []

    async def pre(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        gated.append(execution.name)
        return await next_()

    base.on_pre_execute(pre)
    child = base.layer(without=("task",))
    assert [s.name for s in child.schemas()] == ["echo"]
    assert child.get("task") is None
    assert "task" not in child
    assert len(child) == 1
    assert (await child.execute(call("task"))).error == ToolErrorInfo(
        name="ToolNotFoundError", code="UNKNOWN_TOOL"
    )
    assert not (await child.execute(call("echo"))).is_error
    assert gated == ["echo"]  # the stack's gate still runs for what the layer shows
    assert [s.name for s in base.schemas()] == ["echo", "task"]


# -- execution ---------------------------------------------------------------------------


async def test_execute_success() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())
    result = await registry.execute(call())
    assert result == ToolExecutionResult(call_id="c1", content=(text("echo hi"),))


async def test_unknown_tool_is_an_error_result_through_post_execute() -> None:
    registry = ToolRegistry()
    seen: list[ToolExecutionResult] = []

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next_: PostNext
    ) -> PostToolDecision:
        seen.append(result)
        return await next_()

    registry.on_post_execute(post)
    result = await registry.execute(call("missing"))
    assert result.is_error
    assert texts(result) == ['Error: unknown tool "missing"']
    assert result.error == ToolErrorInfo(name="ToolNotFoundError", code="UNKNOWN_TOOL")
    assert seen == [result]


async def test_invalid_args_skip_the_gate_but_reach_post_execute() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())
    gate_calls: list[str] = []
    post_calls: list[str] = []

    async def pre(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        gate_calls.append(execution.call_id)
        return Ask("please")

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next_: PostNext
    ) -> PostToolDecision:
        post_calls.append(texts(result)[0])
        return await next_()

    registry.on_pre_execute(pre)
    registry.on_post_execute(post)
    result = await registry.execute(call(arguments={"value": 3}))
    assert texts(result) == ['Error: invalid arguments: "value" must be a string']
    assert result.error == ToolErrorInfo("ToolArgsError", "INVALID_ARGS")
    assert gate_calls == []
    assert post_calls == texts(result)


async def test_malformed_json_arguments_are_invalid_args() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())
    result = await registry.execute(call(arguments='{"value": '))
    assert texts(result) == ['Error: invalid arguments: "arguments" must be an object']


async def test_raw_definitions_are_not_validated() -> None:
    received: list[Any] = []

    async def execute(args: Any, execution: ToolExecution) -> str:
        received.append(args)
        return "ok"

    registry = ToolRegistry()
    registry.register(
        ToolDefinition(name="raw", description="Raw.", parameters={"type": "object"}, execute=execute)
    )
    result = await registry.execute(call("raw", arguments="not even an object"))
    assert not result.is_error
    assert received == ["not even an object"]


async def test_pre_execute_waterfall_order_and_short_circuit() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())
    order: list[str] = []

    def listener(label: str, decision: PreToolDecision | None) -> Any:
        async def pre(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
            order.append(label)
            if decision is not None:
                return decision
            return await next_()

        return pre

    registry.on_pre_execute(listener("first", None))
    dispose_deny = registry.on_pre_execute(listener("second", Deny("not today")))
    registry.on_pre_execute(listener("third", None))
    result = await registry.execute(call())
    assert order == ["first", "second"]
    assert texts(result) == ["Error: not today"]
    assert result.error == ToolErrorInfo("ToolDeniedError", "DENIED")

    order.clear()
    dispose_deny()
    result = await registry.execute(call())
    assert order == ["first", "third"]
    assert not result.is_error


async def test_outer_listener_sees_inner_decision() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())

    async def outer(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        inner = await next_()
        return Allow() if isinstance(inner, Deny) else inner

    async def inner(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        return Deny("inner says no")

    registry.on_pre_execute(outer)
    registry.on_pre_execute(inner)
    assert not (await registry.execute(call())).is_error


async def test_ask_without_approver_is_a_clear_deny() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())

    async def pre(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        return Ask("edits need approval")

    registry.on_pre_execute(pre)
    result = await registry.execute(call())
    assert texts(result) == [
        "Error: this call needs approval (edits need approval) and nobody can approve it here"
    ]


async def test_ask_goes_to_the_approver_and_dispatch_is_observable() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())
    events: list[str] = []

    async def pre(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        return Ask()

    async def approver(execution: ToolExecution, ask: Ask) -> Allow | Deny:
        events.append("asked")
        return Allow() if execution.call_id == "yes" else Deny("the user declined")

    async def on_dispatch(execution: ToolExecution) -> None:
        events.append(f"dispatch {execution.call_id}")

    registry.on_pre_execute(pre)
    ok = await registry.execute(call(call_id="yes", approver=approver, on_dispatch=on_dispatch))
    no = await registry.execute(call(call_id="no", approver=approver, on_dispatch=on_dispatch))
    assert not ok.is_error
    assert texts(no) == ["Error: the user declined"]
    assert events == ["asked", "dispatch yes", "asked"]


async def test_raising_tool_and_raising_listeners_become_error_results() -> None:
    async def boom(args: dict[str, Any], execution: ToolExecution) -> str:
        raise ValueError("disk on fire")

    async def clean(args: dict[str, Any], execution: ToolExecution) -> str:
        raise ToolError("no such file: /x")

    registry = ToolRegistry()
    registry.register(define_tool(name="boom", description="b", parameters={}, execute=boom))
    registry.register(define_tool(name="clean", description="c", parameters={}, execute=clean))
    result = await registry.execute(call("boom", {}))
    assert texts(result) == ["Error: ValueError: disk on fire"]
    assert result.error is None
    result = await registry.execute(call("clean", {}))
    assert texts(result) == ["Error: no such file: /x"]
    assert result.error == ToolErrorInfo("ToolError", "TOOL_ERROR")

    async def bad_pre(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        raise RuntimeError("gate broke")

    dispose = registry.on_pre_execute(bad_pre)
    assert texts(await registry.execute(call("clean", {}))) == ["Error: RuntimeError: gate broke"]
    dispose()

    async def bad_post(
        execution: ToolExecution, result: ToolExecutionResult, next_: PostNext
    ) -> PostToolDecision:
        raise RuntimeError("inspector broke")

    registry.on_post_execute(bad_post)
    assert texts(await registry.execute(call("clean", {}))) == ["Error: RuntimeError: inspector broke"]


async def test_listener_returning_garbage_is_an_error() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())

    async def pre(execution: ToolExecution, next_: PreNext) -> Any:
        return "yes"

    registry.on_pre_execute(pre)
    result = await registry.execute(call())
    assert result.is_error
    assert "expected a decision" in texts(result)[0]


async def test_post_execute_accept_replaces_content_and_attaches_context() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next_: PostNext
    ) -> PostToolDecision:
        inner = await next_()
        assert isinstance(inner, Accept)
        return Accept(content=(text("replaced"),), additional_context="remember this")

    registry.on_post_execute(post)
    result = await registry.execute(call())
    assert texts(result) == ["replaced"]
    assert result.additional_context == "remember this"
    assert not result.is_error


async def test_post_execute_block_turns_result_into_feedback() -> None:
    registry = ToolRegistry()
    registry.register(echo_tool())

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next_: PostNext
    ) -> PostToolDecision:
        return Block("output contained a secret", additional_context="scrubbed")

    registry.on_post_execute(post)
    result = await registry.execute(call())
    assert result.is_error
    assert texts(result) == ["output contained a secret"]
    assert result.additional_context == "scrubbed"


async def test_meta_travels_and_must_be_json() -> None:
    async def with_meta(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        return ToolOutput(content=[text("done")], meta={"exit_code": args.get("code", 0)})

    async def bad_meta(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
        return ToolOutput(content=[text("done")], meta={"when": object()})

    registry = ToolRegistry()
    registry.register(define_tool(name="meta", description="m", parameters={}, execute=with_meta))
    registry.register(define_tool(name="bad", description="b", parameters={}, execute=bad_meta))
    result = await registry.execute(call("meta", {"code": 3}))
    assert result.meta == {"exit_code": 3}
    assert result.as_tool_result() == ToolResult(
        content=(text("done"),), is_error=False, meta={"exit_code": 3}
    )
    bad = await registry.execute(call("bad", {}))
    assert bad.is_error
    assert bad.error == ToolErrorInfo("ToolMetaError", "INVALID_META")
    assert texts(bad)[0].startswith('Error: tool "bad" returned meta that is not JSON-serializable')


async def test_content_given_as_dicts_is_validated() -> None:
    async def execute(args: Any, execution: ToolExecution) -> Any:
        return [{"type": "text", "text": "from a dict"}]

    registry = ToolRegistry()
    registry.register(ToolDefinition(name="raw", description="r", parameters={}, execute=execute))
    assert texts(await registry.execute(call("raw", {}))) == ["from a dict"]


async def test_wrong_return_type_is_an_error() -> None:
    async def execute(args: Any, execution: ToolExecution) -> Any:
        return 42

    registry = ToolRegistry()
    registry.register(ToolDefinition(name="raw", description="r", parameters={}, execute=execute))
    result = await registry.execute(call("raw", {}))
    assert result.is_error
    assert "returned int" in texts(result)[0]


async def test_progress_events_reach_the_caller() -> None:
    async def execute(args: Any, execution: ToolExecution) -> str:
        await execution.report(TerminalOutput("line 1\n"))
        await execution.report(TerminalOutput("line 2\n"))
        return "done"

    got: list[str] = []

    async def sink(event: TerminalOutput) -> None:
        got.append(event.data)

    registry = ToolRegistry()
    registry.register(define_tool(name="run", description="r", parameters={}, execute=execute))
    await registry.execute(call("run", {}, progress=sink))
    assert got == ["line 1\n", "line 2\n"]
    await registry.execute(call("run", {}))  # nobody listening is fine


async def test_services_are_looked_up_by_type() -> None:
    class FileSystem:
        pass

    class LocalFileSystem(FileSystem):
        pass

    local = LocalFileSystem()
    services = Services(local)
    assert services.get(LocalFileSystem) is local
    assert services.get(FileSystem) is local
    assert services.get(int) is None


# -- cancellation ------------------------------------------------------------------------


async def test_cancellation_propagates_untouched() -> None:
    started = anyio.Event()
    cleaned_up: list[bool] = []
    post_seen: list[ToolExecutionResult] = []

    async def hang(args: Any, execution: ToolExecution) -> str:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cleaned_up.append(True)
        return "unreachable"

    async def post(
        execution: ToolExecution, result: ToolExecutionResult, next_: PostNext
    ) -> PostToolDecision:
        post_seen.append(result)
        return await next_()

    registry = ToolRegistry()
    registry.register(define_tool(name="hang", description="h", parameters={}, execute=hang))
    registry.on_post_execute(post)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(registry.execute, call("hang", {}))
            await started.wait()
            group.cancel_scope.cancel()
    assert cleaned_up == [True]
    assert post_seen == []


async def test_cancellation_during_approval_propagates() -> None:
    asked = anyio.Event()

    async def pre(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        return Ask()

    async def approver(execution: ToolExecution, ask: Ask) -> Allow | Deny:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError

    registry = ToolRegistry()
    registry.register(echo_tool())
    registry.on_pre_execute(pre)
    outcome: list[ToolExecutionResult] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:

            async def run() -> None:
                outcome.append(await registry.execute(call(approver=approver)))

            group.start_soon(run)
            await asked.wait()
            group.cancel_scope.cancel()
    assert outcome == []


# -- execute_many ------------------------------------------------------------------------


async def test_execute_many_runs_safe_calls_concurrently_in_call_order() -> None:
    log: list[str] = []
    both_running = anyio.Event()
    running = 0

    async def read(args: dict[str, Any], execution: ToolExecution) -> str:
        nonlocal running
        running += 1
        log.append(f"start {execution.call_id}")
        if running == 2:
            both_running.set()
        with anyio.fail_after(5):
            await both_running.wait()  # deadlocks unless the two reads overlap
        log.append(f"end {execution.call_id}")
        return f"read {execution.call_id}"

    async def write(args: dict[str, Any], execution: ToolExecution) -> str:
        log.append(f"write {execution.call_id}")
        return f"wrote {execution.call_id}"

    registry = ToolRegistry()
    registry.register(define_tool(name="read", description="r", parameters={}, execute=read, read_only=True))
    registry.register(define_tool(name="write", description="w", parameters={}, execute=write))
    calls = [
        call("read", {}, "r1"),
        call("read", {}, "r2"),
        call("write", {}, "w3"),
        call("missing", {}, "m4"),
    ]
    results = await registry.execute_many(calls)
    assert [r.call_id for r in results] == ["r1", "r2", "w3", "m4"]
    assert texts(results[0]) == ["read r1"]
    assert texts(results[2]) == ["wrote w3"]
    assert results[3].is_error
    assert log.index("write w3") > max(log.index("end r1"), log.index("end r2"))


# -- presenters --------------------------------------------------------------------------


def test_presenters_validate_softly(caplog: pytest.LogCaptureFixture) -> None:
    def present_call(args: dict[str, Any]) -> GenericCallView:
        if args["value"] == "raise":
            raise KeyError("oops")
        return GenericCallView(title=f"Echo {args['value']}", kind="read")

    def present_result(args: dict[str, Any], result: ToolResult) -> GenericResultView:
        return GenericResultView(title=f"Echoed {args['value']}")

    tool = echo_tool(present_call=present_call, present_result=present_result)
    assert tool.call_view({"value": "x"}) == GenericCallView(title="Echo x", kind="read")
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        assert tool.call_view({"value": 3}) is None
        assert tool.call_view("garbage") is None
        assert tool.call_view({"value": "raise"}) is None
        assert tool.present_call is not None
        assert tool.present_call({"value": "raise"}) is None
    assert len(caplog.records) == 4
    assert tool.result_view({"value": "x"}, ToolResult(content=())) == GenericResultView(title="Echoed x")
    assert echo_tool().call_view({"value": "x"}) is None


def test_raw_definition_presenter_failures_are_contained() -> None:
    def present(args: Any) -> Any:
        raise RuntimeError("bad presenter")

    async def execute(args: Any, execution: ToolExecution) -> str:
        return ""

    tool = ToolDefinition(name="raw", description="r", parameters={}, execute=execute, present_call=present)
    assert tool.call_view({}) is None


def test_views_are_frozen_and_round_trip_json() -> None:
    view = DiffCallView(title="Edit a.py", diffs=(FileDiff(path="/w/a.py", old_text=None, new_text="x\n"),))
    assert DiffCallView.model_validate_json(view.model_dump_json()) == view
    with pytest.raises(Exception, match="frozen"):
        view.title = "other"  # type: ignore[misc]


async def test_failed_output_keeps_meta() -> None:
    async def execute(args: Any, execution: ToolExecution) -> ToolOutput:
        return ToolOutput(content=[text("partial\n[timed out]")], meta={"signal": "SIGTERM"}, is_error=True)

    registry = ToolRegistry()
    registry.register(define_tool(name="t", description="t", parameters={}, execute=execute))
    result = await registry.execute(call("t", {}))
    assert result.is_error
    assert result.meta == {"signal": "SIGTERM"}
    assert result.error is None


async def test_services_setdefault_and_aclose() -> None:
    closed: list[str] = []

    class Tasks:
        async def aclose(self) -> None:
            closed.append("tasks")

    class Tracker:
        def close(self) -> None:
            closed.append("tracker")

    class Broken:
        def close(self) -> None:
            raise RuntimeError("cannot close")

    services = Services()
    tasks = services.setdefault(Tasks, Tasks)
    assert services.setdefault(Tasks, Tasks) is tasks
    services.setdefault(Tracker, Tracker)
    services.setdefault(Broken, Broken)
    await services.aclose()
    assert closed == ["tracker", "tasks"]


async def test_a_services_layer_hides_types_and_keeps_tool_state_below() -> None:
    class Terminals:
        pass

    class ClientTerminals(Terminals):
        def close(self) -> None:
            raise AssertionError("a layer closes only its own services")

    class Tracker:
        pass

    services = Services()
    services.add(ClientTerminals(), as_type=Terminals)
    services.add("session state")
    view = services.layer(without=(Terminals,))
    assert view.get(Terminals) is None
    assert view.get(ClientTerminals) is None  # hidden whichever type asks for it
    assert view.get(str) == "session state"
    tracker = view.setdefault(Tracker, Tracker)
    assert services.get(Tracker) is tracker  # a tool's state is the session's, seen from either
    view.add(3)
    assert services.get(int) is None
    assert list(view) == [3, "session state", tracker]
    await view.aclose()


async def test_execute_many_reports_each_result_when_ready() -> None:
    order: list[str] = []
    release = anyio.Event()

    async def slow(args: dict[str, Any], execution: ToolExecution) -> str:
        with anyio.fail_after(5):
            await release.wait()
        order.append("slow done")
        return "slow"

    async def fast(args: dict[str, Any], execution: ToolExecution) -> str:
        order.append("fast done")
        return "fast"

    async def on_result(result: ToolExecutionResult) -> None:
        order.append(f"result {result.call_id}")
        release.set()

    registry = ToolRegistry()
    registry.register(define_tool(name="slow", description="s", parameters={}, execute=slow, read_only=True))
    registry.register(define_tool(name="fast", description="f", parameters={}, execute=fast, read_only=True))
    results = await registry.execute_many([call("slow", {}, "s"), call("fast", {}, "f")], on_result=on_result)
    assert [r.call_id for r in results] == ["s", "f"]
    assert order == ["fast done", "result f", "slow done", "result s"]


def test_content_blocks_round_trip_json_with_acp_field_names() -> None:
    from pydantic import TypeAdapter

    from dsh_tools import (
        Annotations,
        AudioBlock,
        BlobResource,
        ContentBlock,
        EmbeddedResourceBlock,
        ImageBlock,
        ResourceLinkBlock,
        TextResource,
    )

    adapter: TypeAdapter[ContentBlock] = TypeAdapter(ContentBlock)
    blocks = [
        text("hi"),
        ImageBlock(
            data="AAAA", mime_type="image/png", annotations=Annotations(audience=("user",), priority=0.5)
        ),
        AudioBlock(data="AAAA", mime_type="audio/wav"),
        ResourceLinkBlock(uri="file:///w/a.py", name="a.py", mime_type="text/x-python", size=12),
        EmbeddedResourceBlock(resource=TextResource(uri="file:///w/a.py", text="x = 1")),
        EmbeddedResourceBlock(resource=BlobResource(uri="file:///w/b.bin", blob="AAAA")),
    ]
    for block in blocks:
        wire = block.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert "mime_type" not in str(wire)  # ACP's camelCase keys
        assert adapter.validate_python(wire) == block
        assert adapter.validate_json(block.model_dump_json(by_alias=True)) == block
    assert blocks[3].model_dump(by_alias=True, exclude_none=True) == {
        "type": "resource_link",
        "uri": "file:///w/a.py",
        "name": "a.py",
        "mimeType": "text/x-python",
        "size": 12,
    }
