"""What the sandbox refused a command, read from what the command printed.

The kernel returns an error code (``EACCES`` from Landlock, ``EROFS`` from a read-only mount,
``EPERM`` from seccomp, ``ENETUNREACH`` or a failed name lookup inside the network namespace)
and records nothing a user may read about which path it was. So this is a reading, said as
such: the lines of the output that carry one of those errors, the paths named on them, and
the policy. A path counts only when the policy explains the refusal and the user's own rights
would not have (the agent, which is not sandboxed, could write there), so a plain "Permission
denied" of the host is left alone.
"""

from __future__ import annotations

import os
import re
from typing import Protocol

__all__ = ["explain_denials"]


class _Widening(Protocol):
    @property
    def git(self) -> bool: ...


class SandboxPolicy(Protocol):
    """What of a ``dsh_tools.sandbox.SandboxPolicy`` the reading needs."""

    @property
    def level(self) -> str: ...
    @property
    def writable(self) -> tuple[str, ...]: ...
    @property
    def readonly(self) -> tuple[str, ...]: ...
    @property
    def git_dirs(self) -> tuple[str, ...]: ...
    @property
    def hidden(self) -> tuple[str, ...]: ...
    @property
    def network(self) -> bool: ...
    @property
    def widening(self) -> _Widening: ...


_PATH_ERRORS = re.compile(
    r"permission denied|read-only file system|operation not permitted|\beacces\b|\berofs\b|\beperm\b"
    r"|os error (?:1|13|30)\b|errno (?:1|13|30)\b|device or resource busy|no such file or directory",
    re.IGNORECASE,
)
_NETWORK_ERRORS = re.compile(
    r"could not resolve|temporary failure in name resolution|name or service not known|getaddrinfo"
    r"|\benotfound\b|\beai_again\b|network is unreachable|\benetunreach\b|no address associated"
    r"|nodename nor servname|failed to establish a new connection|connection refused|\beconnrefused\b"
    r"|could not connect to|couldn't connect to server|unable to access '[a-z]+://",
    re.IGNORECASE,
)
_SOCKET_DENIED = re.compile(
    r"socket.*(?:operation not permitted|eperm)|(?:operation not permitted|eperm).*socket", re.I
)
_QUOTED = re.compile(r"""'([^'\n]+)'|"([^"\n]+)"|‘([^’\n]+)’|`([^`\n]+)`|“([^”\n]+)”""")
_BARE = re.compile(r"(?<![\w:/.~-])((?:~|\.{1,2})?/[^\s:'\"`,;()]+|\.[\w.-]+/[^\s:'\"`,;()]*)")
_MAX_LINES = 400


def _candidates(line: str) -> list[str]:
    """The paths a line may name: anything quoted, and bare words with a slash."""
    found = [next(group for group in match.groups() if group) for match in _QUOTED.finditer(line)]
    found += [match.group(1).rstrip(".") for match in _BARE.finditer(line)]
    return [word for word in found if word.strip() and "\0" not in word]


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _real(word: str, cwd: str) -> str:
    return os.path.realpath(os.path.join(cwd, os.path.expanduser(word)))


def _writable_by_user(path: str) -> bool:
    """Whether the user (the unsandboxed agent) may write at ``path``: then only the sandbox
    refused it."""
    probe = path if os.path.lexists(path) else os.path.dirname(path)
    while probe and not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    return bool(probe) and os.access(probe, os.W_OK)


def _refused_path(policy: SandboxPolicy, word: str, cwd: str, line: str) -> tuple[str, str] | None:
    """``(kind, path)`` when the policy, not the user's rights, explains the error on ``line``
    about ``word``: ``hidden`` (a secret store), ``git`` (a repository folder), ``outside``."""
    path, lower = _real(word, cwd), line.lower()
    store = next((s for s in policy.hidden if _inside(path, (s,))), None)
    if store is not None:
        return "hidden", store
    if "no such file" in lower:
        return None  # a missing file is the sandbox's doing only inside a hidden store
    repository = next((g for g in policy.git_dirs if _inside(path, (g,))), None)
    if repository is not None and not policy.widening.git:
        return "git", repository
    if "resource busy" not in lower and not _inside(path, policy.writable) and _writable_by_user(path):
        return "outside", path
    return None


def _sentence(policy: SandboxPolicy, refused: dict[str, str], network: bool) -> str:
    parts, asks = [], []
    for path, kind in refused.items():
        if kind == "hidden":
            parts.append(f"`{path}` is a secret store the sandbox hides")
            asks.append(path)
        elif kind == "git":
            parts.append(f"`{path}` is read-only in the sandbox")
            asks.append("git")
        else:
            where = (
                "the workspace and $TMPDIR" if policy.level == "workspace-write" else "$TMPDIR (plan mode)"
            )
            parts.append(f"writing `{path}` was refused (commands write only in {where})")
            asks.append(path)
    if network:
        parts.append("the command has no network (nor Unix sockets to other programs)")
        asks.append("network")
    asks = list(dict.fromkeys(asks))
    listed = ", ".join(f'"{ask}"' for ask in asks)
    if policy.level == "read-only":
        advice = "plan mode cannot widen the sandbox: propose the command instead"
    else:
        advice = f"if it needs this, run it again with widen: [{listed}] (the user is asked)"
    return f"[sandbox] Probably refused by the sandbox: {'; '.join(parts)}; {advice}."


def explain_denials(policy: SandboxPolicy, output: str, cwd: str) -> str | None:
    """One line saying what the sandbox probably refused the command that printed ``output``
    and how to ask for it, or ``None`` (see the module docstring)."""
    refused: dict[str, str] = {}
    network = False
    for line in output.splitlines()[-_MAX_LINES:]:
        if _PATH_ERRORS.search(line):
            for word in _candidates(line):
                found = _refused_path(policy, word, cwd, line)
                if found is not None:
                    refused.setdefault(found[1], found[0])
        if not policy.network and (_NETWORK_ERRORS.search(line) or _SOCKET_DENIED.search(line)):
            network = True
    if not refused and not network:
        return None
    return _sentence(policy, dict(list(refused.items())[:3]), network)
