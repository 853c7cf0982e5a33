"""Permission modes: a pre-execute policy keyed on the tools' declared kinds, never their names.

- ``default``: reads and searches run; edits, writes and commands ask;
- ``accept_edits``: edits inside the workspace run too; commands ask;
- ``plan``: only read-only tools run; anything else is denied with a note that this is plan mode;
- ``bypass``: everything runs (for trusted sandboxes).

It wraps the other policies: whatever they deny stays denied in every mode (read-before-edit, a
stale file), and what they ask about (access outside the workspace) is asked in every mode but
``bypass``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from dsh_acp.wire._updates import SessionModeState
from dsh_tools import (
    Allow,
    Ask,
    Deny,
    PreExecuteListener,
    PreNext,
    PreToolDecision,
    ToolExecution,
    ToolRegistry,
)

if TYPE_CHECKING:  # the rules module loads with the first session that can remember answers
    from ._approvals import ProjectRules
    from ._rules import Rule

__all__ = ["MODES", "ModeId", "PermissionState", "mode_gate", "modes_wire"]

ModeId = Literal["default", "accept_edits", "plan", "bypass"]

MODES: dict[str, tuple[str, str]] = {
    "default": ("Default", "Reads and searches run; edits, writes and commands ask first."),
    "accept_edits": ("Accept edits", "Edits inside the workspace run; commands still ask first."),
    "plan": ("Plan", "Read-only: the agent explores and proposes; nothing is changed."),
    "bypass": ("Bypass permissions", "Everything runs without asking (trusted sandboxes only)."),
}

_READING = frozenset({"read", "search", "think"})
_EDITING = frozenset({"edit", "delete", "move"})


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
            from ._approvals import ProjectRules

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


def mode_gate(registry: ToolRegistry) -> PreExecuteListener:
    """The mode policy for every session of ``registry`` (each session's state is in its services)."""

    async def gate(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        decision = await next_()
        if isinstance(decision, Deny):
            return decision
        state = execution.services.get(PermissionState)
        mode = state.mode if state is not None else "default"
        if mode == "bypass":
            return Allow()
        # The session's own layer (its MCP tools, ask_user) if the host registered it, else ours.
        scoped = execution.services.get(ToolRegistry) or registry
        definition = scoped.get(execution.name)
        kind = definition.kind if definition is not None else "other"
        read_only = definition is not None and definition.read_only
        if mode == "plan" and not read_only:
            return Deny(
                f"the session is in plan mode, where only read-only tools run ({execution.name} is not one); "
                "describe the change instead, and the user can switch modes to let it run"
            )
        if isinstance(decision, Ask):
            return decision
        if read_only or kind in _READING:
            return Allow()
        if mode == "accept_edits" and kind in _EDITING:
            return Allow()
        return Ask(f"{kind} tools ask first in {MODES[mode][0].lower()} mode")

    return gate
