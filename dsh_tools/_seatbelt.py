"""The macOS sandbox: a Seatbelt profile for a ``SandboxPolicy``, run with ``sandbox-exec``.

The profile denies by default and allows what commands need to run (processes of their own,
system information, terminals, the user directory service), reading every file but the secret
stores, writing only under the policy's writable paths but its read-only ones, and, with a
network widening, the network and the system services that name lookups and certificate checks
go through. Paths are passed as parameters (``-D NAME=path``), never spliced into the profile's
text, so no file name can change what the profile says. Unlike Linux, the network cut is the
whole of it: a server a command starts on 127.0.0.1 cannot be reached from the sandbox either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["SEATBELT", "seatbelt_argv", "seatbelt_profile"]

SEATBELT = "/usr/bin/sandbox-exec"


class SandboxPolicy(Protocol):
    """What of a ``dsh_tools.sandbox.SandboxPolicy`` the profile needs."""

    @property
    def writable(self) -> tuple[str, ...]: ...
    @property
    def readonly(self) -> tuple[str, ...]: ...
    @property
    def hidden(self) -> tuple[str, ...]: ...
    @property
    def network(self) -> bool: ...


_BASE = """(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow user-preference-read)
(allow ipc-posix-sem)
(allow pseudo-tty)
(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))
(allow file-read* file-write-data file-ioctl
  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (literal "/dev/ptmx")
  (regex #"^/dev/ttys[0-9]+$"))
(allow file-read* (literal "/dev/random") (literal "/dev/urandom"))
"""

_NETWORK = """(allow network*)
(allow mach-lookup
  (global-name "com.apple.dnssd.service")
  (global-name "com.apple.trustd.agent")
  (global-name "com.apple.SystemConfiguration.configd"))
"""


def _any(kind: str, names: Sequence[str]) -> str:
    return "(require-any " + " ".join(f'({kind} (param "{name}"))' for name in names) + ")"


def seatbelt_profile(policy: SandboxPolicy) -> tuple[str, dict[str, str]]:
    """The profile's text and its parameters (name → path) for ``policy``."""
    params: dict[str, str] = {}

    def names(prefix: str, paths: Sequence[str]) -> list[str]:
        found = [f"{prefix}_{index}" for index in range(len(paths))]
        params.update(zip(found, paths, strict=True))
        return found

    hidden = names("HIDDEN", policy.hidden)
    writable = names("WRITABLE", policy.writable)
    readonly = names("READONLY", policy.readonly)
    text = _BASE
    if hidden:
        text += f"(allow file-read* (require-not {_any('subpath', hidden)}))\n"
    else:
        text += "(allow file-read*)\n"
    if writable:
        refused = [*readonly, *hidden]
        where = _any("subpath", writable)
        if refused:
            where = f"(require-all {where} (require-not {_any('subpath', refused)}))"
        text += f"(allow file-write* {where})\n"
    if policy.network:
        text += _NETWORK
    return text, params


def seatbelt_argv(policy: SandboxPolicy, argv: Sequence[str]) -> list[str]:
    """``argv`` run under ``policy`` by ``sandbox-exec``."""
    text, params = seatbelt_profile(policy)
    defines = [part for name, path in params.items() for part in ("-D", f"{name}={path}")]
    return [SEATBELT, "-p", text, *defines, "--", *argv]
