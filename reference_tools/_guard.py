"""Run a command so that nothing it starts outlives this process, however this process ends.

    python -I -S _guard.py PROGRAM [ARG...]

``bash`` starts commands in an ACP client's terminal through this script, because clients kill
only the process they started (Toad and acpx send it SIGKILL and leave its children running):
a cancelled ``make`` would go on building. Some clients start a shell that starts this script,
and kill the shell. The command runs in a new session (its own process group) with stdin from
/dev/null and this process's stdout and stderr (the client's terminal). Its group is stopped
(SIGTERM, then SIGKILL after a grace period) when this process ends by any means — a watchdog in
a session of its own holds the read end of a pipe only this process writes to, and acts when it
closes — and when this process's parent goes away (it checks every few hundredths of a second).
This process exits as the command did (with its code, or killed by its signal).

With ``DSH_SANDBOX_PLAN`` in its environment (a sandbox plan, ``marshal``, base64) it first
confines itself to that plan (``dsh_tools/_confine.py``), so the command and everything it
starts run in the sandbox; the variable is not passed on. A plan that cannot be applied is a
command that does not run (exit status 126).

Only the standard library, and nothing of it beyond ``os``/``signal``/``sys``/``time`` (and what
the confinement needs): it starts in a few milliseconds under ``-I -S``.
"""

import os
import signal
import sys
import time

__all__ = ["main"]

_GRACE_S = 2.0
_POLL_S = 0.05


def _watch(group: int, pipe: int) -> None:
    """The watchdog: wait for the pipe to close, then stop ``group``."""
    try:
        while os.read(pipe, 1):
            pass
    except OSError:
        pass
    _stop(group)


def _stop(group: int) -> None:
    """SIGTERM the process group, SIGKILL what is left after the grace period."""
    for sig, wait in ((signal.SIGTERM, _GRACE_S), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(group, sig)
        except OSError:
            return  # nothing left
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except OSError:
                return
            time.sleep(0.02)


def _end(command: int) -> int:
    """Stop the command's group and reap the command (its own zombie would look alive to a
    group signal); the watchdog then takes care of whatever of the group is left."""
    try:
        os.killpg(command, signal.SIGTERM)
    except OSError:
        pass
    deadline = time.monotonic() + _GRACE_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(command, os.WNOHANG)
        if done:
            return status
        time.sleep(_POLL_S)
    try:
        os.killpg(command, signal.SIGKILL)
    except OSError:
        pass
    return os.waitpid(command, 0)[1]


_PLAN = "DSH_SANDBOX_PLAN"
_CONFINE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dsh_tools")
"""Where ``_confine`` is: ``dsh_tools`` is installed beside this package (one distribution)."""


def _confine_self() -> str | None:
    """Apply the sandbox plan this process was given, if any; why it could not be, else ``None``."""
    encoded = os.environ.pop(_PLAN, None)
    if encoded is None:
        return None
    import binascii  # not base64, which imports re and enum: milliseconds on every command
    import marshal

    try:
        plan = marshal.loads(binascii.a2b_base64(encoded))
        sys.path.insert(0, _CONFINE)
        import _confine  # type: ignore[import-not-found]

        _confine.confine(plan)
    except Exception as error:  # whatever it was, the command must not run
        return str(error) or type(error).__name__
    return None


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: _guard.py PROGRAM [ARG...]", file=sys.stderr)
        return 2
    refused = _confine_self()
    if refused is not None:
        print(f"{argv[0]}: not started: {refused}", file=sys.stderr)
        return 126
    command = os.fork()
    if command == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        try:
            os.execvp(argv[0], argv)
        except OSError as error:
            print(f"{argv[0]}: {error.strerror}", file=sys.stderr)
        os._exit(127)
    read_end, write_end = os.pipe()
    watchdog = os.fork()
    if watchdog == 0:
        os.setsid()
        os.close(write_end)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # never keep the client's terminal open
            os.dup2(null, fd)
        _watch(command, read_end)
        os._exit(0)
    os.close(read_end)
    # Signals aimed at this process end it (and so the command); while it waits it ignores none.
    parent = os.getppid()
    while True:
        done, status = os.waitpid(command, os.WNOHANG)
        if done:
            break
        if os.getppid() != parent:  # whoever started this is gone: so is the command
            status = _end(command)
            break
        time.sleep(_POLL_S)
    os.close(write_end)  # the watchdog stops what the command left running, then exits
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
