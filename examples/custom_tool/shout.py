"""A custom tool that renders as a diff card: it upper-cases one line of a file."""

from __future__ import annotations

from typing import Any

import anyio

from dsh_tools import (
    DiffCallView,
    DiffResultView,
    FileDiff,
    Location,
    ToolError,
    ToolExecution,
    ToolOutput,
    ToolResult,
    define_tool,
    text,
)


async def shout(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    path = anyio.Path(execution.cwd or ".", args["path"])  # relative to the session's folder
    old = await path.read_text()
    if args["line"] not in old.splitlines():
        raise ToolError(f"no line {args['line']!r} in {path}")
    new = old.replace(args["line"], args["line"].upper(), 1)
    await path.write_text(new)
    line = old.splitlines().index(args["line"]) + 1
    # meta carries what the result card needs, so a replayed card is the live one.
    return ToolOutput(
        content=[text(f"Shouted line {line} of {path}")], meta={"path": str(path), "line": line}
    )


def present_call(args: dict[str, Any]) -> DiffCallView:
    change = FileDiff(path=args["path"], old_text=args["line"], new_text=args["line"].upper())
    return DiffCallView(title=f"Shout in {args['path']}", diffs=(change,))


def present_result(args: dict[str, Any], result: ToolResult) -> DiffResultView | None:
    if result.is_error:
        return None  # the generic card shows the error text
    change = FileDiff(path=result.meta["path"], old_text=args["line"], new_text=args["line"].upper())
    return DiffResultView(
        diffs=(change,), locations=(Location(path=result.meta["path"], line=result.meta["line"]),)
    )


TOOLS = [
    define_tool(
        name="shout",
        description="Upper-case one line of a text file.",
        parameters={
            "path": {"type": "string", "required": True, "description": "The file, relative to the project"},
            "line": {"type": "string", "required": True, "description": "The exact line to upper-case"},
        },
        execute=shout,
        present_call=present_call,
        present_result=present_result,
        kind="edit",
    )
]
