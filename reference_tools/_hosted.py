"""Running a ``bash`` command in the client's terminal (the ``TerminalHost`` seam).

The client runs the process and shows it; this side asks for the output once the command is
over (or was stopped), so what the model sees is bounded by the byte limit the terminal was
created with. A timeout or a cancel kills the command through the host; the terminal is
released exactly once, whatever happened.
"""

from __future__ import annotations

import base64
import marshal
import math
import os
import sys
from dataclasses import dataclass

import anyio

from dsh_tools import ProgressSink, TerminalAttached, TerminalOutput
from dsh_tools.sandbox import SandboxPolicy
from dsh_tools.terminals import ExitStatus, HostTerminal, TerminalHost, TerminalHostError, TerminalSnapshot

from ._jobs import BashSettings, command_env

__all__ = ["PLAN_VARIABLE", "HostedRun", "run_hosted"]

_SETTLE_S = 5.0
"""How long to wait for the client once it was told to kill the command."""
PLAN_VARIABLE = "DSH_SANDBOX_PLAN"
"""The sandbox plan for the guard (``marshal``, base64): it takes it out before the command runs."""
_GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_guard.py")
"""Clients kill only the process they started (Toad and acpx do): the command runs under this
guard, which takes the command's whole process group down with it (see ``_guard``)."""


@dataclass(frozen=True, slots=True)
class HostedRun:
    """How a command run in the client's terminal ended."""

    terminal_id: str
    output: str
    truncated: bool
    exit_code: int | None
    signal: str | None
    error: str | None
    """Why it did not end on its own (timed out), else ``None``."""


async def _output(terminal: HostTerminal) -> TerminalSnapshot | None:
    """The terminal's output, or ``None`` if the client did not give it within ``_SETTLE_S``."""
    with anyio.move_on_after(_SETTLE_S):
        try:
            return await terminal.output()
        except TerminalHostError:
            return None
    return None


def _client_env(settings: BashSettings, policy: SandboxPolicy | None) -> dict[str, str]:
    # Only what the local path changes on top of the environment: the client's terminal starts
    # from the client's own environment, which is not ours to scrub.
    env = command_env(settings, base={})
    if policy is None:
        return env
    plan = policy.spawn_plan()
    if plan is not None:  # the guard confines itself to it before it starts the command
        env[PLAN_VARIABLE] = base64.b64encode(marshal.dumps(plan)).decode("ascii")
    return policy.environment(env)


async def run_hosted(
    host: TerminalHost,
    command: str,
    cwd: str,
    settings: BashSettings,
    report: ProgressSink | None,
    time_limit: float = math.inf,
    policy: SandboxPolicy | None = None,
) -> HostedRun:
    """Run ``command`` in a new terminal of the client and wait for it (at most ``time_limit``),
    in the sandbox ``policy`` if any (the guard applies it before it starts the command).

    Raises ``TerminalHostError`` only if no terminal could be created (nothing ran: the caller
    may run the command elsewhere); a failure after that ends the run with what is known.
    """
    argv = [sys.executable, "-I", "-S", _GUARD, settings.shell, "-c", command]
    if policy is not None:
        argv = policy.command(argv)
    terminal = await host.create(
        argv[0],
        argv[1:],
        cwd=cwd,
        env=_client_env(settings, policy),
        output_byte_limit=settings.head_bytes + settings.tail_bytes,
    )
    error: str | None = None
    status = ExitStatus()
    snapshot = TerminalSnapshot(output="")
    try:
        if report is not None:
            await report(TerminalAttached(terminal.terminal_id))
        try:
            with anyio.move_on_after(time_limit) as waiting:
                status = await terminal.wait_for_exit()
            if waiting.cancelled_caught:
                error = f"timed out after {time_limit:g} s"
                # Every wait on the client from here on is bounded: a client that never answers
                # (or answers what cannot be read) must not hold the turn past its timeout.
                with anyio.move_on_after(_SETTLE_S):
                    await terminal.kill()
                    status = await terminal.wait_for_exit()
            with anyio.move_on_after(_SETTLE_S):
                snapshot = await terminal.output()
            status = snapshot.exit_status or status
        except TerminalHostError as failure:
            error = f"the client's terminal failed: {failure}"
            with anyio.CancelScope(shield=True), anyio.move_on_after(_SETTLE_S):
                try:
                    await terminal.kill()
                except TerminalHostError:
                    pass
        except BaseException:  # cancelled: stop the command; the client keeps showing its output
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(_SETTLE_S):
                    try:
                        await terminal.kill()
                    except TerminalHostError:
                        pass
                # What it printed until then, for the card and the log, before the release
                # frees it (acpx shows a call's output only through the card).
                printed = await _output(terminal)
                if printed is not None and printed.output and report is not None:
                    await report(TerminalOutput(printed.output))
            raise
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(_SETTLE_S):
            try:
                await terminal.release()
            except TerminalHostError:
                pass  # released on our side all the same: the client went away or forgot it
    return HostedRun(
        terminal_id=terminal.terminal_id,
        output=snapshot.output,
        truncated=snapshot.truncated,
        exit_code=status.exit_code,
        signal=status.signal,
        error=error,
    )
