"""A tool call's card while its arguments stream: titled by the tool's own presenter from the
part that has arrived, through the real agent process and a real HTTP stream (the scripted
model's streamed calls are pinned by the ``streamed_card_titles`` wire golden)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_openai import FakeOpenAI, chunk, stream_reply, tool_delta

from dsh_acp import (
    Finish,
    ModelRequest,
    ScriptedModel,
    ScriptError,
    ToolCallArguments,
    ToolCallRequest,
    ToolCallStart,
)
from dsh_acp.loop._streaming_cards import preview_plan, preview_title
from dsh_acp.testing import AcpClient, AcpSchema, Normalizer, golden_diff
from dsh_tools import GenericCallView, ToolDefinition, text
from reference_tools.ask import ask_user_tool
from reference_tools.fs import edit_tool, read_tool, write_tool
from reference_tools.todo import todo_tool

pytestmark = pytest.mark.anyio

GOLDEN = Path(__file__).parent.parent / "fixtures" / "streaming" / "write_titled_while_streaming.jsonl"


def _arguments(*pieces: str) -> list[dict[str, Any]]:
    return [chunk(tool_calls=[tool_delta(0, arguments=piece)]) for piece in pieces]


def _agent_args(server: FakeOpenAI, tmp_path: Path) -> list[str]:
    return [
        "--deterministic",
        "--mode",
        "accept_edits",
        "--model",
        "openai:fake",
        "--base-url",
        server.base_url,
        "--state-dir",
        str(tmp_path / "state"),
    ]


def _env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "config"), "DSH_API_KEY": ""}


@asynccontextmanager
async def _session(
    acp_schema: AcpSchema, server: FakeOpenAI, tmp_path: Path
) -> AsyncIterator[tuple[AcpClient, str]]:
    """The agent on ``server``'s model, initialized, with a session in ``tmp_path``; the client's
    messages are checked against the schema at the end."""
    async with AcpClient.subprocess(
        _agent_args(server, tmp_path), schema=acp_schema, env=_env(tmp_path)
    ) as client:
        await client.initialize()
        yield client, await client.new_session(str(tmp_path))
    client.assert_valid()


@asynccontextmanager
async def _prompting(client: AcpClient, sid: str, text: str) -> AsyncIterator[list[Any]]:
    """A prompt whose turn runs while the body does; the list holds its answer afterwards."""
    answer: list[Any] = []

    async def prompt() -> None:
        answer.append(await client.prompt(sid, text))

    async with anyio.create_task_group() as group:
        group.start_soon(prompt)
        yield answer


async def test_a_write_is_titled_while_its_content_still_streams(
    acp_schema: AcpSchema, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    streamed = stream_reply(
        chunk(tool_calls=[tool_delta(0, id="call_w", name="write", arguments="")]),
        *_arguments('{"file_path": "no', 'tes.txt", "content": "'),
        *_arguments(*(f"line {n}\\n" for n in range(8)), '"}'),
        chunk(finish="tool_calls"),
        pause=0.02,
        hold_after=6,  # the name, the path and two lines of content are out; six more lines to go
    )
    replies = [streamed, stream_reply(chunk("Written."), chunk(finish="stop"))]
    async with FakeOpenAI(replies, title="Notes") as server:
        async with AcpClient.subprocess(
            _agent_args(server, tmp_path), schema=acp_schema, env=_env(tmp_path)
        ) as client:
            await client.initialize({"fs": {"readTextFile": False, "writeTextFile": False}})
            sid = await client.new_session(str(workspace))
            first = len(client.agent_messages)
            async with _prompting(client, sid, "Write the notes") as answer:
                await client.wait_for(
                    lambda _: any("title" in u for u in client.updates(sid, ["tool_call_update"]))
                )
                # The server has not sent the rest of the arguments: the title came mid-stream.
                (retitled,) = client.updates(sid, ["tool_call_update"])
                assert retitled == {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "call_w",
                    "title": "Write notes.txt",
                }
                server.resume()
            assert answer == [{"stopReason": "end_turn"}]
            await client.wait_for(lambda _: bool(client.updates(sid, ["session_info_update"])))
            messages = client.agent_messages[first:]
            cards = client.updates(sid, ["tool_call", "tool_call_update"])
            shown_inputs = [u["rawInput"] for u in cards if "rawInput" in u]
        client.assert_valid()
    assert (workspace / "notes.txt").read_text() == "".join(f"line {n}\n" for n in range(8))
    # A card announced before its arguments came must not show them as empty: a write's full
    # card has no rawInput to replace it with, so the editor would show "{}" for good.
    assert shown_inputs == []
    normalizer = Normalizer([str(workspace)], [str(tmp_path)], pin_agent=True)
    normalizer.add_session(sid)
    got = [
        normalizer.line(m)
        for m in messages
        if m.get("params", {}).get("update", {}).get("sessionUpdate") != "available_commands_update"
    ]
    if request.config.getoption("--update-golden"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text("".join(line + "\n" for line in got), encoding="utf-8")
    expected = GOLDEN.read_text(encoding="utf-8").splitlines()
    assert got == expected, golden_diff(expected, got, GOLDEN.stem)


async def test_arguments_that_make_no_title_leave_the_card_alone_and_the_agent_serving(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    long_path = "d/" * 400 + "x.py"
    garbage = stream_reply(
        chunk(tool_calls=[tool_delta(0, id="call_a", name="read", arguments="")]),
        # Not JSON, then JSON of the wrong shape, a lone surrogate, a path too long for a title.
        *_arguments("\x00{{[[", '"file_path": [[["'),
        chunk(tool_calls=[tool_delta(1, id="call_b", name="read", arguments='["a", ')]),
        chunk(tool_calls=[tool_delta(2, id="call_c", name="read", arguments='{"file_path": "\\ud800"')]),
        chunk(
            tool_calls=[
                tool_delta(3, id="call_d", name="read", arguments=json.dumps({"file_path": long_path})[:-1])
            ]
        ),
        chunk(tool_calls=[tool_delta(3, arguments=', "limit": 1}')]),
        chunk(finish="tool_calls"),
        pause=0.01,
    )
    replies = [
        garbage,
        stream_reply(chunk("Those failed."), chunk(finish="stop")),
        stream_reply(chunk("Still here."), chunk(finish="stop")),
    ]
    async with (
        FakeOpenAI(replies, title="Reads") as server,
        _session(acp_schema, server, tmp_path) as (client, sid),
    ):
        assert await client.prompt(sid, "Read them") == {"stopReason": "end_turn"}
        assert await client.prompt(sid, "Again?") == {"stopReason": "end_turn"}
        updates = client.updates(sid, ["tool_call", "tool_call_update"])
    announced = [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]
    assert announced == ["call_a", "call_b", "call_c", "call_d"]
    retitled = [
        (u["toolCallId"], u["title"]) for u in updates if set(u) == {"sessionUpdate", "toolCallId", "title"}
    ]
    # Only the long path made a title, cut to a bounded length; the rest kept the tool's name.
    assert [call_id for call_id, _ in retitled] == ["call_d"]
    assert retitled[0][1].startswith("Read d/d/d/")
    assert len(retitled[0][1]) == 200
    assert retitled[0][1].endswith("…")
    finals = {u["toolCallId"]: u["status"] for u in updates if u.get("status") in ("completed", "failed")}
    assert finals == {"call_a": "failed", "call_b": "failed", "call_c": "failed", "call_d": "failed"}


# -- the title of partial arguments, tool by tool ------------------------------------------------


def _jump_tool() -> ToolDefinition:
    """A tool as an MCP server gives one: a JSON Schema, a presenter that trusts its arguments."""

    async def run(args: Any, execution: Any) -> Any:
        return [text("jumped")]

    return ToolDefinition(
        name="jump",
        description="Jump to a line.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
            "required": ["path", "line"],
        },
        execute=run,
        present_call=lambda args: GenericCallView(title=f"Jump to {args.get('path')}:{args.get('line')}"),
    )


@pytest.mark.parametrize(
    ("definition", "partial", "title"),
    [
        (read_tool, '{"file_path": "src/a.py"', "Read src/a.py"),
        (read_tool, '{"file_path": "src/a.p', None),  # not the half of a path
        (read_tool, '{"file_pa', None),
        (read_tool, '{"file_path": "/w/src/a.py", "offset": 12', "Read src/a.py"),  # 12 may be 120
        (read_tool, '{"file_path": "/w/src/a.py", "offset": 12, ', "Read src/a.py (from line 12)"),
        (read_tool, '{"offset": 3, "file_path": "a.py"}', "Read a.py (from line 3)"),
        (read_tool, '{"file_path": "a.py", "offset": 12, "lim', "Read a.py (from line 12)"),
        (read_tool, '{"file_path": "a.py", "offset": 12, "limit"', "Read a.py (from line 12)"),
        (read_tool, '{"file_path": "a.py", "offset": 12, "limit": 4', "Read a.py (from line 12)"),
        (edit_tool, '{"file_path": "a.py", "old_string": "def f(', "Edit a.py"),
        (write_tool, '{"content": "print(1)\\n', None),  # the path is what the title needs
        (write_tool, '{"file_path": "a.py", "content": "x', "Write a.py"),
        (ask_user_tool(), '{"question": "Which database', None),
        (ask_user_tool(), '{"question": "Which database?"', "Question: Which database?"),
        (read_tool, "not json at all", None),
        (read_tool, '["file_path", ', None),
        (read_tool, '{"file_path": 7', None),
        (read_tool, '{"file_path": 7, ', None),  # the tool's own check refuses it, quietly
        (read_tool, '{"file_path": "\\ud800"', None),
        (read_tool, '{"file_path": "a\\nb"', "Read a\nb"),
    ],
)
def test_a_partial_title_is_the_presenters_title_of_what_is_complete(
    definition: ToolDefinition, partial: str, title: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    assert preview_title(definition, partial, "/w") == title
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # incomplete is normal here


def test_a_missing_required_argument_that_is_not_a_string_means_no_title() -> None:
    assert preview_title(_jump_tool(), '{"path": "a.py"', "/w") is None  # never "a.py:None"
    assert preview_title(_jump_tool(), '{"path": "a.py", "line": 3}', "/w") == "Jump to a.py:3"


# -- the scripted model streams a call's arguments in pieces -------------------------------------


async def test_a_script_streams_a_calls_arguments_in_its_pieces() -> None:
    model = ScriptedModel([[{"tool_calls": [{"id": "c", "name": "read", "arguments": ['{"a', '": 1}']}]}]])
    events = [event async for event in model.stream(ModelRequest(messages=[], tools=[]))]
    assert events == [
        ToolCallStart("c", "read"),
        ToolCallArguments("c", '{"a'),
        ToolCallArguments("c", '{"a": 1}'),
        ToolCallRequest("c", "read", '{"a": 1}'),
        Finish("tool_calls"),
    ]


def test_a_script_with_bad_pieces_is_refused() -> None:
    call = {"id": "c", "name": "read", "arguments": ["{", 3], "pause_ms": -1}
    with pytest.raises(
        ScriptError, match=r"a string or a list of strings; .*pause_ms must be a non-negative"
    ):
        ScriptedModel([[{"tool_calls": [call]}]])


# -- a plan, entry by entry -------------------------------------------------------------------

_PLAN = [
    {"content": "Read the failing test", "status": "completed"},
    {"content": "Fix the parser", "status": "in_progress", "priority": "high"},
    {"content": "Run the suite", "status": "pending"},
]


def _wire(*entries: dict[str, Any]) -> list[dict[str, Any]]:
    """Plan entries as the ``plan`` update carries them."""
    return [
        {"content": e["content"], "priority": e.get("priority", "medium"), "status": e["status"]}
        for e in entries
    ]


def _plan_pieces(call_id: str, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``todo_write`` of ``entries``, its arguments cut mid-entry: the call, then one piece per
    entry that ends inside the next entry's content (the last piece closes the call)."""
    text = json.dumps({"todos": entries})
    cuts = [text.index(e["content"]) + 3 for e in entries[1:]]
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return [
        chunk(tool_calls=[tool_delta(0, id=call_id, name="todo_write", arguments="")]),
        *_arguments(*pieces),
    ]


def _plans(client: AcpClient, sid: str) -> list[list[dict[str, Any]]]:
    return [u["entries"] for u in client.updates(sid, ["plan"])]


async def test_a_plan_shows_its_entries_as_they_stream(acp_schema: AcpSchema, tmp_path: Path) -> None:
    # A model may take seconds to write a long plan: each entry is shown once it is whole (the
    # next has begun), not all of them at the end; the complete call's plan closes it.
    streamed = stream_reply(
        *_plan_pieces("call_p", _PLAN),
        chunk(finish="tool_calls"),
        pause=0.12,  # more than the retitle interval: every piece may show
        hold_after=3,  # the call, the first entry, the second: the third is still to come
    )
    replies = [streamed, stream_reply(chunk("Planned."), chunk(finish="stop"))]
    async with (
        FakeOpenAI(replies, title="Plan") as server,
        _session(acp_schema, server, tmp_path) as (client, sid),
    ):
        async with _prompting(client, sid, "Plan it") as answer:
            await client.wait_for(lambda _: _wire(*_PLAN[:2]) in _plans(client, sid))
            # The server holds the rest of the call: these came while it streamed.
            assert _plans(client, sid) == [_wire(_PLAN[0]), _wire(*_PLAN[:2])]
            server.resume()
        assert answer == [{"stopReason": "end_turn"}]
        plans = _plans(client, sid)
        cards = client.updates(sid, ["tool_call", "tool_call_update"])
    assert plans == [_wire(_PLAN[0]), _wire(*_PLAN[:2]), _wire(*_PLAN)]
    assert cards == []  # a plan is the session's plan, never a tool card


async def test_an_entry_the_throttle_held_back_shows_though_the_stream_pauses(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    # Pieces that come faster than the throttle's interval, then a pause (a model thinking for
    # seconds mid-call): the entry that became whole with the last piece before the pause shows
    # once the interval is over, not when the next piece comes.
    streamed = stream_reply(*_plan_pieces("call_p", _PLAN), chunk(finish="tool_calls"), hold_after=3)
    replies = [streamed, stream_reply(chunk("Planned."), chunk(finish="stop"))]
    async with (
        FakeOpenAI(replies, title="Plan") as server,
        _session(acp_schema, server, tmp_path) as (client, sid),
    ):
        async with _prompting(client, sid, "Plan it") as answer:
            await client.wait_for(lambda _: _wire(*_PLAN[:2]) in _plans(client, sid))
            server.resume()
        assert answer == [{"stopReason": "end_turn"}]
        assert _plans(client, sid)[-1] == _wire(*_PLAN)


@pytest.mark.parametrize("ending", ["invalid", "cancelled", "cut off"])
async def test_a_streamed_plan_the_tool_does_not_keep_gives_way_to_the_one_before(
    acp_schema: AcpSchema, tmp_path: Path, ending: str
) -> None:
    # The plan shown while a call streamed is only a preview: when the call does not become the
    # session's plan (its arguments are refused, the turn is cancelled, the response is cut off
    # by the model's output limit), the editor's plan is the last one the tool kept again.
    first = [{"content": "Look around", "status": "in_progress"}]
    second = [*_PLAN[:2], {"content": "Run the suite", "status": "bogus"}]
    pieces = _plan_pieces("call_q", second if ending == "invalid" else _PLAN)
    if ending == "cut off":
        pieces = [*pieces[:-1], chunk(finish="length")]  # the arguments never close
    else:
        pieces.append(chunk(finish="tool_calls"))
    kept = stream_reply(*_plan_pieces("call_p", first), chunk(finish="tool_calls"))
    preview = stream_reply(*pieces, pause=0.12, hold_after=3 if ending == "cancelled" else None)
    replies = [
        kept,
        stream_reply(chunk("Planned."), chunk(finish="stop")),
        preview,
        stream_reply(chunk("Stopped."), chunk(finish="stop")),
        stream_reply(chunk("Yes."), chunk(finish="stop")),
    ]
    async with (
        FakeOpenAI(replies, title="Plan") as server,
        _session(acp_schema, server, tmp_path) as (client, sid),
    ):
        assert await client.prompt(sid, "Plan it") == {"stopReason": "end_turn"}
        assert _plans(client, sid) == [_wire(*first)]
        async with _prompting(client, sid, "Plan again") as answer:
            await client.wait_for(lambda _: _wire(*_PLAN[:2]) in _plans(client, sid))
            if ending == "cancelled":
                await client.cancel(sid)
                server.resume()
        plans = _plans(client, sid)
        assert await client.prompt(sid, "Still there?") == {"stopReason": "end_turn"}
    stop = {"invalid": "end_turn", "cancelled": "cancelled", "cut off": "max_tokens"}[ending]
    assert answer == [{"stopReason": stop}]
    assert plans == [_wire(*first), _wire(_PLAN[0]), _wire(*_PLAN[:2]), _wire(*first)]


async def test_a_loaded_session_gives_back_the_plan_its_log_kept(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    # The plan to go back to is part of the session's state, restored from its log: a session
    # loaded by a new agent process whose streamed plan is refused shows the logged plan again.
    first = [{"content": "Look around", "status": "in_progress"}]
    refused = [*_PLAN[:2], {"content": "Run the suite", "status": "bogus"}]
    replies = [
        stream_reply(*_plan_pieces("call_p", first), chunk(finish="tool_calls")),
        stream_reply(chunk("Planned."), chunk(finish="stop")),
        stream_reply(*_plan_pieces("call_q", refused), chunk(finish="tool_calls"), pause=0.12),
        stream_reply(chunk("Refused."), chunk(finish="stop")),
    ]
    async with FakeOpenAI(replies, title="Plan") as server:
        args, env = _agent_args(server, tmp_path), _env(tmp_path)
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            assert await client.prompt(sid, "Plan it") == {"stopReason": "end_turn"}
        async with AcpClient.subprocess(args, schema=acp_schema, env=env) as client:
            await client.initialize()
            params = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
            await client.request("session/load", params)
            assert _plans(client, sid) == [_wire(*first)]  # the replay's
            assert await client.prompt(sid, "Plan again") == {"stopReason": "end_turn"}
            plans = _plans(client, sid)
        client.assert_valid()
    assert plans == [_wire(*first), _wire(_PLAN[0]), _wire(*_PLAN[:2]), _wire(*first)]


_A = '{"content": "Read it", "status": "completed"}'


@pytest.mark.parametrize(
    ("partial", "shown"),
    [
        ('{"todos": [' + _A + ', {"con', ["Read it"]),
        # The last item waits for the next to begin: a comma after it does not say whether it
        # ends the entry or one of the entry's members.
        ('{"todos": [' + _A + ', {"content": "Fix it", "status": "in_progress"}, ', ["Read it"]),
        ('{"todos": [' + _A + ', {"content": "Fix it", "status": "in_progress"}, {', ["Read it", "Fix it"]),
        ('{"todos": [' + _A, None),  # the entry may go on ("priority" may follow)
        ('{"todos": [' + _A + "]}", None),  # complete: the call's result shows it
        ('{"todos": [{"content": "Read it", "status": "bogus"}, {', None),  # the presenter refuses
        ('{"todos": "a string", ', None),
        ('{"todos": [7, ', None),
        ("[1, 2, ", None),
        ("not json", None),
    ],
)
def test_a_partial_plan_is_the_presenters_plan_of_the_whole_entries(
    partial: str, shown: list[str] | None
) -> None:
    view = preview_plan(todo_tool(), partial)
    assert (None if view is None else [entry.content for entry in view.entries]) == shown
