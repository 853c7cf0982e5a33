"""The golden wire suite: every scenario under fixtures/wire pins what an editor receives.

Each scenario runs against the real ``dsh-acp`` process over stdio, and again in memory: both
must give the golden. ``pytest --update-golden`` rewrites goldens and prints what changed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import orjson
import pytest

from dsh_acp.testing import (
    AcpSchema,
    GoldenCheck,
    Scenario,
    check_scenario,
    discover_scenarios,
    scenario_problems,
    wire_problems,
)
from dsh_acp.wire._client_profile import is_jetbrains, is_zed
from dsh_tools.sandbox import sandbox_support

ROOT = Path(__file__).parent.parent / "fixtures" / "wire"
SCENARIOS = discover_scenarios(ROOT)


def test_every_scenario_folder_is_complete_and_no_golden_is_orphaned() -> None:
    assert scenario_problems(ROOT) == []
    folders = [p for p in ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert [s.folder for s in SCENARIOS] == sorted(folders)


def _needs_a_sandbox(scenario: Scenario) -> None:
    """Skip, saying why, a scenario that pins what the OS sandbox does on a machine without one."""
    args = list(scenario.args)
    flags = [index for index, arg in enumerate(args) if arg == "--sandbox"]
    if flags and args[flags[-1] + 1 : flags[-1] + 2] == ["auto"] and not sandbox_support().available:
        pytest.skip(f"pins the OS sandbox, which this machine lacks: {sandbox_support().detail}")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_scenario_over_stdio(scenario: Scenario, golden: GoldenCheck) -> None:
    _needs_a_sandbox(scenario)
    golden(scenario, mode="subprocess", pin_agent=True)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_scenario_in_memory_gives_the_same_golden(scenario: Scenario, golden: GoldenCheck) -> None:
    if golden.update:
        pytest.skip("goldens are rewritten from the real process only")
    _needs_a_sandbox(scenario)
    golden(scenario, mode="memory", pin_agent=True)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_golden_files_hold_valid_agent_messages(scenario: Scenario, acp_schema: AcpSchema) -> None:
    # The runs above validate every line by its definition as it is produced; this also catches a
    # golden edited by hand. (A response's definition depends on the request it answers, which the
    # golden does not hold, so results are checked by the live runs only.)
    lines = scenario.golden_path.read_text(encoding="utf-8").splitlines()
    assert lines, f"{scenario.name} has an empty golden"
    schema = acp_schema  # until an initialize answer says which version the connection speaks
    for line in lines:
        message = orjson.loads(line)
        if "method" in message:
            schema.validate_agent_message(message)
        elif "error" in message:
            schema.validate("Error", message["error"])
        else:
            assert set(message) == {"jsonrpc", "id", "result"}, line
            if isinstance(message["result"], dict) and "protocolVersion" in message["result"]:
                schema = acp_schema.for_protocol(message["result"]["protocolVersion"])


def test_a_golden_whose_raw_input_is_not_an_object_fails(tmp_path: Path, acp_schema: AcpSchema) -> None:
    # Typed clients (Toad) reject such a call outright: the kit must not let a golden pin one.
    source = next(s for s in SCENARIOS if s.name == "terminal_card_plain_client")
    folder = tmp_path / source.name
    shutil.copytree(source.folder, folder)
    golden = folder / "expected.jsonl"
    lines = golden.read_text(encoding="utf-8").splitlines()
    bad = [re.sub(r'"rawInput":\{[^{}]*\}', '"rawInput":"echo hi"', line, count=1) for line in lines]
    assert bad != lines
    golden.write_text("".join(line + "\n" for line in bad), encoding="utf-8")
    with pytest.raises(AssertionError, match="rawInput must be a JSON object, not str"):
        check_scenario(Scenario.load(folder), mode="memory", schema=acp_schema, pin_agent=True)
    assert wire_problems(orjson.loads(next(b for b, line in zip(bad, lines, strict=True) if b != line)))
    assert not any(wire_problems(orjson.loads(line)) for line in lines)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_a_client_that_shows_no_option_names_never_gets_two_options_of_one_kind(scenario: Scenario) -> None:
    # CodeCompanion lists options by kind and keeps the last of each: a second allow_always
    # ("… in this project") silently won its "Always accept". Only clients known to show the
    # options' names (Zed, JetBrains) may tell two options of one kind apart.
    steps = orjson.loads(scenario.folder.joinpath("scenario.json").read_bytes())["steps"]
    info = next((s["initialize"].get("clientInfo") for s in steps if "initialize" in s), None)
    if is_zed(info) or is_jetbrains(info):
        return
    for line in scenario.golden_path.read_text(encoding="utf-8").splitlines():
        message = orjson.loads(line)
        if message.get("method") == "session/request_permission":
            kinds = [option["kind"] for option in message["params"]["options"]]
            assert len(kinds) == len(set(kinds)), line
