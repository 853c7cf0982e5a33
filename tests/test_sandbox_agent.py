"""Through the real ``dsh-acp`` process: a command the user allowed runs in the sandbox, and only
there — it cannot write, delete or read outside its policy, reach a server on the host's
127.0.0.1 or write ``.git`` — while ordinary work (tests, a temporary file, a commit through an
escalation) still works; the model is told in one line what the sandbox refused; ``auto``
runs sandboxed commands unasked and asks for a widening; ``plan`` runs them read-only; and with
the sandbox switched off the agent says so and ``auto`` asks as ``default`` does."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools.sandbox import sandbox_support

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(
        not sandbox_support().available, reason=f"no sandbox here: {sandbox_support().detail}"
    ),
]


class World:
    """A project with a repository, a folder beside it and a home with secrets."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work, self.outside, self.home = root / "work", root / "outside", root / "home"
        self.work.mkdir()
        self.outside.mkdir()
        (self.outside / "data.txt").write_text("precious")
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "id_ed25519").write_text("SECRET-KEY-4711")
        (self.home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n")
        git = {**os.environ, "HOME": str(self.home)}
        subprocess.run(["git", "init", "-q", str(self.work)], check=True, env=git)
        (self.work / "test_it.py").write_text("def test_it():\n    assert 1 + 1 == 2\n")
        self.config = (self.work / ".git" / "config").read_text()

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "XDG_CONFIG_HOME": str(self.home / ".config")}

    def script(self, *steps: list[dict[str, Any]]) -> str:
        """A model script: each step one model response with these bash calls, then "done"."""
        responses = [{"tool_calls": calls} for calls in steps] + [{"text": "done"}]
        path = self.root / "model.json"
        path.write_text(json.dumps({"turns": [responses]}))
        return f"script:{path}"


def bash(call_id: str, command: str, **extra: Any) -> dict[str, Any]:
    return {"id": call_id, "name": "bash", "arguments": {"command": command, "description": call_id, **extra}}


def results(client: AcpClient, session: str) -> dict[str, str]:
    """What each call's card showed: its live terminal output and the text of its last content."""
    found: dict[str, str] = {}
    for update in client.updates(session, {"tool_call_update"}):
        call = update["toolCallId"]
        live = (update.get("_meta") or {}).get("terminal_output")
        if live:
            found[call] = found.get(call, "") + live["data"]
        if update.get("status") in ("completed", "failed") and update.get("content"):
            found[call] = found.get(call, "") + " ".join(
                block["content"]["text"] for block in update["content"] if block.get("type") == "content"
            )
    return found


def questions(client: AcpClient) -> list[dict[str, Any]]:
    return [r["params"] for r in client.agent_requests if r["method"] == "session/request_permission"]


async def run(
    world: World,
    schema: AcpSchema,
    model: str,
    *,
    mode: str = "default",
    answers: tuple[str, ...] = (),
    capabilities: dict[str, Any] | None = None,
    args: tuple[str, ...] = (),
) -> tuple[AcpClient, str, dict[str, Any]]:
    async with AcpClient.subprocess(
        ["--model", model, "--mode", mode, "--state-dir", str(world.root / "state"), *args],
        schema=schema,
        env=world.env(),
        permission_answers=deque(answers),
    ) as client:
        init = await client.initialize(capabilities or {"_meta": {"terminal_output": True}})
        session = await client.new_session(str(world.work))
        assert await client.prompt(session, "go") == {"stopReason": "end_turn"}
    client.assert_valid()
    return client, session, init


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


async def test_a_command_allowed_once_cannot_reach_outside_its_policy(
    world: World, acp_schema: AcpSchema
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    connected: list[object] = []
    threading.Thread(target=lambda: connected.append(listener.accept()), daemon=True).start()
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
    steps = [
        [bash("write", f"echo x > {world.outside}/new.txt")],
        [bash("delete", f"rm {world.outside}/data.txt")],
        [bash("read", f"cat {world.home}/.ssh/id_ed25519")],
        [bash("net", f'{sys.executable} -c "{probe}"')],
        [bash("git", "git config core.fsmonitor 'touch pwned'")],
    ]
    try:
        client, session, init = await run(
            world, acp_schema, world.script(*steps), answers=("allow_once",) * 5
        )
    finally:
        listener.close()
    assert init["agentCapabilities"]["_meta"]["sandbox"] == {
        "enabled": True,
        "mechanism": "landlock",
        "policy": "workspace-write",
    }
    said = results(client, session)
    assert sorted(p.name for p in world.outside.iterdir()) == ["data.txt"]
    assert (world.outside / "data.txt").read_text() == "precious"
    assert (world.work / ".git" / "config").read_text() == world.config
    assert connected == []
    assert all(b"SECRET-KEY-4711" not in line.raw for line in client.lines)
    assert f'widen: ["{world.outside}/new.txt"]' in said["write"]
    assert "[sandbox]" in said["delete"]
    assert "secret store" in said["read"]
    assert str(world.home / ".ssh") in said["read"]
    assert 'widen: ["network"]' in said["net"]
    assert 'widen: ["git"]' in said["git"]


async def test_ordinary_work_works_and_a_commit_goes_through_an_escalation(
    world: World, acp_schema: AcpSchema
) -> None:
    steps = [
        [bash("tests", f"{sys.executable} -m pytest -q -p no:randomly test_it.py")],
        [bash("temp", 'f=$(mktemp) && echo hello > "$f" && cat "$f" && echo "$f"')],
        [bash("add", "git add test_it.py")],  # the index is in .git: refused
        [bash("commit", "git add test_it.py && git commit -qm first", widen=["git"])],
        [bash("log", "git log --oneline")],
    ]
    client, session, _ = await run(
        world, acp_schema, world.script(*steps), mode="auto", answers=("allow_once",)
    )
    said = results(client, session)
    assert "1 passed" in said["tests"], said["tests"]
    assert "hello" in said["temp"]
    assert "dsh-tmp-" in said["temp"]
    assert 'widen: ["git"]' in said["add"]
    asked = questions(client)
    assert len(asked) == 1  # auto: only the widened command asked
    card = asked[0]["toolCall"]
    assert card["content"][0]["content"]["text"].startswith(
        "Run `git add test_it.py && git commit -qm first` with write access to `.git`.\n\nRuns 2 commands:"
    )
    assert "first" in said["log"]


async def test_a_remembered_widening_covers_that_command_with_that_widening_only(
    world: World, acp_schema: AcpSchema
) -> None:
    steps = [
        [bash("one", "git status --short", widen=["network"])],
        [bash("two", "git status --short", widen=["network"])],
        [bash("three", "git status --short", widen=["network", "git"])],
        [bash("four", "git status --short")],
    ]
    client, _, _ = await run(
        world, acp_schema, world.script(*steps), answers=("allow_always", "allow_once", "allow_once")
    )
    asked = [q["toolCall"]["toolCallId"] for q in questions(client)]
    assert asked == ["one", "three", "four"]
    first = questions(client)[0]
    labels = {option["optionId"]: option["name"] for option in first["options"]}
    assert labels["allow_always"] == "Always allow exactly this command line with network access"


async def test_plan_mode_runs_exploring_commands_read_only(world: World, acp_schema: AcpSchema) -> None:
    steps = [
        [bash("ls", "ls && git log --oneline || true")],
        [bash("touch", "touch made.txt")],
        [bash("widened", "curl -sI https://example.com", widen=["network"])],
    ]
    client, session, _ = await run(world, acp_schema, world.script(*steps), mode="plan")
    said = results(client, session)
    assert questions(client) == []
    assert "test_it.py" in said["ls"]
    assert not (world.work / "made.txt").exists()
    assert "plan mode cannot widen" in said["touch"]
    assert "read-only sandbox that cannot be widened" in said["widened"]


async def test_commands_in_the_clients_terminal_and_in_the_background_are_sandboxed(
    world: World, acp_schema: AcpSchema
) -> None:
    steps = [
        [bash("inside", "echo in > inside.txt && cat inside.txt")],
        [bash("hosted", f"echo x > {world.outside}/hosted.txt")],
        [bash("bg", f"echo x > {world.outside}/bg.txt; echo tried", run_in_background=True)],
        [{"id": "wait", "name": "bash", "arguments": {"command": "sleep 0.5", "description": "wait"}}],
    ]
    client, session, _ = await run(
        world, acp_schema, world.script(*steps), mode="auto", capabilities={"terminal": True}
    )
    said = results(client, session)
    assert sorted(p.name for p in world.outside.iterdir()) == ["data.txt"]
    assert (world.work / "inside.txt").read_text() == "in\n"  # its folder, as the new mounts show it
    assert "[sandbox]" in said["hosted"]
    created = [r["params"] for r in client.agent_requests if r["method"] == "terminal/create"]
    assert created
    assert any(v["name"] == "DSH_SANDBOX_PLAN" for v in created[0]["env"])


async def test_with_the_sandbox_off_the_agent_says_so_and_auto_asks(
    world: World, acp_schema: AcpSchema
) -> None:
    steps = [[bash("free", f"echo x > {world.outside}/free.txt")]]
    client, session, init = await run(
        world,
        acp_schema,
        world.script(*steps),
        mode="auto",
        answers=("allow_once",),
        capabilities={"session": {"notices": {}}},
        args=("--sandbox", "off"),
    )
    assert init["agentCapabilities"]["_meta"]["sandbox"] == {
        "enabled": False,
        "reason": "switched off (--sandbox off)",
    }
    notices = client.updates(session, {"notice"})
    assert [n["title"] for n in notices] == ["Commands run without a sandbox"]
    assert [q["toolCall"]["toolCallId"] for q in questions(client)] == ["free"]  # auto asked
    assert (world.outside / "free.txt").exists()  # no sandbox: the rules were the only wall


def test_a_sandbox_setting_that_means_nothing_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    refused = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "--model", "script:x.json"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "DSH_SANDBOX": "of"},
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode == 2
    assert "DSH_SANDBOX must be auto or off, not 'of'" in refused.stderr
