"""The features that need a real model, driven by the official ACP TypeScript client
(``tests/client/drive.mjs``, scenario ``real_model``) against the fake OpenAI-compatible server
(``tests/fake_openai.py``, its replies in ``tests/client/real_model.json``): the reasoning-effort
picker, the usage meter with the session's cost, the title the model writes after the first
turn, and logout. The agent runs ``--model openai:gpt-5-mini --base-url`` the fake server, with
a config file holding the key ``dsh-acp login`` would have stored and the price provider the
server stands in for. See ``test_official_client`` for what the driver records."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from fake_openai import FakeOpenAI, scripted_replies
from test_official_client import CLIENT_DIR, Run, _drive

from dsh_acp.models._cost import request_cost

KEY = "sk-test-stored-by-login-0123456789"
CONFIG = f"""# dsh-acp settings, as `dsh-acp login` leaves them
api_key = "{KEY}"

# The fake server stands in for OpenAI's API: price the model as OpenAI does.
[models."gpt-5-mini"]
price_provider = "openai"
"""
SCRIPT = json.loads((CLIENT_DIR / "real_model.json").read_text())


@dataclass
class RealRun:
    run: Run
    server: FakeOpenAI
    config: Path


@pytest.fixture(scope="module")
def real(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RealRun:
    config_home = tmp_path_factory.mktemp("config")
    config = config_home / "dsh-acp" / "config.toml"
    config.parent.mkdir()
    config.write_text(CONFIG)
    server = FakeOpenAI(scripted_replies(SCRIPT["replies"]), title=SCRIPT["title"])
    # The server runs in a thread of its own while the driver (node) runs the agent.
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(server):
        run = _drive(
            request,
            "real_model",
            None,
            model=["--model", "openai:gpt-5-mini", "--base-url", server.base_url],
            env={"XDG_CONFIG_HOME": str(config_home)},
        )
    return RealRun(run, server, config)


def test_real_model_sdk_accepted_every_message_as_sent(real: RealRun) -> None:
    run = real.run
    assert run.doc["sdkErrors"] == []
    agent_messages = [message for _, message in run.wire("agent")]
    assert all("unparsable" not in message for message in agent_messages)
    raw_updates = [m["params"] for m in agent_messages if m.get("method") == "session/update"]
    assert raw_updates == [event["params"] for event in run.events("session_update")]
    for exchange in run.exchanges():
        assert "error" not in exchange.answer, (exchange.method, exchange.answer)
    assert run.doc["agentExit"] == {"code": 0, "signal": None}
    # The model was asked once for the answer and once for the title, with the stored key.
    (asked,) = real.server.requests
    assert asked.headers["authorization"] == f"Bearer {KEY}"
    assert len(real.server.title_requests) == 1


def test_reasoning_effort_is_a_thought_level_picker_sent_from_the_next_request(real: RealRun) -> None:
    run = real.run
    (effort,) = [o for o in run.doc["newSession"]["configOptions"] if o["category"] == "thought_level"]
    assert effort["id"] == "reasoning_effort"
    assert [choice["value"] for choice in effort["options"]] == ["low", "medium", "high"]
    assert effort["currentValue"] == "medium"
    (changed,) = [o for o in run.doc["effort"]["configOptions"] if o["id"] == "reasoning_effort"]
    assert changed["currentValue"] == "high"
    (asked,) = real.server.requests
    assert asked.json["reasoning_effort"] == "high"


def test_the_meter_shows_the_cost_of_the_session(real: RealRun) -> None:
    (usage,) = [u for u in real.run.updates() if u["sessionUpdate"] == "usage_update"]
    input_tokens, output_tokens = SCRIPT["replies"][0]["usage"]
    assert usage["used"] == input_tokens + output_tokens
    assert usage["size"] == 400_000  # gpt-5-mini's documented window
    expected = request_cost("gpt-5-mini", "openai", input_tokens, output_tokens)
    assert expected is not None
    assert expected > 0
    assert usage["cost"] == {"amount": pytest.approx(float(expected)), "currency": "USD"}


def test_the_model_writes_the_title_after_the_first_turn(real: RealRun) -> None:
    run = real.run
    (prompt,) = [e for e in run.exchanges() if e.method == "session/prompt"]
    titles = [(i, u) for i, u in run.delivered() if u["sessionUpdate"] == "session_info_update"]
    assert [u["title"] for _, u in titles] == [SCRIPT["title"]]
    assert titles[0][0] > prompt.answered  # the answer does not wait for the title
    (title_request,) = real.server.title_requests
    assert "Fix the greeting in src/app.py" in title_request.json["messages"][-1]["content"]
    (listed,) = run.doc["listed"]["sessions"]
    assert listed["title"] == SCRIPT["title"]


def test_logout_is_advertised_and_forgets_the_stored_key(real: RealRun) -> None:
    run = real.run
    assert run.doc["initialize"]["agentCapabilities"]["auth"] == {"logout": {}}
    assert run.doc["logout"] == {}
    left = real.config.read_text()
    assert KEY not in left
    assert tomllib.loads(left) == {"models": {"gpt-5-mini": {"price_provider": "openai"}}}
