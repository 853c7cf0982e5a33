"""``dsh-acp demo``: the first command a newcomer runs works without a terminal (CI, a pipe), shows
every part of the panel, and ``--raw`` prints the real wire.

Each mode runs once per module (about 5 s each): the real agent as a subprocess of the demo.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from dsh_acp.testing import AcpSchema

pytestmark = pytest.mark.slow

_TIMEOUT_S = 90


def _demo(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    # Wide columns keep each rendered line on one line of output, so the asserts can match them.
    env = {**os.environ, "COLUMNS": str(columns)}
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "dsh_acp", "demo", *args],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        env=env,
        check=False,
    )


@pytest.fixture(scope="module")
def rendered() -> str:
    run = _demo()
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.fixture(scope="module")
def raw() -> list[tuple[str, dict[str, Any]]]:
    run = _demo("--raw")
    assert run.returncode == 0, run.stderr
    lines = []
    for line in run.stdout.splitlines():
        direction, _, body = line.partition(" ")
        assert direction in ("->", "<-"), line
        lines.append((direction, orjson.loads(body)))
    return lines


def test_output_without_a_terminal_is_plain_text(rendered: str) -> None:
    assert "\x1b[" not in rendered  # no colours or cursor moves in a pipe
    assert "dsh-acp demo" in rendered
    assert "session/load replayed the session" in rendered


def test_shows_the_cards_with_their_kinds_and_statuses(rendered: str) -> None:
    for header in (
        "≡ read  List .",
        "⌕ search  Glob **/*.py",
        "$ execute  python3 -m unittest -v",
        "≡ read  Read calc.py",
        "✎ edit  Edit calc.py",
    ):
        assert header in rendered
    assert rendered.count("✓ completed") == 5
    assert rendered.count("failed") == 1  # the first test run exits 1: a failed command
    assert "at calc.py:6" in rendered  # the edit's location, relative as an editor shows it


def test_shows_the_diff(rendered: str) -> None:
    lines = rendered.splitlines()
    assert any("-     return sum(values) / (len(values) - 1)" in line for line in lines)
    assert any("+     return sum(values) / len(values)" in line for line in lines)
    assert "diff calc.py" in rendered


def test_shows_the_streamed_output_and_the_exit_codes(rendered: str) -> None:
    assert "test_mean_of_three (test_calc.CalcTest.test_mean_of_three) ... FAIL" in rendered
    assert "ZeroDivisionError: division by zero" in rendered
    assert "test_mean_of_three (test_calc.CalcTest.test_mean_of_three) ... ok" in rendered
    assert "Ran 4 tests" in rendered
    assert rendered.index(" exit 1 ") < rendered.index(" exit 0 ")


def test_shows_the_permission_prompts_and_the_answers(rendered: str) -> None:
    assert "▸ permission asked: python3 -m unittest -v — answered: Always allow" in rendered
    assert "▸ permission asked: Edit calc.py — answered: Allow" in rendered
    assert rendered.count("permission asked") == 2  # "Always allow" covered the second test run


def test_shows_the_plan_messages_and_title(rendered: str) -> None:
    # The plan is one panel updated in place (in a pipe: printed once, as it ended), not a panel
    # per update.
    assert rendered.count("─ Plan ") == 1
    assert "Plan 4/4" in rendered
    assert "☑ Run the tests again" in rendered
    assert "✻ Thinking" in rendered
    assert "Fixed: mean in calc.py now divides by len(values). All 4 tests pass." in rendered
    assert "Session title: The tests in this project fail. Find the bug and fix it." in rendered
    assert "turn ended: end_turn" in rendered


def test_paths_in_the_project_show_relative_to_it(rendered: str) -> None:
    assert "dsh-acp-demo-" not in rendered.split("(temporary)", 1)[1]  # only the intro names the folder


def test_a_narrow_pipe_does_not_break_the_rendering() -> None:
    run = _demo(columns=40)
    assert run.returncode == 0, run.stderr
    assert "Ran 4 tests" in run.stdout


def test_the_replay_rebuilds_the_live_panel(rendered: str) -> None:
    assert "✓ session/load replayed the session" in rendered


def test_raw_prints_both_directions_of_json_rpc(raw: list[tuple[str, dict[str, Any]]]) -> None:
    assert all(message["jsonrpc"] == "2.0" for _, message in raw)
    sent = [m for d, m in raw if d == "->"]
    received = [m for d, m in raw if d == "<-"]
    assert [m["method"] for m in sent if "method" in m] == [
        "initialize",
        "session/new",
        "session/prompt",
        "session/load",
    ]
    assert sent[0]["params"]["clientCapabilities"]["_meta"]["terminal_output"] is True
    asked = [m for m in received if m.get("method") == "session/request_permission"]
    assert [m["params"]["toolCall"]["toolCallId"] for m in asked] == ["test-1", "edit-1"]
    answers = {m["id"]: m["result"] for m in sent if "result" in m}
    assert [answers[m["id"]]["outcome"]["optionId"] for m in asked] == ["allow_always", "allow_once"]
    updates = [m["params"]["update"] for m in received if m.get("method") == "session/update"]
    streamed = [u for u in updates if "terminal_output" in u.get("_meta", {})]
    assert len(streamed) > 2  # the test run's output arrived in pieces, as it was printed
    assert any(m.get("method") == "fs/write_text_file" for m in received)


def test_raw_agent_messages_validate(raw: list[tuple[str, dict[str, Any]]], acp_schema: AcpSchema) -> None:
    methods = {m["id"]: m["method"] for d, m in raw if d == "->" and "method" in m and "id" in m}
    for direction, message in raw:
        if direction == "<-":
            answered = methods.get(message["id"]) if "method" not in message else None
            acp_schema.validate_agent_message(message, answered)


def test_a_failing_agent_is_one_line_and_non_zero(tmp_path: Path) -> None:
    agent = tmp_path / "broken-agent"
    agent.write_text("#!/bin/sh\necho 'dsh-acp: cannot start: something broke' >&2\nexit 3\n")
    agent.chmod(0o755)
    # The demo launches `sys.executable -m dsh_acp ...`: point it at an agent that fails at once.
    code = (
        "import sys; from dsh_acp.cli._demo import demo_main; "
        f"sys.executable = {str(agent)!r}; sys.exit(demo_main([]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
    )
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        "dsh-acp demo: the agent exited with code 3 before answering initialize "
        "(it said: dsh-acp: cannot start: something broke)"
    ]


def test_importing_the_cli_does_not_import_rich() -> None:
    code = (
        "import sys, dsh_acp.cli._main; "
        "loaded = sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.')); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=_TIMEOUT_S)


def test_in_a_terminal_open_cards_update_in_place() -> None:
    # FORCE_COLOR makes rich treat the pipe as a terminal: the live region of open cards is drawn.
    run = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "demo"],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "120"},
        check=False,
    )
    assert run.returncode == 0, run.stderr
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run.stdout)
    assert "Allow this call?   Allow    Always allow exactly `python3 -m unittest -v`" in screen
    assert " waiting " in screen  # the terminal, before permission was given
    assert "lines above" in screen  # a long running output shows its tail
    assert "○ pending" in screen
    assert "in progress" in screen


_NOT_INSTALLED = ("jsonschema", "pytest", "_pytest", "hypothesis")
"""What only the test extras promise (jsonschema comes today with mcp, but nothing promises it)."""

_BLOCKER = f"""\
import importlib.abc
import sys


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {_NOT_INSTALLED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


def test_runs_with_only_the_package_dependencies(tmp_path: Path) -> None:
    # The README's quick start installs without extras: the demo (and the kit's client it is built
    # on, and the agent it starts) must not need what only the tests install. A sitecustomize on
    # PYTHONPATH hides them from the demo and, through the environment, from the agent.
    (tmp_path / "sitecustomize.py").write_text(_BLOCKER, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}
    env.pop("FORCE_COLOR", None)
    hidden = subprocess.run(
        [sys.executable, "-c", "import jsonschema"], capture_output=True, text=True, env=env, check=False
    )
    assert "No module named 'jsonschema'" in hidden.stderr  # the blocker works
    run = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "demo"],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "✓ session/load replayed the session" in run.stdout
