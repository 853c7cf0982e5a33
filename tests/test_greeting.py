"""Started by hand in a terminal, the real ``dsh-acp`` says on stderr what it is and how an editor
starts it: an absolute command (an editor starts it from elsewhere: the path as typed is useless
in its settings) and a whole editor entry with the model this launch would use."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "dsh-acp"
"""The console script of the test's virtualenv, the one a user starts."""


def _environ(home: Path) -> dict[str, str]:
    """A user with no model and no key but the ones a test gives."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("DSH_") and not k.endswith("_API_KEY")}
    return {**kept, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}


def _greeting(args: list[str], home: Path, **environ: str) -> list[str]:
    """What the agent writes on stderr when its stdin is a terminal, typed as a relative path from
    the folder above the virtualenv (as `.venv/bin/dsh-acp` is typed in a project)."""
    folder = SCRIPT.parent.parent.parent
    typed = os.path.relpath(SCRIPT, folder)
    assert not os.path.isabs(typed)
    controller, terminal = pty.openpty()
    agent = subprocess.Popen(
        [typed, *args],
        cwd=folder,
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**_environ(home), **environ},
    )
    os.close(terminal)
    try:
        assert agent.stderr is not None
        lines: list[str] = []
        while not lines or "Ctrl+C quits" not in lines[-1]:
            line = agent.stderr.readline().decode()
            assert line, f"the agent ended before greeting: {lines}"
            lines.append(line.rstrip("\n"))
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.communicate(timeout=10)
        os.close(controller)
    return lines


def _zed_entry(lines: list[str]) -> dict[str, object]:
    (line,) = [line for line in lines if '"agent_servers"' in line]
    settings = json.loads("{" + line.strip() + "}")
    entry: dict[str, object] = settings["agent_servers"]["dsh-acp"]
    return entry


def test_the_greeting_names_the_model_dsh_acp_login_stored(tmp_path: Path) -> None:
    login = subprocess.run(
        [SCRIPT, "login", "--model", "deepseek-chat"],
        input=b"sk-test\n",
        env=_environ(tmp_path),
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert b"Stored the model deepseek-chat" in login.stdout
    lines = _greeting([], tmp_path)
    entry = _zed_entry(lines)
    assert entry == {
        "type": "custom",
        "command": str(SCRIPT.absolute()),
        "args": ["--model", "deepseek-chat"],
        "env": {},
    }
    assert not any("No model yet" in line or "sk-test" in line for line in lines)
    (toad,) = [line for line in lines if "toad acp" in line]
    assert f"toad acp '{SCRIPT.absolute()} --model deepseek-chat' ." in toad


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--model", "gpt-4o"], ["--model", "gpt-4o"]),
        (
            ["--model", "openai:qwen2.5-coder:14b", "--base-url", "http://localhost:11434/v1/"],
            ["--model", "openai:qwen2.5-coder:14b", "--base-url", "http://localhost:11434/v1"],
        ),
    ],
    ids=["bare-name", "local-server"],
)
def test_the_greeting_names_the_model_the_flags_chose(
    tmp_path: Path, flags: list[str], expected: list[str]
) -> None:
    entry = _zed_entry(_greeting(flags, tmp_path))
    assert entry["command"] == str(SCRIPT.absolute())
    assert entry["args"] == expected


def test_a_scripted_model_is_named_by_its_absolute_path(tmp_path: Path) -> None:
    script = tmp_path / "model.json"
    script.write_text(json.dumps({"turns": [[{"text": "hi"}]]}))
    relative = os.path.relpath(script, SCRIPT.parent.parent.parent)
    entry = _zed_entry(_greeting(["--model", f"script:{relative}"], tmp_path))
    assert entry["args"] == ["--model", f"script:{script}"]


def test_with_no_model_the_greeting_says_how_to_choose_one(tmp_path: Path) -> None:
    lines = _greeting([], tmp_path)
    assert _zed_entry(lines) == {"type": "custom", "command": str(SCRIPT.absolute()), "args": [], "env": {}}
    (advice,) = [line for line in lines if "No model yet" in line]
    assert f"{SCRIPT.absolute()} login" in advice


def test_a_key_from_the_shell_is_named_never_shown(tmp_path: Path) -> None:
    lines = _greeting([], tmp_path, DEEPSEEK_API_KEY="sk-from-the-shell")
    assert _zed_entry(lines)["args"] == ["--model", "deepseek-chat"]
    assert not any("sk-from-the-shell" in line for line in lines)
    (note,) = [line for line in lines if "DEEPSEEK_API_KEY" in line]
    assert "an editor started elsewhere may not have it" in note
