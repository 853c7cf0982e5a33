"""CPU per argument chunk of a streamed tool call: what titling its card from the partial
arguments adds to reading the chunk.

Each chunk takes the path a real one takes in the agent: the SSE ``data:`` payload decoded
(orjson), fed to the stream assembler, and its events handed to the turn's streaming cards
(``StreamingCards.grew``: the throttle, the partial parse, the tool's own presenter, the wire
encoding of a new title). The floor is the same chunks without the cards (decoded and
assembled only). Calls of ``--chunks`` chunks of a few characters each, as models stream them:
a ``write`` whose path comes first (titled early, then its content streams), one whose content
comes first (no title can be made until the end: every parse finds nothing) and a ``read``.
Medians of ``--runs`` runs.

Targets: titling adds at most ``ADDED_TARGET_US`` microseconds per chunk of a long call (the
agent spends tens of microseconds relaying one chunk of text, ``bench_relay.py``), and at most
``CALL_TARGET_US`` to any one call (the parses are bounded: only on growth, after the first
title at most one per ``_INTERVAL``, and never past the first 4 KiB). Exits 1 on a miss.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsh_acp import ToolCallArguments, ToolCallStart
from dsh_acp.loop._streaming_cards import StreamingCards
from dsh_acp.models._openai_response import Assembler
from dsh_acp.wire._render_context import RenderContext
from dsh_tools import ToolRegistry
from reference_tools import default_tools

ADDED_TARGET_US = 3.0
CALL_TARGET_US = 1000.0


class _BenchSession:
    """What the streaming cards use of a session: its tools, its folder, its wire."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        for tool in default_tools():
            self.registry.register(tool)
        self.cwd = "/work/project"
        self.render = RenderContext(cwd=self.cwd)
        self.sent = 0

    async def send(self, update: Any) -> None:
        self.sent += len(orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": update}))


def _payloads(name: str, arguments: str, pieces: int) -> list[bytes]:
    size = max(1, len(arguments) // pieces)
    parts = [arguments[i : i + size] for i in range(0, len(arguments), size)]
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": ""}}
    deltas = [first] + [{"index": 0, "function": {"arguments": part}} for part in parts]
    return [orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]}) for delta in deltas]


def _calls(chunks: int) -> dict[str, tuple[str, str]]:
    content = "".join(f"line {n} of the new file, with some words\\n" for n in range(chunks // 4))
    return {
        "write, path first": ("write", f'{{"file_path": "src/app/main.py", "content": "{content}"}}'),
        "write, content first": ("write", f'{{"content": "{content}", "file_path": "src/app/main.py"}}'),
        "read": ("read", '{"file_path": "src/app/main.py", "offset": 120, "limit": 40}'),
    }


async def _run(payloads: list[bytes], titled: bool) -> float:
    session = _BenchSession()
    cards = StreamingCards(session, set())  # type: ignore[arg-type]
    assembler = Assembler(None, "bench")
    started = time.process_time()
    for payload in payloads:
        for event in assembler.feed(orjson.loads(payload)):
            if not titled:
                continue
            if type(event) is ToolCallArguments:
                await cards.grew(event)
            elif type(event) is ToolCallStart:
                await cards.started(event)
    return (time.process_time() - started) / len(payloads) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=2000, help="argument chunks per call")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    worst_chunk = worst_call = 0.0
    for label, (name, arguments) in _calls(args.chunks).items():
        pieces = args.chunks if name == "write" else 12
        payloads = _payloads(name, arguments, pieces)
        floor, titled = [], []
        for _ in range(args.runs):  # side by side, so both see the same machine
            floor.append(asyncio.run(_run(payloads, titled=False)))
            titled.append(asyncio.run(_run(payloads, titled=True)))
        floor_us, titled_us = statistics.median(floor), statistics.median(titled)
        added = titled_us - floor_us
        per_call = added * len(payloads)
        if len(payloads) >= 1000:
            worst_chunk = max(worst_chunk, added)
        worst_call = max(worst_call, per_call)
        print(
            f"{label} ({len(payloads)} chunks, {len(arguments)} characters): {titled_us:.2f} us per "
            f"chunk titled, {floor_us:.2f} us read only: +{added:.2f} us per chunk, +{per_call:.0f} us "
            "per call"
        )
    ok = worst_chunk <= ADDED_TARGET_US and worst_call <= CALL_TARGET_US
    print(
        f"titling adds {worst_chunk:.2f} us per chunk of a long call (target <= {ADDED_TARGET_US} us) and at "
        f"most {worst_call:.0f} us per call (target <= {CALL_TARGET_US:.0f} us)  {'ok' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
