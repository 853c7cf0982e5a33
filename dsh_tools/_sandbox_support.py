"""Whether this machine can sandbox commands, and how: read once per process.

Cheap on purpose: the agent says it in its answer to ``initialize`` (``agentCapabilities._meta``),
which an editor waits for. On Linux: Landlock's ABI (one system call), the architecture's seccomp
numbers, and the kernel settings that keep users out of user namespaces (three small files). On
macOS: ``sandbox-exec``. Anywhere else, or switched off, there is none.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

__all__ = ["SandboxSupport", "sandbox_support"]

_SEATBELT = "/usr/bin/sandbox-exec"


@dataclass(frozen=True, slots=True)
class SandboxSupport:
    """What confines commands here: ``mechanism`` is ``"landlock"`` (Linux: Landlock, namespaces
    and seccomp), ``"seatbelt"`` (macOS) or ``""`` (none: ``reason`` says why)."""

    mechanism: str
    detail: str
    """What it is made of (``Landlock ABI 7, user namespaces, seccomp``), or why there is none."""
    abi: int = 0
    """Landlock's ABI version (Linux)."""

    @property
    def available(self) -> bool:
        return bool(self.mechanism)

    def meta(self) -> dict[str, object]:
        """What ``initialize`` says of it (``agentCapabilities._meta.sandbox``): the same on every
        machine with the same mechanism (the log line gives the details, such as Landlock's ABI)."""
        if not self.available:
            return {"enabled": False, "reason": self.detail}
        return {"enabled": True, "mechanism": self.mechanism, "policy": "workspace-write"}


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _user_namespaces() -> str | None:
    """Why this user cannot make user namespaces (from the kernel's settings), else ``None``."""
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        return "user namespaces are disabled (user.max_user_namespaces is 0)"
    if os.geteuid() == 0:
        return None
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone is 0)"
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor restricts unprivileged user namespaces "
            "(kernel.apparmor_restrict_unprivileged_userns is 1)"
        )
    return None


def _linux() -> SandboxSupport:
    from . import _confine

    abi = _confine.landlock_abi()
    if abi < 1:
        return SandboxSupport(
            "", "Landlock is not available (it needs Linux 5.13 or later, with Landlock enabled)"
        )
    if _confine.seccomp_arch() is None:
        return SandboxSupport("", f"the sandbox does not know the system calls of {os.uname().machine}")
    refused = _user_namespaces()
    if refused is not None:
        return SandboxSupport("", refused)
    return SandboxSupport("landlock", f"Landlock ABI {abi}, user namespaces, seccomp", abi)


_found: dict[str, SandboxSupport] = {}


def sandbox_support(setting: str = "auto") -> SandboxSupport:
    """This machine's sandbox for commands (probed once per process): ``setting`` ``"off"``
    switches it off (``--sandbox off``)."""
    if setting == "off":
        return SandboxSupport("", "switched off (--sandbox off)")
    found = _found.get(setting)
    if found is None:
        if sys.platform.startswith("linux"):
            found = _linux()
        elif sys.platform == "darwin" and os.path.exists(_SEATBELT):
            found = SandboxSupport("seatbelt", "Seatbelt (sandbox-exec)")
        else:
            found = SandboxSupport("", f"no sandbox for commands on {sys.platform}")
        _found[setting] = found
    return found
