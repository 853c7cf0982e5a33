"""Requests cost O(new messages): the body of a request at 6,000 messages, and the agent's CPU
per turn late in a session against early, through the real agent and an HTTP model server.

1. Encoding: a conversation grows by one turn (prompt, tool call, result, answer) at a time up
   to 6,000 messages; each request body is built by the model's ``RequestEncoder``. Figure: the
   median time for a request at about 6,000 messages. Floor: ``orjson.dumps`` of the same
   messages already in the chat shape. Target: at most 2 ms.
2. Per-turn CPU: one agent in this process (``AcpClient.in_memory``, no tools) against the fake
   OpenAI-compatible server on 127.0.0.1, 500 prompts in one session; the process CPU time of
   turns 41-60 against turns 481-500 (the fake server and the client do a constant amount of
   work per turn). Target: turn 500 within 1.3x of turn 50.

Exits 1 when a target is missed. Run: ``python bench/bench_request.py``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_openai import FakeOpenAI, chunk, stream_reply

from dsh_acp import (
    AssistantMessage,
    Message,
    ModelRequest,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
    build_config,
)
from dsh_acp.models._openai_request import RequestEncoder, chat_messages
from dsh_acp.models._settings import ModelSettings
from dsh_acp.testing import AcpClient
from dsh_tools import TextBlock

ENCODE_TARGET_MS = 2.0
CPU_RATIO_TARGET = 1.3


def encoding() -> bool:
    settings = ModelSettings(model="m", base_url="http://127.0.0.1:1/v1")
    encoder = RequestEncoder(settings)
    history: list[Message] = []
    samples: list[float] = []
    for turn in range(1500):
        history.append(UserMessage((TextBlock(text=f"please look at file {turn} and fix it " * 3),)))
        call = ToolCallRequest(f"call_{turn}", "read", f'{{"path": "src/file_{turn}.py"}}')
        history.append(AssistantMessage(text="Reading.", tool_calls=(call,)))
        history.append(ToolResultMessage(call.id, "read", (TextBlock(text="def f():\n    return 1\n" * 8),)))
        history.append(AssistantMessage(text=f"Fixed file {turn}: the function now returns 1."))
        request = ModelRequest(messages=history, tools=[], system="You are a coding agent.")
        start = time.perf_counter()
        encoder.encode(request)
        if turn >= 1450:
            samples.append((time.perf_counter() - start) * 1000)
    figure = statistics.median(samples)
    shaped = chat_messages(history)
    floor_samples = []
    for _ in range(20):
        start = time.perf_counter()
        orjson.dumps({"messages": shaped})
        floor_samples.append((time.perf_counter() - start) * 1000)
    floor = statistics.median(floor_samples)
    ok = figure <= ENCODE_TARGET_MS
    print(
        f"request body at {len(history)} messages: {figure:.3f} ms (floor, orjson of the shaped "
        f"messages: {floor:.3f} ms; target <= {ENCODE_TARGET_MS} ms) {'ok' if ok else 'MISSED'}"
    )
    return ok


async def per_turn_cpu() -> bool:
    turns = 500
    replies = [
        stream_reply(
            chunk(f"Answer {n}: done."), chunk(finish="stop"), chunk(choices=False, usage=(100 + n, 5))
        )
        for n in range(turns + 1)
    ]
    cpu: list[float] = []
    with tempfile.TemporaryDirectory() as state:
        async with FakeOpenAI(replies, title="Bench") as server:
            args = [
                "--model",
                "openai:fake",
                "--base-url",
                server.base_url,
                "--state-dir",
                state,
                "--no-tools",
            ]
            async with AcpClient.in_memory(build_config(args)) as client:
                await client.initialize()
                sid = await client.new_session(state)
                for n in range(turns):
                    start = time.process_time()
                    await client.prompt(sid, f"Prompt number {n}: please answer briefly.")
                    cpu.append((time.process_time() - start) * 1000)
    early = statistics.median(cpu[40:60])
    late = statistics.median(cpu[480:500])
    ratio = late / early
    ok = ratio <= CPU_RATIO_TARGET
    print(
        f"process CPU per turn: turn 50 {early:.2f} ms, turn 500 {late:.2f} ms, ratio {ratio:.2f}x "
        f"(target <= {CPU_RATIO_TARGET}x) {'ok' if ok else 'MISSED'}"
    )
    return ok


def main() -> int:
    ok = encoding()
    ok = anyio.run(per_turn_cpu) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
