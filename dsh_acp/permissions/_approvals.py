"""Remembered approvals: what an "Always allow" or "Always reject" covers, and nothing wider.

A question to the user is about one of three subjects, and a remembered answer is a rule of
the matching shape:

- a **command** (a tool that declares a ``CommandSubject``, like ``bash``). The line is read by
  a conservative shell reader (``_shellwords``); a rule is the words a simple command starts
  with: ``git status`` (program and subcommand, later arguments free) or an exact word list
  (``ls -la``, ``python3 -m json.tool f``: interpreters, wrappers, programs given by path and
  commands without a subcommand are never generalised). A later line matches only if the reader
  understands it and *every* simple command in it (``a && b | c``) matches an allow rule; its
  options after the rule's words must not be ones that run other code or write elsewhere
  (``--upload-pack``, ``-c``...); and it runs inside the workspace. Lines that change the
  shell's state for the next part (``cd x && ...``) never match. A line the reader refuses can
  only be remembered as exactly that line.
- a **path** outside the workspace (a ``PathSubject`` from the file-system policy): the rule is
  for that verb and that real path, or the folder below which it lies if the user picked that.
- otherwise the **tool**: the mode asked about a call inside the workspace.

Rules are kept in the session log and, when the user picked "in this project", in a 0600 file
per project in the user's state folder (``ProjectRules``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from dsh_acp.acp._client_requests import PermissionOption
from dsh_tools import ApprovalSubject, CommandSubject, PathSubject

from ._shellwords import split_command_line

__all__ = [
    "Option",
    "ProjectRules",
    "Question",
    "Rule",
    "inside",
    "migrate_key",
    "permissions_command",
    "rule_from_json",
]

RuleKind = Literal["tool", "prefix", "exact", "line", "path", "folder"]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Programs that run code they are given, or another command: never generalised past the exact
# words the user saw.
_EXACT_PROGRAMS = _names(
    """
    bash sh zsh dash ksh mksh fish csh tcsh busybox toybox pwsh powershell cmd node nodejs deno
    bun bunx npx pnpx tsx ts-node perl ruby irb php lua luajit tclsh wish r rscript julia java
    jshell scala groovy kotlin osascript awk gawk mawk nawk sed env xargs sudo doas su runuser
    pkexec nice nohup timeout time stdbuf watch strace ltrace gdb lldb valgrind chroot setsid
    flock ionice taskset unshare nsenter script parallel expect ssh scp rsync find fd vim vi
    nvim emacs ed ex less more man tmux screen make cmake open xdg-open start exec eval source .
    command builtin trap alias cd pushd popd export unset set shopt unalias hash enable declare
    typeset readonly local umask ulimit read mapfile readarray getopts let shift docker podman
    """
)
_INTERPRETER = re.compile(r"^(python|pypy|perl|ruby|php|lua|node|uv|uvx|jruby)[0-9.]*$")
# Builtins that change what the next part of a line does (its directory, PATH, functions).
_STATEFUL = _names(
    """
    cd pushd popd export unset set shopt alias unalias hash enable declare typeset readonly
    local umask ulimit source . eval exec builtin command trap read mapfile readarray getopts
    let shift
    """
)
# Subcommands that run an arbitrary program: `npm exec x`, `uv run x`, `docker run`.
_RUNNER_SUBCOMMANDS = frozenset({"run", "exec", "x", "dlx", "eval", "shell", "debug"})
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9-]*$")
# Programs whose second word is a subcommand (`git status`): only for these does a rule cover
# later arguments. For any other program the second word is an operand (`rm build`), and a rule
# is the exact command.
_SUBCOMMAND_PROGRAMS = _names(
    """
    git hg svn jj gh glab npm pnpm yarn cargo rustup go kubectl helm pip pip3
    poetry pdm hatch conda mamba brew apt apt-get dnf yum pacman systemctl journalctl dotnet mvn
    gradle terraform tofu bundle rake mix swift flutter dart az aws gcloud composer bazel nix
    opam stack cabal zig ruff tox nox
    """
)
# Options that make a program run other code, read other configuration or write elsewhere; a
# command using one never matches a prefix rule (it asks).
_CODE_OPTIONS = _names(
    """
    --upload-pack --receive-pack --exec --exec-path --config --config-env --open-files-in-pager
    --pre --pre-glob --to-command --checkpoint-action --use-compress-program --command --eval
    --rcfile --init-file --shell --output --output-file --ext-diff --textconv --filter --run
    --editor --pager --sequence-editor --git-dir --work-tree --namespace --rsh --template
    --global --system --file --import --require --loader --hook --hooks --plugin --plugins
    --script --script-file --preload --interpreter --post-checkout --prefix --root --chdir
    --directory --makefile --include-dir --exec-batch --execdir --ok --exec-path --ssh
    --ssh-command --proxy-command --local-port --registry --index-url --extra-index-url -exec
    -execdir -ok -okdir -delete -fprint -fprintf -fls -toolexec --toolexec -vettool --vettool
    --script-shell --node-options --userconfig --globalconfig --init-module --kubeconfig
    --exec-path --upload-archive --uploadpack
    """
)
# Every abbreviation (five characters or more, "--" included) of the long options above.
_CODE_PREFIXES = frozenset(
    option[:size] for option in _CODE_OPTIONS if option.startswith("--") for size in range(5, len(option) + 1)
)
_CODE_SHORT = frozenset("cCO")
_VERBS = {"read": "reading", "write": "writing", "edit": "editing", "search": "searching", "list": "listing"}
_MAX_LABEL = 110


def _code_option(word: str) -> bool:
    """Whether ``word`` is an option that may run other code, read other configuration or
    write elsewhere. Long options count by any prefix of three letters or more, as git and
    getopt_long accept abbreviations (``--upload-p``)."""
    if not word.startswith("-") or word == "-":
        return False
    name = word.split("=", 1)[0]
    if name in _CODE_OPTIONS:
        return True
    if name.startswith("--"):
        return name in _CODE_PREFIXES
    return word[1] in _CODE_SHORT or "O" in word


# Short options that run a program only for some subcommands (`git clone -u <upload-pack>`).
_SUBCOMMAND_CODE_SHORT = {("git", "clone"): "u", ("git", "ls-remote"): "u", ("git", "archive"): "u"}


def _free_arguments(words: Sequence[str], prefix: Sequence[str] = ()) -> bool:
    """Whether arguments after a prefix rule's words leave it meaning what it said."""
    extra = _SUBCOMMAND_CODE_SHORT.get((prefix[0], prefix[1])) if len(prefix) == 2 else None
    for word in words:
        if word == "--":
            return True
        if _code_option(word):
            return False
        if extra and word.startswith("-") and not word.startswith("--") and extra in word:
            return False
    return True


def _exact_program(program: str) -> bool:
    name = program.lower()
    return "/" in program or name in _EXACT_PROGRAMS or bool(_INTERPRETER.match(name))


def _quote(word: str) -> str:
    if word and all(c.isalnum() or c in "_@%+=:,./-" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def _spell(words: Sequence[str]) -> str:
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

    def phrase(self) -> str:
        """What the rule covers, as the option's label says it."""
        if self.kind == "prefix":
            return f"`{_spell(self.words)}` commands"
        if self.kind == "exact":
            return f"exactly `{_spell(self.words)}`"
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
        return out

    def covers_words(self, words: tuple[str, ...]) -> bool:
        if self.kind == "exact":
            return words == self.words
        if self.kind == "prefix":
            size = len(self.words)
            return words[:size] == self.words and _free_arguments(words[size:], self.words)
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
    tool, kind = data.get("tool"), data.get("kind")
    words, text, verb = data.get("words", []), data.get("text", ""), data.get("verb", "")
    if not isinstance(tool, str) or kind not in ("tool", "prefix", "exact", "line", "path", "folder"):
        return None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        return None
    if not isinstance(text, str) or not isinstance(verb, str):
        return None
    rule = Rule(tool, kind, tuple(words), text, verb)
    if (kind in ("prefix", "exact") and not words) or (kind in ("line", "path", "folder") and not text):
        return None
    if kind == "prefix" and (len(words) != 2 or words[0] not in _SUBCOMMAND_PROGRAMS):
        return None  # no stored rule is wider than one the agent would make now
    return rule


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


def _rule_for(tool: str, words: tuple[str, ...]) -> Rule:
    program = words[0]
    if (
        program in _SUBCOMMAND_PROGRAMS
        and not _exact_program(program)
        and len(words) >= 2
        and _SUBCOMMAND.match(words[1])
        and words[1] not in _RUNNER_SUBCOMMANDS
        and _free_arguments(words[2:], words[:2])
    ):
        return Rule(tool, "prefix", words[:2])
    return Rule(tool, "exact", words)


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
        subject = self.subject
        if isinstance(subject, PathSubject):
            return self.reason[:1].upper() + self.reason[1:] if self.reason else None
        if not isinstance(subject, CommandSubject):
            return None
        notes = []
        if subject.cwd is not None and not self.cwd_inside:
            notes.append(f"Runs outside the workspace, in `{subject.cwd}`.")
        elif subject.cwd is not None and self.roots and subject.cwd != self.roots[0]:
            notes.append(f"Runs in `{subject.cwd}`.")
        if self.parts is None:
            notes.append(
                "Uses shell features an approval rule cannot read: only this exact line can be remembered."
            )
        elif len(self.parts) > 1:
            listed = "\n".join(f"- `{_spell(words)}`" for words in self.parts)
            notes.append(f"Runs {len(self.parts)} commands:\n{listed}")
        return "\n\n".join(notes) or None

    @property
    def _own(self) -> tuple[Rule, ...]:
        """The narrowest rules that would cover this question."""
        subject, tool = self.subject, self.tool
        if isinstance(subject, CommandSubject):
            if self.parts is None:
                return (Rule(tool, "line", text=subject.command),)
            return tuple(dict.fromkeys(_rule_for(tool, words) for words in self.parts))
        if isinstance(subject, PathSubject):
            return (Rule(tool, "path", text=subject.path, verb=subject.verb),)
        return (Rule(tool, "tool"),)

    def _covered(self, rules: Iterable[Rule], *, any_part: bool) -> Rule | None:
        """The rule that decides, if one does (for an allow every part must be covered)."""
        subject, mine = self.subject, [rule for rule in rules if rule.tool == self.tool]
        if isinstance(subject, CommandSubject):
            if self.parts is None:
                return next((r for r in mine if r.kind == "line" and r.text == subject.command), None)
            if not any_part and len(self.parts) > 1 and any(p[0] in _STATEFUL for p in self.parts):
                return None  # `cd elsewhere && allowed`: the next part no longer means what it says
            found = [next((r for r in mine if r.covers_words(words)), None) for words in self.parts]
            if any_part:
                return next((r for r in found if r is not None), None)
            return found[0] if found and all(found) else None
        if isinstance(subject, PathSubject):
            return next((r for r in mine if r.covers_path(subject)), None)
        return next((r for r in mine if r.kind == "tool"), None)

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
        if isinstance(self.subject, CommandSubject) and self.parts is not None:
            missing = [
                rule
                for rule, words in zip(self._own_per_part(), self.parts, strict=True)
                if not any(k.tool == self.tool and k.covers_words(words) for k in known)
            ]
            rules = tuple(dict.fromkeys(missing)) or self._own
            if len(_join([r.phrase() for r in rules])) > _MAX_LABEL:
                rules = tuple(dict.fromkeys(Rule(self.tool, "exact", words) for words in self.parts))
            return rules
        return self._own

    def _own_per_part(self) -> list[Rule]:
        assert self.parts is not None
        return [_rule_for(self.tool, words) for words in self.parts]

    def options(self, known_allow: Iterable[Rule], *, project: bool) -> list[Option]:
        """The card's buttons, each saying exactly what it remembers."""
        allow = self._remember(known_allow)
        reject = self._own
        if isinstance(self.subject, CommandSubject) and self.parts is not None and len(self.parts) > 1:
            # Rejecting a compound line rejects that line, not each of its parts everywhere.
            reject = (Rule(self.tool, "line", text=self.subject.command),)
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
            if isinstance(self.subject, PathSubject):
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


def _project_file(state_dir: str, cwd: str) -> str:
    import hashlib  # only for sessions with a state folder, when the first one opens

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


def permissions_command(
    allow: set[Rule],
    reject: set[Rule],
    project: ProjectRules | None,
    argument: str,
    record: Callable[[Literal["allow", "reject"], dict[str, Any]], object],
) -> str:
    """What ``/permissions`` answers: the remembered approvals, numbered (``/permissions`` or
    ``/permissions list``), or one of them removed (``/permissions remove N``)."""
    project_allow, project_reject = project.load() if project is not None else ([], [])
    entries: list[tuple[str, str, Rule]] = [
        *(("allow", "session", r) for r in sorted(allow, key=Rule.phrase)),
        *(("reject", "session", r) for r in sorted(reject, key=Rule.phrase)),
        *(("allow", "project", r) for r in project_allow),
        *(("reject", "project", r) for r in project_reject),
    ]

    def line(entry: tuple[str, str, Rule]) -> str:
        rule_kind, scope, rule = entry
        where = "this session" if scope == "session" else "this project"
        return f"{'Allow' if rule_kind == 'allow' else 'Reject'} {rule.phrase()} ({where}, `{rule.tool}`)"

    words = argument.split()
    if not words or words == ["list"]:
        if not entries:
            return "No approvals are remembered for this session or this project."
        listed = "\n".join(f"{n}. {line(entry)}" for n, entry in enumerate(entries, 1))
        return f"Remembered approvals:\n{listed}\n\nRemove one with `/permissions remove N`."
    if len(words) == 2 and words[0] == "remove" and words[1].isdigit():
        number = int(words[1])
        if not 1 <= number <= len(entries):
            return f"There is no approval number {number}; `/permissions` lists them."
        rule_kind, scope, rule = entries[number - 1]
        if scope == "session":
            record("allow" if rule_kind == "allow" else "reject", rule.to_json())
        elif project is not None:
            project.remove(rule_kind, rule)
        return f"Removed: {line(entries[number - 1])}. It asks again from now on."
    return "Use `/permissions` to list the remembered approvals and `/permissions remove N` to remove one."
