"""ACP v2 beside v1: the negotiation, the methods v2 renames or drops, what a v2 agent answers
without a store, the git patch of a v2 diff, and the kit's schema of each version. The v2 wire
itself is pinned by the goldens ``fixtures/wire/v2_*`` and driven by the official v2 client
(``test_official_client_v2``)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_acp import RpcError, build_config
from dsh_acp.acp._initialize import initialize_answer
from dsh_acp.testing import (
    AcpClient,
    AcpSchema,
    Normalizer,
    Scenario,
    ScenarioError,
    SchemaViolation,
    wire_problems,
)
from dsh_acp.wire.v2._patch import git_patch, patch_path
from helpers import scripted

pytestmark = pytest.mark.anyio

TURNS = [[{"text": "Hello."}]]


@pytest.mark.parametrize(
    ("asked", "answered"), [(1, 1), (2, 2), (3, 2), (65535, 2), (0, 1), ("1", 1), ("2026-01-01", 1)]
)
def test_each_client_gets_the_version_it_asks_for_or_the_newest(asked: Any, answered: int) -> None:
    result, profile = initialize_answer(build_config([]), {"protocolVersion": asked})
    assert (result["protocolVersion"], profile.protocol) == (answered, answered)
    assert ("info" in result) == (answered == 2)  # v2 names the agent ``info``, v1 ``agentInfo``


async def test_v2_renames_the_auth_methods(
    acp_schema: AcpSchema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_API_KEY", "sk-test-not-real-0000")
    config = build_config(["--model", "openai:gpt-4o", "--state-dir", str(tmp_path / "state")])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        answer = await client.initialize({"auth": {"terminal": {}}}, version=2)
        methods = {m["methodId"]: m for m in answer["authMethods"]}
        assert methods["api-key"]["type"] == "agent"
        assert (methods["login"]["type"], methods["login"]["args"]) == ("terminal", ["login"])
        assert await client.request("auth/login", {"methodId": "api-key"}) == {}
        for v1_name in ("authenticate", "logout", "session/set_mode", "session/load"):
            with pytest.raises(RpcError) as info:
                await client.request(v1_name, {"methodId": "api-key"})
            assert info.value.code == -32601
    client.assert_valid()


async def test_v2_lists_and_resumes_without_a_store(acp_schema: AcpSchema, tmp_path: Path) -> None:
    """Listing and resuming are part of every v2 agent's sessions: without a store there is
    nothing to find (v1 does not offer them at all)."""
    async with AcpClient.in_memory(scripted(TURNS), schema=acp_schema) as client:
        answer = await client.initialize(version=2)
        assert "delete" not in answer["capabilities"]["session"]
        assert "fork" not in answer["capabilities"]["session"]
        session = await client.new_session(str(tmp_path))
        assert await client.request("session/list", {}) == {"sessions": []}
        with pytest.raises(RpcError) as info:
            await client.request("session/resume", {"sessionId": session, "cwd": str(tmp_path)})
        assert (info.value.code, info.value.data["sessionId"]) == (-32002, session)
        for method in ("session/fork", "session/delete"):
            with pytest.raises(RpcError) as info:
                await client.request(method, {"sessionId": session, "cwd": str(tmp_path)})
            assert info.value.code == -32601
        idle = await client.turn(session, "hi")
        assert idle == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    client.assert_valid()


async def test_a_model_failure_ends_the_v2_turn_with_an_error_state(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    """The prompt was answered when it was accepted: the failure is told by the idle state."""
    async with AcpClient.in_memory(scripted([]), schema=acp_schema) as client:  # no turn to play
        await client.initialize(version=2)
        session = await client.new_session(str(tmp_path))
        idle = await client.turn(session, "hi")
        assert idle["stopReason"] == "error"
        assert idle["error"]["code"] == -32603
        assert "turn" in idle["error"]["message"]
    client.assert_valid()


# -- the git patch of a v2 diff ---------------------------------------------------------------

_LINES = st.lists(st.sampled_from(["a", "b", "c", "", "  x", "tab\tb"]), max_size=8)


def _text(lines: list[str], newline: bool) -> str:
    return "\n".join(lines) + ("\n" if newline and lines else "")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=_LINES, new=_LINES, old_newline=st.booleans(), new_newline=st.booleans(), created=st.booleans())
def test_the_patch_turns_the_old_text_into_the_new(
    tmp_path: Path, old: list[str], new: list[str], old_newline: bool, new_newline: bool, created: bool
) -> None:
    before, after = _text(old, old_newline), _text(new, new_newline)
    patch = git_patch("src/f.txt", None if created else before, after)
    if patch is None:
        assert not created
        assert before == after
        return
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    (work / "src").mkdir()
    if not created:
        (work / "src" / "f.txt").write_text(before)
    (work / "p.patch").write_text(patch)
    subprocess.run(["git", "apply", "p.patch"], cwd=work, check=True, capture_output=True)
    assert (work / "src" / "f.txt").read_text() == after


def test_patch_paths_are_relative_inside_the_session_folder_only() -> None:
    assert patch_path("/w/src/a.py", "/w") == "src/a.py"
    assert patch_path("/w2/a.py", "/w") == "/w2/a.py"
    assert patch_path("/etc/hosts", "/") == "etc/hosts"
    assert git_patch("/etc/hosts", "a\n", "b\n").startswith("diff --git a//etc/hosts b//etc/hosts\n")  # type: ignore[union-attr]


# -- the kit's schemas -------------------------------------------------------------------------


def test_the_kit_finds_the_v2_schema_of_the_same_package(acp_schema: AcpSchema) -> None:
    v2 = acp_schema.for_protocol(2)
    assert (acp_schema.protocol, v2.protocol) == (1, 2)
    assert v2.path.parent.name == "v2"
    assert v2.path.name == acp_schema.path.name  # the full schema of each version
    assert v2.for_protocol(1) is acp_schema


def test_v2_error_data_stays_open_and_a_misspelled_key_is_still_caught(acp_schema: AcpSchema) -> None:
    v2 = acp_schema.for_protocol(2)
    message = "Resource not found"
    v2.validate("Error", {"code": -32002, "message": message, "data": {"details": message, "sessionId": "s"}})
    update = {"sessionUpdate": "tool_call_update", "toolCallId": "c", "raw_input": {}}
    with pytest.raises(SchemaViolation, match="raw_input"):
        v2.validate("UpdateSessionNotification", {"sessionId": "s", "update": update})


def test_a_v2_permission_subject_must_carry_an_object_as_raw_input() -> None:
    call = {"toolCallId": "c", "rawInput": "echo hi"}
    params = {
        "sessionId": "s",
        "title": "t",
        "subject": {"type": "tool_call", "toolCall": call},
        "options": [],
    }
    problems = wire_problems(
        {"jsonrpc": "2.0", "id": 1, "method": "session/request_permission", "params": params}
    )
    assert problems == [
        "session/request_permission subject.toolCall 'c': rawInput must be a JSON object, not str 'echo hi'"
    ]


def test_a_scenario_names_a_protocol_this_kit_knows(tmp_path: Path) -> None:
    for name in ("scenario.json", "model.json", "expected.jsonl"):
        (tmp_path / name).write_text("{}")
    steps = [{"initialize": {}}]
    (tmp_path / "scenario.json").write_text(json.dumps({"description": "d", "protocol": 3, "steps": steps}))
    with pytest.raises(ScenarioError, match='"protocol" is the ACP version the client speaks: 1 or 2'):
        Scenario.load(tmp_path)
    (tmp_path / "scenario.json").write_text(json.dumps({"description": "d", "protocol": 2, "steps": steps}))
    assert Scenario.load(tmp_path).protocol == 2


# -- the stable features of the draft ----------------------------------------------------------

GOLDENS = Path(__file__).parent.parent / "fixtures" / "wire"


def _v2_lines(golden: Path) -> list[dict[str, Any]]:
    """The lines of a golden written on connections that negotiated v2."""
    lines, version = [], 1
    for line in golden.read_text(encoding="utf-8").splitlines():
        message = json.loads(line)
        result = message.get("result")
        if isinstance(result, dict) and "protocolVersion" in result:
            version = result["protocolVersion"]
        if version == 2:
            lines.append(message)
    return lines


def test_the_v2_wire_uses_only_the_stable_features_of_the_draft_but_fork(pinned_sdk: Path) -> None:
    """The kit checks every line against the draft's full schema (dsh-acp offers session/fork,
    unstable in v2 too); every update, request and error the v2 goldens pin also validates,
    strictly, against the stable-feature schema the SDK's ``experimental/v2`` client speaks."""
    stable = AcpSchema(pinned_sdk / "schema" / "v2" / "schema.json")
    checked = 0
    for golden in sorted(GOLDENS.glob("*/expected.jsonl")):
        for message in _v2_lines(golden):
            if "method" in message:
                stable.validate_agent_message(message)
            elif "error" in message:
                stable.validate("Error", message["error"])
            elif "protocolVersion" in message["result"]:
                capabilities = message["result"]["capabilities"]
                session = {k: v for k, v in capabilities["session"].items() if k != "fork"}
                stable.validate(
                    "InitializeResponse", {**message["result"], "capabilities": {"session": session}}
                )
            else:
                continue  # a response's definition depends on its request, which goldens do not hold
            checked += 1
    assert checked > 50


def test_an_authors_v2_golden_leaves_out_what_describes_the_agent() -> None:
    """By default a golden survives an upgrade of dsh-acp: v2's names for the agent's version,
    capabilities and commands are left out as v1's are."""
    answer = {
        "protocolVersion": 2,
        "info": {"name": "dsh-acp", "version": "9.9.9"},
        "capabilities": {"session": {}},
        "authMethods": [],
    }
    normalized = json.loads(Normalizer([]).line({"jsonrpc": "2.0", "id": 0, "result": answer}))
    assert normalized["result"] == {
        "protocolVersion": 2,
        "info": {"name": "dsh-acp", "version": "{{version}}"},
        "capabilities": "{{capabilities}}",
        "authMethods": "{{authMethods}}",
    }
    session = {"sessionId": "s", "configOptions": [], "availableCommands": [{"type": "command", "name": "x"}]}
    normalized = json.loads(Normalizer([]).line({"jsonrpc": "2.0", "id": 1, "result": session}))
    assert normalized["result"]["availableCommands"] == "{{commands}}"
