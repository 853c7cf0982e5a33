"""The official ACP schema in the testing kit: where it comes from, and the strict form derived from it.

The strict form must reject a misspelled key everywhere, including in objects whose ``oneOf``/``anyOf``
branches add properties to the parent's (where a restriction inside the branch would reject valid
messages), and must leave ``_meta``, open maps and free-form values open.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_acp.testing import AcpSchema, SchemaNotFound, SchemaViolation, locate_schema
from dsh_acp.testing._schema_source import (
    ACP_SDK_INTEGRITY,
    ACP_SDK_PACKAGE,
    ACP_SDK_VERSION,
    SCHEMA_FILE,
    SchemaFetchError,
    cached_schema_path,
    fetch_schema,
)

ROOT = Path(__file__).parent.parent
DSH_ACP = Path(sys.executable).with_name("dsh-acp")

SELECT = {
    "id": "model",
    "name": "Model",
    "category": "model",
    "type": "select",
    "currentValue": "a",
    "options": [{"value": "a", "name": "A"}],
}
BOOLEAN = {"id": "fast", "name": "Fast", "type": "boolean", "currentValue": True}
SET_VALUE = {"sessionId": "s", "configId": "model", "value": "a"}
SET_BOOLEAN = {"sessionId": "s", "configId": "fast", "type": "boolean", "value": False}
FORM = {
    "sessionId": "s",
    "mode": "form",
    "message": "Which branch?",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "branch": {"type": "string", "title": "Branch"},
            "force": {"type": "boolean", "default": False},
        },
        "required": ["branch"],
    },
}
URL = {
    "sessionId": "s",
    "mode": "url",
    "message": "Log in",
    "elicitationId": "e1",
    "url": "https://example.com/login",
}
CHUNK = {"sessionUpdate": "agent_message_chunk"}
ACCEPT = {"action": "accept", "content": {"branch": "main", "force": True}}

# (definition, valid instance, the same with one key misspelled)
MISSPELLED = [
    ("SessionConfigOption", SELECT, {**SELECT, "current_value": "a"}),
    ("SessionConfigOption", SELECT, {**SELECT, "options": [{"value": "a", "name": "A", "descripton": "x"}]}),
    ("SessionConfigOption", BOOLEAN, {**BOOLEAN, "currentvalue": True}),
    ("SetSessionConfigOptionRequest", SET_VALUE, {**SET_VALUE, "config_id": "model"}),
    ("SetSessionConfigOptionRequest", SET_BOOLEAN, {**SET_BOOLEAN, "vaule": False}),
    ("CreateElicitationRequest", FORM, {**FORM, "requested_schema": {}}),
    ("CreateElicitationRequest", URL, {**URL, "elicitation_id": "e1"}),
    ("CreateElicitationRequest", URL, {**URL, "toolCallID": "c1"}),
    (
        "CreateElicitationRequest",
        FORM,
        {**FORM, "requestedSchema": {**FORM["requestedSchema"], "propreties": {}}},
    ),
    ("ElicitationPropertySchema", {"type": "string", "minLength": 1}, {"type": "string", "min_length": 1}),
    ("ElicitationPropertySchema", {"type": "boolean"}, {"type": "boolean", "defualt": True}),
    ("CreateElicitationResponse", ACCEPT, {**ACCEPT, "contents": {}}),
    ("CreateElicitationResponse", {"action": "decline"}, {"action": "decline", "reason": "no"}),
    (
        "ToolCall",
        {"toolCallId": "x", "title": "t", "rawInput": {"any": {"thing": 1}}},
        {"toolCallId": "x", "title": "t", "raw_input": {}},
    ),
    (
        "SessionNotification",
        {
            "sessionId": "s",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}},
        },
        {
            "sessionId": "s",
            "update": {**CHUNK, "content": {"type": "text", "text": "hi", "annotation": {}}},
        },
    ),
]


@pytest.mark.parametrize(
    ("definition", "valid", "misspelled"),
    MISSPELLED,
    ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(MISSPELLED)],
)
def test_a_misspelled_key_is_rejected_and_the_valid_instance_passes(
    acp_schema: AcpSchema, definition: str, valid: dict[str, Any], misspelled: dict[str, Any]
) -> None:
    acp_schema.validate(definition, valid)
    # The official file itself accepts the misspelling: the strict form is what catches it.
    assert not list(acp_schema._validators(definition)[0].iter_errors(misspelled))
    with pytest.raises(SchemaViolation):
        acp_schema.validate(definition, misspelled)


@pytest.mark.parametrize(
    ("definition", "value"),
    [
        # _meta is open at every level, and may hold anything.
        ("SessionConfigOption", {**SELECT, "_meta": {"any": {"nested": [1]}, "x.y/z": None}}),
        ("CreateElicitationRequest", {**FORM, "_meta": {"trace": "t"}}),
        # Open maps: the field names of a form and the values a user entered are the user's.
        ("CreateElicitationResponse", {"action": "accept", "content": {"any_name": "x", "other-name": 3}}),
        # Free-form values.
        ("ToolCallUpdate", {"toolCallId": "x", "rawOutput": {"whatever": {"deep": True}}}),
        # A future elicitation mode is open by design (the official schema says so).
        ("CreateElicitationRequest", {"sessionId": "s", "mode": "_custom", "message": "m", "extra": 1}),
        ("McpServer", {"name": "x", "command": "/bin/x", "args": [], "env": [{"name": "A", "value": "1"}]}),
    ],
)
def test_meta_open_maps_and_free_form_values_stay_open(
    acp_schema: AcpSchema, definition: str, value: dict[str, Any]
) -> None:
    acp_schema.validate(definition, value)


def test_the_strict_form_is_derived_from_the_official_file_alone(acp_schema: AcpSchema) -> None:
    sources = [*(ROOT / "dsh_acp" / "testing").glob("*.py"), ROOT / "conftest.py"]
    assert not any("schema.strict.json" in path.read_text() for path in sources)
    # A definition's own body is never restricted (the places that use it are), so a definition
    # composed into another that adds properties is not over-restricted.
    assert not [name for name, d in acp_schema.strict["$defs"].items() if "unevaluatedProperties" in d]


def test_the_pin_is_the_lock_files() -> None:
    lock = json.loads((ROOT / "tests" / "client" / "package-lock.json").read_text())
    entry = lock["packages"][f"node_modules/{ACP_SDK_PACKAGE}"]
    assert (entry["version"], entry["integrity"]) == (ACP_SDK_VERSION, ACP_SDK_INTEGRITY)
    assert lock["packages"][""]["dependencies"][ACP_SDK_PACKAGE] == ACP_SDK_VERSION
    manifest = json.loads((ROOT / "tests" / "client" / "package.json").read_text())
    assert manifest["dependencies"][ACP_SDK_PACKAGE] == ACP_SDK_VERSION


def test_the_suite_validates_against_the_pinned_package(acp_schema: AcpSchema) -> None:
    if os.environ.get("ACP_SCHEMA"):
        pytest.skip("ACP_SCHEMA chooses another schema file for this run")
    sdk = json.loads((acp_schema.path.parents[2] / "package.json").read_text())
    assert (sdk["name"], sdk["version"]) == (ACP_SDK_PACKAGE, ACP_SDK_VERSION)
    assert acp_schema.path.is_relative_to(ROOT)


@pytest.fixture
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ACP_SCHEMA", raising=False)
    return tmp_path / "cache"


def test_nothing_found_says_which_command_to_run(user_cache: Path) -> None:
    with pytest.raises(SchemaNotFound) as info:
        locate_schema()
    message = str(info.value)
    assert "run `dsh-acp schema fetch`" in message
    assert str(user_cache / "dsh-acp" / "acp-schema" / ACP_SDK_VERSION / "v1" / SCHEMA_FILE) in message


def test_acp_schema_must_name_a_schema_file(user_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_SCHEMA", str(user_cache / "missing.json"))
    with pytest.raises(SchemaNotFound, match=r"ACP_SCHEMA=.*missing\.json is not the ACP schema\.json"):
        locate_schema()


def test_the_cached_schema_is_found(user_cache: Path, acp_schema: AcpSchema) -> None:
    cached = cached_schema_path()
    cached.parent.mkdir(parents=True)
    shutil.copyfile(acp_schema.path, cached)
    assert locate_schema() == cached


def _fake_npm(tmp_path: Path, body: str) -> Path:
    npm = tmp_path / "bin" / "npm"
    npm.parent.mkdir(exist_ok=True)
    npm.write_text(f"#!/bin/sh\n{body}\n")
    npm.chmod(0o755)
    return npm


def test_fetch_rejects_a_tarball_that_is_not_the_pinned_one(user_cache: Path, tmp_path: Path) -> None:
    # `npm pack` hands over some other tarball (a proxy, a tampered mirror): nothing is cached.
    npm = _fake_npm(tmp_path, 'while [ "$1" != --pack-destination ]; do shift; done; echo x > "$2/sdk.tgz"')
    with pytest.raises(SchemaFetchError, match="is not the pinned @agentclientprotocol/sdk@"):
        fetch_schema(str(npm))
    assert not cached_schema_path().exists()


def test_fetch_reports_a_failing_npm(user_cache: Path, tmp_path: Path) -> None:
    npm = _fake_npm(tmp_path, "echo 'npm error code E404' >&2; exit 1")
    with pytest.raises(SchemaFetchError, match=r"failed \(exit 1\).*\n.*E404"):
        fetch_schema(str(npm))


def test_schema_fetch_without_npm_says_what_to_install(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ACP_SCHEMA"}
    env.update(PATH=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    result = subprocess.run(
        [str(DSH_ACP), "schema", "fetch"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("dsh-acp: npm is not installed:")
    assert "Install Node.js 20 or later with npm" in result.stderr
    assert f"sdk-{ACP_SDK_VERSION}.tgz" in result.stderr


def _npm_env(tmp_path: Path) -> dict[str, str]:
    if shutil.which("npm") is None:
        if os.environ.get("DSH_REQUIRE_NODE"):  # CI sets it: there a missing npm is a failure
            pytest.fail("npm is not installed: `dsh-acp schema fetch` needs it")
        pytest.skip("npm is not installed: `dsh-acp schema fetch` needs it")
    env = {k: v for k, v in os.environ.items() if k not in ("ACP_SCHEMA", "PYTHONPATH")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


@pytest.mark.slow
def test_schema_fetch_caches_the_pinned_schema(tmp_path: Path, pinned_sdk: Path) -> None:
    env = _npm_env(tmp_path)
    fetch = [str(DSH_ACP), "schema", "fetch"]
    first = subprocess.run(fetch, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr
    folder = tmp_path / "cache" / "dsh-acp" / "acp-schema" / ACP_SDK_VERSION
    assert first.stdout == f"{folder / 'v1' / SCHEMA_FILE}\n"
    kept = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert kept == [f"v{v}/{name}" for v in (1, 2) for name in ("schema.json", SCHEMA_FILE)]  # no leftovers
    for name in kept:
        assert (folder / name).read_bytes() == (pinned_sdk / "schema" / name).read_bytes()
    # The second run finds it without npm.
    second = subprocess.run(
        fetch, env={**env, "PATH": str(tmp_path)}, capture_output=True, text=True, timeout=60, check=False
    )
    assert (second.returncode, second.stdout) == (0, first.stdout)


def _example_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "custom_tool", project, ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _pytest_in(project: Path, env: dict[str, str]) -> str:
    """Run pytest in ``project`` as its author would; its output."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 3 passed" in result.stdout  # test_wire.py (shout, shout_v2) and test_in_memory.py
    assert f"rootdir: {project}\n" in result.stdout  # the copy, not this repository
    return result.stdout


@pytest.mark.slow
def test_the_example_passes_in_an_empty_folder(tmp_path: Path) -> None:
    """An outside author's project: the example copied alone, the README's commands, nothing else
    (no ACP_SCHEMA, an empty user cache, no conftest of this repository above it)."""
    env = _npm_env(tmp_path)
    project = _example_project(tmp_path)
    fetch = subprocess.run(
        [str(DSH_ACP), "schema", "fetch"], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert fetch.returncode == 0, fetch.stderr
    _pytest_in(project, env)


@pytest.mark.slow
def test_the_kit_fetches_the_schema_on_first_use(tmp_path: Path) -> None:
    env = _npm_env(tmp_path)
    _pytest_in(_example_project(tmp_path), env)
    assert (tmp_path / "cache" / "dsh-acp" / "acp-schema" / ACP_SDK_VERSION / "v1" / SCHEMA_FILE).is_file()
