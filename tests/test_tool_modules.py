"""``--tools MODULE:NAME`` fails early, in words: through the real process, a module that does
not import, a name it lacks, a definition ``define_tool`` refused… each is one stderr line and
exit status 2 before the agent reads a single message, and ``dsh-acp tools`` prints the same."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DSH = [sys.executable, "-m", "dsh_acp"]

_GOOD = """
from dsh_tools import define_tool

async def run(args, execution):
    return "ok"

print("a stray print while importing")
TOOLS = [define_tool(name="good", description="A good tool.", parameters={}, execute=run)]
ONE = TOOLS[0]
NOT_TOOLS = "good"

def make():
    raise RuntimeError("no tools today")
"""

MODULES = {
    "good_tools": _GOOD,
    "broken_syntax": "TOOLS = [\n",
    "bad_definition": textwrap.dedent(
        """
        from dsh_tools import define_tool

        async def run(args, execution):
            return "ok"

        TOOLS = [define_tool(name="rename symbol", description="", parameters={}, execute=run)]
        """
    ),
    "missing_dependency": "import no_such_dependency\n",
}

CASES = {
    "no_such_module:TOOLS": "cannot import no_such_module: no module named 'no_such_module' "
    "(not on PYTHONPATH or installed)",
    "missing_dependency:TOOLS": "cannot import missing_dependency: no module named 'no_such_dependency' "
    "(not on PYTHONPATH or installed) (missing_dependency.py:1)",
    "broken_syntax:TOOLS": "cannot import broken_syntax: SyntaxError: '[' was never closed "
    "(broken_syntax.py:1)",
    "bad_definition:TOOLS": "cannot import bad_definition: invalid tool definition "
    "\"rename symbol\": name must be 1-64 characters of letters, digits, '_' or '-'; "
    "description must be a non-empty string "
    "(bad_definition.py:7)",
    "good_tools:TOLS": "good_tools has no 'TOLS' (it has TOOLS, ONE)",
    "good_tools:make": "make() raised RuntimeError: no tools today (good_tools.py:13)",
    "good_tools:NOT_TOOLS": "NOT_TOOLS is a str, not a tool definition, a list of them or a function "
    "returning one",
}


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tool-modules")
    for name, source in MODULES.items():
        (folder / f"{name}.py").write_text(source)
    return folder


def _run(args: list[str], modules: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(modules)}
    return subprocess.run(
        [*DSH, *args], capture_output=True, text=True, timeout=60, env=env, input="", cwd=tmp_path
    )


@pytest.mark.parametrize("spec", sorted(CASES))
def test_the_agent_names_an_unusable_tools_module_before_serving(
    spec: str, modules: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"turns": [[{"text": "hi"}]]}')
    # stdin holds an initialize: an agent that served would answer it on stdout.
    initialize = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    env = {**os.environ, "PYTHONPATH": str(modules)}
    done = subprocess.run(
        [*DSH, "--model", f"script:{script}", "--state-dir", str(tmp_path), "--tools", spec],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        input=initialize,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == f"dsh-acp: --tools {spec}: {CASES[spec]}"


def test_the_catalog_prints_the_same_line(modules: Path, tmp_path: Path) -> None:
    done = _run(["tools", "--tools", "bad_definition:TOOLS"], modules, tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"dsh-acp: --tools bad_definition:TOOLS: {CASES['bad_definition:TOOLS']}\n"


def test_a_usable_module_serves_and_what_it_prints_stays_off_the_wire(modules: Path, tmp_path: Path) -> None:
    done = _run(["tools", "--no-tools", "--tools", "good_tools:TOOLS"], modules, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["good", "A", "good", "tool."]
    one = _run(["tools", "--no-tools", "--tools", "good_tools:ONE"], modules, tmp_path)
    assert (one.returncode, one.stdout) == (0, done.stdout)  # one definition serves as a list of one
    assert done.stderr == "a stray print while importing\n"


def test_a_tool_named_twice_is_refused(modules: Path, tmp_path: Path) -> None:
    done = _run(["tools", "--tools", "good_tools:TOOLS", "--tools", "good_tools:TOOLS"], modules, tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "dsh-acp: --tools good_tools:TOOLS: a tool named 'good' is given twice"
    )


def test_a_tool_named_like_a_reference_tool_is_refused_by_the_catalog(tmp_path: Path) -> None:
    (tmp_path / "clash.py").write_text(_GOOD.replace('name="good"', 'name="read"'))
    done = _run(["tools", "--tools", "clash:TOOLS"], tmp_path, tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == 'dsh-acp: tool "read" is already registered'
