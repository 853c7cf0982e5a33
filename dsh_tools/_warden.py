"""The guard process: started once per agent, it prepares a warden for every command.

Run as ``python -I -S _warden.py`` with a ``SOCK_SEQPACKET`` socket to the agent as its stdin; it
imports only the standard library and is never imported by the agent (its behaviour is tested
through ``_process``, which drives it). The *guard* forks *wardens* ahead of need and hands the
agent a socket to each (message ``S<kind>`` with the socket in ``SCM_RIGHTS``); the agent sends a
spawn request straight to a warden it holds, then asks for the next of that kind (``N<kind>``).
Wardens are of two kinds: ``P`` (plain) and ``I`` (isolated: already in user, mount and network
namespaces of their own, for the commands whose sandbox cuts the network — most of them — so that
what costs most in a confinement is done before the command is asked for). The guard forks
isolated wardens only once the agent asked for one. Guard and wardens are
child subreapers (``PR_SET_CHILD_SUBREAPER``, Linux): a process that leaves its group (``setsid``,
a double fork) and loses its parent is re-parented to its warden, never to init, so the warden can
always find it.

A request is one message: ``marshal`` of ``(argv, cwd, env, plan)`` carrying four descriptors in
``SCM_RIGHTS`` (the command's stdin, stdout and stderr, and the warden's end of a socket pair whose
other end the agent keeps: the *job socket*). The warden first confines itself to the sandbox
``plan`` if there is one (``_confine``: the command and all it starts inherit it; a plan that
cannot be applied is a command that does not start), then starts the command leading a new
process group (in the guard's session, which has no controlling terminal) and speaks on the job
socket:

- warden → agent: ``P<pid>`` once started (or ``F<errno>\\0<strerror>\\0<filename>`` if it could not),
  ``X<returncode>`` when the leader exits (``-N``: killed by signal N), ``E`` when no process of the
  tree is left, then it exits (``X<returncode>E`` when both happen at once).
- agent → warden: ``T`` (SIGTERM the tree), ``K`` (SIGKILL it until nothing is left). The job
  socket closing (the agent closed it, exited or was SIGKILLed) means ``K``.

The guard sees its own socket close when the agent is gone; it then waits for its wardens (each
of which saw its job socket close and is killing its tree, or saw the agent's end of its request
socket close and exits) and SIGKILLs anything a killed warden left to it. Everything a warden
spawns runs with the environment the agent sent; their own environment is the near-empty one the
agent started the guard with, so nothing reading ``/proc/<pid>/environ`` up the tree finds the
agent's secrets here.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import marshal
import os
import select
import signal
import socket
import sys
import time

TYPE_CHECKING = False  # not typing's (see _confine)
if TYPE_CHECKING:
    from dsh_tools import _confine
else:
    # -I leaves this file's folder off sys.path: the confinement is a sibling, stdlib-only too.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _confine

__all__ = ["main"]

_PR_SET_CHILD_SUBREAPER = 36
_MAX_REQUEST = 4 << 20
_KILL_PASS_S = 0.01
"""How often a tree being killed is searched again: a process re-parented to us sends no signal."""
_READY_WARDENS = 2
"""How many wardens of a kind the agent holds ready: two commands in quick succession need not
wait for a fork."""
_PLAIN, _ISOLATED = b"P", b"I"
_REPLENISH_DELAY_S = 0.003
_GIVE_UP_S = 30.0
"""How long to keep killing a tree that will not die (a process stuck in the kernel) before leaving."""


def _subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: escapees go to init, as they would without us


def _children() -> list[int]:
    """Our live children (zombies included), from /proc."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as listing:
            return [int(pid) for pid in listing.read().split()]
    except FileNotFoundError:  # a kernel without CONFIG_PROC_CHILDREN: scan every process
        pass
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    if int(stat.read().rpartition(b")")[2].split()[1]) == me:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _signal(pid: int, sig: int) -> None:
    # Its group too: a child that is a group leader (every setsid escapee is) takes its members.
    for send in (os.killpg, os.kill):
        try:
            send(pid, sig)
        except OSError:
            pass


def _reap(leader: int) -> tuple[int | None, bool]:
    """Reap every dead child: the leader's return code if it was one of them, and whether any
    child is left."""
    code = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return code, False
        if pid == 0:
            return code, True
        if pid == leader:
            code = os.waitstatus_to_exitcode(status)


def _send(job: socket.socket, message: bytes) -> None:
    try:
        job.send(message)
    except OSError:
        pass  # the agent is gone: nobody to tell


def _find(argv: list[str], env: dict[str, str]) -> str:
    """The program ``argv[0]`` names, searched in ``env``'s PATH as ``subprocess`` would."""
    name = argv[0]
    candidates = [name] if "/" in name else [os.path.join(d, name) for d in os.get_exec_path(env)]
    path = next((c for c in candidates if os.path.isfile(c) and os.access(c, os.X_OK)), None)
    if path is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    return path


def _start(
    argv: list[str], cwd: str | None, env: dict[str, str], stdin: int, stdout: int, stderr: int
) -> int:
    """``posix_spawn`` the command leading a new process group; its pid.

    Not ``subprocess``: in a freshly forked process every object it touches is a page to copy,
    and that, not the spawn, would be most of the time.
    """
    if cwd is not None:
        os.chdir(cwd)  # this process is the command's alone: its directory can be the command's
    return os.posix_spawn(
        _find(argv, env),
        argv,
        env,
        file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate((stdin, stdout, stderr))],
        # A group of its own, in the guard's session (which has no controlling terminal): not a
        # session of its own, as setsid also makes a scheduler autogroup, costing milliseconds.
        setpgroup=0,
        setsigmask=(),
        # What this process ignores, the command must not: exec keeps an ignored signal ignored.
        setsigdef=(signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD),
    )


def _confine_for(plan: object, kind: bytes, isolation: OSError | None) -> None:
    """Apply the request's sandbox plan (an isolated warden has its namespaces already)."""
    if kind == _ISOLATED:
        if isolation is not None:
            raise isolation
        if not isinstance(plan, dict):
            raise OSError(errno.EINVAL, "an isolated warden starts only sandboxed commands")
        _confine.confine(plan, isolated=True)
    elif plan is not None:
        _confine.confine(plan)  # type: ignore[arg-type]


def _warden(requests: socket.socket, kind: bytes) -> None:
    """One command's keeper: a fork of the guard, made before its request comes (never returns).

    Everything that does not need the request is done first, off the path of the spawn: an
    isolated warden's namespaces, and warming what runs later (in a freshly forked process each
    page the code writes to is copied at first touch).
    """
    isolation: OSError | None = None
    if kind == _ISOLATED:
        try:
            _confine.isolate()
        except OSError as error:  # told to the agent when it asks for a command here
            isolation = error
    gc.disable()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the poll below
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    _subreaper()
    poller = select.poll()
    poller.register(wake_r, select.POLLIN)
    _warm()
    job, leader = _start_requested(requests, kind, isolation)
    poller.register(job, select.POLLIN)
    _keep(job, leader, poller, wake_r)


def _warm() -> None:
    for warm in (
        lambda: _find(["sh"], {"PATH": "/"}),
        lambda: marshal.loads(marshal.dumps(([""], None, {}, None))),
        _confine.warm,
    ):
        try:
            warm()
        except OSError:
            pass


def _start_requested(
    requests: socket.socket, kind: bytes, isolation: OSError | None
) -> tuple[socket.socket, int]:
    """Wait for the request, start its command and tell the agent: the job socket and the
    command's pid. Exits when there is no request, or the command could not start."""
    try:
        request, fds, _flags, _addr = socket.recv_fds(requests, _MAX_REQUEST, 4)
    except OSError:
        os._exit(0)
    requests.close()
    if len(fds) != 4:
        os._exit(0)  # the agent is gone (no request), or a malformed one: nothing to keep
    stdin, stdout, stderr, job_fd = fds
    for fd in fds:  # descriptors received in a message come without close-on-exec
        os.set_inheritable(fd, False)
    job = socket.socket(fileno=job_fd)
    argv, cwd, env, plan = marshal.loads(request)
    try:
        _confine_for(plan, kind, isolation)
        leader = _start(argv, cwd, env, stdin, stdout, stderr)
    except OSError as error:
        parts = (error.strerror or str(error), "" if error.filename is None else os.fsdecode(error.filename))
        _send(job, b"F%d\0" % (error.errno or 0) + "\0".join(parts).encode("utf-8", "surrogateescape"))
        os._exit(0)
    for fd in (stdin, stdout, stderr):
        os.close(fd)
    _send(job, b"P%d" % leader)
    return job, leader


def _keep(job: socket.socket, leader: int, poller: select.poll, wake_r: int) -> None:
    """Tell the agent when the command exits and when its tree is gone (then exit); signal the
    tree when the agent says so, and kill it, pass after pass, once told to or left alone."""
    killing_since: float | None = None
    while True:
        _report_exits(job, leader)
        if killing_since is not None:
            if time.monotonic() - killing_since > _GIVE_UP_S:
                os._exit(1)
            _signal_tree(leader, signal.SIGKILL)
        for fd, events in poller.poll(None if killing_since is None else _KILL_PASS_S * 1000):
            if fd == wake_r:
                os.read(wake_r, 512)
                continue
            message = _job_message(job, events)
            if message == b"T":
                _signal_tree(leader, signal.SIGTERM)
            elif message == b"K" or not message:  # K, or the agent closed the job socket
                if not message:
                    poller.unregister(job)
                if killing_since is None:
                    killing_since = time.monotonic()


def _report_exits(job: socket.socket, leader: int) -> None:
    """Reap what exited; tell the leader's exit code, and exit when no process of the tree is left."""
    code, left = _reap(leader)
    # One message when the leader was the last: the agent never sees it exited with its tree
    # still there when it was not.
    report = b"" if code is None else b"X%d" % code
    if not left:
        _send(job, report + b"E")
        os._exit(0)
    if report:
        _send(job, report)


def _signal_tree(leader: int, sig: int) -> None:
    _signal(leader, sig)
    for child in _children():
        _signal(child, sig)


def _job_message(job: socket.socket, events: int) -> bytes:
    """What the agent sent on the job socket; ``b""`` when it closed it."""
    if events & select.POLLIN:
        try:
            return job.recv(16)
        except OSError:
            return b""
    return b""


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the agent's terminal is not for us
    _subreaper()
    agent = socket.socket(fileno=0)
    wardens: set[int] = set()

    def reap_wardens(*_: object) -> None:
        # A warden that died (killed by its own command, say) left its tree to us: kill it.
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
            wardens.discard(pid)
        for child in _children():
            if child not in wardens:
                _signal(child, signal.SIGKILL)

    def fork_warden(kind: bytes) -> socket.socket:
        """A new warden of ``kind``, waiting for its request on the socket returned."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # SIGCHLD waits until the new warden is in the set: never mistaken for a stray.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            pid = os.fork()
            if pid == 0:
                try:
                    agent.close()
                    ours.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    _warden(theirs, kind)
                finally:
                    os._exit(1)
            wardens.add(pid)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            theirs.close()
        return ours

    def offer(kind: bytes) -> None:
        """Fork a warden of ``kind`` and hand the agent its socket: the agent's next spawn of that
        kind goes to it directly."""
        try:
            warden = fork_warden(kind)
        except OSError:
            return  # the agent waits for a warden, and reports it could not start the command
        try:
            socket.send_fds(agent, [b"S" + kind], [warden.fileno()])
        except OSError:
            pass  # the agent is gone: the warden sees its socket close, and exits
        finally:
            warden.close()

    signal.signal(signal.SIGCHLD, reap_wardens)
    _confine.prepare()  # what every confinement needs, computed once, before the wardens fork
    gc.freeze()  # what exists now is never collected: a collection in a fork would copy it all
    for _ in range(_READY_WARDENS):
        offer(_PLAIN)
    isolated_offered = False
    while True:
        try:
            message = agent.recv(16)
        except OSError:
            break
        if not message:
            break  # the agent is gone (or closed us): each warden sees its own job socket close
        kind = message[1:2]
        if message[:1] == b"N" and kind in (_PLAIN, _ISOLATED):  # the agent took one: the next
            if kind == _ISOLATED and not isolated_offered:
                isolated_offered = True  # the first one asked for: it waits, the next is ready
                offer(_ISOLATED)
                time.sleep(_REPLENISH_DELAY_S)
            else:
                # Not at once: the spawn that warden is doing would have to share the CPU with the fork.
                time.sleep(_REPLENISH_DELAY_S)
            offer(kind)
    # Stay the subreaper of last resort until every warden has finished its tree.
    deadline = time.monotonic() + _GIVE_UP_S
    while time.monotonic() < deadline:
        reap_wardens()
        if not _children():
            break
        time.sleep(_KILL_PASS_S)


if __name__ == "__main__":
    main()
    sys.exit(0)
