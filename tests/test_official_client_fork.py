"""``session/fork`` driven by the official ACP TypeScript client's unstable v1 entrypoint
(``@agentclientprotocol/sdk/unstable``; ``tests/client/drive.mjs``, scenario ``fork``, script
``tests/client/fork.json``, whose answer tells how many prompts the conversation has seen): one
prompt, the session forked, each branch prompted, both listed, closed and loaded again. See
``test_official_client`` for how the driver records what the SDK handed to the editor."""

from __future__ import annotations

import pytest
from test_official_client import Run, _drive


@pytest.fixture(scope="module")
def fork(request: pytest.FixtureRequest) -> Run:
    return _drive(request, "fork", "fork.json")


def test_the_sdk_accepted_every_message_as_sent(fork: Run) -> None:
    assert fork.doc["sdkErrors"] == []
    agent_messages = [message for _, message in fork.wire("agent")]
    assert all("unparsable" not in message for message in agent_messages)
    raw_updates = [m["params"] for m in agent_messages if m.get("method") == "session/update"]
    assert raw_updates == [event["params"] for event in fork.events("session_update")]
    for exchange in fork.exchanges():
        assert "error" not in exchange.answer, (exchange.method, exchange.answer)
        assert exchange.result == exchange.answer["result"], exchange.method
    assert fork.doc["agentExit"] == {"code": 0, "signal": None}


def test_the_fork_continues_the_conversation_and_the_source_goes_on_alone(fork: Run) -> None:
    assert fork.doc["initialize"]["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
    source, branch = fork.session_id, fork.doc["fork"]["sessionId"]
    assert branch != source
    answers = {
        session: [
            u["content"]["text"]
            for e in fork.events("session_update")
            if e["params"]["sessionId"] == session
            and (u := e["params"]["update"])["sessionUpdate"] == "agent_message_chunk"
            and e["transcriptIndex"] < fork.doc["loadedAt"]
        ]
        for session in (source, branch)
    }
    # Each branch's second prompt is the second of its conversation: the fork's model saw the
    # source's first prompt, and the source never saw the fork's.
    assert answers[source] == ["I will remember 42.", "This conversation has seen two prompts."]
    assert answers[branch] == ["This conversation has seen two prompts."]
    listed = {s["sessionId"] for s in fork.doc["listed"]["sessions"]}
    assert listed == {source, branch}


def test_each_branch_loads_with_its_own_history(fork: Run) -> None:
    source, branch = fork.session_id, fork.doc["fork"]["sessionId"]
    replayed: dict[str, list[str]] = {source: [], branch: []}
    for e in fork.events("session_update"):
        update = e["params"]["update"]
        if e["transcriptIndex"] >= fork.doc["loadedAt"] and update["sessionUpdate"] == "user_message_chunk":
            replayed[e["params"]["sessionId"]].append(update["content"]["text"])
    assert replayed[branch] == ["Remember the number 42", "What was the number?"]
    assert replayed[source] == ["Remember the number 42", "Forget it"]
