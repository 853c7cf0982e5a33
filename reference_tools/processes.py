"""Process groups that never outlive the agent, not even a SIGKILLed one: the bash tool's guards, for
any code that starts a process group of its own (the agent's MCP servers, a tool that spawns).

Nothing runs in the agent when it is SIGKILLed, so two guards act from outside it:

- ``parent_death_preexec()`` (Linux): the group leader gets ``PR_SET_PDEATHSIG(SIGKILL)``.
- ``register_group(pgid)``: a reaper process, one per agent whoever registers, started on first
  use, SIGKILLs every group still registered once the agent is gone (it reads the end of a pipe the
  kernel closes when the agent dies), reaching the grandchildren a parent-death signal cannot. A
  normal exit closes the pipe too, so what still runs dies then as well.

The pattern (``spawn_group`` does the first two lines, with stdout/stderr pipes)::

    proc = subprocess.Popen(argv, start_new_session=True, preexec_fn=parent_death_preexec())
    register_group(proc.pid)  # a session leader's group id is its pid; no await before this
    ...  # stop it: signal the group, wait
    if not group_alive(proc.pid):
        unregister_group(proc.pid)  # only once gone: a live group stays covered

Spawn from a long-lived thread (the event loop's): Linux sends the parent-death signal when the
spawning *thread* ends, so a worker thread would kill the child early. A descendant that leaves the
group (``setsid``, ``setpgid``) escapes both guards.
"""

from __future__ import annotations

from collections.abc import Callable

from ._process import _group_alive, _parent_death_preexec, _reaper, spawn_group

__all__ = ["group_alive", "parent_death_preexec", "register_group", "spawn_group", "unregister_group"]


def parent_death_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` that SIGKILLs the child when the spawning thread
    ends (the agent dying); ``None`` where there is no such signal (off Linux).

    Call it in the parent just before spawning: it binds the parent's pid, and it loads ``ctypes``
    there rather than between fork and exec. If the parent died before the child set the signal,
    the child kills itself.
    """
    return _parent_death_preexec()


def register_group(pgid: int) -> None:
    """SIGKILL process group ``pgid`` when the agent ends, however it ends.

    Starts the reaper on first use (``OSError`` if it cannot start). Register right after the
    spawn, with no ``await`` in between, so no window leaves the group uncovered.
    """
    _reaper.register(pgid)


def unregister_group(pgid: int) -> None:
    """Stop covering ``pgid`` (unknown ids are ignored).

    Only once the group is gone (``group_alive`` is false): its id may then be reused by a stranger
    the reaper must not kill, while a group still running must stay covered.
    """
    _reaper.forget(pgid)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs; zombies do not count (an init that never
    reaps, as in many containers, would keep them forever). Reap your own leader first."""
    return _group_alive(pgid)
