"""A first tool: define it, register it, run one call through the pipeline and print its card."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

from dsh_tools import (
    GenericCallView,
    Location,
    ToolExecution,
    ToolRegistry,
    define_tool,
    text,
)


async def count_lines(args: dict[str, Any], execution: ToolExecution) -> list[Any]:
    content = await anyio.Path(args["path"]).read_text(encoding="utf-8")
    return [text(f"{len(content.splitlines())} lines")]


def present(args: dict[str, Any]) -> GenericCallView:
    return GenericCallView(
        title=f"Count lines in {args['path']}", kind="read", locations=(Location(path=args["path"]),)
    )


count_tool = define_tool(
    name="count_lines",
    description="Count the lines of a text file.",
    parameters={"path": {"type": "string", "required": True, "description": "Absolute path"}},
    execute=count_lines,
    present_call=present,
    kind="read",
    read_only=True,
)


async def main() -> None:
    registry = ToolRegistry()
    registry.register(count_tool)
    arguments = {"path": __file__}
    print("card:", count_tool.call_view(arguments))
    result = await registry.execute(ToolExecution(call_id="1", name="count_lines", arguments=arguments))
    print("result:", result.content[0])
    bad = await registry.execute(ToolExecution(call_id="2", name="count_lines", arguments={"path": 3}))
    print("invalid call:", bad.content[0])


if __name__ == "__main__":
    asyncio.run(main())
