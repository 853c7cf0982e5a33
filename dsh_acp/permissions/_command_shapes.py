"""What a remembered command rule may be widened over, and what must match exactly.

A rule is safe to widen over the arguments that choose *what a command looks at*, never over
those that choose *what it does*, *what it runs* or *where it reaches*:

- **What it does** is the program, its subcommand and, for a subcommand that groups actions, the
  action (``git stash list``, ``npm pkg get``, ``git config --get``). A rule is keyed on those
  words and they must match exactly, so a rule made for a read never covers a write of the same
  subcommand (``npm pkg get`` is not ``npm pkg set``). Only the subcommands listed in
  ``_WIDENING`` have such a key: every other command (another subcommand, an alias, a plugin, a
  program that is not listed, a subcommand whose meaning depends on its arity such as
  ``git branch``) is remembered as exactly its words. The list is a list of what is known to be
  safe to widen, not of what is known to be dangerous, because the second kind never ends.
- **What it runs**: runner subcommands (``git bisect run``, ``git submodule foreach``,
  ``git difftool``, ``npm exec``, ``cargo run``...) are not listed, and a later command that uses an
  option naming a program, a command or other configuration (``-x``, ``--exec``, ``-c``,
  ``--config``, ``--upload-pack``..., long options also abbreviated) is not covered.
- **Where it reaches**: every argument that names a path (an operand, an option's value, attached
  or after ``=``, after ``--`` too) must resolve inside the project, symbolic links followed;
  ``file:`` URLs and git's ``<transport>::<address>`` remotes never match.

The option lists are long but no longer the wall: an option missing from them can only run code
or reach a path that the three checks above let through for a subcommand that is listed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Place", "command_key", "free_arguments", "reaches_outside"]


@dataclass(frozen=True, slots=True)
class Place:
    """Where a command runs: its real directory (``None`` when unknown: every path is then
    outside) and the project's real roots (the session folder and its additional directories)."""

    cwd: str | None
    roots: tuple[str, ...]

    def inside(self, real_path: str) -> bool:
        return any(
            real_path == root or real_path.startswith(root.rstrip(os.sep) + os.sep) for root in self.roots
        )


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Per program: the subcommands a rule may be widened over (`status`), and the ones that group
# actions with the actions that may be (`stash:list,show`: the rule is `git stash list`). A
# subcommand is either plain or a group, never both: a plain `git stash` would cover `git stash
# drop`. Runner subcommands and arity-dependent ones are deliberately absent.
_WIDENING_TABLE = """
git     status log diff show add commit restore switch checkout reset rm mv grep blame fetch pull
        push merge rebase cherry-pick revert clone init shortlog describe rev-parse rev-list
        ls-files ls-tree ls-remote cat-file show-ref for-each-ref diff-tree diff-files diff-index
        merge-base check-ignore check-attr name-rev whatchanged format-patch archive apply am
        clean gc fsck count-objects version range-diff check-ref-format
        stash:list,show,push,pop,apply,drop,save,branch
        worktree:list,add,remove,prune,lock,unlock,move,repair
        remote:show,get-url,add,remove,rename,set-url,prune
        submodule:status,summary,init,sync,update,deinit,absorbgitdirs
        bisect:start,good,bad,new,old,skip,reset,log,terms
        config:get,list,--get,--get-all,--get-regexp,--list,-l
        notes:list,show sparse-checkout:list
npm     test t tst ci install i add ls list outdated audit view info show why explain doctor
        prune dedupe fund search pkg:get config:get,list
pnpm    install i add test t ls list outdated audit why
yarn    install add test why info outdated audit list
cargo   build b check c test t bench clippy fmt doc d clean tree metadata update fetch add
        remove rm search version verify-project locate-project generate-lockfile package new
        init vendor fix
go      build test vet fmt list doc version get mod:tidy,download,graph,why,verify,edit
pip     install download list show freeze check index inspect wheel
pip3    install download list show freeze check index inspect wheel
ruff    check format version rule linter config clean
poetry  install show check lock env:info,list
pdm     install list show lock sync
hatch   build version test fmt env:show
kubectl get describe logs explain version api-resources api-versions cluster-info top
gh      pr:list,view,status,diff,checks issue:list,view,status run:list,view repo:view
        release:list,view workflow:list,view auth:status
glab    mr:list,view,diff issue:list,view
hg      status log diff summary heads identify id
svn     status info log diff
jj      status st log diff show
helm    list ls status version history
terraform fmt validate version
tofu    fmt validate version
brew    list ls info search outdated config doctor deps leaves
apt     list search show policy
dnf     list search info repolist
yum     list search info repolist
systemctl status is-active is-enabled is-failed list-units list-unit-files list-timers show cat
dotnet  build test restore list format clean
conda   list info env:list
mamba   list info env:list
rustup  show toolchain:list target:list component:list
"""


def _read_table(text: str) -> dict[str, dict[str, frozenset[str] | None]]:
    """``{program: {subcommand: None (plain) or its actions}}``."""
    table: dict[str, dict[str, frozenset[str] | None]] = {}
    program = ""
    for line in text.strip().splitlines():
        words = line.split()
        if not line.startswith(" "):
            program, words = words[0], words[1:]
            table[program] = {}
        for word in words:
            name, _, actions = word.partition(":")
            table[program][name] = frozenset(actions.split(",")) if actions else None
    return table


_WIDENING = _read_table(_WIDENING_TABLE)

# Options that make a program run other code, read other configuration, change the folder or
# identity it works as, write elsewhere, or lift a containment guard; a command using one is not
# covered by a widened rule (it asks).
_CODE_OPTIONS = _names(
    """
    --upload-pack --receive-pack --exec --exec-path --config --config-env --open-files-in-pager
    --pre --pre-glob --to-command --checkpoint-action --use-compress-program --command --eval
    --rcfile --init-file --shell --output --output-file --ext-diff --textconv --filter --run
    --editor --pager --sequence-editor --git-dir --work-tree --namespace --rsh --template
    --global --system --file --import --require --loader --hook --hooks --plugin --plugins
    --script --script-file --preload --interpreter --post-checkout --prefix --root --chdir
    --directory --makefile --include-dir --exec-batch --execdir --ok --ssh
    --ssh-command --proxy-command --local-port --registry --index-url --extra-index-url -exec
    -execdir -ok -okdir -delete -fprint -fprintf -fls -toolexec --toolexec -vettool --vettool
    --script-shell --node-options --userconfig --globalconfig --init-module --kubeconfig
    --upload-archive --uploadpack --extcmd --tool --interactive --unsafe-paths --open
    --location --user --as --as-group --as-uid --host --machine --web --post-renderer
    --config-toml --config-file --config-dir --config-option --diff-cmd --diff3-cmd --editor-cmd
    --cwd --debugger --git --browser --viewer --node-gyp --proxy --https-proxy --strict-ssl
    --find-links --python --server --show-token --kube-apiserver --kube-token --kube-as-user
    --kube-as-group --property --restore-property --no-strict-ssl
    """
)
# Every abbreviation of the long options above (git's parse-options, getopt_long, Python's
# argparse and optparse, npm's nopt take any unique prefix: `git rebase --ex=<cmd>`).
_CODE_PREFIXES = frozenset(
    option[:size] for option in _CODE_OPTIONS if option.startswith("--") for size in range(3, len(option) + 1)
)
# Programs whose option parser takes no abbreviations (clap, cobra, Go's flag package): their
# long options count by their exact names (`ruff check --diff` is not `--diff-cmd`).
_WHOLE_NAMES = _names("cargo ruff go gh glab kubectl helm terraform tofu rustup dotnet hatch jj")
# Short options that do the same for every program: `-c name=value` (git, pip's constraints),
# `-C dir`, `-O<pager>`.
_CODE_SHORT = "cCO"
# Short options that do it for one program or subcommand (`git rebase -x <cmd>`).
_PROGRAM_SHORT = {
    "npm": "g",
    "pnpm": "g",
    "cargo": "Z",
    "gh": "wt",
    "pip": "if",
    "pip3": "if",
    "pdm": "g",
    "kubectl": "s",
    "glab": "w",
    "apt": "o",
    "dotnet": "p",
    "systemctl": "HM",
    "git rebase": "xi",
    "git commit": "e",
    "git merge": "e",
    "git pull": "e",
    "git revert": "e",
    "git cherry-pick": "e",
    "git archive": "u",
    "git clone": "u",
    "git ls-remote": "u",
    "git add": "i",
    "git config": "e",
}
# Programs whose options are single-dash long names (`go test -exec x`), not clusters of letters,
# with those that run code (matched by name: their flag parser takes no abbreviations).
_SINGLE_DASH_LONG = {"go": _names("exec toolexec vettool ldflags gccgoflags overlay C")}
# `git config`'s read actions: a later word may only be one of these options or an operand (its
# write actions are many and abbreviable, so they are not listed: anything else asks).
_CONFIG_READ_OPTIONS = _names(
    """
    --show-origin --show-scope -z --null --name-only --includes --no-includes --local --worktree
    --bool --int --bool-or-int --path --expiry-date --fixed-value --all --regexp
    """
)
_CONFIG_READ_VALUED = ("--type=", "--default=", "--url=", "--value=")

# `git push` sends the project's history where its first operand says: a rule for it covers the
# remotes the repository names (`origin`), never a URL or a path given on the line.
_REMOTE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9-]*$")
_FILE_URL = re.compile(r"(?i)(^|[=:+])file:")


def command_key(words: Sequence[str]) -> tuple[str, ...] | None:
    """The words a widened rule for ``words`` is keyed on (program, subcommand and, for a
    group, its action), or ``None``: such a command is only ever remembered exactly."""
    subcommands = _WIDENING.get(words[0]) if words else None
    if subcommands is None or len(words) < 2 or not _SUBCOMMAND.match(words[1]):
        return None
    if words[1] not in subcommands:
        return None
    actions = subcommands[words[1]]
    if actions is None:
        return tuple(words[:2])
    if len(words) >= 3 and words[2] in actions:
        return tuple(words[:3])
    return None


def _option_runs_code(word: str, key: Sequence[str]) -> bool:
    """Whether ``word`` is an option that may run other code, read other configuration or
    reach elsewhere, for the command keyed ``key``."""
    if not word.startswith("-") or word == "-":
        return False
    name = re.split("[=:]", word, maxsplit=1)[0].lower()  # `--opt=value`, msbuild's `-p:Name=value`
    if name in _CODE_OPTIONS:
        return True
    # A setting named in parts, as npm and pnpm take them: `--config.script-shell=…`,
    # `--@scope:registry=…`.
    full = word.split("=", 1)[0].lower()
    if full.startswith("--") and any(f"--{part}" in _CODE_OPTIONS for part in re.split("[.:]", full[2:])):
        return True
    single_dash_long = _SINGLE_DASH_LONG.get(key[0])
    if single_dash_long is not None:
        return name.lstrip("-") in single_dash_long
    if name.startswith("--"):
        return name in _CODE_PREFIXES and key[0] not in _WHOLE_NAMES
    # A cluster of short options (`-nO<pager>`): every letter counts, since where an attached
    # value begins cannot be told without the program's option table.
    shorts = _CODE_SHORT + _PROGRAM_SHORT.get(key[0], "") + _PROGRAM_SHORT.get(" ".join(key[:2]), "")
    return any(letter in shorts for letter in word[1:])


def _config_read_option(word: str) -> bool:
    return word in _CONFIG_READ_OPTIONS or word.startswith(_CONFIG_READ_VALUED) or not word.startswith("-")


def _path_pieces(word: str) -> list[str]:
    """The strings in ``word`` that may name a path: the word (an option's name stripped), and
    what follows each ``=``, ``:``, ``,`` or ``@`` in it (``--target-dir=../x``, ``HEAD:a.py``,
    ``a,../x``, an ``@../args`` response file); ``-o../x`` is also tried as ``../x``."""
    pieces = [word.lstrip("-")]
    if word.startswith("-") and not word.startswith("--"):
        # `-o../x`: the value may begin after any of the letters that open the cluster.
        letters = re.match(r"-[A-Za-z0-9]*", word)
        assert letters is not None
        pieces += [word[i:] for i in range(2, letters.end() + 1)]
    separators = "=,@" if "://" in word else "=:,@"  # `https://x` is one name, `//x` is not a path
    pieces += [word[i + 1 :] for i, char in enumerate(word) if char in separators]
    return pieces


def reaches_outside(word: str, place: Place) -> bool:
    """Whether an argument may name a path outside the project, or is a ``file:`` URL. A
    network URL is read as a path too, and stays inside (``https://x`` is ``./https:/x``)."""
    if _FILE_URL.search(word):
        return True
    for piece in _path_pieces(word):
        if piece.startswith("~"):
            return True  # npm and git's config paths read `~/` as the home folder
        if "/" not in piece and piece != "..":
            continue  # a plain name stays in the folder it is resolved in
        if place.cwd is None:
            return True
        if not place.inside(os.path.realpath(os.path.join(place.cwd, piece))):
            return True
    return False


def free_arguments(key: Sequence[str], rest: Sequence[str], place: Place) -> bool:
    """Whether the words after a rule's ``key`` leave it meaning what it said: no option that
    runs code or reaches elsewhere, no path outside the project, and for ``git config``'s reads
    only its read options. Words after ``--`` count too: many commands hand them to another
    program (``npm test -- --require x``)."""
    config_read = tuple(key[:2]) == ("git", "config")
    for word in rest:
        if _option_runs_code(word, key) or (config_read and not _config_read_option(word)):
            return False
        if reaches_outside(word, place) or (key[0] == "git" and "::" in word):
            return False  # `<transport>::<address>`: git runs git-remote-<transport>
    return tuple(key) != ("git", "push") or _pushes_to_a_remote(rest)


def _pushes_to_a_remote(rest: Sequence[str]) -> bool:
    """Whether ``git push``'s repository, if one is given, is a configured remote's name."""
    operands = []
    value_next = False
    for word in rest:
        if value_next:
            value_next = False
        elif re.fullmatch(r"-[A-Za-z0-9]*o", word) or (len(word) > 2 and "--push-option".startswith(word)):
            value_next = True  # `-o x`, `-vo x`, `--push-o x`: its value, not the repository
        elif word.startswith("--repo"):
            return False
        elif not word.startswith("-"):
            operands.append(word)
    if any("://" in word for word in operands):
        return False
    return not operands or bool(_REMOTE_NAME.match(operands[0]))
