"""The render bridge's mapping table, case by case (pure functions, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_acp.wire._bridge import (
    CallInfo,
    RenderContext,
    announce_call,
    attach_terminal,
    cancelled_call,
    child_question,
    finish_call,
    output_chunk,
    permission_tool_call,
    raw_input,
    relativize_title,
    steps_card,
    steps_update,
)
from dsh_acp.wire._client_profile import ClientProfile, client_profile
from dsh_acp.wire._steps import StepList
from dsh_acp.wire._updates import tool_call_update
from dsh_tools import (
    DiffCallView,
    DiffResultView,
    FileDiff,
    GenericCallView,
    GenericResultView,
    Location,
    PlanEntry,
    PlanView,
    TerminalCallView,
    TerminalResultView,
    ToolResult,
    text,
)

CWD = "/work/project"
TERMINAL = RenderContext(CWD, "terminal_output")
DELTA = RenderContext(CWD, "terminal_output_delta")
PLAIN = RenderContext(CWD, None)


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Read /work/project/src/a.py", "Read src/a.py"),
        ("Read /work/project/src/a.py (lines 1-20)", "Read src/a.py (lines 1-20)"),
        ("Read /work/project", "Read ."),
        ("List /work/project/", "List ."),
        ("Edit /work/project/a.py.", "Edit a.py."),
        ("Read /work/project2/a.py", "Read /work/project2/a.py"),
        ("Read /work/other/a.py", "Read /work/other/a.py"),
        ("Read /etc/hosts", "Read /etc/hosts"),
        ("Copy /work/project/a to /work/project/b", "Copy a to b"),
        ("Read '/work/project/x y.py'", "Read 'x y.py'"),
        ("no path here", "no path here"),
        ("Read /work/project/../secret", "Read /work/project/../secret"),
    ],
)
def test_relativize_title(title: str, expected: str) -> None:
    assert relativize_title(title, CWD) == expected


@pytest.mark.parametrize(
    ("title", "cwd", "expected"),
    [
        # The root and a folder that is not written normalised take the long way (relpath).
        ("Read /etc/hosts", "/", "Read etc/hosts"),
        ("Read //etc/hosts", "/", "Read etc/hosts"),
        ("Read /work/./project/a.py", "/work/project", "Read a.py"),
        ("Read /work/project/a.py", "/work/./project", "Read /work/project/a.py"),
        ("Read /work/project/a.py", "/work/project/", "Read a.py"),
        ("Read /work/project//src/a.py", "/work/project", "Read src/a.py"),
    ],
)
def test_relativize_title_against_any_cwd(title: str, cwd: str, expected: str) -> None:
    assert relativize_title(title, cwd) == expected


def test_client_capabilities_choose_the_terminal_key() -> None:
    assert client_profile({"_meta": {"terminal_output": True}}).terminal_key == "terminal_output"
    assert client_profile({"_meta": {"terminal_output_delta": True}}).terminal_key == "terminal_output_delta"
    assert client_profile({"terminal": True}).terminal_key is None
    assert client_profile({"_meta": {"terminal_output": "yes"}}).terminal_key is None
    assert client_profile(None).terminal_key is None


def test_raw_input_is_always_an_object() -> None:
    assert raw_input(CallInfo("c", "x", {"a": 1})) == {"a": 1}
    assert raw_input(CallInfo("c", "x", "[1, 2]")) == {"arguments": "[1, 2]"}
    assert raw_input(CallInfo("c", "x", [1, 2])) == {"arguments": [1, 2]}
    assert raw_input(CallInfo("c", "x", {"a": 1}), {"b": 2}) == {"b": 2}  # the presenter's wins
    assert raw_input(CallInfo("c", "x", {"a": 1}), "bare") == {"a": 1}
    assert raw_input(CallInfo("c", "x", "zz"), "bare") == {"input": "bare"}
    for ctx in (PLAIN, TERMINAL):
        update = announce_call(CallInfo("t", "bash", {"command": "ls"}, TERM_VIEW), "pending", ctx)
        assert update["rawInput"] == {"command": "ls"}
        generic = GenericCallView(title="t", raw_input="bare")
        assert permission_tool_call(CallInfo("g", "x", "zz", generic), ctx)["rawInput"] == {"input": "bare"}


def test_default_generic_card() -> None:
    info = CallInfo("c1", "mystery", {"a": 1}, None, "read")
    assert announce_call(info, "in_progress", PLAIN) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "mystery",
        "name": "mystery",
        "kind": "read",
        "rawInput": {"a": 1},
        "status": "in_progress",
    }
    raw = CallInfo("c2", "mystery", '{"a": ', None)
    assert announce_call(raw, "pending", PLAIN)["rawInput"] == {"arguments": '{"a": '}
    assert announce_call(raw, "pending", PLAIN)["kind"] == "other"


def test_generic_card_relative_title_absolute_locations() -> None:
    view = GenericCallView(
        title="Read /work/project/src/a.py",
        kind="read",
        raw_input={"path": "src/a.py"},
        locations=(Location(path="/work/project/src/a.py", line=3),),
        content=(text("note"),),
    )
    update = announce_call(CallInfo("c", "read", {}, view), "in_progress", PLAIN)
    assert update["title"] == "Read src/a.py"
    assert update["locations"] == [{"path": "/work/project/src/a.py", "line": 3}]
    assert update["content"] == [{"type": "content", "content": {"type": "text", "text": "note"}}]
    assert update["rawInput"] == {"path": "src/a.py"}


def test_diff_card_call_and_result() -> None:
    view = DiffCallView(
        title="Edit /work/project/a.py",
        diffs=(FileDiff(path="/work/project/a.py", old_text="x = 1\n", new_text="x = 2\n"),),
    )
    info = CallInfo("c", "edit", {}, view)
    call = announce_call(info, "pending", TERMINAL)
    assert call["kind"] == "edit"
    assert call["title"] == "Edit a.py"
    assert call["content"] == [
        {"type": "diff", "path": "/work/project/a.py", "oldText": "x = 1\n", "newText": "x = 2\n"}
    ]
    assert call["locations"] == [{"path": "/work/project/a.py"}]
    result_view = DiffResultView(
        title="Edited /work/project/a.py",
        diffs=(FileDiff(path="/work/project/a.py", old_text="a\nx = 1\nb\n", new_text="a\nx = 2\nb\n"),),
        locations=(Location(path="/work/project/a.py", line=2),),
    )
    (update,) = finish_call(info, ToolResult(content=(text("ok"),)), result_view, TERMINAL)
    assert update == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "status": "completed",
        "content": [
            {
                "type": "diff",
                "path": "/work/project/a.py",
                "oldText": "a\nx = 1\nb\n",
                "newText": "a\nx = 2\nb\n",
            }
        ],
        "locations": [{"path": "/work/project/a.py", "line": 2}],
        "title": "Edited a.py",
    }


def test_new_file_diff_has_null_old_text() -> None:
    view = DiffCallView(
        title="Write /x/new.txt", diffs=(FileDiff(path="/x/new.txt", old_text=None, new_text="hi"),)
    )
    call = announce_call(CallInfo("c", "write", {}, view), "pending", PLAIN)
    assert call["content"][0]["oldText"] is None
    assert call["title"] == "Write /x/new.txt"  # outside the cwd: stays absolute


TERM_VIEW = TerminalCallView(title="ls -la", description="List files", cwd="/work/project/sub")
TERM_ARGS = {"command": "ls -la", "description": "List files"}


def test_terminal_call_on_capable_clients() -> None:
    for ctx in (TERMINAL, DELTA):
        update = announce_call(CallInfo("t1", "bash", TERM_ARGS, TERM_VIEW), "in_progress", ctx)
        assert update == {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "ls -la",
            "name": "bash",
            "kind": "execute",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "List files"}},
                {"type": "terminal", "terminalId": "t1"},
            ],
            "rawInput": {"command": "ls -la", "description": "List files"},
            "_meta": {"terminal_info": {"terminal_id": "t1", "cwd": "/work/project/sub"}},
            "status": "in_progress",
        }


def test_terminal_cwd_defaults_to_the_session() -> None:
    view = TerminalCallView(title="pwd")
    update = announce_call(CallInfo("t", "bash", {}, view), "in_progress", TERMINAL)
    assert update["_meta"]["terminal_info"]["cwd"] == CWD
    assert update["content"] == [{"type": "terminal", "terminalId": "t"}]


def test_terminal_output_chunks() -> None:
    info = CallInfo("t1", "bash", {}, TERM_VIEW)
    assert output_chunk(info, "abc", TERMINAL) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t1",
        "_meta": {"terminal_output": {"terminal_id": "t1", "data": "abc"}},
    }
    delta = output_chunk(info, "abc", DELTA)
    assert delta is not None
    assert delta["_meta"] == {"terminal_output_delta": {"terminal_id": "t1", "data": "abc"}}
    assert output_chunk(info, "abc", PLAIN) is None
    assert output_chunk(info, "", TERMINAL) is None
    assert output_chunk(CallInfo("g", "x", {}, None), "abc", TERMINAL) is None


def test_terminal_finish_streamed_has_exit_and_no_content() -> None:
    # A non-zero exit is a failed call (clients draw completed as success); the client's own
    # terminal shows the exit, so the title stays the command.
    info = CallInfo("t1", "bash", {}, TERM_VIEW)
    view = TerminalResultView(output="a\nb\n", exit_code=2)
    updates = finish_call(
        info, ToolResult(content=(text("a\nb\n[exit code 2]"),)), view, TERMINAL, streamed=True
    )
    assert updates == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "failed",
            "_meta": {"terminal_exit": {"terminal_id": "t1", "exit_code": 2, "signal": None}},
        }
    ]


def test_terminal_finish_unstreamed_sends_the_output_once() -> None:
    info = CallInfo("t1", "bash", {}, TERM_VIEW)
    view = TerminalResultView(output="all of it\n", exit_code=0)
    first, last = finish_call(info, ToolResult(content=()), view, DELTA, streamed=False)
    assert first["_meta"] == {"terminal_output_delta": {"terminal_id": "t1", "data": "all of it\n"}}
    assert "content" not in last
    assert last["_meta"]["terminal_exit"] == {"terminal_id": "t1", "exit_code": 0, "signal": None}


def test_failed_terminal_keeps_its_terminal_with_a_reason_line() -> None:
    info = CallInfo("t1", "bash", {}, TERM_VIEW)
    view = TerminalResultView(output="partial", signal="SIGTERM", error="timed out after 120 s")
    result = ToolResult(content=(text("partial\n[timed out]"),), is_error=True)
    chunk, last = finish_call(info, result, view, TERMINAL, streamed=True)
    assert chunk["_meta"]["terminal_output"]["data"] == "[timed out after 120 s]\n"
    assert last["status"] == "failed"
    assert last["_meta"]["terminal_exit"] == {"terminal_id": "t1", "exit_code": None, "signal": "SIGTERM"}
    assert "content" not in chunk
    assert "content" not in last


def test_failed_terminal_without_a_result_view_uses_the_error_text() -> None:
    info = CallInfo("t1", "bash", {}, TERM_VIEW)
    result = ToolResult(
        content=(text('Error: invalid arguments: "command" must be a string'),), is_error=True
    )
    chunk, last = finish_call(info, result, None, TERMINAL)
    assert chunk["_meta"]["terminal_output"]["data"] == '[invalid arguments: "command" must be a string]\n'
    assert last["status"] == "failed"


def test_terminal_fallback_for_plain_clients_is_fenced() -> None:
    info = CallInfo("t1", "bash", "not json", TERM_VIEW)  # the card's command stands in
    call = announce_call(info, "in_progress", PLAIN)
    assert call == {
        "sessionUpdate": "tool_call",
        "toolCallId": "t1",
        "title": "ls -la",
        "name": "bash",
        "kind": "execute",
        "content": [{"type": "content", "content": {"type": "text", "text": "List files"}}],
        "rawInput": {"command": "ls -la", "description": "List files"},
        "status": "in_progress",
    }
    output = "# not a heading\n``` fake fence\n````\n"
    (update,) = finish_call(
        info, ToolResult(content=()), TerminalResultView(output=output, exit_code=1), PLAIN
    )
    body = update["content"][0]["content"]["text"]
    # A client that shows a card as one line sees the exit first, and in the title.
    assert body == "Exit code 1\n\n`````console\n# not a heading\n``` fake fence\n````\n`````"
    assert (update["status"], update["title"]) == ("failed", "ls -la (exit code 1)")
    assert "_meta" not in update
    (passed,) = finish_call(
        info, ToolResult(content=()), TerminalResultView(output="ok\n", exit_code=0), PLAIN
    )
    assert passed["status"] == "completed"
    assert "title" not in passed


def test_fallback_is_bounded_with_a_marker() -> None:
    info = CallInfo("t1", "bash", {}, TERM_VIEW)
    small = RenderContext(CWD, None, fallback_head=10, fallback_tail=10)
    (update,) = finish_call(info, ToolResult(content=()), TerminalResultView(output="x" * 100), small)
    body = update["content"][0]["content"]["text"]
    assert "[... 80 bytes omitted ...]" in body


def test_fallback_empty_output_and_signals() -> None:
    info = CallInfo("t1", "bash", {}, TERM_VIEW)
    (update,) = finish_call(
        info, ToolResult(content=()), TerminalResultView(output="", signal="SIGKILL"), PLAIN
    )
    assert update["content"][0]["content"]["text"] == "Killed by SIGKILL\n\n(no output)"
    assert (update["status"], update["title"]) == ("failed", "ls -la (killed by SIGKILL)")


def test_generic_results() -> None:
    info = CallInfo("g", "tool", {}, GenericCallView(title="Do"))
    (update,) = finish_call(info, ToolResult(content=(text("raw"),)), None, PLAIN)
    assert update["content"] == [{"type": "content", "content": {"type": "text", "text": "raw"}}]
    view = GenericResultView(title="Did /work/project/x", content=(text("pretty"),))
    (update,) = finish_call(info, ToolResult(content=(text("raw"),)), view, PLAIN)
    assert update["title"] == "Did x"
    assert update["content"][0]["content"]["text"] == "pretty"
    (failed,) = finish_call(info, ToolResult(content=(text("Error: boom"),), is_error=True), None, PLAIN)
    assert failed["status"] == "failed"
    assert failed["content"][0]["content"]["text"] == "Error: boom"


def test_terminal_result_on_a_generic_call_is_fenced() -> None:
    info = CallInfo("g", "tool", {}, GenericCallView(title="Run"))
    (update,) = finish_call(info, ToolResult(content=()), TerminalResultView(output="out"), TERMINAL)
    assert update["content"][0]["content"]["text"].startswith("```console\nout\n```")
    assert "_meta" not in update


def test_plan_results() -> None:
    plan = PlanView(entries=(PlanEntry(content="step", status="in_progress", priority="high"),))
    info = CallInfo("p", "todo", {}, GenericCallView(title="Plan"))
    updates = finish_call(info, ToolResult(content=()), plan, PLAIN)
    assert updates[0] == {
        "sessionUpdate": "plan",
        "entries": [{"content": "step", "priority": "high", "status": "in_progress"}],
    }
    assert updates[1]["status"] == "completed"


def test_permission_tool_call_repeats_the_card() -> None:
    info = CallInfo("t1", "bash", {}, TERM_VIEW)
    call: dict[str, Any] = permission_tool_call(info, TERMINAL)
    assert call["toolCallId"] == "t1"
    assert call["status"] == "pending"
    assert call["title"] == "ls -la"
    assert "sessionUpdate" not in call


def test_relative_view_paths_become_absolute() -> None:
    view = DiffCallView(title="Edit src/a.py", diffs=(FileDiff(path="src/a.py", old_text="a", new_text="b"),))
    call = announce_call(CallInfo("c", "edit", {}, view), "pending", PLAIN)
    assert call["content"][0]["path"] == "/work/project/src/a.py"
    assert call["locations"] == [{"path": "/work/project/src/a.py"}]
    read = GenericCallView(title="Read ../x.py", locations=(Location(path="../x.py", line=2),))
    assert announce_call(CallInfo("r", "read", {}, read), "pending", PLAIN)["locations"] == [
        {"path": "/work/x.py", "line": 2}
    ]


def test_cancelled_calls() -> None:
    term = CallInfo("t1", "bash", {}, TERM_VIEW)
    chunk, last = cancelled_call(term, TERMINAL, streamed=True)
    assert chunk["_meta"]["terminal_output"]["data"] == "[cancelled]\n"
    assert last["status"] == "failed"
    assert "content" not in last
    generic = CallInfo("g", "tool", {}, None)
    assert cancelled_call(generic, TERMINAL) == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "g", "status": "failed"}
    ]


def test_jetbrains_is_known_by_its_client_info() -> None:
    # JetBrains IDEs render terminal_output_delta without advertising it; they name themselves.
    for info in (
        {"name": "JetBrains.WebStorm", "version": "2026.1.1"},
        {"name": "AI Assistant", "version": "1", "_meta": {"platform": "intellij"}},
    ):
        assert client_profile({"terminal": True}, info).terminal_key == "terminal_output_delta"
    assert client_profile({"terminal": True}, {"name": "zed"}).terminal_key is None


def test_client_profiles_decide_where_commands_run() -> None:
    zed = {"terminal": True, "_meta": {"terminal_output": True}}
    toad = {"terminal": True, "fs": {"readTextFile": True}}
    jetbrains = {"name": "JetBrains.PyCharm", "version": "2026.1"}
    assert client_profile(zed) == ClientProfile(terminal_key="terminal_output")
    assert client_profile(toad) == ClientProfile(client_terminals=True, can_read=True)
    assert client_profile(toad, jetbrains) == ClientProfile(
        terminal_key="terminal_output_delta", can_read=True, option_names=True
    )
    assert client_profile({}) == ClientProfile()
    assert client_profile({}, {"name": "zed", "version": "0.200.0"}).option_names is True
    assert client_profile({}, {"name": "CodeCompanion.nvim", "version": "1.0.0"}).option_names is False
    assert client_profile(zed, terminals="client") == ClientProfile(client_terminals=True)
    assert client_profile(toad, terminals="agent") == ClientProfile(can_read=True)
    assert client_profile({"_meta": {"terminal_output": True}}, terminals="client").client_terminals is False


def test_a_command_in_the_clients_terminal_keeps_it_on_the_card() -> None:
    info = CallInfo("t1", "bash", TERM_ARGS, TERM_VIEW)
    terminal = {"type": "terminal", "terminalId": "term-7"}
    described = {"type": "content", "content": {"type": "text", "text": "List files"}}
    assert attach_terminal(info, "term-7")["content"] == [described, terminal]
    (done,) = finish_call(
        info, ToolResult(content=()), TerminalResultView(output="x", exit_code=2), PLAIN, attached="term-7"
    )
    assert done["content"] == [
        described,
        terminal,
        {"type": "content", "content": {"type": "text", "text": "Exit code 2"}},
    ]
    assert done["rawOutput"] == {"output": "x"}  # for clients that list raw output (acpx)
    (cancelled,) = cancelled_call(info, PLAIN, attached="term-7")
    assert cancelled["status"] == "failed"
    assert cancelled["content"][:2] == [described, terminal]


def test_a_cancelled_command_shows_a_plain_client_what_it_printed() -> None:
    info = CallInfo("t1", "bash", TERM_ARGS, TERM_VIEW)
    (update,) = cancelled_call(info, PLAIN, partial="compiling\n")
    assert update["status"] == "failed"
    assert update["content"][0]["content"]["text"] == "```console\ncompiling\n```\n\ncancelled"
    assert cancelled_call(info, PLAIN) == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "failed"}
    ]


# -- a call's own calls (a subagent's) -------------------------------------------------------

NESTING = RenderContext(CWD, "terminal_output", nested_calls=True)
TASK = CallInfo(
    "t1", "task", {"description": "Look", "prompt": "..."}, GenericCallView(title="Look", kind="think")
)


def test_only_a_client_that_says_it_nests_gets_child_cards() -> None:
    assert client_profile({"_meta": {"parentToolCallId": True}}).nested_calls
    assert not client_profile({"_meta": {"parentToolCallId": "yes"}}).nested_calls
    assert not client_profile({"subagents": {}}).nested_calls  # the draft RFD's child sessions: not sent
    assert RenderContext.for_profile(CWD, ClientProfile(nested_calls=True)).nested_calls
    # A subagent's commands are terminals only where they are cards of their own.
    assert TERMINAL.for_children().terminal_key is None
    assert NESTING.for_children().terminal_key == "terminal_output"
    assert not RenderContext(CWD, None, notices=True, compaction=True).for_children().notices


def test_a_subagents_calls_are_lines_of_its_task_card_for_a_client_that_does_not_nest() -> None:
    steps = StepList()
    child = CallInfo("c1", "bash", {"command": "ls *.py"}, TerminalCallView(title="ls *.py"))
    assert steps.feed(announce_call(child, "pending", PLAIN))
    assert not steps.feed(tool_call_update("c1", meta={"terminal_output": {"data": "x"}}))  # output: no line
    assert not steps.feed(tool_call_update("c9", "completed"))  # never announced: not a step
    assert steps.feed(tool_call_update("c1", "in_progress", title="ls *.py (in src)"))
    assert steps.text() == "- … ls \\*.py (in src)"
    assert steps_update(TASK, steps, NESTING) is None
    update = steps_update(TASK, steps, PLAIN)
    # The title says which call is going: a collapsed card (Toad's) shows that much.
    going = [_text_block("- … ls \\*.py (in src)")]
    assert update == tool_call_update("t1", title="Look · ls *.py (in src)", content=going)
    steps.feed(tool_call_update("c1", "completed"))
    done = finish_call(TASK, ToolResult(content=(text("Found 2."),)), None, PLAIN, steps=steps)
    lines = [_text_block("- ✓ ls \\*.py (in src)"), _text_block("Found 2.")]
    assert done == [tool_call_update("t1", "completed", title="Look", content=lines)]
    nested_done = finish_call(TASK, ToolResult(content=(text("Found 2."),)), None, NESTING, steps=steps)
    assert nested_done == [tool_call_update("t1", "completed", content=[_text_block("Found 2.")])]
    (cancelled,) = cancelled_call(TASK, PLAIN, steps=steps)
    assert cancelled["status"] == "failed"
    assert cancelled["title"] == "Look"  # the whole card: a question may have shown the child's
    assert cancelled["content"] == [_text_block("- ✓ ls \\*.py (in src)")]


def test_a_title_keeps_its_text_and_loses_only_what_markdown_would_read() -> None:
    steps = StepList()
    titles = ["Edit my_file.py", "wc -l < a.txt", "`rm` _all_ [x](y) <b> ~z~ a\\b", "two\n  lines", "x" * 300]
    for n, title in enumerate(titles):
        steps.feed({"sessionUpdate": "tool_call", "toolCallId": f"c{n}", "title": title, "status": "failed"})
    lines = steps.text().splitlines()
    assert lines[:4] == [
        "- ✗ Edit my_file.py",
        "- ✗ wc -l < a.txt",
        "- ✗ \\`rm\\` \\_all\\_ \\[x](y) \\<b> \\~z\\~ a\\\\b",
        "- ✗ two lines",
    ]
    assert lines[4] == "- ✗ " + "x" * 159 + "…"


def test_a_childs_question_is_asked_on_its_card_or_on_its_tasks() -> None:
    child = CallInfo("c1", "write", {}, GenericCallView(title="Write a.txt", kind="edit"))
    card = permission_tool_call(child, PLAIN)
    assert child_question(card, TASK, NESTING) == {**card, "_meta": {"parentToolCallId": "t1"}}
    assert child_question(card, TASK, PLAIN) == {**card, "toolCallId": "t1", "title": "Look · Write a.txt"}
    restored = steps_card(TASK, StepList(), PLAIN, "in_progress")
    assert {k: restored[k] for k in ("toolCallId", "title", "kind", "status")} == {  # type: ignore[literal-required]
        "toolCallId": "t1",
        "title": "Look",
        "kind": "think",
        "status": "in_progress",
    }


def _text_block(value: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": value}}
