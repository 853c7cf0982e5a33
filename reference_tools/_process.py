"""Process groups for shell commands: spawn, wait, stop, and never outlive the agent.

Every command leads a new session, so its whole tree shares one process group that can be
signalled at once; it reads stdin from /dev/null and writes to pipes of its own, never the agent's
(whose stdout is the protocol). Two guards cover the agent dying without running any ``finally``
(SIGKILL, OOM killer):

- Linux: the group leader gets ``PR_SET_PDEATHSIG(SIGKILL)``, so it dies with the agent.
- Everywhere: a reaper process, one per agent, started on first use, reads the end of a pipe the
  agent writes each group it starts (and stops) to. When the agent dies the kernel closes the pipe,
  the reaper reads EOF and SIGKILLs every group still registered, reaching the grandchildren a
  parent-death signal cannot.

Both guards are offered to other code that starts process groups (the agent's MCP servers) by the
public ``reference_tools.processes``, so there is one reaper per agent, whoever spawns.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence

import anyio

__all__ = ["ProcessGroup", "signal_name", "spawn_group"]

_log = logging.getLogger("reference_tools.bash")

_PR_SET_PDEATHSIG = 1
_KILL_WAIT_S = 2.0
"""How long to wait for SIGKILLed processes to be gone (only a process stuck in the kernel lasts)."""

_REAPER_SCRIPT = """\
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = set()
for line in sys.stdin.buffer:
    try:
        pgid = int(line[1:])
    except ValueError:
        continue
    if line[:1] == b"+":
        groups.add(pgid)
    else:
        groups.discard(pgid)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class _Reaper:
    """The agent's side of the reaper: a pipe the reaper process reads groups from until EOF."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0  # the pid that started the reaper: a forked agent needs its own

    def register(self, pgid: int) -> None:
        with self._lock:
            self._groups.add(pgid)
            self._send(b"+%d\n" % pgid)

    def forget(self, pgid: int) -> None:
        # Once a group is gone its id may be reused: the reaper must not kill a stranger later.
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._send(b"-%d\n" % pgid)

    def _send(self, line: bytes) -> None:
        if self._proc is None or self._owner != os.getpid() or self._proc.poll() is not None:
            self._start()
            return  # _start sent every registered group, this one included
        assert self._proc.stdin is not None
        try:
            # Lines are far below PIPE_BUF: each write is atomic, the reaper never sees half a line.
            os.write(self._proc.stdin.fileno(), line)
        except OSError:
            _log.warning("the process reaper went away; starting a new one", exc_info=True)
            self._start()

    def _start(self) -> None:
        if self._proc is not None and self._owner == os.getpid():
            self._close()
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C or kill aimed at the agent's group must spare it
        )
        self._owner = os.getpid()
        assert self._proc.stdin is not None
        if self._groups:
            os.write(self._proc.stdin.fileno(), b"".join(b"+%d\n" % g for g in self._groups))

    def _close(self) -> None:
        """Close the pipe (the reaper kills what is still registered) and reap the reaper."""
        proc, self._proc = self._proc, None
        if proc is None or self._owner != os.getpid():
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=_KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        with self._lock:
            self._close()


_reaper = _Reaper()
# A normal exit closes the pipe the same way a crash would, so whatever still runs dies with us.
atexit.register(_reaper.close)


@functools.cache
def _load_prctl() -> Callable[..., int] | None:
    # Loaded at the first spawn, in the parent (never between fork and exec): ctypes costs the
    # agent's idle memory, and sessions that run no command need none of it.
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong]  # type: ignore[attr-defined]
    prctl.restype = ctypes.c_int  # type: ignore[attr-defined]
    return prctl


def _parent_death_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` giving the child ``PR_SET_PDEATHSIG(SIGKILL)``; ``None`` off Linux."""
    prctl = _load_prctl()
    return None if prctl is None else functools.partial(_die_with_parent, prctl, os.getpid())


def _die_with_parent(prctl: Callable[..., int], parent: int) -> None:
    """Runs in the child between fork and exec: keep it to syscalls."""
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the agent died before prctl: the signal would never come
        os.kill(os.getpid(), signal.SIGKILL)


def spawn_group(
    argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str], stdin: int
) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start ``argv`` leading a new process group under both guards: the parent-death signal and
    the reaper. Returns the process and the read ends of its stdout and stderr pipes (``stdin`` is
    a file descriptor, or ``subprocess.DEVNULL``). ``OSError`` when it cannot start or cannot be
    guarded; a process that cannot be guarded is killed rather than left to outlive the agent.

    Call it from a long-lived thread (the event loop's): Linux sends the parent-death signal when
    the spawning *thread* ends.
    """
    preexec = _parent_death_preexec()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=out_w,
            stderr=err_w,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=preexec,
        )
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    try:
        _reaper.register(proc.pid)  # no await before this: no window leaves the group uncovered
    except BaseException:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        os.close(out_r)
        os.close(err_r)
        raise
    return proc, out_r, err_r


def signal_name(returncode: int | None) -> str | None:
    """``"SIGTERM"`` for a process killed by SIGTERM (a negative return code), else ``None``."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"SIG{-returncode}"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except OSError:  # gone, or only processes we may not signal (setuid) are left: nothing to stop
        return False
    if not os.path.isdir("/proc"):
        return True
    # killpg also finds zombies, which a non-reaping init (many containers) never clears.
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


class ProcessGroup:
    """A ``bash -c`` command leading its own process group, with its stdout and stderr pipes.

    ``stdout`` and ``stderr`` are the non-blocking read ends; ``close()`` closes them.
    """

    def __init__(self, proc: subprocess.Popen[bytes], stdout: int, stderr: int) -> None:
        self.proc = proc
        self.pgid = proc.pid  # a session leader's group id is its pid
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    def spawn(cls, argv: Sequence[str], *, cwd: str, env: Mapping[str, str]) -> ProcessGroup:
        """Start ``argv`` in ``cwd``; raises ``OSError`` when it cannot start.

        Call it from a long-lived thread (the event loop's): Linux sends the parent-death signal
        when the spawning *thread* ends, so a worker thread would kill the command early.
        """
        proc, out_r, err_r = spawn_group(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL)
        os.set_blocking(out_r, False)
        os.set_blocking(err_r, False)
        return cls(proc, out_r, err_r)

    @property
    def returncode(self) -> int | None:
        """The leader's exit status once reaped (negative: killed by that signal)."""
        return self.proc.returncode

    async def wait(self) -> int:
        """Wait until the leader exits, reap it and return its status."""
        if self.proc.returncode is None:
            pidfd = -1
            if hasattr(os, "pidfd_open"):
                try:
                    pidfd = os.pidfd_open(self.proc.pid)
                except OSError:  # an old kernel; or reaped meanwhile, which wait() handles
                    pidfd = -1
            if pidfd >= 0:
                try:
                    await anyio.wait_readable(pidfd)  # readable once the process has exited
                finally:
                    os.close(pidfd)
            else:
                await anyio.to_thread.run_sync(self.proc.wait, abandon_on_cancel=True)
        return self.proc.wait()

    def alive(self) -> bool:
        """Whether any process of the group still runs (the leader is reaped on the way)."""
        self.proc.poll()
        return _group_alive(self.pgid)

    async def terminate(self, grace: float) -> bool:
        """SIGTERM the whole group, SIGKILL what is left after ``grace`` seconds.

        Returns at once when nothing runs, and once every process is gone otherwise; ``True``
        if there was anything to signal. A group that is gone is forgotten by the reaper.
        """
        signalled = False
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, _KILL_WAIT_S)):
            if not self.alive():
                break
            try:
                os.killpg(self.pgid, sig)
            except OSError:
                break
            signalled = True
            if await self._gone_within(wait):
                break
        if not self.alive():
            _reaper.forget(self.pgid)
        return signalled

    async def _gone_within(self, seconds: float) -> bool:
        # No event tells when a whole group is gone: poll, briefly at first.
        delay = 0.002
        deadline = anyio.current_time() + seconds
        while self.alive():
            if anyio.current_time() >= deadline:
                return False
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.05)
        return True

    def close(self) -> None:
        """Close the read ends of the pipes (idempotent)."""
        for name in ("stdout", "stderr"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)
