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
per project in the user's state folder (``_approvals.ProjectRules``). ``_permission_choices`` reads a
permission question once and offers the card's buttons, each saying what it remembers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dsh_tools import PathSubject

from ._shellwords import split_command_line

__all__ = ["STATEFUL", "Rule", "RuleKind", "inside", "migrate_key", "rule_for", "rule_from_json", "spell"]


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
STATEFUL = _names(
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

    def phrase(self) -> str:
        """What the rule covers, as the option's label says it."""
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


def rule_for(tool: str, words: tuple[str, ...]) -> Rule:
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
