"""The gate reads the paths every call's card declares: outside the workspace, in a git folder (for
a call that may change files) or in the agent's own folders, a call asks in every mode but
``bypass``, whatever the tool; the question is about that path, so an answer given for the tool
inside the workspace never covers it."""

from __future__ import annotations

import os
import subprocess
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from dsh_acp.permissions._mode_gate import mode_gate
from dsh_acp.permissions._modes import MODES, PermissionState
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import (
    Allow,
    Ask,
    DiffCallView,
    FileDiff,
    GenericCallView,
    Location,
    PathSubject,
    Services,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    define_tool,
)
from helpers import recorded

pytestmark = pytest.mark.anyio


async def _ok(args: dict[str, Any], execution: ToolExecution) -> str:
    return "ok"


def paths_tool(name: str, kind: Any, card: Any, read_only: bool = False) -> ToolDefinition:
    """A tool whose card names the paths of its ``paths`` argument (``card(paths)``)."""
    return define_tool(
        name=name,
        description=name,
        parameters={"paths": {"type": "array", "items": {"type": "string"}, "required": True}},
        execute=_ok,
        present_call=lambda args: card(args["paths"]),
        kind=kind,
        read_only=read_only,
    )


def _diffs(paths: list[str]) -> DiffCallView:
    return DiffCallView(
        title="Put", diffs=tuple(FileDiff(path=p, old_text=None, new_text="x") for p in paths)
    )


def _located(kind: Any) -> Any:
    return lambda paths: GenericCallView(
        title="Look", kind=kind, locations=tuple(Location(path=p) for p in paths)
    )


PUT = paths_tool("put", "edit", _diffs)
LOOK = paths_tool("look", "read", _located("read"), read_only=True)
SAVE = paths_tool("save", "fetch", _located("fetch"))  # a network tool that saves pages


async def decide(workspace: Path, mode: str, tool: str, *paths: str, agent: tuple[str, ...] = ()) -> Any:
    """What the gate decides for a call of ``tool`` naming ``paths`` (``Allow`` or an ``Ask``)."""
    registry = ToolRegistry()
    registry.on_pre_execute(mode_gate(registry, agent))
    registry.register(PUT)
    registry.register(LOOK)
    registry.register(SAVE)
    decisions: list[Any] = []

    async def approver(execution: ToolExecution, ask: Ask) -> Any:
        decisions.append(ask)
        return Allow()

    execution = ToolExecution(
        call_id="c",
        name=tool,
        arguments={"paths": list(paths)},
        cwd=str(workspace),
        services=Services(PermissionState(mode=mode)),
        approver=approver,
    )
    result = await registry.execute(execution)
    assert not result.is_error, result.content
    return decisions[0] if decisions else Allow()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a = 1\n")
    (tmp_path / "outside").mkdir()
    return root


# Every mode there is (a mode added later is covered too), but plan, which refuses every edit.
@pytest.mark.parametrize("mode", [mode for mode in MODES if mode != "plan"])
async def test_an_edit_card_naming_a_path_outside_asks_in_every_mode_but_bypass(
    workspace: Path, mode: str
) -> None:
    decision = await decide(workspace, mode, "put", "../outside/x.txt")
    if mode == "bypass":
        assert decision == Allow()
        return
    real = str(workspace.parent / "outside" / "x.txt")
    assert decision == Ask(f"edit {real}, which is outside the workspace", PathSubject("edit", real, real))


async def test_inside_the_workspace_the_mode_decides(workspace: Path) -> None:
    assert await decide(workspace, "accept_edits", "put", "src/a.py", "new/b.py") == Allow()
    assert await decide(workspace, "default", "put", "src/a.py") == Ask(
        "edit tools ask first in default mode"
    )
    assert await decide(workspace, "default", "look", "src/a.py") == Allow()


@pytest.mark.parametrize("mode", ["default", "accept_edits", "plan"])
async def test_a_read_card_naming_a_path_outside_asks_too(workspace: Path, mode: str) -> None:
    decision = await decide(workspace, mode, "look", "/etc/hostname")
    assert decision == Ask(
        "read /etc/hostname, which is outside the workspace",
        PathSubject("read", "/etc/hostname", "/etc/hostname"),
    )


@pytest.mark.parametrize(
    "path", [".git/config", ".git/hooks/pre-commit", "sub/.git/config", ".GIT/config", "store/hooks/x"]
)
@pytest.mark.parametrize("mode", [mode for mode in MODES if mode not in ("plan", "bypass")])
async def test_an_edit_in_a_git_folder_asks_in_every_mode_that_edits(
    workspace: Path, path: str, mode: str
) -> None:
    store = workspace / "store"  # a separate git folder, shaped like one (HEAD, objects/, refs/)
    (store / "objects").mkdir(parents=True)
    (store / "refs").mkdir()
    (store / "HEAD").write_text("ref: refs/heads/main\n")
    decision = await decide(workspace, mode, "put", path)
    assert isinstance(decision, Ask)
    assert (
        decision.reason
        == f"edit {workspace / path}, which is in a git folder, where what git runs is kept (hooks, config)"
    )
    # Reading there is no change: the mode decides.
    assert await decide(workspace, mode, "look", path) == Allow()


async def test_the_folder_a_git_file_points_to_and_a_link_into_git_ask(workspace: Path) -> None:
    (workspace / "store" / "worktrees" / "w").mkdir(parents=True)
    (workspace / "store" / "worktrees" / "w" / "commondir").write_text("../..\n")
    (workspace / ".git").write_text("gitdir: store/worktrees/w\n")  # a worktree's pointer
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".git").mkdir()
    (workspace / "hooks").symlink_to(workspace / "sub" / ".git")
    for path, asks in [
        ("src/x.py", False),
        ("store/worktrees/w/HEAD", True),  # the folder the .git file names
        ("store/config", True),  # and its commondir
        ("hooks/pre-commit", True),  # a link into a .git folder
    ]:
        decision = await decide(workspace, "accept_edits", "put", path)
        assert isinstance(decision, Ask) == asks, path


@pytest.fixture
def separate_git_folder(workspace: Path) -> Path:
    """What ``git init --separate-git-dir`` leaves: ``repo/.git`` a file, the git folder beside."""
    command = [
        "git",
        "init",
        "-q",
        "--separate-git-dir",
        str(workspace / "elsewhere"),
        str(workspace / "repo"),
    ]
    subprocess.run(command, capture_output=True, check=True)
    return workspace


async def test_a_separate_git_folder_is_known_by_its_shape(separate_git_folder: Path) -> None:
    for path in ("elsewhere/config", "elsewhere/hooks/pre-commit", "repo/.git"):
        assert isinstance(await decide(separate_git_folder, "accept_edits", "put", path), Ask), path
    assert await decide(separate_git_folder, "accept_edits", "put", "repo/main.py") == Allow()


async def test_the_agents_own_folders_ask_for_reads_and_edits(workspace: Path) -> None:
    (workspace / "state").mkdir()
    agent = (str(workspace / "state"),)
    for tool in ("put", "look"):
        decision = await decide(workspace, "accept_edits", tool, "state/projects/p.json", agent=agent)
        assert isinstance(decision, Ask)
        assert decision.reason is not None
        assert decision.reason.endswith("which is in the agent's own configuration or state folder")


async def test_a_hard_linked_file_asks(workspace: Path) -> None:
    os.link(workspace / "src" / "a.py", workspace.parent / "outside" / "a.py")
    decision = await decide(workspace, "accept_edits", "put", "src/a.py")
    assert isinstance(decision, Ask)
    assert "a file with 2 hard links" in (decision.reason or "")


async def test_a_symlink_out_of_the_workspace_is_outside(workspace: Path) -> None:
    (workspace / "out").symlink_to(workspace.parent / "outside")
    decision = await decide(workspace, "accept_edits", "put", "out/x.txt")
    real = str(workspace.parent / "outside" / "x.txt")
    assert decision == Ask(
        f"edit {workspace}/out/x.txt (really {real}), which is outside the workspace",
        PathSubject("edit", real, str(workspace / "out" / "x.txt")),
    )


def step(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in calls]}


async def test_always_allowing_one_path_does_not_cover_a_call_naming_two(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = str(tmp_path / "a" / "x"), str(tmp_path / "b" / "y")
    turns = [
        [
            step(("1", "put", {"paths": [one]})),
            step(("2", "put", {"paths": [one, two]})),
            step(("3", "put", {"paths": [one, two]})),
            {"text": "done"},
        ]
    ]
    config, _ = recorded(turns, [PUT], default_mode="accept_edits", state_dir=tmp_path / "state")
    answers = deque(["allow_always", "allow_always"])
    async with AcpClient.in_memory(config, schema=acp_schema, permission_answers=answers) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path / "work"))
        await client.prompt(sid, "go")
        asked = [
            (r["params"]["toolCall"]["toolCallId"], [o["name"] for o in r["params"]["options"]][1])
            for r in client.agent_requests
        ]
    # The second call is asked about the path no answer covers; the third is covered twice over.
    assert asked == [("1", f"Always allow editing `{one}`"), ("2", f"Always allow editing `{two}`")]
    client.assert_valid()


async def test_a_network_tool_naming_a_path_outside_is_asked_about_the_path(workspace: Path) -> None:
    real = str(workspace.parent / "outside" / "page.html")
    decision = await decide(workspace, "accept_edits", "save", "../outside/page.html")
    assert decision == Ask(f"edit {real}, which is outside the workspace", PathSubject("edit", real, real))
    inside = await decide(workspace, "accept_edits", "save", "page.html")
    assert inside == Ask("fetch tools ask first in every mode but bypass (they reach the network)")
