"""End to end with the official ACP client: the TypeScript SDK (``@agentclientprotocol/sdk``, pinned in
``tests/client/package-lock.json``) plays Zed against the real ``dsh-acp`` over stdio.

``tests/client/drive.mjs`` runs one of four scenarios and prints everything it saw.

The ``tools`` run initializes with Zed's capabilities, opens a session in a seeded temp workspace
and sends one prompt whose scripted model (``tests/client/model.json``) runs ``bash`` (output on
stdout and stderr, exit 3), reads ``src/app.py``, writes ``src/util.py`` and edits ``src/app.py``.
It allows every permission request once and serves ``fs/*`` from the real files.

The ``editor`` run is everything else an editor draws, in one session: Zed's capabilities
plus boolean config options; the model and mode pickers of ``session/new``; the ``/`` menu; a prompt
whose script (``tests/client/editor.json``) writes its todo list twice and reports usage (the live
plan, the context meter, then the session title); the mode changed from the config-option picker
and from the mode picker; ``/tools``, ``/mode bypass`` and ``/compact`` typed as prompts; and the
history list (``session/list``).

The ``terminals`` run is a client that offers terminals and no live-output convention (as Toad and
acpx do): the driver serves ``terminal/*`` with real subprocesses, and the script
(``tests/client/terminals.json``) runs a command that prints on both streams, one that exits 3, and
a ``sleep 30`` the driver cancels once its terminal is in the card.

The SDK parses leniently: unknown keys are dropped, a field with an invalid value falls back to its
default (``status: "running"`` simply vanishes), an invalid content block is skipped, and a message it
cannot parse at all is only logged. A run that merely succeeds proves little, so the tests below
assert what the SDK handed to the client app, that this is exactly what the agent wrote (nothing
dropped, nothing defaulted), that the SDK logged nothing, and the order of the raw transcript.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

CLIENT_DIR = Path(__file__).parent / "client"
SDK = "@agentclientprotocol/sdk"

# Long enough that the edit's applied hunk (3 lines of context) is a proper part of the file: the
# result card must carry the hunk, not the whole file and not the call-time snippet.
APP_PY = '''"""A tiny app."""

import sys


def greet(name):
    return "Hello, " + name


def main(argv):
    for name in argv[1:]:
        print(greet(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''
EDITED_APP_PY = APP_PY.replace('return "Hello, " + name', 'return f"Hello, {name}!"')
UTIL_PY = "def shout(text):\n    return text.upper()\n"
# What the scripted bash command prints (stdout, then stderr 0.3 s later) and its exit status.
BASH_OUTPUT = "collecting 3 tests\nFAILED test_greet\n"
BASH_EXIT = 3
CALLS = ("call-bash", "call-read", "call-write", "call-edit")
ASKING_CALLS = ("call-bash", "call-write", "call-edit")  # mode "default": edits and commands ask


@dataclass
class Run:
    """What the driver recorded, with lookups the assertions share."""

    doc: dict[str, Any]
    workspace: Path

    @property
    def session_id(self) -> str:
        return str(self.doc["newSession"]["sessionId"])

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.doc["events"] if event["kind"] == kind]

    def updates(self, call_id: str | None = None) -> list[dict[str, Any]]:
        """The ``update`` of each ``session/update`` the SDK delivered, in arrival order."""
        updates = [event["params"]["update"] for event in self.events("session_update")]
        return [u for u in updates if call_id is None or u.get("toolCallId") == call_id]

    def announcement(self, call_id: str) -> dict[str, Any]:
        calls = [u for u in self.updates(call_id) if u["sessionUpdate"] == "tool_call"]
        assert len(calls) == 1, f"{call_id} announced {len(calls)} times"
        return calls[0]

    def call_updates(self, call_id: str) -> list[dict[str, Any]]:
        return [u for u in self.updates(call_id) if u["sessionUpdate"] == "tool_call_update"]

    def fs_requests(self, kind: str, path: Path) -> list[dict[str, Any]]:
        return [e["params"] for e in self.events(kind) if e["params"]["path"] == str(path)]

    def wire(self, direction: str) -> list[tuple[int, dict[str, Any]]]:
        """(transcript index, message) of every line one side wrote, in wire order."""
        return [(i, t["message"]) for i, t in enumerate(self.doc["transcript"]) if t["dir"] == direction]

    def delivered(self) -> list[tuple[int, dict[str, Any]]]:
        """(transcript index of its line, ``update`` as the SDK delivered it) of every session update.

        The SDK hands notifications over in wire order (the tests check that they are the raw ones),
        so the n-th delivered update is the n-th on the wire: this places what the editor got.
        """
        lines = [i for i, m in self.wire("agent") if m.get("method") == "session/update"]
        updates = self.updates()
        assert len(lines) == len(updates), "the SDK delivered a different number of updates"
        return list(zip(lines, updates, strict=True))

    def exchanges(self) -> list[Exchange]:
        """Each request the editor made, with where it and its answer sit on the wire and the result
        the SDK returned to the app."""
        requests = [(i, m) for i, m in self.wire("client") if "method" in m and "id" in m]
        assert [m["method"] for _, m in requests] == [c["method"] for c in self.doc["calls"]]
        exchanges = []
        for (asked, request), sdk_call in zip(requests, self.doc["calls"], strict=True):
            assert request["params"] == sdk_call["params"]
            answers = [
                (i, m) for i, m in self.wire("agent") if m.get("id") == request["id"] and "method" not in m
            ]
            assert len(answers) == 1, (
                f"{request['method']} (id {request['id']}) answered {len(answers)} times"
            )
            answered, answer = answers[0]
            exchanges.append(
                Exchange(request["method"], request["params"], asked, answered, answer, sdk_call["result"])
            )
        return exchanges

    def during(self, exchange: Exchange) -> list[dict[str, Any]]:
        """The updates the editor got between sending a request and getting its answer."""
        return [u for i, u in self.delivered() if exchange.asked < i < exchange.answered]

    def next_update(self, exchange: Exchange) -> dict[str, Any]:
        """The first update after an answer; it must be the very next line the agent wrote."""
        following = [(i, m) for i, m in self.wire("agent") if i > exchange.answered]
        assert following, f"nothing followed the answer to {exchange.method}"
        line = following[0][0]
        updates = [u for i, u in self.delivered() if i == line]
        assert updates, f"the line after the answer to {exchange.method} is no update: {following[0][1]}"
        return updates[0]


@dataclass
class Exchange:
    """One editor request: its method and params, the wire indexes of the request and of its
    answer, the raw answer and the result the SDK returned to the app."""

    method: str
    params: dict[str, Any]
    asked: int
    answered: int
    answer: dict[str, Any]
    result: Any


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        message = f"{tool} is not installed: the official TypeScript client test needs node and npm"
        if os.environ.get("DSH_REQUIRE_NODE"):  # CI sets it: there a missing node is a failure
            pytest.fail(message)
        pytest.skip(message)
    return path


def _without_model_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment minus what would choose the agent's model or key for it: the driver says."""
    names = ("DSH_MODEL", "DSH_BASE_URL", "DSH_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY")
    return {name: value for name, value in environ.items() if name not in names}


def _drive(
    request: pytest.FixtureRequest,
    scenario: str,
    script: str | None,
    *,
    model: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Run:
    """Run one driver scenario: with ``script`` (in ``tests/client``) the agent plays a scripted
    model; else ``model`` is the driver's ``--model openai:NAME --base-url URL`` and ``env`` what
    the agent's environment adds."""
    node = _need("node")
    _need("npm")
    request.getfixturevalue("pinned_sdk")  # `npm ci` in tests/client on first use (the root conftest)
    tmp_path_factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    # Paths on the wire are compared with the workspace's: resolve it as the agent will see it.
    workspace = tmp_path_factory.mktemp("workspace").resolve()
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text(APP_PY)
    (workspace / "README.md").write_text("# tiny app\n")
    result = subprocess.run(
        [
            node,
            str(CLIENT_DIR / "drive.mjs"),
            "--python",
            sys.executable,
            "--workspace",
            str(workspace),
            "--state-dir",
            str(tmp_path_factory.mktemp("state")),
            *(["--script", str(CLIENT_DIR / script)] if script is not None else model),
            "--scenario",
            scenario,
            "--timeout-ms",
            "20000",
        ],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=40,
        check=False,
        env={**_without_model_settings(os.environ), **(env or {})},
    )
    assert result.returncode == 0, f"the driver failed:\n{result.stdout[-8000:]}\n{result.stderr[-4000:]}"
    return Run(json.loads(result.stdout), workspace)


@pytest.fixture(scope="module")
def run(request: pytest.FixtureRequest) -> Run:
    return _drive(request, "tools", "model.json")


def test_the_sdk_accepted_every_message_as_sent(run: Run) -> None:
    # The SDK logs what it cannot parse or handle, and silently drops unknown keys, invalid values
    # and invalid content blocks: what the editor's handlers got must be exactly what the agent wrote.
    assert run.doc["sdkErrors"] == []
    agent_messages = [message for _, message in run.wire("agent")]
    raw_updates = [m["params"] for m in agent_messages if m.get("method") == "session/update"]
    assert raw_updates == [event["params"] for event in run.events("session_update")]
    raw_requests = [m["params"] for m in agent_messages if "method" in m and "id" in m]
    handled = ("request_permission", "read_text_file", "write_text_file")
    assert raw_requests == [event["params"] for event in run.doc["events"] if event["kind"] in handled]
    assert all("unparsable" not in message for message in agent_messages)


def test_handshake_and_session(run: Run) -> None:
    assert run.doc["initialize"]["protocolVersion"] == 1
    session_id = run.session_id
    assert isinstance(session_id, str)
    assert session_id
    every_params = [e["params"] for e in run.doc["events"] if "params" in e]
    assert every_params
    assert {params["sessionId"] for params in every_params} == {session_id}


def test_bash_is_a_live_terminal_card(run: Run) -> None:
    call = run.announcement("call-bash")
    assert call["kind"] == "execute"
    assert {"type": "terminal", "terminalId": "call-bash"} in call["content"]
    info = call["_meta"]["terminal_info"]
    assert info["terminal_id"] == "call-bash"
    assert Path(info["cwd"]).is_absolute()
    assert Path(info["cwd"]) == run.workspace

    updates = run.call_updates("call-bash")
    outputs = [u["_meta"]["terminal_output"] for u in updates if "terminal_output" in u.get("_meta", {})]
    assert outputs, "no live output reached the terminal"
    assert {output["terminal_id"] for output in outputs} == {"call-bash"}
    assert "".join(output["data"] for output in outputs) == BASH_OUTPUT

    final = updates[-1]
    assert final["status"] == "failed"  # it exits non-zero: drawn as a failure
    assert "title" not in final  # Zed's terminal shows the exit itself: the title stays the command
    assert final["_meta"]["terminal_exit"]["terminal_id"] == "call-bash"
    assert final["_meta"]["terminal_exit"]["exit_code"] == BASH_EXIT
    # Any `content` in an update replaces the card's content and so would wipe the terminal block.
    assert [u for u in updates if "content" in u] == []


def test_permission_is_asked_while_pending_and_the_call_waits_for_the_answer(run: Run) -> None:
    agent_wire = run.wire("agent")
    client_wire = run.wire("client")
    for call_id in ASKING_CALLS:
        announced = next(
            i
            for i, m in agent_wire
            if m.get("method") == "session/update"
            and m["params"]["update"].get("toolCallId") == call_id
            and m["params"]["update"]["sessionUpdate"] == "tool_call"
        )
        requests = [
            (i, m)
            for i, m in agent_wire
            if m.get("method") == "session/request_permission"
            and m["params"]["toolCall"]["toolCallId"] == call_id
        ]
        assert len(requests) == 1, f"{call_id}: {len(requests)} permission requests"
        asked, request = requests[0]
        answered = next(i for i, m in client_wire if m.get("id") == request["id"] and "result" in m)
        running = next(
            i
            for i, m in agent_wire
            if m.get("method") == "session/update"
            and m["params"]["update"].get("toolCallId") == call_id
            and m["params"]["update"].get("status") == "in_progress"
        )
        assert run.announcement(call_id)["status"] == "pending"
        assert announced < asked < answered < running, call_id
        # The editor draws its buttons from the request: the kinds it needs must be there.
        kinds = {option["kind"] for option in request["params"]["options"]}
        assert {"allow_once", "allow_always", "reject_once", "reject_always"} <= kinds
        assert request["params"]["toolCall"]["kind"] == run.announcement(call_id)["kind"]
    asked_for = {e["params"]["toolCall"]["toolCallId"] for e in run.events("request_permission")}
    assert asked_for == set(ASKING_CALLS)
    answered_for = [e["toolCallId"] for e in run.events("permission_answer")]
    assert answered_for == list(ASKING_CALLS)


def test_read_goes_through_the_editor(run: Run) -> None:
    app = run.workspace / "src" / "app.py"
    call = run.announcement("call-read")
    assert call["kind"] == "read"
    assert call["status"] == "in_progress"  # reads do not ask in the default mode
    paths = [location["path"] for location in call["locations"]]
    assert paths == [str(app)]
    assert Path(paths[0]).is_absolute()
    assert "src/app.py" in call["title"]
    assert str(run.workspace) not in call["title"]  # titles are cwd-relative
    assert run.fs_requests("read_text_file", app), "the read did not go through fs/read_text_file"
    final = run.call_updates("call-read")[-1]
    assert final["status"] == "completed"
    shown = final["content"][0]["content"]["text"]
    assert 'return "Hello, " + name' in shown


def test_write_shows_a_new_file_diff_and_writes_through_the_editor(run: Run) -> None:
    util = run.workspace / "src" / "util.py"
    new_file_diff = {"type": "diff", "path": str(util), "oldText": None, "newText": UTIL_PY}
    call = run.announcement("call-write")
    assert call["kind"] == "edit"
    assert call["content"] == [new_file_diff]
    final = run.call_updates("call-write")[-1]
    assert final["status"] == "completed"
    assert final["content"] == [new_file_diff]  # the result keeps the diff on the card
    writes = run.fs_requests("write_text_file", util)
    assert [w["content"] for w in writes] == [UTIL_PY]
    assert util.read_text() == UTIL_PY


def test_edit_shows_the_applied_hunk_and_writes_through_the_editor(run: Run) -> None:
    app = run.workspace / "src" / "app.py"
    call = run.announcement("call-edit")
    assert call["kind"] == "edit"
    # The edit asks first, so its card shows the whole file before and after (a client that reads
    # a diff's texts as whole files numbers the change at its own line).
    assert call["content"] == [
        {"type": "diff", "path": str(app), "oldText": APP_PY, "newText": EDITED_APP_PY}
    ]
    final = run.call_updates("call-edit")[-1]
    assert final["status"] == "completed"
    assert final["locations"] == [{"path": str(app), "line": 7}]  # click-through lands on the change
    diffs = final["content"]
    assert len(diffs) == 1
    (hunk,) = diffs
    assert hunk["type"] == "diff"
    assert hunk["path"] == str(app)
    # The hunk is whole lines around the change, a proper part of the file, and applying it to the
    # old file gives the new one.
    assert hunk["oldText"] != APP_PY
    assert hunk["oldText"].endswith("\n")
    assert APP_PY.count(hunk["oldText"]) == 1
    assert APP_PY.replace(hunk["oldText"], hunk["newText"]) == EDITED_APP_PY
    writes = run.fs_requests("write_text_file", app)
    assert [w["content"] for w in writes] == [EDITED_APP_PY]
    assert app.read_text() == EDITED_APP_PY


def test_the_turn_closes_every_call_and_ends(run: Run) -> None:
    announced: set[str] = set()
    for update in run.updates():
        if update["sessionUpdate"] == "tool_call":
            announced.add(update["toolCallId"])
        elif update["sessionUpdate"] == "tool_call_update":
            assert update["toolCallId"] in announced, f"update for unannounced {update['toolCallId']}"
    assert announced == set(CALLS)
    for call_id in CALLS:
        statuses = [u["status"] for u in run.updates(call_id) if "status" in u]
        # The command exits non-zero (its output is what the model reads), so it ends failed.
        assert statuses[-1] == ("failed" if call_id == "call-bash" else "completed"), (call_id, statuses)
    assert run.doc["prompt"] == {"stopReason": "end_turn"}
    # The answer comes after every update of the turn.
    agent_wire = run.wire("agent")
    assert "result" in agent_wire[-1][1]
    assert agent_wire[-1][1]["result"] == {"stopReason": "end_turn"}
    texts = [u["content"]["text"] for u in run.updates() if u["sessionUpdate"] == "agent_message_chunk"]
    # The second step's text starts a paragraph (a client that ignores messageId glued them).
    assert "".join(texts) == "Running the tests first.\n\nFixed the greeting and added a helper."


def test_closing_stdin_ends_the_agent_cleanly(run: Run) -> None:
    assert run.doc["agentExit"] == {"code": 0, "signal": None}


# -- the editor experience --------------------------------------------------------------------

MODEL_ID = "script:model.json"  # drive.mjs hands the agent its script as <state dir>/model.json
MODE_IDS = ["default", "accept_edits", "auto", "plan", "bypass"]
COMMANDS = ["compact", "init", "mode", "model", "permissions", "tools", "undo"]
REFERENCE_TOOLS = [
    "bash",
    "bash_output",
    "bash_kill",
    "read",
    "write",
    "edit",
    "glob",
    "grep",
    "ls",
    "todo_write",
    "web_fetch",
]
FIRST_PROMPT = "Plan the greeting fix"
# The two todo lists tests/client/editor.json writes, as the plan the editor must show each time:
# complete, in order, with the default priority filled in.
PLANS = [
    [
        {"content": "Find the greeting", "priority": "high", "status": "in_progress"},
        {"content": "Fix the punctuation", "priority": "medium", "status": "pending"},
        {"content": "Run the tests", "priority": "low", "status": "pending"},
    ],
    [
        {"content": "Find the greeting", "priority": "high", "status": "completed"},
        {"content": "Fix the punctuation", "priority": "medium", "status": "in_progress"},
        {"content": "Run the tests", "priority": "low", "status": "pending"},
    ],
]
# Input plus output tokens of the two model requests that report usage, of a 200k window.
USAGE = [{"used": 12_300, "size": 200_000}, {"used": 13_050, "size": 200_000}]
SUMMARY = "We planned the greeting fix: found it in src/app.py; the punctuation fix is next."


@pytest.fixture(scope="module")
def editor(request: pytest.FixtureRequest) -> Run:
    return _drive(request, "editor", "editor.json")


def _options(config_options: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Config options by id, after checking the list is complete: an editor replaces all its pickers
    with each list it gets, so one that is missing an option would remove that picker."""
    assert [option["id"] for option in config_options] == ["model", "mode", "show_reasoning"]
    return {option["id"]: option for option in config_options}


def _current(config_options: list[dict[str, Any]]) -> dict[str, Any]:
    return {option_id: option["currentValue"] for option_id, option in _options(config_options).items()}


def _messages(updates: list[dict[str, Any]]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]


def test_editor_sdk_accepted_every_message_as_sent(editor: Run) -> None:
    # As for the tools run: what the editor's handlers got is exactly what the agent wrote. Here the
    # answers matter too (the pickers are drawn from them), and the SDK returns them unvalidated (a
    # few, such as set_mode's, mapped to `{}`), so each must be a result and equal the raw one.
    assert editor.doc["sdkErrors"] == []
    agent_messages = [message for _, message in editor.wire("agent")]
    assert all("unparsable" not in message for message in agent_messages)
    raw_updates = [m["params"] for m in agent_messages if m.get("method") == "session/update"]
    assert raw_updates == [event["params"] for event in editor.events("session_update")]
    for exchange in editor.exchanges():
        assert "error" not in exchange.answer, (exchange.method, exchange.answer)
        assert exchange.result == exchange.answer["result"], exchange.method
    # Nothing in this session needs the editor's help: todo_write is read-only, commands ask nothing.
    assert [m for m in agent_messages if "method" in m and "id" in m] == []
    # Every kind of update this session is about reached the editor (each is checked below).
    assert {p["update"]["sessionUpdate"] for p in raw_updates} >= {
        "available_commands_update",
        "plan",
        "usage_update",
        "session_info_update",
        "current_mode_update",
        "config_option_update",
        "agent_message_chunk",
    }
    assert {p["sessionId"] for p in raw_updates} == {editor.session_id}
    assert editor.doc["agentExit"] == {"code": 0, "signal": None}


def test_new_session_offers_the_model_mode_and_boolean_pickers(editor: Run) -> None:
    initialize, new, *_ = editor.exchanges()
    # The boolean option is offered only to a client that advertises it: this one does, with Zed's
    # own capabilities beside it.
    sent = initialize.params["clientCapabilities"]
    assert sent["session"] == {"configOptions": {"boolean": {}}}
    assert sent["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert sent["terminal"] is True

    answer = new.result
    options = _options(answer["configOptions"])
    model = options["model"]
    assert (model["category"], model["type"], model["currentValue"]) == ("model", "select", MODEL_ID)
    assert [choice["value"] for choice in model["options"]] == [MODEL_ID]
    assert all(choice["name"] for choice in model["options"])

    # The mode select is the session modes seen as a picker: same ids, names and current value.
    mode = options["mode"]
    assert (mode["category"], mode["type"]) == ("mode", "select")
    modes = answer["modes"]
    assert modes["currentModeId"] == "default"
    assert mode["currentValue"] == modes["currentModeId"]
    assert [m["id"] for m in modes["availableModes"]] == MODE_IDS
    assert [(c["value"], c["name"]) for c in mode["options"]] == [
        (m["id"], m["name"]) for m in modes["availableModes"]
    ]

    reasoning = options["show_reasoning"]
    assert reasoning["type"] == "boolean"
    assert reasoning["currentValue"] is True
    assert reasoning["name"]


def test_the_slash_menu_arrives_after_the_session_answer(editor: Run) -> None:
    _, new, *_ = editor.exchanges()
    commands = [u for u in editor.updates() if u["sessionUpdate"] == "available_commands_update"]
    assert len(commands) == 1
    # An editor drops updates for a session it does not know yet: the menu comes right after the
    # answer, and nothing comes before it.
    assert editor.next_update(new) == commands[0]
    assert [i for i, _ in editor.delivered() if i < new.answered] == []
    listed = commands[0]["availableCommands"]
    assert [command["name"] for command in listed] == COMMANDS
    assert all(command["description"] for command in listed)
    # The commands that take an argument say so, so the editor can hint at it after the name.
    hinted = {command["name"] for command in listed if command.get("input", {}).get("hint")}
    assert hinted == {"mode", "model", "permissions"}


def test_todo_write_is_a_live_plan_with_usage_and_then_a_title(editor: Run) -> None:
    _, _, first_prompt, *_ = editor.exchanges()
    assert first_prompt.result == {"stopReason": "end_turn"}
    turn = editor.during(first_prompt)
    kinds = [u["sessionUpdate"] for u in turn]
    # Each todo_write replaces the plan with the complete list; neither is drawn as a tool card.
    assert [u["entries"] for u in turn if u["sessionUpdate"] == "plan"] == PLANS
    assert [u for u in editor.updates() if u["sessionUpdate"] in ("tool_call", "tool_call_update")] == []
    # The context meter moves after each model request that reports usage, with used and size.
    usage = [u for u in turn if u["sessionUpdate"] == "usage_update"]
    assert [{k: v for k, v in u.items() if k != "sessionUpdate"} for u in usage] == USAGE
    # The meter follows each request as it ends (the first one's before its tool ran), not a total
    # at the end of the turn.
    assert kinds.index("usage_update") < kinds.index("plan")
    # The second step's text starts a paragraph: a client that ignores messageId would glue them.
    assert _messages(turn) == ["Planning first.", "\n\nThe greeting is in src/app.py; fixing it next."]
    # The title comes once the turn's work is shown, before its answer, from the first prompt.
    assert kinds[-1] == "session_info_update"
    title = turn[-1]
    assert title["title"] == FIRST_PROMPT
    stamp = datetime.fromisoformat(title["updatedAt"])
    assert stamp.tzinfo is not None


def test_the_title_is_set_once_and_listed_in_the_history(editor: Run) -> None:
    *_, listing = editor.exchanges()
    titles = [u for u in editor.updates() if u["sessionUpdate"] == "session_info_update"]
    assert [u["title"] for u in titles] == [FIRST_PROMPT]  # commands and later turns keep it
    assert listing.method == "session/list"
    (listed,) = listing.result["sessions"]
    assert listed["sessionId"] == editor.session_id
    assert listed["title"] == FIRST_PROMPT
    assert listed["cwd"] == str(editor.workspace)


def test_the_mode_changes_from_the_config_option_picker(editor: Run) -> None:
    _, new, _, pick, *_ = editor.exchanges()
    assert pick.method == "session/set_config_option"
    # The answer is the complete option list (the editor redraws every picker from it), with only
    # the mode changed.
    options = pick.result["configOptions"]
    assert _current(options) == {"model": MODEL_ID, "mode": "accept_edits", "show_reasoning": True}
    unchanged = _options(new.result["configOptions"])
    for option_id, option in _options(options).items():
        assert {**option, "currentValue": None} == {**unchanged[option_id], "currentValue": None}
    # Editors that draw the older session-modes selector learn of the change at once.
    assert editor.next_update(pick) == {
        "sessionUpdate": "current_mode_update",
        "currentModeId": "accept_edits",
    }
    assert editor.during(pick) == []


def test_the_mode_picker_keeps_the_config_options_in_step(editor: Run) -> None:
    _, _, _, _, set_mode, *_ = editor.exchanges()
    assert set_mode.method == "session/set_mode"
    assert set_mode.result == {}
    update = editor.next_update(set_mode)
    assert update["sessionUpdate"] == "config_option_update"
    assert _current(update["configOptions"]) == {"model": MODEL_ID, "mode": "plan", "show_reasoning": True}
    assert editor.during(set_mode) == []


def test_slash_tools_lists_every_tool(editor: Run) -> None:
    tools = editor.exchanges()[5]
    assert tools.params["prompt"] == [{"type": "text", "text": "/tools"}]
    assert tools.result == {"stopReason": "end_turn"}
    turn = editor.during(tools)
    # One message and nothing else: the script's turn for it is empty, so had the prompt gone to
    # the model, the agent would have failed the request.
    assert [u["sessionUpdate"] for u in turn] == ["agent_message_chunk"]
    (text,) = _messages(turn)
    lines = text.splitlines()
    assert lines[0] == "Tools:"
    listed = [line.split("`")[1] for line in lines[1:]]
    assert listed == [*REFERENCE_TOOLS, "task"]  # and the agent's own, which starts a subagent
    assert all(line.split("`: ", 1)[1].strip() for line in lines[1:])  # each says what it does


def test_slash_mode_switches_both_pickers_and_says_so(editor: Run) -> None:
    mode = editor.exchanges()[6]
    assert mode.params["prompt"] == [{"type": "text", "text": "/mode bypass"}]
    assert mode.result == {"stopReason": "end_turn"}
    switched, options, said = editor.during(mode)
    assert switched == {"sessionUpdate": "current_mode_update", "currentModeId": "bypass"}
    assert options["sessionUpdate"] == "config_option_update"
    assert _current(options["configOptions"]) == {"model": MODEL_ID, "mode": "bypass", "show_reasoning": True}
    assert said["sessionUpdate"] == "agent_message_chunk"
    assert said["content"]["text"].startswith("Mode: Bypass permissions.")


def test_slash_compact_shows_the_summary(editor: Run) -> None:
    compact = editor.exchanges()[7]
    assert compact.params["prompt"] == [{"type": "text", "text": "/compact"}]
    assert compact.result == {"stopReason": "end_turn"}
    turn = editor.during(compact)
    # The script's turn for /compact is the summary the model writes: the user reads it as it comes.
    assert [u["sessionUpdate"] for u in turn] == ["agent_message_chunk"]
    assert _messages(turn) == [SUMMARY]


# -- a client that serves terminal/* -------------------------------------------------------------

TERMINAL_CALLS = ("call-print", "call-fail", "call-sleep")


@pytest.fixture(scope="module")
def terminals(request: pytest.FixtureRequest) -> Run:
    return _drive(request, "terminals", "terminals.json")


def _terminal_requests(run: Run, kind: str) -> list[dict[str, Any]]:
    return [e["params"] for e in run.events(kind)]


def test_terminals_sdk_accepted_every_message_as_sent(terminals: Run) -> None:
    assert terminals.doc["sdkErrors"] == []
    agent_messages = [message for _, message in terminals.wire("agent")]
    assert all("unparsable" not in message for message in agent_messages)
    raw_updates = [m["params"] for m in agent_messages if m.get("method") == "session/update"]
    assert raw_updates == [event["params"] for event in terminals.events("session_update")]
    for update in terminals.updates():
        if "rawInput" in update:
            assert isinstance(update["rawInput"], dict), update


def test_each_command_runs_in_the_clients_terminal_after_its_permission(terminals: Run) -> None:
    created = _terminal_requests(terminals, "terminal_create")
    assert [c["args"][-1] for c in created] == [
        "printf 'building\\n'; printf 'warning: slow\\n' >&2",
        "echo 'FAILED test_greet'; exit 3",
        "echo started; sleep 29.25 & sleep 29.5; echo never",
    ]
    # bash -c under the guard that takes the command's process group down with it
    assert all(c["command"] == sys.executable and c["args"][-3:-1] == ["bash", "-c"] for c in created)
    assert all(c["cwd"] == str(terminals.workspace) and c["outputByteLimit"] > 0 for c in created)
    events = terminals.doc["events"]
    answers = [e for e in events if e["kind"] == "permission_answer"]
    creates = [e for e in events if e["kind"] == "terminal_create"]
    for answer, create in zip(answers, creates, strict=True):
        assert answer["seq"] < create["seq"]  # the permission gate first
    for index, call_id in enumerate(TERMINAL_CALLS, start=1):
        terminal = {"type": "terminal", "terminalId": f"term-{index}"}
        assert not any("_meta" in u for u in terminals.updates(call_id))  # no Zed convention here
        assert any(terminal in u.get("content", []) for u in terminals.call_updates(call_id)), call_id


def test_every_terminal_is_released_exactly_once(terminals: Run) -> None:
    released = [p["terminalId"] for p in _terminal_requests(terminals, "terminal_release")]
    assert released == ["term-1", "term-2", "term-3"]
    assert terminals.doc["terminalsLeft"] == []  # every process exited, every terminal released


def test_a_failing_command_shows_its_exit_status_and_the_model_gets_the_output(terminals: Run) -> None:
    done = terminals.call_updates("call-print")[-1]
    assert done["status"] == "completed"
    failed = terminals.call_updates("call-fail")[-1]
    assert failed["status"] == "failed"  # clients draw completed as success
    assert failed["title"].endswith(" (exit code 3)")
    assert failed["content"][-1] == {"type": "content", "content": {"type": "text", "text": "Exit code 3"}}
    outputs = _terminal_requests(terminals, "terminal_output")
    assert [o["terminalId"] for o in outputs[:2]] == ["term-1", "term-2"]


def _running(marker: bytes) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds processes through /proc")
def test_nothing_the_cancelled_command_started_outlives_it(terminals: Run) -> None:
    # This client, like Toad and acpx, killed only the process it had started.
    deadline = time.monotonic() + 5
    while _running(b"sleep\x0029.") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _running(b"sleep\x0029.") == []


def test_the_cancelled_sleep_is_killed_and_keeps_its_terminal(terminals: Run) -> None:
    assert terminals.doc["prompt"] == {"stopReason": "cancelled"}
    kills = [p["terminalId"] for p in _terminal_requests(terminals, "terminal_kill")]
    assert kills == ["term-3"]
    last = terminals.call_updates("call-sleep")[-1]
    assert last["status"] == "failed"
    assert {"type": "terminal", "terminalId": "term-3"} in last["content"]
    cancelled_at = terminals.doc["cancelledAt"]
    answer = next(i for i, m in terminals.wire("agent") if m.get("result") == {"stopReason": "cancelled"})
    after = [m for i, m in terminals.wire("agent") if i > answer and m.get("method") == "session/update"]
    assert after == []  # nothing of the session follows the cancelled answer
    assert answer > cancelled_at
