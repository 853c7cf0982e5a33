"""dsh_tools speed: registry.execute overhead and validate_args.

Targets: ``registry.execute`` of a trivial ``define_tool`` tool with one pre- and one
post-listener ≤ 30 µs per call; ``validate_args`` on a 10-property spec ≤ 10 µs. A bare
``await tool.execute(...)`` call runs side by side as the baseline (the pipeline's own cost is the
difference).

Run: python bench/bench_tools.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _stats import median_us, report

from dsh_tools import (
    PostNext,
    PostToolDecision,
    PreNext,
    PreToolDecision,
    SchemaSpec,
    TextBlock,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
    define_tool,
    validate_args,
)

SPEC: SchemaSpec = {
    "path": {"type": "string", "required": True},
    "offset": {"type": "integer"},
    "limit": {"type": "integer"},
    "mode": {"type": "string", "enum": ["a", "b", "c"]},
    "ratio": {"type": "number"},
    "flag": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
    "name": {"type": "string", "required": True},
    "count": {"type": "integer", "required": True},
}
ARGS: dict[str, Any] = {
    "path": "/tmp/x",
    "offset": 1,
    "limit": 10,
    "mode": "b",
    "ratio": 0.5,
    "flag": True,
    "tags": ["a", "b"],
    "opts": {"deep": False},
    "name": "n",
    "count": 3,
}
RESULT = [TextBlock(text="ok")]


async def execute(args: dict[str, Any], execution: ToolExecution) -> list[TextBlock]:
    return RESULT


async def pre(execution: ToolExecution, next_: PreNext) -> PreToolDecision:
    return await next_()


async def post(execution: ToolExecution, result: ToolExecutionResult, next_: PostNext) -> PostToolDecision:
    return await next_()


async def timed_async(fn: Any, inner: int, repeats: int = 15) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            await fn()
        samples.append((time.perf_counter() - start) / inner * 1e6)
    return statistics.median(samples)


async def main() -> None:
    tool = define_tool(
        name="trivial", description="t", parameters={"value": {"type": "string"}}, execute=execute
    )
    registry = ToolRegistry()
    registry.register(tool)
    registry.on_pre_execute(pre)
    registry.on_post_execute(post)
    execution = ToolExecution(call_id="c", name="trivial", arguments={"value": "x"})

    async def via_registry() -> None:
        await registry.execute(execution)

    async def bare() -> None:
        await tool.execute({"value": "x"}, execution)

    await via_registry()
    baseline = await timed_async(bare, 20_000)
    pipeline = await timed_async(via_registry, 20_000)
    report(
        "registry.execute, trivial tool, 1 pre + 1 post listener",
        pipeline,
        "µs",
        "target ≤ 30 µs",
        f"baseline bare tool call {baseline:.2f} µs",
    )
    assert not validate_args(SPEC, ARGS)
    validate = median_us(lambda: validate_args(SPEC, ARGS), inner=20_000)
    report("validate_args, 10-property spec (valid)", validate, "µs", "target ≤ 10 µs")


if __name__ == "__main__":
    asyncio.run(main())
