"""The stdio transport of MCP servers: a child process, newline-delimited JSON-RPC on its pipes.

Ours rather than the SDK's ``stdio_client`` because the agent must know the process: its exit
status and last stderr lines explain a server that dies, and stopping it must reach its whole
process group (the SDK signals the group only when the server itself outlives the grace period,
so a helper the server started would survive a server that exits promptly).

The server leads a session of its own, so its group can be signalled at once and a Ctrl-C
aimed at the agent's group spares it; its stdin, stdout and stderr are pipes of ours, never the
agent's stdin/stdout. Stopping follows MCP's lifecycle: close its stdin, wait, SIGTERM the group,
wait, SIGKILL; then SIGKILL whatever is left of the group.

That stop needs a living agent. A SIGKILLed one runs no cleanup, and a server that ignores the end of
its stdin (or a helper it started, even one that left the group) would be orphaned; so the server is
started the way the bash tool starts commands (``dsh_tools.processes``): by the agent's guard
process, whose warden for it kills the whole tree when the agent dies, however it dies.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

from dsh_acp._safe_text import one_line
from dsh_acp.rpc._stdio import FdReceiveStream, FdSendStream
from dsh_tools.processes import spawn_group

if TYPE_CHECKING:
    from dsh_tools.processes import GuardedProcess

__all__ = ["StdioServerProcess"]

_log = logging.getLogger("dsh_acp.mcp")

EXIT_GRACE_S = 2.0
"""How long a server has to exit once its stdin is closed (MCP's polite shutdown)."""
TERM_GRACE_S = 1.0
"""How long it has after SIGTERM before SIGKILL."""
_KILL_WAIT_S = 2.0
"""How long to wait for a SIGKILLed process (only one stuck in the kernel lasts that long)."""
_SETTLE_S = 0.5
"""How long to let a dead server's exit status and last stderr lines arrive before quoting them."""
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_STDERR_TAIL_LINES = 20
_STDERR_LINE_CHARS = 2000
_STDERR_CHARS = 200
"""Characters of a dead server's last stderr line quoted in why it failed."""


class _ServerProcess:
    """The spawned server: its ``Popen`` and our ends of its pipes, as non-blocking streams."""

    def __init__(self, popen: GuardedProcess, stdin: int, stdout: int, stderr: int) -> None:
        self.popen = popen
        self.stdin = FdSendStream(stdin, close_fd=True)
        self.stdout = FdReceiveStream(stdout, close_fd=True)
        self.stderr = FdReceiveStream(stderr, close_fd=True)

    @property
    def pid(self) -> int:
        """The server's pid (a group leader's: also its process group id), once it started."""
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the server has exited (negative: killed by that signal)."""
        return self.popen.poll()

    @property
    def gone(self) -> bool:
        """Whether nothing of the server's tree runs any more (its status may never be known)."""
        return not self.popen.alive()

    async def aclose(self) -> None:
        """Close our ends of the pipes, then wait for the exit (bound it: this does not)."""
        with anyio.CancelScope(shield=True):  # a deadline between two closes must not leak the third
            for stream in (self.stdin, self.stdout, self.stderr):
                await stream.aclose()  # wakes a reader still waiting on it (ClosedResourceError)
        await _exit_of(self)


def _spawn(argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str]) -> _ServerProcess:
    """Start ``argv`` leading a new session, kept by a warden (``OSError`` if it cannot start)."""
    # Lazily: the guard process starts with the first server, and a session without one pays nothing.

    in_r, in_w = os.pipe()
    try:
        popen, out_r, err_r = spawn_group(argv, cwd=cwd, env=env, stdin=in_r)
    except BaseException:
        os.close(in_w)
        raise
    finally:
        os.close(in_r)
    return _ServerProcess(popen, in_w, out_r, err_r)


async def _exited(process: _ServerProcess, seconds: float) -> bool:
    """Whether the process exits within ``seconds``."""
    with anyio.move_on_after(seconds):
        await _exit_of(process)
    return process.returncode is not None


async def _exit_of(process: _ServerProcess) -> None:
    """Until the process has exited.

    Polls rather than waiting for the pipes to close, which a descendant holding them would
    delay indefinitely.
    """
    delay = 0.002
    while process.returncode is None and not process.gone:
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.05)


class StdioServerProcess:
    """One stdio MCP server process, from spawn to the end of its process group.

    ``open()`` spawns it and yields the SDK's stream pair; leaving it stops the process.
    ``on_end(reason)`` is called once the server can no longer answer (its stdout ended or it
    stopped reading its stdin), before the session sees the end of the stream, so a caller
    that gets "connection closed" can already tell that the server went away.
    """

    def __init__(
        self,
        name: str,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None,
        on_end: Callable[[str], None],
    ) -> None:
        self.name = name
        self.command = command
        self.args = tuple(args)
        self.env = dict(env)
        self.cwd = cwd
        self.pid: int | None = None
        self.returncode: int | None = None
        self.stderr_tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._on_end = on_end
        self._ended = False
        self._process: _ServerProcess | None = None
        self._stderr_done = anyio.Event()

    @asynccontextmanager
    async def open(
        self,
    ) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
    ]:
        """Spawn the server (``OSError`` when it cannot run) and yield ``(read, write)``."""

        async with AsyncExitStack() as stack:
            # Unwound in reverse: stop the process (the readers keep draining its pipes
            # meanwhile), close the streams, then end the pipe tasks.
            tasks = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tasks.cancel_scope.cancel)
            to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
            for stream in (to_session, from_server, to_server, from_session):
                stack.callback(stream.close)
            process = _spawn([self.command, *self.args], cwd=self.cwd, env=self.env)
            try:
                await process.popen.started()  # OSError if it could not start
            except BaseException:
                process.popen.close()  # its warden kills whatever did start
                with anyio.CancelScope(shield=True):
                    await process.stdin.aclose()
                    await process.stdout.aclose()
                    await process.stderr.aclose()
                raise
            # No await between the start and this: a cancellation there would leak the process.
            stack.push_async_callback(self._stop, process)
            self._process = process
            self.pid = process.pid
            tasks.start_soon(self._read_stdout, process.stdout, to_session)
            tasks.start_soon(self._write_stdin, process.stdin, from_session, to_session)
            tasks.start_soon(self._read_stderr, process.stderr)
            yield from_server, to_server

    async def exit_detail(self) -> str:
        """`` (exit code 3; stderr: "…")``: how the server ended, once known (bounded wait)."""
        parts: list[str] = []
        process = self._process
        if process is not None:
            await _exited(process, _SETTLE_S)
            code = process.returncode
            if code is not None and code >= 0:
                parts.append(f"exit code {code}")
            elif code is not None:
                try:
                    parts.append(f"killed by {signal.Signals(-code).name}")
                except ValueError:
                    parts.append(f"killed by signal {-code}")
        with anyio.move_on_after(_SETTLE_S):
            await self._stderr_done.wait()
        if self.stderr_tail:
            parts.append(f'stderr: "{one_line(self.stderr_tail[-1], _STDERR_CHARS)}"')
        return f" ({'; '.join(parts)})" if parts else ""

    # -- the pipes -------------------------------------------------------------------------------

    def _end(self, reason: str) -> None:
        if not self._ended:
            self._ended = True
            self._on_end(reason)

    async def _read_stdout(
        self, stdout: ByteReceiveStream, send: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:

        lines = BufferedByteReceiveStream(stdout)
        delivering = True
        reason = "it exited"
        try:
            while True:
                try:
                    line = await lines.receive_until(b"\n", _MAX_MESSAGE_BYTES)
                except anyio.DelimiterNotFound:
                    # Framing is lost: there is no telling where the next message starts.
                    reason = f"it wrote a line longer than {_MAX_MESSAGE_BYTES} bytes"
                    break
                except (
                    anyio.EndOfStream,
                    anyio.IncompleteRead,
                    anyio.ClosedResourceError,
                    anyio.BrokenResourceError,
                    OSError,
                ):
                    break
                if not delivering or not line.strip():
                    continue
                item: SessionMessage | Exception
                try:
                    item = SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
                except ValueError as error:  # the SDK's session logs and skips such items
                    item = error
                try:
                    await send.send(item)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    # The session is gone; keep draining so a server flushing its output can
                    # still read its stdin closing, and exit.
                    delivering = False
        finally:
            self._end(reason)
            send.close()

    async def _write_stdin(
        self,
        stdin: ByteSendStream,
        receive: MemoryObjectReceiveStream[SessionMessage],
        to_session: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        try:
            async for message in receive:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send(data.encode() + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            # The server stopped reading: nothing sent to it will be answered. A server that exited
            # closes its input too: then its exit is the cause to report, whichever pipe noticed
            # first.
            process = self._process
            exited = process is not None and await _exited(process, _SETTLE_S)
            self._end("it exited" if exited else "it stopped reading its input")
            to_session.close()
        finally:
            receive.close()

    async def _read_stderr(self, stderr: ByteReceiveStream) -> None:
        pending = b""
        try:
            async for chunk in stderr:
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._stderr_line(line)
                if len(pending) > _STDERR_LINE_CHARS:
                    self._stderr_line(pending)
                    pending = b""
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            if pending:
                self._stderr_line(pending)
            self._stderr_done.set()

    def _stderr_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").rstrip("\r")[:_STDERR_LINE_CHARS]
        if line.strip():
            self.stderr_tail.append(line)
        # Forwarded to the agent's stderr (its log, never the protocol), attributed.
        try:
            sys.stderr.write(f"[mcp {self.name}] {line}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    # -- stopping --------------------------------------------------------------------------------

    async def _stop(self, process: _ServerProcess) -> None:
        # Shielded: a cancelled owner must still not leave the process behind; every wait is bounded.
        with anyio.CancelScope(shield=True):
            try:
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stdin.aclose()
                if not await _exited(process, EXIT_GRACE_S):
                    process.popen.terminate_tree()
                    if not await _exited(process, TERM_GRACE_S):
                        process.popen.kill_tree()
                        if not await _exited(process, _KILL_WAIT_S):
                            _log.warning('MCP server "%s" (pid %d) survived SIGKILL', self.name, process.pid)
                # Helpers the server started, in its group or out of it, do not outlive it.
                process.popen.kill_tree()
                if not await process.popen.wait_gone(_KILL_WAIT_S):
                    # Its warden keeps killing it, and keeps it from escaping, after we let go.
                    _log.warning('MCP server "%s" left processes that survived SIGKILL', self.name)
            finally:
                self.returncode = process.returncode
                with anyio.move_on_after(_KILL_WAIT_S):
                    await process.aclose()
                process.popen.close()
