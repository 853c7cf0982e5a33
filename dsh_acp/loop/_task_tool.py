"""The ``task`` tool: hand a self-contained task to a subagent (``_subagent``) and get its answer.

It lives with the agent loop, not among the reference tools, because it runs the loop. The call
itself changes nothing (it is ``read_only``): every call its subagent makes passes the session's
gate as the session's own would, so in plan mode the subagent only reads. Being read-only, it is
also parallel-safe: several tasks in one response run at once, each subagent's own calls in their
usual order; what they could race on is guarded where it always is (an edit refuses a file that
changed since it was read, each command asks or is allowed by the same rules).
"""

from __future__ import annotations

from typing import Any

from dsh_tools import (
    GenericCallView,
    ToolDefinition,
    ToolError,
    ToolExecution,
    ToolOutput,
    define_tool,
)

from ._subagent import run_task
from ._turn import TaskHost

__all__ = ["task_tool"]


async def _task(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    host = execution.services.get(TaskHost)
    if host is None or host.runner is None:
        raise ToolError("a task runs only inside an agent turn")
    return await run_task(host.runner, execution, args["description"], args["prompt"])


def _present_call(args: dict[str, Any]) -> GenericCallView:
    description = args.get("description")
    title = " ".join(description.split()) if isinstance(description, str) else ""
    return GenericCallView(title=title or "Task", kind="think")


def task_tool() -> ToolDefinition:
    """The ``task`` tool (its subagent runs in the turn that calls it)."""
    return define_tool(
        name="task",
        description="Hand a self-contained task to a subagent (fresh context, same tools); returns its "
        "answer. Several run at once.",
        parameters={
            "description": {"type": "string", "required": True},
            "prompt": {"type": "string", "required": True},
        },
        execute=_task,
        present_call=_present_call,
        kind="think",
        read_only=True,
    )
