"""The paths a call declares on its card, checked before it runs, whatever the tool.

A tool's pending card (``present_call``) names the files the call reads or changes: the paths of
its diffs and of its locations. The mode gate reads them for every tool (the reference tools,
a ``--tools`` module, any other) and asks, in every mode but ``bypass``, when one of them is

- outside the workspace (the session's folder and additional directories), compared as real
  paths, so neither ``..`` nor a symlink leads out;
- a file with more than one hard link (its other names may be outside);
- for a call that may change files (one that is not read-only and not of a reading kind):
  inside a git folder, where what git runs lives (hooks, ``config``): a ``.git`` folder, a
  folder shaped like one (``HEAD``, ``objects/``, ``refs/``: a bare or separate git folder), or
  the folder a ``.git`` file points to (``gitdir:``, a worktree's or a submodule's);
- inside the agent's own configuration or state folder (its API key, its session logs and the
  approvals it keeps): for every call.

Relative paths are read against the session's folder, as the card shows them; a path starting
with ``~`` is checked as written and as the home folder it may mean. What a call does without
declaring it stays its tool's own business: the gate can only read the card.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dsh_acp.wire._bridge import absolute
from dsh_tools import DiffCallView, GenericCallView, ToolExecution

__all__ = ["PathProblem", "PreviewableCalls", "declared_paths", "path_problems", "workspace_roots"]

_POINTER_BYTES = 4096
"""How much of a ``.git`` file is read: one ``gitdir:`` line."""


@dataclass(frozen=True, slots=True)
class PathProblem:
    """A declared path the gate asks about: as the card names it (absolute), its real path,
    and why (the end of the sentence "edit PATH, …")."""

    shown: str
    real: str
    why: str


class PreviewableCalls:
    """A session's calls the gate asks about whose cards name paths, none of which it asks about
    (a per-session service): only for these may a tool's preview read files to build the card a
    person approves, before that person answered. The approval takes its call's mark."""

    def __init__(self) -> None:
        self.ids: set[str] = set()


def declared_paths(view: Any, cwd: str | None) -> list[str]:
    """The absolute paths ``view`` names (diffs first, then locations), each once."""
    if isinstance(view, DiffCallView):
        named = [diff.path for diff in view.diffs] + [location.path for location in view.locations]
    elif isinstance(view, GenericCallView):
        named = [location.path for location in view.locations]
    else:
        return []
    out: list[str] = []
    for path in named:
        for spelled in (path, os.path.expanduser(path)) if path.startswith("~") else (path,):
            full = absolute(spelled, cwd) if cwd else os.path.normpath(spelled)
            if os.path.isabs(full) and full not in out:
                out.append(full)
    return out


def workspace_roots(execution: ToolExecution) -> tuple[str, ...]:
    """The real paths of the session's folder and additional directories."""
    cwd = (execution.cwd,) if execution.cwd else ()
    return tuple(os.path.realpath(root) for root in (*cwd, *execution.additional_directories))


def _inside(real: str, roots: Iterable[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _looks_like_git_folder(folder: str) -> bool:
    """What git itself takes for a git folder: ``HEAD``, ``objects/`` and ``refs/``."""
    return (
        os.path.isfile(os.path.join(folder, "HEAD"))
        and os.path.isdir(os.path.join(folder, "objects"))
        and os.path.isdir(os.path.join(folder, "refs"))
    )


def _pointed_to(dotgit: str) -> list[str]:
    """The real folders a ``.git`` file names: its ``gitdir:`` and that folder's ``commondir``."""
    try:
        with open(dotgit, "rb") as file:
            line = file.read(_POINTER_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    base = os.path.dirname(dotgit)
    gitdir = os.path.realpath(os.path.join(base, line.removeprefix("gitdir:").strip()))
    found = [gitdir]
    try:
        with open(os.path.join(gitdir, "commondir"), "rb") as file:
            common = file.read(_POINTER_BYTES).decode("utf-8", "replace").strip()
        if common:
            found.append(os.path.realpath(os.path.join(gitdir, common)))
    except OSError:
        pass
    return found


def _in_git_folder(real: str) -> bool:
    if any(part.casefold() == ".git" for part in real.split(os.sep)):
        return True
    folder = real
    while True:
        if _looks_like_git_folder(folder):
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
        dotgit = os.path.join(folder, ".git")
        if os.path.isfile(dotgit) and _inside(real, _pointed_to(dotgit)):
            return True
    return False


def _problem(
    shown: str, roots: Sequence[str], agent_folders: Sequence[str], writes: bool
) -> PathProblem | None:
    real = os.path.realpath(shown)
    if _inside(real, agent_folders):
        return PathProblem(shown, real, "which is in the agent's own configuration or state folder")
    if not _inside(real, roots):
        return PathProblem(shown, real, "which is outside the workspace")
    try:
        info = os.stat(real)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        return PathProblem(
            shown,
            real,
            f"a file with {info.st_nlink} hard links: its other names may be outside the workspace",
        )
    if writes and _in_git_folder(real):
        return PathProblem(
            shown, real, "which is in a git folder, where what git runs is kept (hooks, config)"
        )
    return None


def path_problems(
    paths: Sequence[str], roots: Sequence[str], agent_folders: Sequence[str], *, writes: bool
) -> list[PathProblem]:
    """The declared ``paths`` the gate asks about (see the module), in the card's order.

    A few stats per path, on the event loop: cheaper than a hop to a worker thread.
    """
    agent = [os.path.realpath(folder) for folder in agent_folders]
    found = (_problem(path, roots, agent, writes) for path in paths)
    return [problem for problem in found if problem is not None]
