"""Processes that never outlive the agent, not even a SIGKILLed one, and whose descendants cannot
escape: the bash tool's spawn, for any code that starts processes of its own (the agent's MCP
servers, a tool that spawns).

``spawn_guarded`` hands the command to the agent's guard process, which forks a *warden* for it:
the command leads a new process group under the warden, a child subreaper (Linux), so a descendant that
leaves the group (``setsid``, a double fork) is still the warden's to find and kill. The warden
kills the whole tree when told to, when the agent closes the process (``close()``), and when the
agent dies however it dies (the kernel closes the socket between them). Spawning costs the agent
no fork, so it does not slow down as the agent's memory grows. The first spawn also makes the
agent's own environment unreadable to its children (``protect_environment``).

The pattern (``spawn_group`` does the spawn with stdout/stderr pipes)::

    process, out_r, err_r = spawn_group(argv, cwd=cwd, env=env, stdin=fd)
    pid = await process.started()  # OSError if it could not start; close() it then too
    ...
    process.terminate_tree()  # SIGTERM the group and whatever left it
    if not await process.wait_gone(grace):
        process.kill_tree()
        await process.wait_gone(2.0)
    process.close()

What it cannot stop: a command can kill its warden (it runs as the same user); then the guard
process, the warden's subreaper, kills what that warden left; a command that kills both gets away.
"""

from __future__ import annotations

from ._environ import protect_environment
from ._process import GuardedProcess, ProcessGroup, signal_name, spawn_group, spawn_guarded

__all__ = [
    "GuardedProcess",
    "ProcessGroup",
    "protect_environment",
    "signal_name",
    "spawn_group",
    "spawn_guarded",
]
