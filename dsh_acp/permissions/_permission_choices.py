"""One permission question, read once: the rules that decide it and the card's buttons, each
saying exactly what choosing it remembers."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from dsh_acp._safe_text import visible
from dsh_acp.wire._client_requests import PermissionOption
from dsh_tools import ApprovalSubject, CommandSubject, PathSubject, shown_text
from dsh_tools.sandbox import Widening

from ._rules import STATEFUL, Place, Rule, inside, rule_for, spell
from ._shellwords import split_command_line

__all__ = ["Option", "Question"]

_MAX_LABEL = 110


@dataclass(frozen=True, slots=True)
class Option:
    """One button of the permission card and what choosing it remembers."""

    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]
    remember: tuple[Rule, ...] = ()
    project: bool = False

    def wire(self) -> PermissionOption:
        return {"optionId": self.option_id, "name": self.name, "kind": self.kind}


def _code(text: str) -> str:
    """``text`` as inline code, its fence longer than any run of backticks in it."""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _widened(subject: CommandSubject) -> str:
    """The card's first line for a command that widens the sandbox: "Run `npm install` with
    network access." (the command itself when it is one short line, else "this command")."""
    command = shown_text(subject.command.strip())
    shown = _code(command) if len(command) <= 80 and "\n" not in command else "this command"
    return f"Run {shown} {Widening(subject.widen).phrase()}."


def _join(phrases: Sequence[str]) -> str:
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


@dataclass(slots=True)
class Question:
    """What one permission request is about, read once: the rules it could match or make."""

    tool: str
    subject: ApprovalSubject | None
    roots: tuple[str, ...]
    reason: str | None = None
    parts: list[tuple[str, ...]] | None = None
    cwd_inside: bool = True
    cwd: str | None = None

    @property
    def place(self) -> Place:
        """Where the command runs, for the rules' path checks."""
        return Place(self.cwd, self.roots)

    @classmethod
    def of(
        cls, tool: str, subject: ApprovalSubject | None, roots: tuple[str, ...], reason: str | None = None
    ) -> Question:
        """Read the question once: the line's commands, and whether it runs in the workspace."""
        question = cls(tool, subject, roots, reason=reason)
        if isinstance(subject, CommandSubject):
            question.parts = split_command_line(subject.command)
            question.cwd = subject.cwd
            question.cwd_inside = subject.cwd is not None and inside(subject.cwd, roots)
        return question

    @property
    def notice(self) -> str | None:
        """What the card says first: where a command really runs, what a compound line runs, or
        why a path is asked about (only built when a person is asked)."""
        # The card keeps its line breaks; the paths and the reason in it are each one line.
        subject = self.subject
        if isinstance(subject, PathSubject):
            return visible(self.reason[:1].upper() + self.reason[1:]) if self.reason else None
        if not isinstance(subject, CommandSubject):
            return None
        notes = []
        if subject.widen:
            notes.append(_widened(subject))
        if subject.cwd is not None and not self.cwd_inside:
            notes.append(f"Runs outside the workspace, in `{visible(subject.cwd)}`.")
        elif subject.cwd is not None and self.roots and subject.cwd != self.roots[0]:
            notes.append(f"Runs in `{visible(subject.cwd)}`.")
        if self.parts is None:
            notes.append(
                "Uses shell features an approval rule cannot read: only this exact line can be remembered."
            )
        elif len(self.parts) > 1:
            listed = "\n".join(f"- `{spell(words)}`" for words in self.parts)
            notes.append(f"Runs {len(self.parts)} commands:\n{listed}")
        return "\n\n".join(notes) or None

    @property
    def _own(self) -> tuple[Rule, ...]:
        """The narrowest rules that would cover this question."""
        subject, tool = self.subject, self.tool
        if isinstance(subject, CommandSubject):
            if self.parts is None or subject.widen:
                return (Rule(tool, "line", text=subject.command, widen=subject.widen),)
            return tuple(dict.fromkeys(rule_for(tool, words, self.place) for words in self.parts))
        if isinstance(subject, PathSubject):
            return (Rule(tool, "path", text=subject.path, verb=subject.verb),)
        return (Rule(tool, "tool"),)

    def _covered(self, rules: Iterable[Rule], *, any_part: bool) -> Rule | None:
        """The rule that decides, if one does (for an allow every part must be covered)."""
        subject, mine = self.subject, [rule for rule in rules if rule.tool == self.tool]
        if isinstance(subject, CommandSubject):
            return self._command_covered(subject, mine, any_part=any_part)
        if isinstance(subject, PathSubject):
            return next((r for r in mine if r.covers_path(subject)), None)
        return next((r for r in mine if r.kind == "tool"), None)

    def _command_covered(self, subject: CommandSubject, mine: list[Rule], *, any_part: bool) -> Rule | None:
        mine = [rule for rule in mine if rule.widen == subject.widen]  # never across widenings
        if self.parts is None or subject.widen:
            return next((r for r in mine if r.kind == "line" and r.text == subject.command), None)
        if any_part:
            return self._rejecting_a_part(self.parts, mine)
        return self._allowing_every_part(self.parts, mine)

    def _rejecting_a_part(self, parts: list[tuple[str, ...]], mine: list[Rule]) -> Rule | None:
        """The first rule rejecting a part of the line (in the order of the parts)."""
        place = self.place
        return next(
            (r for words in parts for r in mine if r.covers_words(words, place, allowing=False)), None
        )

    def _allowing_every_part(self, parts: list[tuple[str, ...]], mine: list[Rule]) -> Rule | None:
        """The rule allowing the first part, when a rule allows each part of the line."""
        if len(parts) > 1 and any(words[0] in STATEFUL for words in parts):
            return None  # `cd elsewhere && allowed`: the next part no longer means what it says
        place = self.place
        found = [next((r for r in mine if r.covers_words(words, place)), None) for words in parts]
        return found[0] if found and all(found) else None

    def allowed_by(self, rules: Iterable[Rule]) -> Rule | None:
        if isinstance(self.subject, CommandSubject) and not self.cwd_inside:
            return None  # a command elsewhere always asks
        return self._covered(rules, any_part=False)

    def rejected_by(self, rules: Iterable[Rule]) -> Rule | None:
        return self._covered(rules, any_part=True)

    def _remember(self, known: Iterable[Rule]) -> tuple[Rule, ...]:
        """The rules an "always" answer adds: one per part not yet covered (all, if the label
        would be too long to read, as exact rules)."""
        known = list(known)
        if isinstance(self.subject, CommandSubject) and self.parts is not None and not self.subject.widen:
            missing = [
                rule
                for rule, words in zip(self._own_per_part(), self.parts, strict=True)
                if not any(k.tool == self.tool and k.covers_words(words, self.place) for k in known)
            ]
            rules = tuple(dict.fromkeys(missing)) or self._own
            if len(_join([r.phrase() for r in rules])) > _MAX_LABEL:
                rules = tuple(dict.fromkeys(Rule(self.tool, "exact", words) for words in self.parts))
            return rules
        return self._own

    def _own_per_part(self) -> list[Rule]:
        assert self.parts is not None
        return [rule_for(self.tool, words, self.place) for words in self.parts]

    def options(
        self, known_allow: Iterable[Rule], *, project: bool, names_shown: bool = True
    ) -> list[Option]:
        """The card's buttons, each saying exactly what it remembers.

        A client that shows only a label per ``kind`` (``names_shown`` false) gets one option of
        each kind: "always" then remembers the narrowest rule, for this session; a wider rule
        (a folder, the project) is offered only to clients that show the words that say so.
        """
        allow = self._remember(known_allow)
        reject = self._own
        subject = self.subject
        if (
            isinstance(subject, CommandSubject)
            and self.parts is not None
            and len(self.parts) > 1
            and not subject.widen
        ):
            # Rejecting a compound line rejects that line, not each of its parts everywhere.
            reject = (Rule(self.tool, "line", text=subject.command),)
        project = project and names_shown
        options = [Option("allow_once", "Allow", "allow_once")]

        def label(verb: str, rules: Sequence[Rule]) -> str:
            phrases = [r.phrase() for r in rules]
            text = _join(phrases)
            if len(text) > _MAX_LABEL:
                text = "exactly these commands" if len(rules) > 1 else "exactly this command"
            return f"{verb} {text}"

        can_allow = not (isinstance(self.subject, CommandSubject) and not self.cwd_inside)
        if can_allow:
            options.append(Option("allow_always", label("Always allow", allow), "allow_always", allow))
            if isinstance(self.subject, PathSubject) and names_shown:
                folder_path = self.subject.path
                if self.subject.verb in ("read", "write", "edit"):
                    folder_path = os.path.dirname(folder_path)
                folder = Rule(self.tool, "folder", text=folder_path, verb=self.subject.verb)
                options.append(
                    Option("allow_always_folder", label("Always allow", [folder]), "allow_always", (folder,))
                )
            if project:
                options.append(
                    Option(
                        "allow_always_project",
                        label("Always allow", allow) + " in this project",
                        "allow_always",
                        allow,
                        project=True,
                    )
                )
        options.append(Option("reject_once", "Reject", "reject_once"))
        options.append(Option("reject_always", label("Always reject", reject), "reject_always", reject))
        if project:
            options.append(
                Option(
                    "reject_always_project",
                    label("Always reject", reject) + " in this project",
                    "reject_always",
                    reject,
                    project=True,
                )
            )
        return options
