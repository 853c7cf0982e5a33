"""Process trees for commands: spawn, wait, stop, and never outlive the agent (nor escape it).

Every command is started by the agent's guard process (``_warden``: one per agent, started on
first use with a near-empty environment), which forks a *warden* per command. The command leads a
new process group (in the guard's session, which has no controlling terminal), so its group can be
signalled at once; it reads the stdin it is given and writes to
pipes of its own, never the agent's (whose stdout is the protocol). The warden is a child
subreaper: a descendant that leaves the group (``setsid``, a double fork) is re-parented to it
when its parent dies, so stopping a command reaches its whole tree. The agent talks to each warden
over a socket; when the agent dies (SIGKILL, OOM killer: no ``finally`` runs) the kernel closes
those sockets, and each warden kills its tree.

Spawning this way costs the agent a message to a warden forked ahead of need, not a fork: the
time does not grow with the agent's memory. The guard is started by ``subprocess`` without a
``preexec_fn``, so even that first spawn uses ``vfork``.
"""

from __future__ import annotations

import atexit
import errno
import marshal
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from ._environ import protect_environment
from ._pipes import widen_pipe

__all__ = ["GuardedProcess", "ProcessGroup", "signal_name", "spawn_group", "spawn_guarded"]

_KILL_WAIT_S = 2.0
"""How long to wait for SIGKILLed processes to be gone (only a process stuck in the kernel lasts)."""
_START_TIMEOUT_S = 30.0
"""How long a spawn may wait for the guard (its first start imports a few modules)."""
_MESSAGE_BYTES = 1 << 16
"""Room for the longest message a warden sends (``F`` with a path): a datagram read short is cut."""
_WARDEN = str(Path(__file__).with_name("_warden.py"))
# The guard's own environment: what /proc/<guard>/environ shows. Nothing of the agent's.
_GUARD_ENV = {"LC_ALL": "C.UTF-8"}


_PLAIN, _ISOLATED = b"P", b"I"
"""The kinds of wardens (see ``_warden``): plain, or already in namespaces of its own for a
sandboxed command without network."""


class _Guard:
    """The agent's side of the guard process: the socket wardens come from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0  # the pid that started the guard: a forked agent needs its own
        self._held: dict[bytes, list[socket.socket]] = {_PLAIN: [], _ISOLATED: []}
        """Wardens the guard offered, read while waiting for one of another kind."""
        self._asked_isolated = False

    def spawn(
        self,
        argv: Sequence[str],
        cwd: str | None,
        env: Mapping[str, str],
        fds: tuple[int, int, int],
        plan: Mapping[str, Any] | None = None,
    ) -> socket.socket:
        """Hand ``argv`` to a warden, ``fds`` its stdin, stdout and stderr, ``plan`` the sandbox
        it runs in; the job socket, on which the warden says (``P``/``F``) whether it started."""
        payload = marshal.dumps((list(argv), cwd, dict(env), None if plan is None else dict(plan)))
        kind = _ISOLATED if plan is not None and not plan.get("network", True) else _PLAIN
        job, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                for attempt in range(3):
                    warden = self._warden(kind)
                    try:
                        socket.send_fds(warden, [payload], [*fds, theirs.fileno()])
                        break
                    except (BrokenPipeError, ConnectionError):
                        if attempt == 2:  # wardens that die as they start: give up rather than loop
                            raise
                    finally:
                        warden.close()
        except BaseException:
            job.close()
            raise
        finally:
            theirs.close()
        job.setblocking(False)
        return job

    def _warden(self, kind: bytes) -> socket.socket:
        """A socket to a warden of ``kind`` ready for a request (the guard sends them ahead of
        need; the first isolated one is asked for when first needed)."""
        for attempt in range(2):
            guard = self._ready()
            held = self._held[kind]
            if not held and kind == _ISOLATED and not self._asked_isolated:
                self._asked_isolated = True
                self._tell_guard(guard, b"N" + kind)
            while not held and self._receive(guard):
                pass
            if held:
                self._tell_guard(guard, b"N" + kind)  # prepare the next one
                return held.pop(0)
            if attempt:
                break
            self._close()  # the guard went away (killed?): start another
        raise OSError(errno.EIO, "the process guard did not answer")

    def _receive(self, guard: socket.socket) -> bool:
        """Read the next warden the guard offers into ``_held``; ``False`` if it is gone."""
        try:
            message, fds, _flags, _addr = socket.recv_fds(guard, 16, 1)
        except OSError:
            return False
        if not fds:
            return False
        os.set_inheritable(fds[0], False)  # received descriptors come without close-on-exec
        warden = socket.socket(fileno=fds[0])
        kind = message[1:2]
        if kind not in self._held:
            warden.close()
        else:
            self._held[kind].append(warden)
        return True

    @staticmethod
    def _tell_guard(guard: socket.socket, message: bytes) -> None:
        try:
            guard.send(message)
        except OSError:
            pass  # the guard went away: the next spawn starts another

    def _ready(self) -> socket.socket:
        if self._socket is None or self._owner != os.getpid():
            if self._owner != os.getpid():  # a forked agent: what it holds is its parent's
                self._held, self._asked_isolated = {_PLAIN: [], _ISOLATED: []}, False
            protect_environment()  # before the first child exists
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", _WARDEN],
                    stdin=theirs.fileno(),
                    stdout=subprocess.DEVNULL,
                    env=_GUARD_ENV,
                    start_new_session=True,  # a Ctrl-C or kill aimed at the agent's group spares it
                )
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
            ours.settimeout(_START_TIMEOUT_S)
            self._socket, self._owner = ours, os.getpid()
        return self._socket

    def _close(self) -> None:
        """Close our socket: the guard ends once its wardens have (each kills what is left)."""
        sock, self._socket = self._socket, None
        proc, self._proc = self._proc, None
        held, self._held = self._held, {_PLAIN: [], _ISOLATED: []}
        self._asked_isolated = False
        if sock is None or self._owner != os.getpid():
            return
        for warden in (*held[_PLAIN], *held[_ISOLATED]):
            warden.close()
        sock.close()
        if proc is not None and proc.poll() is None:
            # Not waited for: a warden whose job is still open in this process ends with it.
            threading.Thread(target=proc.wait, name="guard reaper", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._close()


_guard = _Guard()
# A normal exit closes the sockets the same way a crash would, so whatever still runs dies with us.
atexit.register(_guard.close)


class GuardedProcess:
    """A process handed to a warden by ``spawn_guarded``: ``await started()`` for its leader's
    pid (also its group id) or why it could not start; then its exit status once known, and
    control over its whole tree, which its warden keeps.

    Several tasks may wait on it at once (a background command's pump waits for its exit while
    ``bash_kill`` waits for its tree to go): one of them waits on the socket, the others for it;
    the socket is closed only once nobody waits on it.
    """

    def __init__(self, job: socket.socket) -> None:
        self.returncode: int | None = None
        """The leader's exit status once it exited (negative: killed by that signal)."""
        self._job = job
        self._gone = False
        self._pid: int | None = None
        self._start_error: OSError | None = None
        self._waiting = 0
        self._readable: anyio.Event | None = None
        """Set when the task that waits on the socket is done waiting (the others wait for it)."""
        self._closing = False

    async def started(self) -> int:
        """Until the command runs: its pid. ``OSError`` if it could not start (the process is then
        gone). The spawn itself only hands the command over: the agent never waits for it."""
        while self._pid is None and not self._gone:
            await self._event()
        return self._started()

    @property
    def pid(self) -> int:
        """The leader's pid (blocks until the warden says it, if ``started()`` was not awaited)."""
        if self._pid is None and not self._gone:
            self._job.settimeout(_START_TIMEOUT_S)
            try:
                self._read(self._job.recv(_MESSAGE_BYTES))
            except OSError:
                self._gone = True
            finally:
                self._job.setblocking(False)
        return self._started()

    def _started(self) -> int:
        if self._pid is not None:
            return self._pid
        raise self._start_error or OSError(errno.EIO, "the process guard could not start the command")

    def _read(self, message: bytes) -> None:
        kind = message[:1]
        try:
            if kind == b"P":
                self._pid = int(message[1:])
            elif kind == b"F":
                code, text, filename = message[1:].decode("utf-8", "surrogateescape").split("\0")
                self._start_error = OSError(int(code) or errno.EIO, text, filename or None)
                self._gone = True
            elif kind == b"X":
                self.returncode = int(message[1:].rstrip(b"E"))
        except ValueError:  # not what a warden says (the command, in its sandbox, can reach it)
            self._gone = True
        if message[-1:] == b"E" or not message:  # E, or the warden is gone: nothing is left
            self._gone = True

    def poll(self) -> int | None:
        """The leader's exit status if it has exited, else ``None`` (never blocks)."""
        self._pump()
        return self.returncode

    def alive(self) -> bool:
        """Whether any process of the tree still runs."""
        self._pump()
        return not self._gone

    def _pump(self) -> bool:
        """Read what the warden said; whether it said anything."""
        heard = False
        while not self._gone:
            try:
                message = self._job.recv(_MESSAGE_BYTES)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                message = b""
            heard = True
            self._read(message)
        return heard

    async def _event(self) -> None:
        """Until the warden says something (or goes)."""
        if self._pump() or self._gone:
            return
        if self._readable is not None:  # another task waits on the socket: anyio allows one
            await self._readable.wait()
            return
        self._readable = anyio.Event()
        self._waiting += 1
        try:
            await anyio.wait_readable(self._job)
        finally:
            readable, self._readable = self._readable, None
            readable.set()  # cancelled or not: a task that waited for this one now looks again
            self._waiting -= 1
            if self._closing and not self._waiting:
                self._job.close()
        self._pump()

    async def wait(self) -> int | None:
        """Until the leader exits; its status (``None`` if its warden was killed before telling)."""
        while self.returncode is None and not self._gone:
            await self._event()
        return self.returncode

    async def wait_gone(self, seconds: float) -> bool:
        """Whether the whole tree is gone within ``seconds``."""
        with anyio.move_on_after(seconds):
            while not self._gone:
                await self._event()
        return self._gone

    def terminate_tree(self) -> None:
        """SIGTERM the group and every process that left it."""
        self._tell(b"T")

    def kill_tree(self) -> None:
        """SIGKILL the whole tree, again and again until nothing of it is left."""
        self._tell(b"K")

    def _tell(self, message: bytes) -> None:
        try:
            self._job.send(message)
        except OSError:
            pass  # the warden is gone, and the tree with it

    def close(self) -> None:
        """Let go of the tree: whatever still runs of it is killed (idempotent)."""
        if self._closing or self._job.fileno() < 0:
            return
        self._pump()
        self._closing = self._gone = True
        try:
            # The warden sees the end now (and kills what is left); a thread waiting on the socket
            # wakes up, and the last one out closes it.
            self._job.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if not self._waiting:
            self._job.close()


def spawn_guarded(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    stdin: int,
    stdout: int,
    stderr: int,
    sandbox: Mapping[str, Any] | None = None,
) -> GuardedProcess:
    """Hand ``argv`` to a warden, to run leading a new process group (see the module's docstring);
    ``await process.started()`` for its pid, or the ``OSError`` that kept it from starting.

    ``stdin``, ``stdout`` and ``stderr`` are file descriptors, or ``subprocess.DEVNULL``; the
    caller keeps (and closes) its own. ``sandbox``, a plan from ``dsh_tools.sandbox``, confines
    the command and all it starts (a plan that cannot be applied keeps it from starting).
    ``OSError`` when the guard cannot be reached. Any thread may call it.
    """
    devnull = -1
    if subprocess.DEVNULL in (stdin, stdout, stderr):
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        fds = tuple(devnull if fd == subprocess.DEVNULL else fd for fd in (stdin, stdout, stderr))
        job = _guard.spawn(argv, cwd, env, (fds[0], fds[1], fds[2]), sandbox)
    finally:
        if devnull >= 0:
            os.close(devnull)
    return GuardedProcess(job)


def spawn_group(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    stdin: int,
    sandbox: Mapping[str, Any] | None = None,
) -> tuple[GuardedProcess, int, int]:
    """``spawn_guarded`` with new pipes for stdout and stderr: the process and their read ends."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for fd in (out_r, err_r):  # a command that prints a lot runs ahead of us in bigger steps
        widen_pipe(fd)
    try:
        process = spawn_guarded(
            argv, cwd=cwd, env=env, stdin=stdin, stdout=out_w, stderr=err_w, sandbox=sandbox
        )
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return process, out_r, err_r


def signal_name(returncode: int | None) -> str | None:
    """``"SIGTERM"`` for a process killed by SIGTERM (a negative return code), else ``None``."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"SIG{-returncode}"


class ProcessGroup:
    """A ``bash -c`` command and its whole tree, with its stdout and stderr pipes.

    ``stdout`` and ``stderr`` are the non-blocking read ends; ``close()`` closes them and lets go
    of the tree (whatever still runs of it is killed).
    """

    def __init__(self, proc: GuardedProcess, stdout: int, stderr: int) -> None:
        self.proc = proc
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        sandbox: Mapping[str, Any] | None = None,
    ) -> ProcessGroup:
        """Start ``argv`` in ``cwd`` (confined to the ``sandbox`` plan, if any); raises ``OSError``
        when it cannot start."""
        proc, out_r, err_r = spawn_group(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, sandbox=sandbox)
        group = cls(proc, out_r, err_r)
        try:
            await proc.started()
        except BaseException:
            group.close()  # the warden kills whatever did start
            raise
        os.set_blocking(out_r, False)
        os.set_blocking(err_r, False)
        return group

    @property
    def returncode(self) -> int | None:
        """The leader's exit status once it exited (negative: killed by that signal)."""
        return self.proc.poll()

    async def wait(self) -> int | None:
        """Until the leader exits; its status (``None`` if that could not be learned)."""
        return await self.proc.wait()

    def alive(self) -> bool:
        """Whether any process of the tree still runs, in the group or out of it."""
        return self.proc.alive()

    async def terminate(self, grace: float) -> bool:
        """SIGTERM the whole tree, SIGKILL what is left after ``grace`` seconds.

        Returns at once when nothing runs, and once every process is gone otherwise; ``True``
        if there was anything to signal.
        """
        if not self.proc.alive():
            return False
        self.proc.terminate_tree()
        if not await self.proc.wait_gone(grace):
            self.proc.kill_tree()
            await self.proc.wait_gone(_KILL_WAIT_S)
        return True

    def close(self) -> None:
        """Close the read ends of the pipes and let go of the tree (idempotent)."""
        for name in ("stdout", "stderr"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)
        self.proc.close()
