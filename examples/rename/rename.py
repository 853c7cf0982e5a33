import re

import anyio
from pydantic import BaseModel

from dsh_tools import DiffCallView, DiffResultView, FileDiff, ToolError, ToolExecution, define_tool


class Rename(BaseModel):
    path: str
    old: str
    new: str


async def rename(args: Rename, execution: ToolExecution) -> str:
    file = anyio.Path(execution.cwd or ".", args.path)
    text, count = re.subn(rf"\b{re.escape(args.old)}\b", args.new, await file.read_text())
    if not count:
        raise ToolError(f"no whole word {args.old!r} in {args.path}")
    await file.write_text(text)
    return f"Renamed {count} {args.old} in {args.path}"


def diff(args: Rename) -> tuple[FileDiff]:
    return (FileDiff(path=args.path, old_text=args.old, new_text=args.new),)


TOOL = define_tool(
    name="rename",
    description="Rename a whole word in one file.",
    parameters=Rename,
    execute=rename,
    present_call=lambda args: DiffCallView(title=f"Rename {args.old} in {args.path}", diffs=diff(args)),
    present_result=lambda args, result: None if result.is_error else DiffResultView(diffs=diff(args)),
    kind="edit",
)
