"""Every public module declares ``__all__``; every listed name exists; nothing private leaks."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

import dsh_acp
from dsh_acp.testing import AcpClient, AcpSchema, AgentConfig, RpcError

PACKAGES = ["dsh_tools", "dsh_acp", "reference_tools"]


def public_modules() -> list[str]:
    names: list[str] = []
    for package in PACKAGES:
        names.append(package)
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return names


@pytest.mark.parametrize("name", public_modules())
def test_public_module_declares_all(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    for attr in exported:
        assert not attr.startswith("_"), f"{name}.__all__ exports private {attr}"
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr}"


@pytest.mark.parametrize("name", public_modules())
def test_no_undeclared_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(getattr(module, "__all__", ()))
    for attr, value in vars(module).items():
        if attr.startswith("_") or attr in exported:
            continue
        # Submodules and `from __future__ import annotations` are not API.
        if isinstance(value, ModuleType) or attr == "annotations":
            continue
        # Only what the module itself defines: names it imports (for annotations, say) are not
        # offered as its API, whatever their spelling.
        owner = getattr(value, "__module__", None)
        assert owner != name, f"{name}.{attr} is defined here, public, but not in __all__"


def test_private_modules_declare_all() -> None:
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue
            sub = importlib.import_module(info.name)
            assert hasattr(sub, "__all__"), f"{info.name} has no __all__"


# -- the curated surface of dsh_acp ------------------------------------------------------------

DSH_ACP_ALL = [
    "ARGUMENTS_SHOWN",
    "AgentConfig",
    "AssistantMessage",
    "ConnectionClosed",
    "ContextMessage",
    "ContextOverflow",
    "Finish",
    "FinishReason",
    "Message",
    "Model",
    "ModelAuthError",
    "ModelChoice",
    "ModelError",
    "ModelEvent",
    "ModelRequest",
    "ReasoningDelta",
    "RpcError",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedModel",
    "TextDelta",
    "ToolCallArguments",
    "ToolCallRequest",
    "ToolCallStart",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "build_config",
    "counter_ids",
    "serve",
    "serve_stdio",
]
"""What users of ``dsh_acp`` may rely on: adding or removing a name is a deliberate change."""


def test_the_public_surface_is_pinned() -> None:
    import dsh_acp

    assert dsh_acp.__all__ == DSH_ACP_ALL
    assert sorted(dir(dsh_acp)) == sorted(set(dir(dsh_acp)) | set(DSH_ACP_ALL))


def test_every_public_name_resolves_to_the_object_its_home_holds() -> None:
    import dsh_acp

    for name in DSH_ACP_ALL:
        value = getattr(dsh_acp, name)
        home = importlib.import_module(dsh_acp._HOME[name])
        assert value is getattr(home, name), name
    with pytest.raises(AttributeError, match="has no attribute 'Protocol'"):
        _ = dsh_acp.Protocol  # type: ignore[attr-defined]


def test_the_model_seam_is_public_whole() -> None:
    """A model author needs every event a response may stream, every message of the conversation
    and every error a model raises: a new one added to the seam must be added here too."""
    import typing

    import dsh_acp
    from dsh_acp.models import _model

    seam = {*typing.get_args(_model.ModelEvent), *typing.get_args(_model.Message)}
    seam |= {v for v in vars(_model).values() if isinstance(v, type) and issubclass(v, Exception)}
    assert sorted(c.__name__ for c in seam if c.__name__ not in dsh_acp.__all__) == []
    assert sorted(set(_model.__all__) - set(dsh_acp.__all__)) == []


TESTING_ALL = [
    "ZED_CAPABILITIES",
    "AcpClient",
    "AcpSchema",
    "AgentConfig",
    "FrameGenerator",
    "FuzzReport",
    "GoldenCheck",
    "Mode",
    "Normalizer",
    "PermissionAnswer",
    "RpcError",
    "Scenario",
    "ScenarioError",
    "SchemaNotFound",
    "SchemaViolation",
    "WireLine",
    "check_scenario",
    "discover_scenarios",
    "fuzz_agent",
    "golden_diff",
    "golden_tests",
    "locate_schema",
    "run_scenario",
    "scenario_problems",
    "wire_problems",
]
"""What users of the kit may rely on (``docs/tool-authors.md`` imports from these only)."""


def test_the_kits_surface_is_pinned() -> None:
    import dsh_acp.testing
    from dsh_acp.testing import pytest_plugin

    assert dsh_acp.testing.__all__ == TESTING_ALL
    assert all(hasattr(dsh_acp.testing, name) for name in TESTING_ALL)
    # The type a test annotates the ``golden`` fixture with is the one the fixture gives.
    assert pytest_plugin.GoldenCheck is dsh_acp.testing.GoldenCheck


def test_the_kit_offers_the_public_config_and_error() -> None:
    import dsh_acp
    import dsh_acp.testing

    assert dsh_acp.testing.AgentConfig is dsh_acp.AgentConfig
    assert dsh_acp.testing.RpcError is dsh_acp.RpcError


IMPORT_ONLY = """
import sys
before = set(sys.modules)
import dsh_acp
print(" ".join(sorted(set(sys.modules) - before)))
"""


def test_importing_dsh_acp_loads_nothing_else() -> None:
    """The agent's path to ``initialize`` starts with ``import dsh_acp``: the public surface must
    not cost it pydantic, anyio, the models or even ``typing``."""
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_ONLY], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["dsh_acp"]


def test_version_is_the_installed_distribution_s() -> None:
    from importlib.metadata import version

    import dsh_acp
    from dsh_acp._version import VERSION

    assert dsh_acp.__version__ == version("dsh-acp")
    # What initialize's agentInfo and the model client's User-Agent say: the same release.
    assert dsh_acp.__version__ == VERSION


def test_version_falls_back_when_the_package_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    import dsh_acp
    from dsh_acp._version import VERSION

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.delitem(vars(dsh_acp), "__version__", raising=False)
    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert dsh_acp.__version__ == VERSION


class _EchoModel(dsh_acp.Model):
    """A model written from the public names alone: it answers with the user's text."""

    name = "echo"
    accepts_images = False

    async def stream(self, request: dsh_acp.ModelRequest) -> AsyncIterator[dsh_acp.ModelEvent]:
        (last,) = [m for m in request.messages if isinstance(m, dsh_acp.UserMessage)][-1:]
        said = "".join(getattr(block, "text", "") for block in last.content)
        yield dsh_acp.TextDelta(f"you said: {said}")
        yield dsh_acp.Usage(input_tokens=3, output_tokens=4)
        yield dsh_acp.Finish("stop")


@pytest.mark.anyio
async def test_an_agent_runs_on_the_public_names_alone(acp_schema: AcpSchema, tmp_path: Path) -> None:
    """Config, models and the kit from ``dsh_acp`` and ``dsh_acp.testing``: no private import."""
    model: dsh_acp.Model = _EchoModel()
    script = dsh_acp.ScriptedModel([[{"text": "scripted"}]])
    config = AgentConfig(
        models=[
            dsh_acp.ModelChoice("echo", "Echo", lambda: model),
            dsh_acp.ModelChoice("script", "Script", lambda: script),
        ],
        session_ids=dsh_acp.counter_ids("s"),
    )
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        answer = await client.initialize()
        assert answer["agentInfo"]["version"] == dsh_acp.__version__
        sid = await client.new_session(str(tmp_path))
        assert sid == "s1"
        assert await client.prompt(sid, "hello") == {"stopReason": "end_turn"}
        (chunk,) = client.updates(sid, {"agent_message_chunk"})
        assert chunk["content"] == {"type": "text", "text": "you said: hello"}
        with pytest.raises(RpcError) as info:
            await client.request("session/prompt", {"sessionId": "nope", "prompt": []})
        assert info.value.code == -32002
    client.assert_valid()


# -- the tests, examples and benches use the public names -----------------------------------------------

ROOT = Path(__file__).resolve().parent.parent

PRIVATE_ON_PURPOSE = {
    "tests/test_connection.py": {"dsh_acp.rpc._errors"},
}
"""Tests of a private unit that take its public names from the unit itself, beside its internals."""


def _imports_from(path: Path) -> list[tuple[int, str, str]]:
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


def _same(module: str, name: str) -> bool:
    """Whether ``module``'s ``name`` is the object ``dsh_acp`` offers (not a namesake)."""
    return getattr(importlib.import_module(module), name, None) is getattr(dsh_acp, name)


def test_tests_examples_and_benches_take_public_names_from_dsh_acp() -> None:
    """A private import of a name ``dsh_acp`` offers would make the public surface untested."""
    offered = set(DSH_ACP_ALL)
    misses = []
    files = [*ROOT.glob("tests/**/*.py"), *ROOT.glob("examples/**/*.py"), *ROOT.glob("bench/*.py")]
    files.append(ROOT / "conftest.py")
    for path in files:
        if "node_modules" in path.parts:
            continue
        where = path.relative_to(ROOT).as_posix()
        for line, module, name in _imports_from(path):
            private = module.startswith("dsh_acp.") and "._" in module
            private = private and module not in PRIVATE_ON_PURPOSE.get(where, ())
            if private and name in offered and _same(module, name):
                misses.append(f"{where}:{line}: from {module} import {name}")
    assert misses == []


def test_examples_import_no_private_module() -> None:
    """The examples are what a tool author copies: only ``dsh_tools``, ``dsh_acp`` and
    ``dsh_acp.testing`` (with its pytest plugin)."""
    misses = []
    for path in ROOT.glob("examples/**/*.py"):
        for line, module, _name in _imports_from(path):
            if module != "__future__" and any(part.startswith("_") for part in module.split(".")):
                misses.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert misses == []


class _StructuralModel:
    """A model that only matches the seam's three required members."""

    name = "bare"
    accepts_images = False

    async def stream(self, request: dsh_acp.ModelRequest) -> AsyncIterator[dsh_acp.ModelEvent]:
        yield dsh_acp.Finish("stop")


@pytest.mark.anyio
async def test_a_model_that_is_no_model_is_named_with_what_it_lacks(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    config = AgentConfig(models=[dsh_acp.ModelChoice("bare", "Bare", _StructuralModel)])
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        with pytest.raises(RpcError) as info:
            await client.new_session(str(tmp_path))
    message = str(info.value)
    assert "'bare' (_StructuralModel) is not a dsh_acp.Model" in message
    assert "lacks context_window, price_ref, writes_titles, aclose" in message
