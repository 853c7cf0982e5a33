"""``bash``, ``bash_output`` and ``bash_kill``: run shell commands that render as terminals.

How the tools stay safe: each command leads its own process group (stdin from /dev/null, pipes
of its own) and the whole group is stopped on timeout, on cancel, when the command's shell exits
and when the session closes; a reaper process kills it if the agent itself dies (see
``_process``). Secret-looking variables are dropped from its environment.

Where the session has a sandbox (``dsh_tools.sandbox.CommandSandbox``), every command runs in
it, at the level the permission gate granted the call (``workspace-write``, or ``read-only`` in
plan mode) and with the widening a person allowed (the ``widen`` argument: ``network``, ``git``,
paths, ``all``); when a command fails and its output shows the sandbox refused something, the
result ends with one line saying what and how to ask for it.

How they render: a foreground call is a terminal card. Its output streams live as
``TerminalOutput`` progress events; the result's ``meta`` carries ``exit_code``, ``signal``,
``cwd`` and ``error`` so ``present_result`` rebuilds the same card from a session log. Background
calls and the helpers are generic ``execute`` cards; command output in them is fenced, so that no
line of it renders as Markdown.

Memory stays bounded whatever a command prints: the model sees the head and tail of each stream;
the whole stream is saved to a private file that goes away with the session (``BashSettings``).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from typing import Any

from dsh_tools import (
    CommandSubject,
    GenericCallView,
    GenericResultView,
    SchemaSpec,
    TerminalCallView,
    TerminalResultView,
    ToolDefinition,
    ToolError,
    ToolExecution,
    ToolOutput,
    ToolResult,
    define_tool,
    fenced,
    text,
    text_of,
)
from dsh_tools.sandbox import CommandSandbox, SandboxPolicy, WideningError
from dsh_tools.terminals import TerminalHost, TerminalHostError

# Private names stay private here too: this module's public API is its __all__.
from ._hosted import HostedRun as _HostedRun
from ._hosted import run_hosted as _run_hosted
from ._jobs import BashSettings
from ._jobs import Job as _Job
from ._jobs import Shell as _Shell
from ._jobs import SpawnError as _SpawnError

_log = logging.getLogger("reference_tools.bash")

__all__ = ["BashSettings", "bash_tools"]

_BASH_PARAMETERS: SchemaSpec = {
    "command": {"type": "string", "required": True},
    "description": {"type": "string", "required": True, "description": "5-10 words for the user."},
    "timeout_ms": {
        "type": "integer",
        "description": "Default 120000 (background: none), max 600000.",
    },
    "workdir": {"type": "string"},
    "run_in_background": {
        "type": "boolean",
        "description": "Return a task id at once; for servers, watchers.",
    },
}
_WIDEN: SchemaSpec = {
    "widen": {
        "type": "array",
        "items": {"type": "string"},
        # What the sandbox is, the model learns from the line a refused command ends with, which
        # says what to ask for: the schema stays short (the first request's size is a target).
        "description": 'Retry what the sandbox blocked with "network", "git" (write .git), paths, or "all".',
    }
}
_TASK_PARAMETERS: SchemaSpec = {"task_id": {"type": "string", "required": True}}


def _shell(execution: ToolExecution) -> _Shell:
    services = execution.services
    return services.setdefault(_Shell, lambda: _Shell(services.get(BashSettings) or BashSettings()))


def _workdir(workdir: str | None, session_cwd: str | None) -> str:
    if workdir:
        workdir = os.path.expanduser(workdir)
    if workdir and os.path.isabs(workdir):
        return os.path.normpath(workdir)
    if session_cwd is None:  # never fall back to the agent's own cwd: it is not the user's project
        raise ToolError("this session has no working directory; pass an absolute workdir")
    return os.path.normpath(os.path.join(session_cwd, workdir or ""))


def _timeout_s(timeout_ms: int | float | None, settings: BashSettings, default: float) -> float:
    if timeout_ms is None:
        return default
    if timeout_ms <= 0:
        raise ToolError(f"timeout_ms must be positive, not {timeout_ms}")
    return min(timeout_ms / 1000, settings.max_timeout_s)


def _status_line(meta: dict[str, Any]) -> str:
    """``[exit code 2]``, ``[killed by SIGKILL]``, ``[timed out after 5 s; killed by SIGTERM]``."""
    parts = [meta["error"]] if meta.get("error") else []
    if meta.get("running"):
        parts.append("still running")
    elif meta.get("signal"):
        parts.append(f"killed by {meta['signal']}")
    elif meta.get("exit_code") is not None:
        parts.append(f"exit code {meta['exit_code']}")
    if not parts:  # the leader could not be reaped (stuck in the kernel)
        parts.append("exit status unknown")
    if meta.get("stopped_leftovers"):
        parts.append("stopped the processes it left running; use run_in_background to keep them")
    return f"[{'; '.join(parts)}]"


def _output_text(job: _Job, *, final: bool) -> str:
    """The output the model has not seen yet: stdout, then a ``[stderr]`` section."""
    out, err = job.stdout.take(final=final), job.stderr.take(final=final)
    body = out if not out or out.endswith("\n") else out + "\n"
    if err:
        body += "[stderr]\n" + (err if err.endswith("\n") else err + "\n")
    return body


def _meta(job: _Job, *, task: bool = False) -> dict[str, Any]:
    running = not job.finished.is_set()
    meta = {
        "exit_code": None if running else job.exit_code,
        "signal": None if running else job.signal,
        "cwd": job.cwd,
        "error": job.error,
        "stopped_leftovers": job.stopped_leftovers,
    }
    return {**meta, "task_id": job.name, "running": running} if task else meta


def _policy(args: dict[str, Any], execution: ToolExecution, cwd: str) -> SandboxPolicy | None:
    """The sandbox the command runs in: what the gate granted the call, else (a host without
    the gate) the session's default with the widening asked for; ``None``: no sandbox."""
    sandbox = execution.services.get(CommandSandbox)
    if sandbox is None or not sandbox.available:
        return None
    granted = sandbox.take(execution.call_id)
    try:
        widening = sandbox.widening(args.get("widen"), cwd)  # one that does not read never runs
    except WideningError as error:
        raise ToolError(str(error)) from None
    if granted is not None:
        return sandbox.policy(*granted)
    return sandbox.policy("workspace-write", widening)


def _sandbox_note(policy: SandboxPolicy | None, output: str, cwd: str, failed: bool) -> str | None:
    return policy.explain(output, cwd) if policy is not None and failed else None


async def _bash(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    shell = _shell(execution)
    cwd = _workdir(args.get("workdir"), execution.cwd)
    policy = _policy(args, execution, cwd)
    background = bool(args.get("run_in_background"))
    settings = shell.settings
    timeout = _timeout_s(
        args.get("timeout_ms"), settings, math.inf if background else settings.default_timeout_s
    )
    host = execution.services.get(TerminalHost)  # type: ignore[type-abstract]
    if host is not None and not background and not shell.host_failed:
        try:
            run = await _run_hosted(host, args["command"], cwd, settings, execution.report, timeout, policy)
        except TerminalHostError as error:
            # Nothing ran: run it here, and from now on (one line, not one per command).
            shell.host_failed = True
            _log.warning("the client's terminals failed (%s); bash runs commands itself from now on", error)
        else:
            return _hosted_output(run, cwd, policy)
    tasks = execution.tasks
    if background and tasks is None:
        raise ToolError("this host keeps no session tasks: run the command without run_in_background")
    try:
        job = await shell.start(args["command"], cwd, background=background, policy=policy)
    except _SpawnError as error:
        meta = {"exit_code": None, "signal": None, "cwd": cwd, "error": str(error)}
        return ToolOutput([text(f"Error: {error}")], meta=meta, is_error=True)
    if background:
        assert tasks is not None  # checked before the command started
        shell.run_in_background(job, timeout, tasks)
        return ToolOutput(
            [
                text(
                    f"Started background task {job.name} in {cwd}. Read its output with bash_output "
                    f'(task_id "{job.name}"); stop it with bash_kill.'
                )
            ],
            meta={"task_id": job.name, "cwd": cwd},
        )
    await shell.run(job, execution.report, timeout)
    output = job.terminal.take(final=True)
    meta = {**_meta(job), "output": output}
    body = _output_text(job, final=True)
    note = _sandbox_note(policy, output, cwd, job.error is not None or job.exit_code != 0)
    if note is not None:
        meta["sandbox"] = note
    return ToolOutput(
        [text(body + _status_line(meta) + (f"\n{note}" if note else ""))],
        meta=meta,
        is_error=job.error is not None,
    )


def _hosted_output(run: _HostedRun, cwd: str, policy: SandboxPolicy | None) -> ToolOutput:
    """The result of a command that ran in the client's terminal: what the terminal kept of the
    output (both streams as they interleaved), then the status line."""
    meta: dict[str, Any] = {
        "exit_code": run.exit_code,
        "signal": run.signal,
        "cwd": cwd,
        "error": run.error,
        "stopped_leftovers": False,
        "output": run.output,
        "terminal_id": run.terminal_id,
    }
    body = run.output if not run.output or run.output.endswith("\n") else run.output + "\n"
    if run.truncated:
        body = "[... the client's terminal kept only the end of the output ...]\n" + body
    note = _sandbox_note(policy, run.output, cwd, run.error is not None or run.exit_code != 0)
    if note is not None:
        meta["sandbox"] = note
    status = _status_line(meta) + (f"\n{note}" if note else "")
    return ToolOutput([text(body + status)], meta=meta, is_error=run.error is not None)


def _task(execution: ToolExecution, task_id: str) -> _Job:
    job = _shell(execution).tasks.get(task_id)
    if job is None:  # ids are per session: another session's bg-1 is not this one's
        raise ToolError(f"no background task {task_id} in this session")
    return job


async def _bash_output(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    job = _task(execution, args["task_id"])
    meta = _meta(job, task=True)  # before taking the output: once finished, no more will come
    body = _output_text(job, final=not meta["running"]) or "(no new output)\n"
    return ToolOutput([text(body + _status_line(meta))], meta=meta)


async def _bash_kill(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    job = _task(execution, args["task_id"])
    if job.finished.is_set():
        meta = _meta(job, task=True)
        return ToolOutput([text(f"Task {job.name} had already ended {_status_line(meta)}.")], meta=meta)
    await job.stop()
    await job.wait_finished()
    meta = _meta(job, task=True)
    return ToolOutput([text(f"Stopped task {job.name} {_status_line(meta)}.")], meta=meta)


# -- presentation: pure functions of the arguments and the (possibly replayed) result -----------


def _fenced_result(result: ToolResult) -> GenericResultView:
    return GenericResultView(content=(text(fenced(text_of(result.content), "console")),))


def _present_bash_call(args: dict[str, Any]) -> TerminalCallView | GenericCallView:
    command: str = args["command"]
    if args.get("run_in_background"):
        salient = {"command": command, "description": args.get("description"), "run_in_background": True}
        return GenericCallView(
            title=f"{command} (background)",
            kind="execute",
            raw_input={key: value for key, value in salient.items() if value is not None},
        )
    workdir = args.get("workdir")
    # A relative workdir is resolved against the session's folder by the UI bridge.
    cwd = os.path.expanduser(workdir) if isinstance(workdir, str) and workdir else None
    return TerminalCallView(title=command, description=args.get("description"), cwd=cwd)


def _bash_subject(args: Any, execution: ToolExecution) -> CommandSubject | None:
    """What approving a command is about: the line, the real directory it runs in, and the
    widening of the sandbox it asks for (a ``widen`` that does not read is none: the call
    refuses it and nothing runs)."""
    if not isinstance(args, dict) or not isinstance(args.get("command"), str):
        return None
    workdir = args.get("workdir")
    try:
        cwd = _workdir(workdir if isinstance(workdir, str) else None, execution.cwd)
    except ToolError:
        return CommandSubject(args["command"], None)
    widen: tuple[str, ...] = ()
    sandbox = execution.services.get(CommandSandbox)
    if sandbox is not None and sandbox.available and args.get("widen"):
        try:
            widen = sandbox.widening(args["widen"], cwd).tokens
        except WideningError:
            pass
    return CommandSubject(args["command"], os.path.realpath(cwd), widen)


def _present_bash_result(args: dict[str, Any], result: ToolResult) -> TerminalResultView | GenericResultView:
    meta = result.meta
    if args.get("run_in_background") or not isinstance(meta, dict) or "exit_code" not in meta:
        return _fenced_result(result)  # refused, bad arguments, or a background start
    output: str | None = meta.get("output")  # interleaved, as the terminal showed it
    if output is None and (meta["exit_code"] is not None or meta.get("signal") is not None):
        output = text_of(result.content)  # an older log: the model's text, stdout then stderr
        status = _status_line(meta)
        if output.endswith(status):  # a post-execute listener may have replaced the text
            output = output[: len(output) - len(status)]
    return TerminalResultView(
        output=output,
        exit_code=meta["exit_code"],
        signal=meta.get("signal"),
        error=meta.get("error"),
        note=meta.get("sandbox"),
    )


def _present_task_call(title: str) -> Callable[[dict[str, Any]], GenericCallView]:
    def present(args: dict[str, Any]) -> GenericCallView:
        return GenericCallView(
            title=f"{title} {args['task_id']}", kind="execute", raw_input={"task_id": args["task_id"]}
        )

    return present


def _present_task_result(args: dict[str, Any], result: ToolResult) -> GenericResultView:
    return _fenced_result(result)


def bash_tools(*, sandbox: bool = False) -> list[ToolDefinition]:
    """The three bash tools: ``bash``, ``bash_output`` and ``bash_kill``.

    Per-session state (background tasks, spill files) lives in the session's ``Services`` and
    ends with it; a ``BashSettings`` there changes the defaults. With ``sandbox`` (the host
    gives sessions a ``CommandSandbox`` that is available) the model gets the ``widen``
    argument (the sandbox's refusals say what to ask for); commands run in a session's sandbox
    whenever it has one.
    """
    return [
        define_tool(
            name="bash",
            # Long output says itself what it kept and where the rest is: the schema stays short.
            description="Run a command with `bash -c`; returns stdout, stderr and the exit status.",
            parameters={**_BASH_PARAMETERS, **(_WIDEN if sandbox else {})},
            execute=_bash,
            present_call=_present_bash_call,
            present_result=_present_bash_result,
            kind="execute",
            approval_subject=_bash_subject,
            prompt_rules=("Commands get no input: never start interactive programs.",),
            sandboxed=True,
        ),
        define_tool(
            name="bash_output",
            description="A background task's new output, and whether it still runs.",
            parameters=_TASK_PARAMETERS,
            execute=_bash_output,
            present_call=_present_task_call("Output of"),
            present_result=_present_task_result,
            kind="execute",
            # Reads change nothing but the task's read position: several may run in one step.
            parallel_safe=True,
        ),
        define_tool(
            name="bash_kill",
            description="Stop a background task and all it started.",
            parameters=_TASK_PARAMETERS,
            execute=_bash_kill,
            present_call=_present_task_call("Stop"),
            present_result=_present_task_result,
            kind="execute",
        ),
    ]
