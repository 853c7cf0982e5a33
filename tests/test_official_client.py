"""End to end with the official ACP client: the TypeScript SDK (``@agentclientprotocol/sdk``, pinned in
``tests/client/package.json``) plays Zed against the real ``dsh-acp`` over stdio.

``tests/client/drive.mjs`` initializes with Zed's capabilities, opens a session in a seeded temp
workspace and sends one prompt whose scripted model runs ``bash`` (output on stdout and stderr, exit
3), reads ``src/app.py``, writes ``src/util.py`` and edits ``src/app.py``. It allows every permission
request once and serves ``fs/*`` from the real files, then prints everything it saw.

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
from dataclasses import dataclass
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


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        message = f"{tool} is not installed: the official TypeScript client test needs node and npm"
        if os.environ.get("DSH_REQUIRE_NODE"):  # CI sets it: there a missing node is a failure
            pytest.fail(message)
        pytest.skip(message)
    return path


def _install_sdk(npm: str) -> None:
    """``npm ci`` from the committed lock file unless the pinned SDK is already installed, so the
    README's test command works on a fresh machine that only has node and npm."""
    pinned = json.loads((CLIENT_DIR / "package.json").read_text())["dependencies"][SDK]
    installed = CLIENT_DIR / "node_modules" / SDK / "package.json"
    if installed.is_file() and json.loads(installed.read_text()).get("version") == pinned:
        return
    result = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    # A failing install is a failure, never a skip: CI must not go green without running this test.
    assert result.returncode == 0, f"npm ci failed in {CLIENT_DIR}:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    node = _need("node")
    _install_sdk(_need("npm"))
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
            "--script",
            str(CLIENT_DIR / "model.json"),
            "--timeout-ms",
            "20000",
        ],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=40,
        check=False,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, f"the driver failed:\n{result.stdout[-8000:]}\n{result.stderr[-4000:]}"
    return Run(json.loads(result.stdout), workspace)


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
    assert final["status"] == "completed"
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
    assert call["content"] == [
        {
            "type": "diff",
            "path": str(app),
            "oldText": 'return "Hello, " + name',
            "newText": 'return f"Hello, {name}!"',
        }
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
        assert statuses[-1] == "completed", (call_id, statuses)
    assert run.doc["prompt"] == {"stopReason": "end_turn"}
    # The answer comes after every update of the turn.
    agent_wire = run.wire("agent")
    assert "result" in agent_wire[-1][1]
    assert agent_wire[-1][1]["result"] == {"stopReason": "end_turn"}
    texts = [u["content"]["text"] for u in run.updates() if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(texts) == "Running the tests first.Fixed the greeting and added a helper."
    # Closing stdin ends the agent, cleanly.
    assert run.doc["agentExit"] == {"code": 0, "signal": None}
