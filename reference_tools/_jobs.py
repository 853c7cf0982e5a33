"""Running commands for ``bash``: one ``Job`` per command, one ``Shell`` per session.

A job pumps its two pipes into bounded captures (reporting live text on the way), waits for its
leader, then stops whatever the command left behind in its group. A foreground job is pumped by
the tool call itself; a background job by a task in the session's ``SessionTasks``, so that it
outlives the call and ends with the session.
"""

from __future__ import annotations

import codecs
import logging
import math
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import anyio

from dsh_tools import BOUND_BYTES, ProgressSink, SessionTasks, TerminalOutput, without_secrets
from dsh_tools.processes import ProcessGroup, signal_name
from dsh_tools.sandbox import SandboxPolicy

from ._capture import StreamCapture
from ._heap import keep_freed_heap

__all__ = ["BashSettings", "Job", "Shell", "SpawnError", "command_env"]

_log = logging.getLogger("reference_tools.bash")
_CHUNK = 256 * 1024  # a read takes this much of what a widened pipe holds


@dataclass(frozen=True, slots=True)
class BashSettings:
    """How ``bash`` runs commands; put one in a session's ``Services`` to change the defaults.

    The settings a session's first command finds are the ones it keeps.
    """

    default_timeout_s: float = 120.0
    max_timeout_s: float = 600.0
    """Longer ``timeout_ms`` values are clamped to this."""
    kill_grace_s: float = 2.0
    """How long a command has to exit after SIGTERM before SIGKILL."""
    settle_s: float = 0.25
    """How long to wait for output still in flight once the shell has exited or been killed."""
    head_bytes: int = BOUND_BYTES
    tail_bytes: int = BOUND_BYTES
    """What the model sees of each stream: its first and last bytes."""
    spill_dir: str | None = None
    """Where full outputs are saved; by default a fresh private temporary directory per session.
    Removed with the session if this created it (files written in it are removed either way)."""
    spill_limit_bytes: int | None = 1 << 30
    """Save at most this much of each stream, so a runaway command cannot fill the disk."""
    scrub_secret_env: bool = True
    """Drop the environment variables that carry secrets (``dsh_tools.is_secret_variable``: by
    name, by the shape of the value, or a random-looking value under a name that hints at one)."""
    keep_env: frozenset[str] = frozenset()
    """Names passed through even though they look secret."""
    shell: str = "bash"


def command_env(settings: BashSettings, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a command runs with: ``base`` (default ``os.environ``) minus secrets,
    with colour and pagers off because nobody is at a terminal to page."""
    env = dict(os.environ if base is None else base)
    if settings.scrub_secret_env:
        env = without_secrets(env, settings.keep_env)
    env.update(NO_COLOR="1", TERM="dumb", PAGER="cat", GIT_PAGER="cat")
    return env


class SpawnError(Exception):
    """The command could not start (its message is for the model)."""


class Job:
    """One command: its process group, its captured streams and how it ended."""

    def __init__(self, name: str, command: str, cwd: str, process: ProcessGroup, shell: Shell) -> None:
        self.name, self.command, self.cwd, self.process = name, command, cwd, process
        settings = self._settings = shell.settings

        def capture(label: str) -> StreamCapture:
            return StreamCapture(
                label,
                head=settings.head_bytes,
                tail=settings.tail_bytes,
                spill_path=lambda: shell.spill_path(f"{name}.{label}"),
                spill_limit=settings.spill_limit_bytes,
            )

        self.stdout, self.stderr = capture("stdout"), capture("stderr")
        # Not saved itself: the streams are, and writing every byte to disk twice would double the
        # cost of the copy (the largest cost but one of a command that prints a lot).
        self.terminal = StreamCapture(
            "output", head=settings.head_bytes, tail=settings.tail_bytes, spill_path=None, note=self._saved
        )
        """Both streams interleaved as they arrived: what a terminal showed (and a replay shows)."""
        self.error: str | None = None
        """Why the command did not finish on its own (timed out), else ``None``."""
        self.stopped_leftovers = False
        """Whether processes the command left running were stopped when it ended."""
        self._stopping = False
        """Whether ``stop()`` was called: then whatever is still in the group when the leader is
        gone is going down with it, not something the command left behind."""
        self.finished = anyio.Event()
        """Set once the output is complete and the group is gone (or given up on)."""

    def _saved(self) -> str:
        saved = [
            f"full {c.label} saved to {c.path}" for c in (self.stdout, self.stderr) if c.path is not None
        ]
        return "; ".join(saved) or "each stream was short enough to be returned in full"

    @property
    def exit_code(self) -> int | None:
        """The leader's exit code; ``None`` while running or when a signal killed it."""
        code = self.process.returncode
        return code if code is not None and code >= 0 else None

    @property
    def signal(self) -> str | None:
        """The signal that killed the leader (``"SIGTERM"``), if one did."""
        return signal_name(self.process.returncode)

    async def run(self, report: ProgressSink | None, time_limit: float = math.inf) -> None:
        """Pump the output until the command is over, then stop what it left running.

        On cancellation the caller must ``stop()`` the job (``Shell.run`` does).
        """
        try:
            # One report at a time, in the order chunks arrived; taking it free must not yield.
            lock = anyio.Lock(fast_acquire=True)
            async with anyio.create_task_group() as tasks:
                readers = [anyio.Event(), anyio.Event()]
                tasks.start_soon(self._read, self.process.stdout, self.stdout, report, lock, readers[0])
                tasks.start_soon(self._read, self.process.stderr, self.stderr, report, lock, readers[1])

                async def drained(seconds: float) -> bool:
                    with anyio.move_on_after(seconds):
                        for done in readers:
                            await done.wait()
                    return all(done.is_set() for done in readers)

                with anyio.move_on_after(time_limit) as waiting:
                    await self.process.wait()
                if waiting.cancelled_caught:
                    self.error = f"timed out after {time_limit:g} s"
                else:
                    # Give output still in flight (a process substitution, say) a moment first.
                    await drained(self._settings.settle_s)
                # Whatever still runs in the group would hold our pipes open: the command is over.
                stopped = await self.process.terminate(self._settings.kill_grace_s)
                self.stopped_leftovers = stopped and self.error is None and not self._stopping
                if not await drained(self._settings.settle_s):
                    tasks.cancel_scope.cancel()  # a process that left the group holds a pipe
        finally:
            self.process.close()
            self.stdout.close()
            self.stderr.close()
            self.terminal.close()
            self.finished.set()

    async def _read(
        self,
        fd: int,
        capture: StreamCapture,
        report: ProgressSink | None,
        lock: anyio.Lock,
        done: anyio.Event,
    ) -> None:
        # Never splits a character; a byte that is not UTF-8 is shown as \xNN.
        decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
        while True:
            try:
                data = os.read(fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            if len(data) == _CHUNK:  # a flood: the pipe held a whole read
                keep_freed_heap()
            capture.feed(data)
            text = decoder.decode(data, final=not data)
            if text:
                async with lock:  # the terminal capture and the live stream see the same order
                    # ASCII text as long as the read is the read itself: no copy of a flood's
                    # every byte (a character completed from the last read, or a byte shown as
                    # \xNN, makes the lengths differ).
                    self.terminal.feed(data if len(text) == len(data) and text.isascii() else text.encode())
                    if report is not None:
                        await report(TerminalOutput(text))
            if not data:
                break
            # A command that prints without pause never makes read block: let others run.
            await anyio.lowlevel.checkpoint()
        done.set()

    async def wait_finished(self) -> bool:
        """Wait (a bounded time) until a job pumped by another task is finished."""
        with anyio.move_on_after(self._settings.kill_grace_s + 2 * self._settings.settle_s + 1):
            await self.finished.wait()
        return self.finished.is_set()

    async def stop(self) -> None:
        """Stop the whole group (SIGTERM, then SIGKILL after the grace period)."""
        self._stopping = True
        await self.process.terminate(self._settings.kill_grace_s)


class Shell:
    """A session's bash state: settings, spill directory and jobs. The session's ``Services``
    closes it, which stops every job it still runs and removes the spill files."""

    def __init__(self, settings: BashSettings) -> None:
        self.settings = settings
        self.tasks: dict[str, Job] = {}
        """Background jobs by task id."""
        self.host_failed = False
        """Whether the client's terminals failed once: commands then run here."""
        self._running: set[Job] = set()
        self._count: dict[Literal["cmd", "bg"], int] = {"cmd": 0, "bg": 0}
        self._dir: str | None = None
        self._made_dir = False
        self._paths: list[str] = []

    async def start(
        self, command: str, cwd: str, *, background: bool, policy: SandboxPolicy | None = None
    ) -> Job:
        """Spawn ``command`` in ``cwd`` (in the sandbox ``policy``, if any); raises ``SpawnError``
        when it cannot start."""
        if not os.path.isdir(cwd):  # noqa: ASYNC240 - one stat of a local directory
            raise SpawnError(f"the working directory {cwd} does not exist")
        env = command_env(self.settings)
        env["PWD"] = cwd  # bash trusts an inherited PWD that names the same directory (symlinks)
        argv: list[str] = [self.settings.shell, "-c", command]
        plan = None
        if policy is not None:
            env, argv, plan = policy.environment(env), policy.command(argv), policy.spawn_plan()
        try:
            process = await ProcessGroup.spawn(argv, cwd=cwd, env=env, sandbox=plan)
        except OSError as error:
            raise SpawnError(f"could not start {self.settings.shell}: {error}") from None
        kind: Literal["cmd", "bg"] = "bg" if background else "cmd"
        self._count[kind] += 1
        job = Job(f"{kind}-{self._count[kind]}", command, cwd, process, self)
        if background:
            self.tasks[job.name] = job
        else:
            self._running.add(job)
        return job

    async def run(self, job: Job, report: ProgressSink | None, time_limit: float) -> None:
        """Run a foreground job to its end; on cancellation stop its group, then re-raise."""
        try:
            await job.run(report, time_limit)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await job.stop()
            raise
        finally:
            self._running.discard(job)

    def run_in_background(self, job: Job, time_limit: float, tasks: SessionTasks) -> None:
        """Pump ``job`` in the session's ``tasks`` until it ends (or the session closes)."""

        async def pump() -> None:
            try:
                await job.run(None, time_limit)
            except Exception as error:  # a bug: never leave the command running unobserved
                _log.exception("reading the output of background task %s failed", job.name)
                job.error = f"its output could not be read ({error})"
                with anyio.CancelScope(shield=True):
                    await job.stop()
            except BaseException:  # the session closes: nothing it started outlives it
                with anyio.CancelScope(shield=True):
                    await job.stop()
                raise

        tasks.start_soon(pump, name=f"bash {job.name}")

    def spill_path(self, name: str) -> str:
        """A path for a spill file in the session's private directory (made on first use)."""
        if self._dir is None:
            if self.settings.spill_dir is None:
                import tempfile  # only once output spills: keeps the idle agent small

                self._dir, self._made_dir = tempfile.mkdtemp(prefix="dsh-bash-"), True
            else:
                self._dir = self.settings.spill_dir
                if not os.path.isdir(self._dir):
                    os.makedirs(self._dir, mode=0o700)
                    self._made_dir = True
        path = os.path.join(self._dir, name)
        self._paths.append(path)
        return path

    async def aclose(self) -> None:
        """Stop every job, wait for background pumps, remove the spill files."""
        with anyio.CancelScope(shield=True):
            jobs = [*self._running, *self.tasks.values()]
            async with anyio.create_task_group() as group:
                for job in jobs:
                    group.start_soon(job.stop)
            for job in self.tasks.values():
                if not await job.wait_finished():
                    _log.warning("background task %s did not finish", job.name)
        for path in self._paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        if self._made_dir and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._paths.clear()
