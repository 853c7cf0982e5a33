"""The golden kit fails loudly and survives upgrades: a scenario that cannot be read or has no
golden fails naming the problem (never a skip), an agent that would not start says why, memory
mode works whatever lies under a scenario's pythonpath, the default golden leaves out what
describes dsh-acp itself, and a failing golden shows the change field by field."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from dsh_acp.testing import AcpSchema, Scenario, ScenarioError, check_scenario, discover_scenarios

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "custom_tool"


def _author_project(tmp_path: Path) -> Path:
    """The example as an author keeps it: shout.py, its test, wire/shout."""
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "test_in_memory.py"))
    return project


def _shout(scenarios: list[Scenario]) -> Scenario:
    """The example's ``shout`` scenario (``shout_v2`` beside it pins the same tool over ACP v2)."""
    return next(scenario for scenario in scenarios if scenario.name == "shout")


def _write(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n")


def test_a_misspelled_step_or_field_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "wire" / "typo"
    shutil.copytree(EXAMPLE / "wire" / "shout", folder)
    document = json.loads((folder / "scenario.json").read_text())
    document["steps"][2] = {"promt": {"text": "hi"}}
    document["steps"].append({"prompt": {"text": "hi", "permisions": ["allow_once"], "cancel_after": 0}})
    document["pythonpth"] = [".."]
    _write(folder / "scenario.json", document)
    (scenario,) = discover_scenarios(tmp_path / "wire")  # found, not dropped
    assert scenario.problems == (
        "scenario.json: unknown field 'pythonpth' (did you mean 'pythonpath'?)",
        "step 3: unknown step 'promt' (did you mean 'prompt'?); steps are cancel, files, initialize, "
        "new_session, notify, prompt, raw, request, restart, wait",
        "step 4 (prompt): unknown field 'permisions' (did you mean 'permissions'?); it takes blocks, "
        "cancel_after, elicitations, permissions, session, text, wait",
        "step 4 (prompt): cancel_after must be a whole number from 1, not 0",
    )
    with pytest.raises(ScenarioError, match=r"^scenario typo cannot be read: scenario.json: unknown field"):
        check_scenario(scenario)


def test_a_missing_folder_or_an_empty_one_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no scenario folder at"):
        discover_scenarios(tmp_path / "nowhere")
    (tmp_path / "__pycache__").mkdir()
    with pytest.raises(ScenarioError, match="holds no scenario"):
        discover_scenarios(tmp_path)


def test_a_scenario_without_a_golden_fails_and_update_writes_it(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    project = _author_project(tmp_path)
    (project / "wire" / "shout" / "expected.jsonl").unlink()
    scenario = _shout(discover_scenarios(project / "wire"))
    with pytest.raises(
        AssertionError, match=r"scenario shout has no golden yet \(.*\): run pytest --update-golden"
    ):
        check_scenario(scenario, mode="memory", schema=acp_schema)
    assert check_scenario(scenario, mode="memory", schema=acp_schema, update=True)
    assert scenario.golden_path.read_text() == (EXAMPLE / "wire" / "shout" / "expected.jsonl").read_text()


def test_the_default_golden_survives_a_version_bump(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, acp_schema: AcpSchema
) -> None:
    from dsh_acp.permissions import _modes

    scenario = _shout(discover_scenarios(EXAMPLE / "wire"))
    pinned = Scenario.load(shutil.copytree(EXAMPLE / "wire" / "shout", tmp_path / "shout"))
    pinned = Scenario(pinned.folder, pinned.description, pinned.steps, pinned.args, (str(EXAMPLE),))
    check_scenario(pinned, mode="memory", schema=acp_schema, pin_agent=True, update=True)
    # A later release: another version, a mode more.
    monkeypatch.setattr("dsh_acp.acp._initialize.VERSION", "9.9.9")
    monkeypatch.setitem(_modes.MODES, "auto", ("Auto", "A mode a later release adds."))
    assert check_scenario(scenario, mode="memory", schema=acp_schema) is None
    with pytest.raises(AssertionError) as changed:
        check_scenario(pinned, mode="memory", schema=acp_schema, pin_agent=True)
    assert 'result.agentInfo.version: "0.1.0" → "9.9.9"' in str(changed.value)


def test_memory_mode_keeps_the_modules_of_a_venv_under_the_pythonpath(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    # The folder that holds the virtualenv (the project, with .venv inside it), as an author's
    # "pythonpath": [".."] often is: anyio and pytest live under it.
    holder = Path(anyio.__file__).resolve().parents[5]
    assert Path(anyio.__file__).resolve().is_relative_to(holder)
    folder = tmp_path / "wire" / "shout"
    shutil.copytree(EXAMPLE / "wire" / "shout", folder)
    shutil.copy(EXAMPLE / "shout.py", folder / "shout.py")  # the scenario's own folder is on the path
    document = json.loads((folder / "scenario.json").read_text())
    document["pythonpath"] = [str(holder)]
    _write(folder / "scenario.json", document)
    loaded = dict(sys.modules)
    assert check_scenario(Scenario.load(folder), mode="memory", schema=acp_schema) is None
    assert sys.modules["anyio"] is loaded["anyio"]
    assert sys.modules["pytest"] is loaded["pytest"]
    assert "shout" not in sys.modules or sys.modules["shout"] is loaded.get("shout")


@pytest.mark.parametrize("mode", ["subprocess", "memory"])
def test_an_agent_that_would_not_start_says_why(tmp_path: Path, acp_schema: AcpSchema, mode: str) -> None:
    folder = tmp_path / "wire" / "shout"
    shutil.copytree(EXAMPLE / "wire" / "shout", folder)
    document = json.loads((folder / "scenario.json").read_text())
    document["args"] = ["--no-tools", "--tools", "shoot:TOOLS"]
    _write(folder / "scenario.json", document)
    said = "dsh-acp: --tools shoot:TOOLS: cannot import shoot: no module named 'shoot'"
    with pytest.raises(ScenarioError) as error:
        check_scenario(Scenario.load(folder), mode=mode, schema=acp_schema)  # type: ignore[arg-type]
    assert said in str(error.value)
    assert "status 2" in str(error.value)


@pytest.mark.slow
def test_in_an_authors_run_failures_are_tests_that_say_what_is_wrong(tmp_path: Path) -> None:
    project = _author_project(tmp_path)
    wire = project / "wire"
    for name in ("typo", "changed", "no_golden"):
        shutil.copytree(wire / "shout", wire / name)
    document = json.loads((wire / "typo" / "scenario.json").read_text())
    document["steps"][2] = {"promt": {"text": "hi"}}
    _write(wire / "typo" / "scenario.json", document)
    (wire / "no_golden" / "expected.jsonl").unlink()
    golden = (wire / "changed" / "expected.jsonl").read_text()
    longer = "Done: line 2 is loud now, and the golden says more than this run does, in a long line."
    (wire / "changed" / "expected.jsonl").write_text(golden.replace("Done: line 2 is loud now.", longer))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "test_wire.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert "3 failed, 2 passed" in out, out  # the example's shout and shout_v2 pass
    assert "skipped" not in out
    assert "step 3: unknown step 'promt' (did you mean 'prompt'?)" in out
    assert "scenario no_golden has no golden yet" in out
    marked = "content.text at character 25: Done: line 2 is loud now[-, and the golden says more"
    assert marked in out, out
    assert "Traceback" not in out, out
    assert "_scenario.py" not in out, out
    failure = out.split("_ test_wire[changed] _", 1)[1].split("\n_", 1)[0]
    assert len(failure.splitlines()) < 40, failure
    # --update-golden writes the missing golden and says so, from pytest-xdist's workers too.
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--update-golden"]
    updated = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300, check=False)
    assert "golden wire transcripts rewritten: read the diff before committing" in updated.stdout
    assert "scenario no_golden: 8 messages added" in updated.stdout, updated.stdout
    assert (wire / "no_golden" / "expected.jsonl").read_text() == golden
