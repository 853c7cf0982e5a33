"""Permission modes: a pre-execute policy keyed on the tools' declared kinds, never their names.

- ``default``: reads and searches run; edits, writes and commands ask;
- ``accept_edits``: edits inside the workspace run too; commands ask;
- ``auto``: commands in the sandbox and edits inside the workspace run; a command that asks to
  widen the sandbox asks, and so does every other tool that is not a read; where there is no
  sandbox, it asks as ``default`` does;
- ``plan``: only read-only tools run, and commands in a read-only sandbox (none that widens it;
  without a sandbox, no command); anything else is denied with a note that this is plan mode;
- ``bypass``: everything runs, commands without the sandbox (for trusted sandboxes).

A tool that declares ``sandboxed`` (``bash``) runs its calls in the session's
``CommandSandbox``: the gate records the level each call was allowed at (``read-only`` in plan
mode, none in bypass, else ``workspace-write``) and the widening its person allowed, which the
call takes when it runs. Whatever the mode, a widened command says its widening first on its card.

A tool of kind ``fetch`` asks in every mode but ``bypass``, ``plan`` included (it changes nothing
here, but its request leaves the machine, and a URL can carry what the model read).

It wraps the other policies: whatever they deny stays denied in every mode (read-before-edit, a
stale file), and what they ask about (access outside the workspace) is asked in every mode but
``bypass``. It also reads the paths every call's card declares (``_declared_paths``): one outside
the workspace, in a git folder (for a call that may change files) or in the agent's own folders
asks in every mode but ``bypass``, about that path, so that an answer given for the tool inside
the workspace ("Always allow `rename` calls") never covers it.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh_tools import (
    Allow,
    Ask,
    CommandSubject,
    Deny,
    PathSubject,
    PreExecuteListener,
    PreNext,
    PreToolDecision,
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
)
from dsh_tools.sandbox import CommandSandbox, Widening

from ._declared_paths import PathProblem, PreviewableCalls, declared_paths, path_problems, workspace_roots
from ._modes import MODES, PermissionState

__all__ = ["mode_gate"]

_READING = frozenset({"read", "search", "think"})
_EDITING = frozenset({"edit", "delete", "move"})
_NETWORK = frozenset({"fetch"})


def _confined(
    definition: ToolDefinition | None, execution: ToolExecution
) -> tuple[CommandSandbox, Widening] | None:
    """The session's sandbox and the widening asked for, when ``definition``'s calls run in it."""
    if definition is None or not definition.sandboxed:
        return None
    sandbox = execution.services.get(CommandSandbox)
    if sandbox is None or not sandbox.available:
        return None
    subject = definition.subject_of(execution)
    return sandbox, Widening(subject.widen if isinstance(subject, CommandSubject) else ())


def _plan_decision(
    decision: PreToolDecision, execution: ToolExecution, confined: tuple[CommandSandbox, Widening] | None
) -> PreToolDecision | None:
    """Plan mode's answer for a call that is not read-only (``None`` for one that is)."""
    if confined is None:
        return Deny(
            f"the session is in plan mode, where only read-only tools run ({execution.name} is not one); "
            "describe the change instead, and the user can switch modes to let it run"
        )
    sandbox, widening = confined
    if widening.tokens:
        return Deny(
            "the session is in plan mode, where commands run in a read-only sandbox that cannot be "
            "widened; propose the command instead, and the user can switch modes to let it run"
        )
    sandbox.grant(execution.call_id, "read-only")
    return decision if isinstance(decision, Ask) else Allow()


def mode_gate(registry: ToolRegistry, agent_folders: Sequence[str] = ()) -> PreExecuteListener:
    """The mode policy for every session of ``registry`` (each session's state is in its services).

    ``agent_folders`` are the agent's own configuration and state folders: a call whose card names
    a path in them asks (see ``_declared_paths``), as one naming a path outside the workspace does.
    """

    async def gate(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
        decision = await next_()
        if isinstance(decision, Deny):
            return decision
        state = execution.services.get(PermissionState)
        mode = state.mode if state is not None else "default"
        # The session's own layer (its MCP tools, ask_user) if the host registered it, else ours.
        scoped = execution.services.get(ToolRegistry) or registry
        definition = scoped.get(execution.name)
        confined = _confined(definition, execution)
        if mode == "bypass":
            if confined is not None:
                confined[0].grant(execution.call_id, None)
            return Allow()
        kind = definition.kind if definition is not None else "other"
        read_only = definition is not None and definition.read_only
        asked, clean = None, False
        if definition is not None and definition.present_call is not None:
            writes = not read_only and kind not in _READING
            asked, clean = _declared(execution, definition, decision, agent_folders, state, writes=writes)
        if kind in _NETWORK and not isinstance(decision, Ask):
            return asked or Ask(f"{kind} tools ask first in every mode but bypass (they reach the network)")
        if mode == "plan" and not read_only:
            planned = _plan_decision(decision, execution, confined)
            if planned is not None:
                return planned
        if asked is not None:
            return asked
        if confined is not None:
            confined[0].grant(execution.call_id, "workspace-write", confined[1])
        result = (
            decision if isinstance(decision, Ask) else _by_mode(mode, kind, read_only, execution, confined)
        )
        if clean and isinstance(result, Ask):
            execution.services.setdefault(PreviewableCalls, PreviewableCalls).ids.add(execution.call_id)
        return result

    return gate


def _by_mode(
    mode: str,
    kind: str,
    read_only: bool,
    execution: ToolExecution,
    confined: tuple[CommandSandbox, Widening] | None,
) -> Allow | Ask:
    """What the mode says of a call no other policy decided."""
    if read_only or kind in _READING:
        return Allow()
    widening = confined[1] if confined is not None else Widening()
    if mode == "auto" and _has_sandbox(execution):
        if confined is not None:
            return Allow() if not widening.tokens else Ask(_widening_reason(widening))
        if kind in _EDITING:
            return Allow()
    elif mode == "accept_edits" and kind in _EDITING:
        return Allow()
    if widening.tokens:
        return Ask(_widening_reason(widening))
    return Ask(f"{kind} tools ask first in {MODES[mode][0].lower()} mode")


def _has_sandbox(execution: ToolExecution) -> bool:
    """Whether commands of this session run in a sandbox (``auto`` asks as ``default`` without)."""
    sandbox = execution.services.get(CommandSandbox)
    return sandbox is not None and sandbox.available


def _widening_reason(widening: Widening) -> str:
    return f"the command asks to run {widening.phrase()}"


def _declared(
    execution: ToolExecution,
    definition: ToolDefinition,
    decision: PreToolDecision,
    agent_folders: Sequence[str],
    state: PermissionState | None,
    *,
    writes: bool,
) -> tuple[Ask | None, bool]:
    """The question about the paths the call's card names (``None`` when none needs one), and
    whether it names paths and none of them needs one (a preview may then read them)."""
    paths = declared_paths(definition.call_view(execution.arguments), execution.cwd)
    if not paths:
        return None, False
    problems = path_problems(paths, workspace_roots(execution), agent_folders, writes=writes)
    if not problems:
        return None, True
    if isinstance(decision, Ask) and _about(decision, problems):
        return decision, False  # a tool's own policy asked about that very path (the file tools do)
    verb = "edit" if writes else "read"
    reason = "; ".join(
        f"{verb} {p.shown}{'' if p.real == p.shown else f' (really {p.real})'}, {p.why}" for p in problems
    )
    chosen = _undecided(problems, verb, execution.name, state)
    return Ask(reason, subject=PathSubject(verb, chosen.real, chosen.shown)), False


def _about(ask: Ask, problems: Sequence[PathProblem]) -> bool:
    """Whether ``ask`` is already about the one path of ``problems``."""
    subject = ask.subject
    return isinstance(subject, PathSubject) and all(problem.real == subject.path for problem in problems)


def _undecided(
    problems: Sequence[PathProblem], verb: str, tool: str, state: PermissionState | None
) -> PathProblem:
    """Which path the question is about: one the user always rejects, else one no remembered
    answer allows (so that "always" covers a call only when it covers each of its paths)."""
    if len(problems) == 1 or state is None:
        return problems[0]
    project_allow, project_reject = state.project.load() if state.project is not None else ([], [])
    allow = [rule for rule in (*state.allow, *project_allow) if rule.tool == tool]
    reject = [rule for rule in (*state.reject, *project_reject) if rule.tool == tool]
    subjects = [(problem, PathSubject(verb, problem.real, problem.shown)) for problem in problems]
    for problem, subject in subjects:
        if any(rule.covers_path(subject) for rule in reject):
            return problem
    for problem, subject in subjects:
        if not any(rule.covers_path(subject) for rule in allow):
            return problem
    return problems[0]
