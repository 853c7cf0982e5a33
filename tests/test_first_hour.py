"""What a person meets first, through the real ``dsh-acp`` process: started in a terminal it says
what it is and keeps serving; Ctrl+C and SIGTERM end it quietly with the shell's usual codes;
``login`` works without a terminal; ``tools`` fits the terminal."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

DSH = [sys.executable, "-m", "dsh_acp"]


def _read_until(fd: int, marker: bytes, limit: float = 15) -> bytes:
    seen = b""
    deadline = time.monotonic() + limit
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"never saw {marker!r}; got {seen!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"closed before {marker!r}; got {seen!r}"
            seen += chunk
    return seen


def test_in_a_terminal_it_says_what_it_is_keeps_serving_and_ctrl_c_is_quiet(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    agent = subprocess.Popen(
        [*DSH, "--state-dir", str(tmp_path)], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    os.close(slave)
    try:
        assert agent.stderr is not None
        assert agent.stdout is not None
        greeting = _read_until(agent.stderr.fileno(), b"Ctrl+C quits").decode()
        assert "Agent Client Protocol agent" in greeting
        assert "dsh-acp demo" in greeting
        assert "agent_servers" in greeting
        os.write(
            master,
            orjson.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
            )
            + b"\n",
        )
        answer = _read_until(agent.stdout.fileno(), b"\n")
        assert orjson.loads(answer.splitlines()[0])["result"]["protocolVersion"] == 1
        agent.send_signal(signal.SIGINT)
        assert agent.wait(timeout=10) == 130
        rest = agent.stderr.read().decode()
        assert "Traceback" not in rest
    finally:
        os.close(master)
        if agent.poll() is None:
            agent.kill()
        agent.communicate()  # closes the pipes


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_end_the_agent_quietly_with_the_usual_codes(tmp_path: Path, signum: int, code: int) -> None:
    agent = subprocess.Popen(
        [*DSH, "--state-dir", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert agent.stdin is not None
    assert agent.stdout is not None
    agent.stdin.write(
        orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
        + b"\n"
    )
    agent.stdin.flush()
    agent.stdout.readline()  # serving: the signal handlers are in place
    agent.send_signal(signum)
    _, err = agent.communicate(timeout=10)
    assert agent.returncode == code
    assert err.decode() == ""  # no traceback, no noise


def test_not_on_a_terminal_it_says_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [*DSH, "--state-dir", str(tmp_path)], input=b"", capture_output=True, timeout=15, check=False
    )
    assert done.returncode == 0
    assert done.stderr == b""


def test_login_without_a_terminal_reads_the_key_from_stdin(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    env.pop("DSH_API_KEY", None)
    done = subprocess.run(
        [*DSH, "login"], input=b"sk-piped-123\n", capture_output=True, env=env, timeout=15, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""  # no GetPassWarning, no "may be echoed"
    assert 'api_key = "sk-piped-123"' in (tmp_path / "dsh-acp" / "config.toml").read_text()
    empty = subprocess.run(
        [*DSH, "login"], stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=15, check=False
    )
    assert empty.returncode == 1
    message = empty.stderr.decode()
    assert "pass the key on stdin" in message
    assert "Warning" not in message


def test_tools_fit_the_terminal() -> None:
    done = subprocess.run(
        [*DSH, "tools"], capture_output=True, env={**os.environ, "COLUMNS": "60"}, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0].startswith("bash ")
    assert max(len(line) for line in lines) <= 60


def test_the_command_line_section_names_every_flag_and_command_the_help_lists() -> None:
    """docs/running.md says ``--help`` lists every flag and then names them: a flag or a command
    the real ``--help`` shows that the section leaves out is one a reader never hears of."""
    shown = subprocess.run([*DSH, "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    flags = set(re.findall(r"^\s+(--[a-z][a-z-]+)", shown, re.M)) - {"--help"}
    commands = set(re.findall(r"`dsh-acp ([a-z]+)", shown))
    assert "--model" in flags  # the help reads as this test expects
    assert "schema" in commands
    page = (Path(__file__).parent.parent / "docs" / "running.md").read_text(encoding="utf-8")
    section = page.split("\n## Command line\n", 1)[1].split("\n## ", 1)[0]
    assert sorted(f for f in flags if f"`{f}" not in section) == []
    assert sorted(c for c in commands if f"`dsh-acp {c}" not in section) == []
