"""The first model request is small: the system prompt and tool schemas the agent sends before
any conversation, in tokens.

The request is the real one: an agent in this process (``AcpClient.in_memory``, the default
reference tools, no project instructions) gets one prompt in a new session whose working
directory is a temporary directory, and sends it to the fake OpenAI-compatible server on
127.0.0.1; the body the server received is measured. Figure: the tokens of the system message's
content plus those of each entry of ``tools`` as sent (compact JSON). Target: at most 1,200.

Tokens are counted by a llama.cpp server's ``/tokenize`` when ``--tokenizer-url`` is given
(for example ``http://127.0.0.1:8093`` serving SmolLM2-135M-Instruct); the estimate of
characters / 4 is always printed beside it and is the figure when no server is given.

Exits 1 when the target is missed. Run: ``python bench/bench_first_request.py [--tokenizer-url URL]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_openai import FakeOpenAI, chunk, stream_reply

from dsh_acp import build_config
from dsh_acp.testing import AcpClient

TARGET = 1200


async def first_request() -> dict[str, Any]:
    reply = stream_reply(chunk("Done."), chunk(finish="stop"), chunk(choices=False, usage=(10, 1)))
    with tempfile.TemporaryDirectory() as state, tempfile.TemporaryDirectory() as cwd:
        async with FakeOpenAI([reply], title="Bench") as server:
            args = ["--model", "openai:fake", "--base-url", server.base_url, "--state-dir", state]
            async with AcpClient.in_memory(build_config(args)) as client:
                await client.initialize()
                sid = await client.new_session(cwd)
                await client.prompt(sid, "Hello.")
            body: dict[str, Any] = server.chat_requests[0].json
    return body


def estimate(text: str) -> int:
    return (len(text) + 3) // 4


def tokenizer(url: str) -> Callable[[str], int]:
    from urllib.request import Request, urlopen

    def count(text: str) -> int:
        request = Request(f"{url.rstrip('/')}/tokenize", data=orjson.dumps({"content": text}), method="POST")
        request.add_header("Content-Type", "application/json")
        with urlopen(request, timeout=30) as response:  # a failed status raises
            return len(orjson.loads(response.read())["tokens"])

    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer-url", help="a llama.cpp server whose /tokenize counts the tokens")
    options = parser.parse_args()
    body = anyio.run(first_request)
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    parts = [("system prompt", system)] + [
        (f"tool {tool['function']['name']}", orjson.dumps(tool).decode()) for tool in body.get("tools", [])
    ]
    counters: list[tuple[str, Callable[[str], int]]] = [("chars/4", estimate)]
    if options.tokenizer_url:
        counters.insert(0, ("tokenizer", tokenizer(options.tokenizer_url)))
    counts = {name: [count(text) for _, text in parts] for name, count in counters}
    header = "".join(f"{name:>11}" for name, _ in counters)
    print(f"{'part':<22}{header}")
    for index, (label, _) in enumerate(parts):
        print(f"{label:<22}" + "".join(f"{counts[name][index]:>11}" for name, _ in counters))
    totals = {name: sum(values) for name, values in counts.items()}
    tools = {name: sum(values[1:]) for name, values in counts.items()}
    print(f"{'tool schemas':<22}" + "".join(f"{tools[name]:>11}" for name, _ in counters))
    print(f"{'total':<22}" + "".join(f"{totals[name]:>11}" for name, _ in counters))
    tools_sent = body.get("tools", [])
    widen = any("widen" in tool["function"]["parameters"].get("properties", {}) for tool in tools_sent)
    print("bash takes widen (the sandbox is available)" if widen else "bash has no widen (no sandbox)")
    measure = counters[0][0]
    figure = totals[measure]
    ok = figure <= TARGET
    print(f"first request: {figure} tokens ({measure}; target <= {TARGET}) {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
