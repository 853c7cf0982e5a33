"""``todo_write``: the agent's plan, shown by the editor as a live plan rather than a tool card.

The whole list is written every time (the model keeps it current); the tool's presentation is a
``PlanView``, which a bridge maps to a plan update instead of a tool card.
"""

from __future__ import annotations

from typing import Any

from dsh_tools import PlanEntry, PlanView, ToolDefinition, ToolExecution, ToolResult, define_tool, text

__all__ = ["todo_tool"]

_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


def _plan(args: dict[str, Any]) -> PlanView:
    return PlanView(
        entries=tuple(
            PlanEntry(content=item["content"], status=item["status"], priority=item.get("priority", "medium"))
            for item in args["todos"]
        )
    )


async def _todo_write(args: dict[str, Any], execution: ToolExecution) -> list[Any]:
    plan = _plan(args)
    done = sum(entry.status == "completed" for entry in plan.entries)
    lines = [f"{_MARK[entry.status]} {entry.content}" for entry in plan.entries]
    return [text(f"Plan updated ({done}/{len(plan.entries)} done):\n" + "\n".join(lines))]


def _present_result(args: dict[str, Any], result: ToolResult) -> PlanView | None:
    return None if result.is_error else _plan(args)


def todo_tool() -> ToolDefinition:
    """The ``todo_write`` tool."""
    return define_tool(
        name="todo_write",
        description="Your plan, sent whole each time: one item in_progress, each completed once done.",
        parameters={
            "todos": {
                "type": "array",
                "required": True,
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "required": True},
                        "status": {
                            "type": "string",
                            "required": True,
                            "enum": ["pending", "in_progress", "completed"],
                        },
                        "priority": {"type": "string", "enum": ["high", "medium", "low"]},
                    },
                },
            }
        },
        execute=_todo_write,
        present_call=_plan,
        present_result=_present_result,
        kind="think",
        read_only=True,
    )
