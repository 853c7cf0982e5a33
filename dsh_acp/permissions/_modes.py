"""Permission modes: the five a session can be in (``MODES``), and a session's permission state (its
mode and the answers a person gave "always"). The policy the modes stand for is ``_mode_gate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from dsh_acp.wire._updates import SessionModeState

from ._approvals import ProjectRules
from ._rules import Rule

__all__ = ["MODES", "ModeId", "PermissionState", "modes_wire"]

ModeId = Literal["default", "accept_edits", "auto", "plan", "bypass"]

MODES: dict[str, tuple[str, str]] = {
    "default": ("Default", "Reads and searches run; edits, writes and commands ask first."),
    "accept_edits": ("Accept edits", "Edits inside the workspace run; commands still ask first."),
    "auto": (
        "Auto",
        "Commands in the sandbox and edits inside the workspace run; widening the sandbox asks first "
        "(without a sandbox, as Default).",
    ),
    "plan": (
        "Plan",
        "Read-only: the agent explores (commands in a read-only sandbox) and proposes; nothing is changed.",
    ),
    "bypass": ("Bypass permissions", "Everything runs without asking or sandbox (trusted sandboxes only)."),
}


@dataclass(eq=False, slots=True)  # slots: one per idle session
class PermissionState:
    """A session's mode and the answers a person gave "always": for the session (kept in its
    log) and, if the session has a state folder, for its project (see ``_approvals``)."""

    mode: str = "default"
    project_of: tuple[str, str] | None = None
    """``(state folder, session cwd)`` when answers can be kept for the project."""
    _project: ProjectRules | None = field(default=None, repr=False)
    # Made on first use: most sessions never remember an answer, and two empty sets would be a
    # fifth of what an idle session costs.
    _allow: set[Rule] | None = field(default=None, repr=False)
    _reject: set[Rule] | None = field(default=None, repr=False)

    @property
    def allow(self) -> set[Rule]:
        """The session's "always allow" rules."""
        if self._allow is None:
            self._allow = set()
        return self._allow

    @property
    def reject(self) -> set[Rule]:
        """The session's "always reject" rules."""
        if self._reject is None:
            self._reject = set()
        return self._reject

    @property
    def project(self) -> ProjectRules | None:
        """The project's kept answers, opened on first use (an idle session holds no more than
        the two names)."""
        if self._project is None and self.project_of is not None:
            self._project = ProjectRules(*self.project_of)
        return self._project


def modes_wire(state: PermissionState) -> SessionModeState:
    """The ACP ``SessionModeState`` for a session."""
    return {
        "currentModeId": state.mode,
        "availableModes": [
            {"id": mode_id, "name": name, "description": description}
            for mode_id, (name, description) in MODES.items()
        ],
    }
