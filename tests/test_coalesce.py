"""The live-output coalescer: output after a quiet spell goes out at once, a flood is batched."""

from __future__ import annotations

import anyio
import pytest

from dsh_acp._coalesce_policy import CoalescePolicy
from dsh_acp.loop._coalesce import OutputCoalescer

pytestmark = pytest.mark.anyio


async def test_quiet_output_is_sent_at_once_and_a_flood_is_batched() -> None:
    sent: list[tuple[str, float]] = []
    second = anyio.Event()

    async def flush(data: str) -> None:
        sent.append((data, anyio.current_time()))
        if len(sent) == 2:
            second.set()

    async with anyio.create_task_group() as group:
        coalescer = OutputCoalescer(flush, CoalescePolicy(max_bytes=1 << 20, max_delay=0.2), group)
        start = anyio.current_time()
        await coalescer.feed("first line\n")
        assert [data for data, _ in sent] == ["first line\n"]  # no timer between it and the user
        for part in "abc":
            await coalescer.feed(part)
        assert len(sent) == 1  # within max_delay of the last flush: batched
        with anyio.fail_after(2):
            await second.wait()
        assert sent[1][0] == "abc"
        assert sent[1][1] - start >= 0.19
        await anyio.sleep(0.25)
        await coalescer.feed("after a pause\n")
        assert sent[-1][0] == "after a pause\n"
        await coalescer.aclose()


async def test_without_a_delay_only_size_and_the_end_flush() -> None:
    sent: list[str] = []

    async def flush(data: str) -> None:
        sent.append(data)

    async with anyio.create_task_group() as group:
        coalescer = OutputCoalescer(flush, CoalescePolicy(max_bytes=6, max_delay=None), group)
        for part in ("ab", "cd", "ef", "g"):
            await coalescer.feed(part)
        assert sent == ["abcdef"]
        await coalescer.aclose()
    assert sent == ["abcdef", "g"]
