"""End to end with the official ACP TypeScript SDK's experimental v2 client
(``@agentclientprotocol/sdk/experimental/v2``, the stable features of the v2 draft, pinned with the
rest of the SDK in ``tests/client/package-lock.json``) against the real ``dsh-acp`` over stdio.

``tests/client/drive_v2.mjs`` plays one user's session in two agent processes over one state folder:
a prompt whose script (``tests/client/v2.json``) plans, reads ``src/app.py``, edits it and runs a
command that prints on both streams and exits 3 (the edit and the command ask first; the driver
allows each once), read with the SDK's active-session helper until its idle state update; the
session closed and the agent ended; a second agent resuming it with its replay from the start, a
second prompt, and the history list. The SDK parses leniently, so the tests compare what it handed
to the app with the raw wire, and check the order of the transcript.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_official_client import APP_PY, CLIENT_DIR, EDITED_APP_PY, _need, _without_model_settings


class V2Run:
    """What the v2 driver recorded."""

    def __init__(self, doc: dict[str, Any], workspace: Path) -> None:
        self.doc = doc
        self.workspace = workspace

    @property
    def session_id(self) -> str:
        return str(self.doc["newSession"]["sessionId"])

    def wire(self, direction: str) -> list[tuple[int, dict[str, Any]]]:
        return [(i, t["message"]) for i, t in enumerate(self.doc["transcript"]) if t["dir"] == direction]

    def updates(self, since: int = 0, until: int | None = None) -> list[tuple[int, dict[str, Any]]]:
        """(transcript index, update) of every ``session/update`` the agent wrote in that span."""
        end = len(self.doc["transcript"]) if until is None else until
        return [
            (i, m["params"]["update"])
            for i, m in self.wire("agent")
            if since <= i < end and m.get("method") == "session/update"
        ]

    def answer_to(self, method: str, nth: int = 0) -> tuple[int, dict[str, Any]]:
        """The answer to the ``nth`` request of ``method`` (ids start again with each agent)."""
        asked_at, request = [(i, m) for i, m in self.wire("client") if m.get("method") == method][nth]
        return next(
            (i, m)
            for i, m in self.wire("agent")
            if i > asked_at and m.get("id") == request["id"] and "method" not in m
        )


@pytest.fixture(scope="module")
def v2(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> V2Run:
    node = _need("node")
    _need("npm")
    request.getfixturevalue("pinned_sdk")
    workspace = tmp_path_factory.mktemp("workspace").resolve()
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text(APP_PY)
    result = subprocess.run(
        [
            node,
            str(CLIENT_DIR / "drive_v2.mjs"),
            "--python",
            sys.executable,
            "--workspace",
            str(workspace),
            "--state-dir",
            str(tmp_path_factory.mktemp("state")),
            "--script",
            str(CLIENT_DIR / "v2.json"),
        ],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_without_model_settings(os.environ),
    )
    assert result.returncode == 0, f"the driver failed:\n{result.stdout[-8000:]}\n{result.stderr[-4000:]}"
    return V2Run(json.loads(result.stdout), workspace)


def test_the_sdk_accepted_every_message_as_sent(v2: V2Run) -> None:
    assert v2.doc["sdkErrors"] == []
    agent_messages = [m for _, m in v2.wire("agent")]
    assert all("unparsable" not in m for m in agent_messages)
    raw = [m["params"] for m in agent_messages if m.get("method") == "session/update"]
    assert raw == [e["params"] for e in v2.doc["events"] if e["kind"] == "session_update"]
    raw_requests = [m["params"] for m in agent_messages if m.get("method") == "session/request_permission"]
    assert raw_requests == [e["params"] for e in v2.doc["events"] if e["kind"] == "request_permission"]
    assert all("error" not in m for m in agent_messages)
    for index, call in enumerate(v2.doc["calls"]):  # the SDK returned each answer as the agent wrote it
        nth = sum(1 for c in v2.doc["calls"][:index] if c["method"] == call["method"])
        _, answer = v2.answer_to(call["method"], nth)
        expected = answer["result"]
        if call["method"] == "initialize":  # the stable-feature client drops the unstable fork capability
            capabilities = expected["capabilities"]
            expected = {
                **expected,
                "capabilities": {**capabilities, "session": dict(capabilities["session"])},
            }
            assert expected["capabilities"]["session"].pop("fork") == {}
        assert call["result"] == expected, call["method"]
    assert [run["exit"] for run in v2.doc["runs"]] == [{"code": 0, "signal": None}] * 2


def test_the_prompt_is_accepted_then_the_turn_runs_to_its_idle_state(v2: V2Run) -> None:
    assert v2.doc["initialize"]["protocolVersion"] == 2
    answered_at, answer = v2.answer_to("session/prompt")
    message_id = answer["result"]["messageId"]
    first = v2.doc["runs"][1]["startsAt"]
    updates = v2.updates(until=first)
    kinds = [u["sessionUpdate"] for _, u in updates]
    assert kinds[:2] == ["state_update", "user_message"]
    assert updates[0][1] == {"sessionUpdate": "state_update", "state": "running"}
    assert updates[1][1] == {
        "sessionUpdate": "user_message",
        "messageId": message_id,
        "content": [{"type": "text", "text": "Fix add and test it"}],
    }
    assert updates[1][0] < answered_at < updates[2][0]  # the answer only says it was accepted
    assert updates[-1][1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    # The SDK's active session read the turn to its stop message.
    turn = v2.doc["firstTurn"]
    assert turn[-1]["kind"] == "stop"
    assert turn[-1]["stopReason"] == "end_turn"
    assert [m["update"] for m in turn[:-1]] == [u for _, u in updates[:-1]]
    texts = [u for _, u in updates if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")]
    assert all(u["messageId"] for u in texts)  # v2 requires them


def test_permissions_are_titled_about_their_subject_and_wait_for_the_answer(v2: V2Run) -> None:
    requests = [(i, m) for i, m in v2.wire("agent") if m.get("method") == "session/request_permission"]
    assert len(requests) == 2
    (edit_at, edit), (bash_at, bash) = requests
    assert edit["params"]["title"] == "Edit src/app.py"
    subject = edit["params"]["subject"]
    assert subject["type"] == "tool_call"
    assert subject["toolCall"]["toolCallId"] == "edit-1"
    assert subject["toolCall"]["content"][0]["type"] == "diff"
    assert bash["params"]["subject"] == {
        "type": "command",
        "command": bash["params"]["title"],
        "cwd": str(v2.workspace),
        "toolCallId": "bash-1",
    }
    for (asked, request), call_id in ((edit_at, edit), "edit-1"), ((bash_at, bash), "bash-1"):
        answered = next(i for i, m in v2.wire("client") if m.get("id") == request["id"] and "result" in m)
        statuses = [(i, u.get("status")) for i, u in v2.updates() if u.get("toolCallId") == call_id]
        assert [s for i, s in statuses if i < asked] == ["pending"]  # announced first, pending
        assert all(i > answered for i, s in statuses if s == "in_progress")  # runs only once allowed


def test_the_edit_is_a_structured_change_with_a_patch_that_applies(v2: V2Run, tmp_path: Path) -> None:
    assert (v2.workspace / "src" / "app.py").read_text() == EDITED_APP_PY
    path = str(v2.workspace / "src" / "app.py")
    done = next(
        u for _, u in v2.updates() if u.get("toolCallId") == "edit-1" and u.get("status") == "completed"
    )
    (diff,) = done["content"]
    assert diff["changes"] == [{"operation": "modify", "path": path, "fileType": "text"}]
    assert diff["patch"]["format"] == "git_patch"
    # The permission's card is the whole file: its patch turns the old file into the new one.
    asked = next(m for _, m in v2.wire("agent") if m.get("method") == "session/request_permission")
    patch = asked["params"]["subject"]["toolCall"]["content"][0]["patch"]["text"]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(APP_PY)
    (tmp_path / "change.patch").write_text(patch)
    subprocess.run(["git", "apply", "change.patch"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "src" / "app.py").read_text() == EDITED_APP_PY


def test_the_command_runs_in_a_terminal_the_agent_owns(v2: V2Run) -> None:
    first = v2.doc["runs"][1]["startsAt"]
    terminal = [u for _, u in v2.updates(until=first) if u.get("terminalId") == "bash-1"]
    created, *chunks, exited = terminal
    assert created["sessionUpdate"] == "terminal_update"
    assert created["cwd"] == str(v2.workspace)
    assert created["command"].startswith("printf 'collecting 3 tests")
    printed = b"".join(
        base64.b64decode(c["data"]) for c in chunks if c["sessionUpdate"] == "terminal_output_chunk"
    )
    assert printed == b"collecting 3 tests\nFAILED test_greet\n"
    assert exited == {
        "sessionUpdate": "terminal_update",
        "terminalId": "bash-1",
        "exitStatus": {"exitCode": 3},
    }
    card = next(u for _, u in v2.updates() if u.get("toolCallId") == "bash-1" and "content" in u)
    assert {"type": "terminal", "terminalId": "bash-1"} in card["content"]
    created_at = next(i for i, u in v2.updates() if u.get("terminalId") == "bash-1")
    card_at = next(i for i, u in v2.updates() if u.get("toolCallId") == "bash-1")
    assert created_at < card_at  # the card never refers to a terminal the client does not know


def test_a_second_agent_resumes_the_session_with_its_replay(v2: V2Run) -> None:
    answered_at, answer = v2.answer_to("session/resume")
    replay = v2.updates(since=v2.doc["resumedAt"], until=answered_at)
    kinds = [u["sessionUpdate"] for _, u in replay]
    assert kinds[-1] == "state_update"  # the session's state after the replay, before the answer
    assert replay[-1][1] == {"sessionUpdate": "state_update", "state": "idle"}
    first_prompt = v2.doc["prompt"]["messageId"]
    assert replay[0][1]["sessionUpdate"] == "user_message"
    assert replay[0][1]["messageId"] == first_prompt  # a replayed message keeps its id
    assert {"agent_thought", "agent_message", "plan_update", "tool_call_update", "terminal_update"} <= set(
        kinds
    )
    replayed_output = b"".join(
        base64.b64decode(u["data"]) for _, u in replay if u["sessionUpdate"] == "terminal_output_chunk"
    )
    assert replayed_output == b"collecting 3 tests\nFAILED test_greet\n"
    assert {o["configId"] for o in answer["result"]["configOptions"]} >= {"model", "mode"}
    second = v2.doc["secondTurn"]
    said = [
        m["update"]["content"]["text"]
        for m in second
        if m["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert said == ["You are welcome."]  # the second prompt of the conversation the log kept
    assert second[-1]["stopReason"] == "end_turn"
    (listed,) = v2.doc["listed"]["sessions"]
    assert (listed["sessionId"], listed["title"]) == (v2.session_id, "Fix add and test it")
