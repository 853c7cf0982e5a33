"""Remembered approvals kept for a project (a 0600 file per project in the user's state folder)
and the ``/permissions`` command that lists them, removes one, or keeps one of the session's
for the project."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal

import orjson

from dsh_acp._safe_text import visible

from ._rules import Rule, rule_from_json

__all__ = ["ProjectRules", "permissions_command"]


def _project_file(state_dir: str, cwd: str) -> str:
    digest = hashlib.sha256(os.path.realpath(cwd).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(state_dir, "projects", f"{digest}.json")


class ProjectRules:
    """Answers kept for a project (its real cwd) in ``<state>/projects/<hash>.json``, mode 0600.

    Read when a session opens and again before each question (another session of the same
    project may have added or removed one); written whole, through a rename."""

    def __init__(self, state_dir: str, cwd: str) -> None:
        self.path = _project_file(state_dir, cwd)
        self.cwd = os.path.realpath(cwd)
        self._cache: tuple[Any, tuple[list[Rule], list[Rule]]] | None = None

    def load(self) -> tuple[list[Rule], list[Rule]]:
        """``(allow, reject)``; a missing or unreadable file is no rules. Parsed again only
        when the file changed (another session may have written it)."""
        try:
            info = os.stat(self.path)
        except OSError:
            return [], []
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if self._cache is not None and self._cache[0] == stamp:
            allow, reject = self._cache[1]
            return list(allow), list(reject)
        rules = self._read()
        self._cache = (stamp, rules)
        return list(rules[0]), list(rules[1])

    def _read(self) -> tuple[list[Rule], list[Rule]]:
        try:
            with open(self.path, "rb") as file:
                data = orjson.loads(file.read())
        except (OSError, orjson.JSONDecodeError):
            return [], []
        if not isinstance(data, dict) or data.get("cwd") != self.cwd:
            return [], []
        lists: list[list[Rule]] = []
        for name in ("allow", "reject"):
            items = data.get(name)
            found = [rule_from_json(item) for item in items] if isinstance(items, list) else []
            lists.append([rule for rule in found if rule is not None])
        return lists[0], lists[1]

    def save(self, allow: Sequence[Rule], reject: Sequence[Rule]) -> None:
        directory = os.path.dirname(self.path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        body = orjson.dumps(
            {
                "cwd": self.cwd,
                "allow": [r.to_json() for r in dict.fromkeys(allow)],
                "reject": [r.to_json() for r in dict.fromkeys(reject)],
            },
            option=orjson.OPT_INDENT_2,
        )
        temp = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            with open(fd, "wb") as file:
                file.write(body)
            os.replace(temp, self.path)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise

    def add(self, rule: str, rules: Sequence[Rule]) -> None:
        allow, reject = self.load()
        (allow if rule == "allow" else reject).extend(rules)
        self.save(allow, reject)

    def remove(self, rule: str, target: Rule) -> bool:
        allow, reject = self.load()
        chosen = allow if rule == "allow" else reject
        if target not in chosen:
            return False
        chosen[:] = [r for r in chosen if r != target]
        self.save(allow, reject)
        return True


_Entry = tuple[Literal["allow", "reject"], Literal["session", "project"], Rule]
_Record = Callable[[Literal["allow", "reject"], dict[str, Any]], object]
"""One remembered answer as ``/permissions`` numbers it: allow or reject, where it is kept, the rule."""


def permissions_command(
    allow: set[Rule],
    reject: set[Rule],
    project: ProjectRules | None,
    argument: str,
    record: _Record,
) -> str:
    """What ``/permissions`` answers: the remembered approvals, numbered (``/permissions`` or
    ``/permissions list``), one of them removed (``/permissions remove N``), or a session's
    answer kept for every session of the project (``/permissions project N``: the one step that
    widens an answer to the project on a client that shows no option names)."""
    project_allow, project_reject = project.load() if project is not None else ([], [])
    entries: list[_Entry] = [
        *(("allow", "session", r) for r in sorted(allow, key=Rule.phrase)),
        *(("reject", "session", r) for r in sorted(reject, key=Rule.phrase)),
        *(("allow", "project", r) for r in project_allow),
        *(("reject", "project", r) for r in project_reject),
    ]
    words = argument.split()
    if not words or words == ["list"]:
        return _listed(entries, project)
    if len(words) == 2 and words[0] in ("remove", "project") and words[1].isdigit():
        number = int(words[1])
        if not 1 <= number <= len(entries):
            return f"There is no approval number {number}; `/permissions` lists them."
        if words[0] == "project":
            return _kept_for_project(entries[number - 1], project, record)
        return _removed(entries[number - 1], project, record)
    return (
        "Use `/permissions` to list the remembered approvals, `/permissions remove N` to remove one "
        "and `/permissions project N` to keep one for every session in this project."
    )


def _line(entry: _Entry) -> str:
    verb, scope, rule = entry
    where = "this session" if scope == "session" else "this project"
    return visible(f"{'Allow' if verb == 'allow' else 'Reject'} {rule.phrase()} ({where}, `{rule.tool}`)")


def _listed(entries: list[_Entry], project: ProjectRules | None) -> str:
    if not entries:
        return "No approvals are remembered for this session or this project."
    listed = "\n".join(f"{n}. {_line(entry)}" for n, entry in enumerate(entries, 1))
    more = "Remove one with `/permissions remove N`"
    if project is not None and any(scope == "session" for _, scope, _ in entries):
        more += "; keep one of this session's for the whole project with `/permissions project N`"
    return f"Remembered approvals:\n{listed}\n\n{more}."


def _kept_for_project(
    entry: _Entry,
    project: ProjectRules | None,
    record: Callable[[Literal["allow", "reject"], dict[str, Any]], object],
) -> str:
    verb, scope, rule = entry
    if project is None:
        return "Answers cannot be kept for this project: the agent has no state folder."
    if scope == "project":
        return f"Already kept for this project: {_line(entry)}."
    project.add(verb, [rule])
    record(verb, rule.to_json())  # the project's copy now decides; the session's goes
    return f"Kept for every session in this project: {_line((verb, 'project', rule))}."


def _removed(
    entry: _Entry,
    project: ProjectRules | None,
    record: Callable[[Literal["allow", "reject"], dict[str, Any]], object],
) -> str:
    verb, scope, rule = entry
    if scope == "session":
        record(verb, rule.to_json())
    elif project is not None:
        project.remove(verb, rule)
    return f"Removed: {_line(entry)}. It asks again from now on."
