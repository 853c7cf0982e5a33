"""The features users ask every agent for, driven by the official ACP TypeScript client
(``tests/client/drive.mjs``, scenario ``features``, script ``tests/client/features.json``):
prompts queued while a turn runs and cancelled with it; notices; session/delete; ask_user; /init. See
``test_official_client`` for how the driver records what the SDK handed to the editor and the
raw wire."""

from __future__ import annotations

import pytest
from test_official_client import Run, _drive


@pytest.fixture(scope="module")
def features(request: pytest.FixtureRequest) -> Run:
    return _drive(request, "features", "features.json")


def test_features_sdk_accepted_every_message_as_sent(features: Run) -> None:
    assert features.doc["sdkErrors"] == []
    agent_messages = [message for _, message in features.wire("agent")]
    assert all("unparsable" not in message for message in agent_messages)
    raw_updates = [m["params"] for m in agent_messages if m.get("method") == "session/update"]
    assert raw_updates == [event["params"] for event in features.events("session_update")]
    for exchange in features.exchanges():
        assert "error" not in exchange.answer, (exchange.method, exchange.answer)
        assert exchange.result == exchange.answer["result"], exchange.method
    assert features.doc["agentExit"] == {"code": 0, "signal": None}


def test_prompts_sent_while_a_turn_runs_are_queued_and_answered_in_turn(features: Run) -> None:
    meta = features.doc["initialize"]["agentCapabilities"]["_meta"]
    assert meta["promptQueueing"] is True
    assert features.doc["queued"] == [{"stopReason": "end_turn"}] * 3
    prompts = [e for e in features.exchanges() if e.method == "session/prompt"][:3]
    # All three were on the wire before the first was answered: the editor did not wait.
    assert max(p.asked for p in prompts) < min(p.answered for p in prompts)
    # Answers in the order sent, and each prompt's text between its predecessor's answer and its own.
    assert [p.answered for p in prompts] == sorted(p.answered for p in prompts)
    texts = ["Building.", "Tests pass.", "Reported."]
    previous = prompts[0].asked
    for exchange, text in zip(prompts, texts, strict=True):
        during = [
            u["content"]["text"]
            for i, u in features.delivered()
            if previous < i < exchange.answered and u["sessionUpdate"] == "agent_message_chunk"
        ]
        assert during == [text]
        previous = exchange.answered


def test_cancel_stops_the_turn_and_answers_the_queue(features: Run) -> None:
    assert features.doc["cancelled"] == [{"stopReason": "cancelled"}] * 3
    prompts = [e for e in features.exchanges() if e.method == "session/prompt"][3:6]
    # The queued prompts never ran: nothing was said after the cancel.
    cancelled_at = min(p.asked for p in prompts)
    answered_at = max(p.answered for p in prompts)
    assert [u for i, u in features.delivered() if cancelled_at < i < answered_at] == []


def test_an_mcp_server_that_fails_to_start_is_a_notice(features: Run) -> None:
    session_id = features.doc["mcpSession"]["sessionId"]
    (created,) = [e for e in features.exchanges() if e.method == "session/new" and e.params["mcpServers"]]
    updates = [
        (i, e["params"]["update"])
        for i, e in zip(
            (i for i, m in features.wire("agent") if m.get("method") == "session/update"),
            features.events("session_update"),
            strict=True,
        )
        if e["params"]["sessionId"] == session_id
    ]
    notices = [(i, u) for i, u in updates if u["sessionUpdate"] == "notice"]
    assert [u for _, u in notices] == [
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": 'MCP server "broken" failed to start',
            "description": f'cannot run "{features.workspace / "no-such-server"}": No such file or directory',
        }
    ]
    assert notices[0][0] > created.answered  # after the session's answer, which the editor needs first
    # Not also a message in the chat (the one message is the answer to the prompt it got later).
    messages = [u["content"]["text"] for _, u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert messages == ["No approvals are remembered for this session or this project."]


def test_session_delete_is_advertised_and_removes_the_session(features: Run) -> None:
    assert features.doc["initialize"]["agentCapabilities"]["sessionCapabilities"]["delete"] == {}
    first, deleted = features.session_id, features.doc["mcpSession"]["sessionId"]
    assert {s["sessionId"] for s in features.doc["listed"]["sessions"]} == {first, deleted}
    assert features.doc["deleted"] == {}
    assert [s["sessionId"] for s in features.doc["listedAfter"]["sessions"]] == [first]


def test_ask_user_is_an_elicitation_on_its_own_card(features: Run) -> None:
    assert features.doc["asked"] == {"stopReason": "end_turn"}
    (asked,) = features.events("elicitation")
    params = asked["params"]
    assert params["mode"] == "form"
    assert params["toolCallId"] == "call-ask"
    assert params["message"] == "Which database should I use?"
    assert params["requestedSchema"]["properties"]["answer"]["enum"] == ["PostgreSQL", "SQLite"]
    card = features.announcement("call-ask")
    assert card["title"] == "Question: Which database should I use?"
    assert card["status"] == "in_progress"
    # The card waits while the user answers; then it shows the answer the model got.
    final = features.call_updates("call-ask")[-1]
    assert final["status"] == "completed"
    assert final["content"][0]["content"]["text"] == "The user answered:\nPostgreSQL"
    raw = [m for _, m in features.wire("agent") if m.get("method") == "elicitation/create"]
    assert [m["params"] for m in raw] == [params]


def test_slash_init_writes_agents_md_through_the_permission_flow(features: Run) -> None:
    assert features.doc["init"] == {"stopReason": "end_turn"}
    agents = features.workspace / "AGENTS.md"
    asked = [
        e
        for e in features.events("request_permission")
        if e["params"]["toolCall"]["toolCallId"] == "call-init"
    ]
    assert len(asked) == 1  # the write asked, as any write does in the default mode
    (written,) = features.fs_requests("write_text_file", agents)
    assert written["content"] == agents.read_text()
    assert agents.read_text().startswith("# AGENTS.md")
    commands = [u for u in features.updates() if u["sessionUpdate"] == "available_commands_update"]
    assert "init" in [c["name"] for c in commands[0]["availableCommands"]]
