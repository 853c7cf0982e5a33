"""Remembered approvals: what an "Always allow" or "Always reject" covers, and nothing wider.

A question to the user is about one of three subjects, and a remembered answer is a rule of
the matching shape:

- a **command** (a tool that declares a ``CommandSubject``, like ``bash``). The line is read by
  a conservative shell reader (``_shellwords``); a rule is the key of a simple command
  (``git status``, ``git stash list``, ``npm pkg get``: later arguments free within what
  ``_command_shapes`` allows: no option that runs code, no path outside the project) or an
  exact word list (``ls -la``, ``python3 -m json.tool f``: every command without a key). A
  later line matches only if the reader understands it and *every* simple command in it
  (``a && b | c``) matches an allow rule, and it runs inside the workspace. Lines that change
  the shell's state for the next part (``cd x && ...``) never match. A line the reader refuses
  can only be remembered as exactly that line.
- a **path** outside the workspace (a ``PathSubject`` from the file-system policy): the rule is
  for that verb and that real path, or the folder below which it lies if the user picked that.
- otherwise the **tool**: the mode asked about a call inside the workspace.

Rules are kept in the session log and, when the user picked "in this project", in a 0600 file
per project in the user's state folder (``_approvals.ProjectRules``). ``_permission_choices`` reads a
permission question once and offers the card's buttons, each saying what it remembers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeGuard, get_args

from dsh_tools import PathSubject
from dsh_tools.sandbox import Widening

from ._command_shapes import Place, command_key, free_arguments
from ._shellwords import split_command_line

__all__ = [
    "STATEFUL",
    "Place",
    "Rule",
    "RuleKind",
    "inside",
    "migrate_key",
    "rule_for",
    "rule_from_json",
    "spell",
]


RuleKind = Literal["tool", "prefix", "exact", "line", "path", "folder"]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Builtins that change what the next part of a line does (its directory, PATH, functions).
STATEFUL = _names(
    """
    cd pushd popd export unset set shopt alias unalias hash enable declare typeset readonly
    local umask ulimit source . eval exec builtin command trap read mapfile readarray getopts
    let shift
    """
)
_VERBS = {"read": "reading", "write": "writing", "edit": "editing", "search": "searching", "list": "listing"}


def _quote(word: str) -> str:
    if word and all(c.isalnum() or c in "_@%+=:,./-" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def spell(words: Sequence[str]) -> str:
    return " ".join(_quote(word) for word in words)


@dataclass(frozen=True, slots=True)
class Rule:
    """One remembered answer (see the module docstring for what each kind covers)."""

    tool: str
    kind: RuleKind
    words: tuple[str, ...] = ()
    """``prefix`` and ``exact``: the command's words."""
    text: str = ""
    """``line``: the exact command line; ``path``/``folder``: the real path; ``tool``: unused."""
    verb: str = ""
    """``path`` and ``folder``: read, write, edit, search or list."""
    widen: tuple[str, ...] = ()
    """``line`` only: the sandbox widening the command runs with (``Widening`` tokens); a rule
    covers a command with exactly its widening, and a widened command only by its exact line."""

    def phrase(self) -> str:
        """What the rule covers, as the option's label says it."""
        if self.widen:
            return f"exactly this command line {Widening(self.widen).phrase()}"
        if self.kind == "prefix":
            return f"`{spell(self.words)}` commands"
        if self.kind == "exact":
            return f"exactly `{spell(self.words)}`"
        if self.kind == "line":
            return "exactly this command line"
        verb = _VERBS.get(self.verb, self.verb)
        if self.kind == "path":
            return f"{verb} `{self.text}`"
        if self.kind == "folder":
            return f"{verb} in `{self.text.rstrip(os.sep)}{os.sep}`"
        return f"`{self.tool}` calls"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.tool, "kind": self.kind}
        if self.words:
            out["words"] = list(self.words)
        if self.text:
            out["text"] = self.text
        if self.verb:
            out["verb"] = self.verb
        if self.widen:
            out["widen"] = list(self.widen)
        return out

    def covers_words(self, words: tuple[str, ...], place: Place, *, allowing: bool = True) -> bool:
        """Whether the rule covers one simple command run at ``place``. An allow covers later
        arguments only while they leave the rule meaning what it said (``_command_shapes``); a
        rejection covers every command with its key."""
        if self.kind == "exact":
            return words == self.words
        if self.kind == "prefix" and command_key(words) == self.words:
            return not allowing or free_arguments(self.words, words[len(self.words) :], place)
        return False

    def covers_path(self, subject: PathSubject) -> bool:
        if self.verb != subject.verb:
            return False
        if self.kind == "path":
            return subject.path == self.text
        if self.kind == "folder":
            return inside(subject.path, (self.text,))
        return False


def rule_from_json(data: Any) -> Rule | None:
    """A stored rule, or ``None`` for anything malformed (it is dropped, never widened)."""
    if not isinstance(data, dict):
        return None
    fields = {name: data.get(name, default) for name, (default, _) in _STORED_FIELDS.items()}
    if not all(well_typed(fields[name]) for name, (_, well_typed) in _STORED_FIELDS.items()):
        return None
    words, widen = tuple(fields["words"]), tuple(sorted(set(fields["widen"])))
    rule = Rule(fields["tool"], fields["kind"], words, fields["text"], fields["verb"], widen)
    return rule if _one_the_agent_makes(rule) else None


def _strings(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


_STORED_FIELDS: Final[dict[str, tuple[object, Callable[[object], bool]]]] = {
    # name: (its value when absent, whether a value is well typed)
    "tool": (None, _is_str),
    "kind": (None, lambda kind: kind in get_args(RuleKind)),
    "words": ([], _strings),
    "text": ("", _is_str),
    "verb": ("", _is_str),
    "widen": ([], lambda widen: _strings(widen) and all(widen)),
}


def _one_the_agent_makes(rule: Rule) -> bool:
    """Whether the agent could have made this rule: no stored rule is wider than one it makes now."""
    if rule.widen and rule.kind != "line":
        return False  # a widened command is only ever remembered by its exact line
    if rule.kind in ("prefix", "exact") and not rule.words:
        return False
    if rule.kind in ("line", "path", "folder") and not rule.text:
        return False
    return rule.kind != "prefix" or command_key(rule.words) == rule.words


def migrate_key(key: Any) -> Rule | None:
    """An answer logged before rules had shapes (``"bash: git status"`` or a tool name).

    A command key becomes an *exact* rule for those words (it used to cover any command that
    started with them: narrower, never wider); a tool name stays a tool rule, which now only
    covers what the mode asks about inside the workspace. Anything else is dropped.
    """
    if not isinstance(key, str) or not key:
        return None
    name, colon, rest = key.partition(": ")
    if not colon:
        return Rule(key, "tool") if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", key) else None
    parts = split_command_line(rest)
    if parts is None or len(parts) != 1:
        return None
    return Rule(name, "exact", parts[0])


def inside(real_path: str, roots: Iterable[str]) -> bool:
    """Whether a resolved path is one of ``roots`` or below one."""
    return any(real_path == root or real_path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def rule_for(tool: str, words: tuple[str, ...], place: Place) -> Rule:
    """The rule an "Always allow" of one simple command remembers: its key (see
    ``_command_shapes``) when it has one and its arguments are free, else its exact words."""
    key = command_key(words)
    if key is not None and free_arguments(key, words[len(key) :], place):
        return Rule(tool, "prefix", key)
    return Rule(tool, "exact", words)
