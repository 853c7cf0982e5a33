"""The sandbox under every command: what a running command may touch, decided by the kernel.

A session's ``CommandSandbox`` (one of its services) turns a *level* and an optional
*widening* into a ``SandboxPolicy``, which the process layer applies to the command and to all
it starts (Linux: ``_confine``, in the warden or the terminal guard, before ``exec``; macOS: a
Seatbelt profile, ``sandbox-exec``):

- ``workspace-write`` (the default): reads everywhere but the user's secret stores
  (``SECRET_STORES``, and the agent's own config and state folders), which are hidden; writes
  only in the workspace, the session's additional directories and a private temporary folder
  (``TMPDIR`` and ``TMP``/``TEMP`` point there; ``/dev/shm`` is private too); the repository's
  ``.git`` (and the folder a ``.git`` file points to) read-only; no network, and no Unix socket
  to other programs (the ssh agent, D-Bus, Docker).
- ``read-only`` (plan mode): the same, with writes only in the private temporary folder.

A ``Widening`` lifts named parts of that for one command, after a person allowed it: ``network``
(the network and Unix sockets), ``git`` (writes to ``.git``), a path (read and write access to
it and what is beneath it), or ``all`` (no sandbox). Approvals decide whether a command runs;
this decides what it can touch once it does: neither is trusted to do the other's job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._sandbox_support import SandboxSupport, sandbox_support

__all__ = [
    "SECRET_STORES",
    "CommandSandbox",
    "SandboxLevel",
    "SandboxPolicy",
    "SandboxSupport",
    "Widening",
    "WideningError",
    "sandbox_support",
]

SandboxLevel = Literal["workspace-write", "read-only"]

SECRET_STORES = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".npmrc",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".pgpass",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
)
"""Folders and files under the home folder that commands cannot read (or write): keys, tokens,
credentials, browser profiles. A path widening naming one (or a path in one) opens it."""

_DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
)
"""Devices a command may write to (and use terminal ``ioctl``s on)."""
_SHM = "/dev/shm"
_MAX_WIDENINGS = 16
_NAMED = ("network", "git", "all")


class WideningError(ValueError):
    """A ``widen`` argument that names nothing the sandbox can give (the message is for the model)."""


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _existing(path: str) -> str:
    """The real path of ``path``'s nearest existing ancestor (``path`` itself if it exists)."""
    path = os.path.realpath(path)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _widening_token(item: str, cwd: str, hidden: Sequence[str], home: str | None) -> str:
    """One ``widen`` entry as a token: a name, or the real folder a path gives (see ``Widening.parse``)."""
    word = item.strip()
    if word in _NAMED:
        return word
    if not (word.startswith(("/", "./", "../", "~")) or word in (".", "..")):
        raise WideningError(
            f'widen entry {item!r:.80} is not "network", "git", "all" or a path '
            "(absolute, or starting with ./ ../ ~)"
        )
    if "\0" in word:
        raise WideningError("a path in widen contains a NUL character")
    if home is not None and (word == "~" or word.startswith("~/")):
        word = home + word[1:]
    path = _existing(os.path.join(cwd, os.path.expanduser(word)))
    return next((store for store in hidden if _inside(path, (store,))), path)


@dataclass(frozen=True, slots=True)
class Widening:
    """What one command may do beyond its level: ``tokens`` holds ``network``, ``git``, ``all``
    and absolute real paths, sorted (two widenings are the same when their tokens are)."""

    tokens: tuple[str, ...] = ()

    @classmethod
    def parse(cls, value: object, cwd: str, hidden: Sequence[str] = (), home: str | None = None) -> Widening:
        """The widening a ``widen`` argument asks for, paths resolved against ``cwd`` (``~``:
        ``home``) to the nearest folder that exists, or the secret store they lie in: what the
        kernel can grant. ``WideningError`` says what is wrong with it."""
        if value is None or value == []:
            return cls()
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise WideningError('widen must be a list of strings: "network", "git", "all" or paths')
        if len(value) > _MAX_WIDENINGS:
            raise WideningError(f"widen takes at most {_MAX_WIDENINGS} entries")
        tokens = {_widening_token(item, cwd, hidden, home) for item in value}
        return cls(("all",) if "all" in tokens else tuple(sorted(tokens)))

    @property
    def everything(self) -> bool:
        return self.tokens == ("all",)

    @property
    def network(self) -> bool:
        return "network" in self.tokens or self.everything

    @property
    def git(self) -> bool:
        return "git" in self.tokens or self.everything

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(token for token in self.tokens if token.startswith("/"))

    def phrase(self) -> str:
        """What it gives, as a card says it: "with network access", "without the sandbox"."""
        if self.everything:
            return "without the sandbox"
        parts = []
        if self.network:
            parts.append("with network access")
        if self.git:
            parts.append("with write access to `.git`")
        if self.paths:
            parts.append("with read and write access to " + ", ".join(f"`{p}`" for p in self.paths))
        return " and ".join(parts)


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What one command may touch (see the module docstring); real, absolute paths."""

    level: SandboxLevel
    writable: tuple[str, ...]
    """Where it may write: the workspace's roots (workspace-write), the private temporary folder,
    the paths a widening added."""
    readonly: tuple[str, ...]
    """Inside ``writable``, what stays read-only: ``.git`` and the folders a ``.git`` file names."""
    git_dirs: tuple[str, ...]
    """Every repository folder of the workspace (read-only unless widened with ``git``)."""
    hidden: tuple[str, ...]
    """Secret stores it cannot see."""
    network: bool
    tmpdir: str
    widening: Widening = field(default_factory=Widening)
    mechanism: str = "landlock"
    """How it is enforced: ``landlock`` (Linux: the process layer applies ``plan()``) or
    ``seatbelt`` (macOS: ``command()`` runs the command through ``sandbox-exec``)."""

    def spawn_plan(self) -> dict[str, Any] | None:
        """What the process layer must apply before ``exec`` (``spawn_guarded(sandbox=...)``):
        ``plan()`` on Linux, ``None`` where ``command()`` does it all."""
        return self.plan() if self.mechanism == "landlock" else None

    def plan(self) -> dict[str, Any]:
        """The plan ``_confine`` applies on Linux (a plain dict: it crosses to the warden)."""
        devices = [path for path in _DEVICES if os.path.exists(path)]
        private = [_SHM] if os.path.isdir(_SHM) else []
        return {
            "read": ["/"],
            "write": [*self.writable, *private],
            "devices": devices,
            "readonly": list(self.readonly),
            "hide": list(self.hidden),
            "private": private,
            "network": self.network,
        }

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` as it must be started under this policy: on macOS, through ``sandbox-exec``
        with the profile; on Linux, unchanged (the warden applies ``plan()``)."""
        if self.mechanism != "seatbelt":
            return list(argv)
        from ._seatbelt import seatbelt_argv

        return seatbelt_argv(self, argv)

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with the temporary-folder variables pointing at the private folder."""
        return {**env, "TMPDIR": self.tmpdir, "TMP": self.tmpdir, "TEMP": self.tmpdir}

    def explain(self, output: str, cwd: str) -> str | None:
        """One line for the model when ``output`` (of a command that failed) shows this policy
        refused something, saying what and how to ask for it; ``None`` when nothing points at
        the sandbox. The kernel does not say what it refused: this reads the errors the
        command printed against the policy (see ``_sandbox_denials``)."""
        from ._sandbox_denials import explain_denials

        return explain_denials(self, output, cwd)


def _git_dirs(root: str) -> list[str]:
    """The repository folders of a workspace root: its ``.git`` (folder or file) and, for a
    ``.git`` file (a worktree, a submodule), the folder it names and that folder's common
    directory (the main repository's ``.git``)."""
    dot = os.path.join(root, ".git")
    if not os.path.lexists(dot):
        return []
    found = [dot]
    if os.path.isfile(dot):
        try:
            with open(dot, encoding="utf-8", errors="surrogateescape") as file:
                first = file.readline(4096)
        except OSError:
            return found
        if first.startswith("gitdir:"):
            gitdir = os.path.realpath(os.path.join(root, first[len("gitdir:") :].strip()))
            if os.path.isdir(gitdir):
                found.append(gitdir)
                common = _common_dir(gitdir)
                if common is not None:
                    found.append(common)
    return list(dict.fromkeys(found))


def _common_dir(gitdir: str) -> str | None:
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8", errors="surrogateescape") as file:
            common = file.readline(4096).strip()
    except OSError:
        return None
    path = os.path.realpath(os.path.join(gitdir, common))
    return path if common and os.path.isdir(path) else None


class CommandSandbox:
    """A session's sandbox for commands (one of its ``Services``): its roots, secret stores and
    private temporary folder, and the level each call was allowed at.

    The permission gate records the level a call was allowed at and the widening the person
    allowed (``grant``): ``read-only`` in plan mode, ``workspace-write`` otherwise, ``None`` for
    no sandbox (bypass); the tool takes them when it runs (``take``), so neither a mode changed
    in between nor a path that changed under a widening loosens what was allowed.
    """

    def __init__(
        self,
        support: SandboxSupport,
        roots: Sequence[str],
        *,
        home: str | None = None,
        private_dirs: Sequence[str] = (),
    ) -> None:
        self.support = support
        self.roots = tuple(dict.fromkeys(os.path.realpath(root) for root in roots))
        home = self.home = os.path.expanduser("~") if home is None else home
        stores = [os.path.join(home, store) for store in SECRET_STORES] + list(private_dirs)
        self._stores = tuple(dict.fromkeys(os.path.abspath(store) for store in stores))
        self._grants: dict[str, tuple[SandboxLevel | None, Widening]] = {}
        self._tmpdir: str | None = None

    @property
    def available(self) -> bool:
        return self.support.available

    def hidden(self) -> tuple[str, ...]:
        """The secret stores there are now (real paths), but any that holds a root: a workspace
        opened inside one is the user's choice."""
        found = []
        for store in self._stores:
            if os.path.lexists(store):
                real = os.path.realpath(store)
                if not any(_inside(root, (real,)) for root in self.roots):
                    found.append(real)
        return tuple(dict.fromkeys(found))

    def grant(self, call_id: str, level: SandboxLevel | None, widening: Widening = Widening()) -> None:
        """Record what the call ``call_id`` was allowed: its level (``None``: no sandbox) and
        widening."""
        self._grants[call_id] = (level, widening)

    def take(self, call_id: str) -> tuple[SandboxLevel | None, Widening] | None:
        """What the call was allowed (``grant``), or ``None`` when nobody said."""
        return self._grants.pop(call_id, None)

    def tmpdir(self) -> str:
        """The session's private temporary folder (made on first use, removed with the session)."""
        if self._tmpdir is None:
            import tempfile

            self._tmpdir = tempfile.mkdtemp(prefix="dsh-tmp-")
        return self._tmpdir

    def widening(self, value: object, cwd: str) -> Widening:
        """``Widening.parse`` with this session's secret stores and home."""
        return Widening.parse(value, cwd, self.hidden(), self.home)

    def policy(self, level: SandboxLevel | None, widening: Widening = Widening()) -> SandboxPolicy | None:
        """The policy of a command allowed at ``level`` with ``widening``; ``None`` when it runs
        without a sandbox (none here, ``level`` ``None``, or widened with ``all``)."""
        if not self.available or level is None or widening.everything:
            return None
        tmpdir = self.tmpdir()
        roots = self.roots if level == "workspace-write" else ()
        repositories = [path for root in self.roots for path in _git_dirs(root)]
        hidden = [store for store in self.hidden() if store not in widening.paths]
        writable = [*roots, tmpdir, *widening.paths]
        if widening.git:
            writable += [path for path in repositories if not _inside(path, writable)]
        readonly = [] if widening.git else [path for path in repositories if _inside(path, writable)]
        return SandboxPolicy(
            level=level,
            writable=tuple(dict.fromkeys(writable)),
            readonly=tuple(readonly),
            git_dirs=tuple(repositories),
            hidden=tuple(hidden),
            network=widening.network,
            tmpdir=tmpdir,
            widening=widening,
            mechanism=self.support.mechanism,
        )

    def close(self) -> None:
        """Remove the private temporary folder (the session is closing)."""
        if self._tmpdir is not None:
            import shutil  # not at the top: with its archive modules it weighs on an idle agent

            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
