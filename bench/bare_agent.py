"""Floor for the benchmarks: the same scripted agent as a bare asyncio + orjson loop.

    python bench/bare_agent.py [--script PATH] [--log PATH]

No framework, no validation, no task per request beyond ``session/prompt``: read NDJSON lines from
stdin, answer ``initialize`` and ``session/new`` inline, and play a prompt's turn of the
scripted-model file (the format of ``dsh-acp --model script:PATH``, ``text`` steps only) as
``agent_message_chunk`` notifications, one ``orjson.dumps`` and one ``transport.write`` each,
awaiting ``drain()`` for backpressure. It is what ``bench_agent.py`` calls "bare".

With ``--log PATH`` it also keeps what a durable agent keeps of a turn: each step's whole text as
one JSON line appended to ``PATH`` in one ``write``, and an ``fsync`` at the turn's end (dsh-acp's
session log does that, after redacting the text). ``bench_agent.py`` runs it as an anchor of the
streamed chunk, "bare + log": the floor with the log's cost, which depends on the machine.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson

_DUMPS_OPTION = orjson.OPT_APPEND_NEWLINE
_LOG_PIECE = 256 * 1024


async def _chunks(step: dict[str, Any]) -> AsyncIterator[str]:
    """The model: an async stream of text chunks (as a network model would be)."""
    text = step.get("text") or ()
    for chunk in [text] if isinstance(text, str) else text:
        yield chunk


class BareAgent:
    def __init__(
        self, turns: list[list[dict[str, Any]]], writer: asyncio.StreamWriter, log: int | None = None
    ) -> None:
        self.turns = turns
        self.writer = writer
        self.log = log
        self.prompts: dict[str, int] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(orjson.dumps(message, option=_DUMPS_OPTION))

    def on_line(self, line: bytes) -> None:
        message = orjson.loads(line)
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": 1,
                        "agentCapabilities": {"loadSession": False},
                        "authMethods": [],
                        "agentInfo": {"name": "bare-bench-agent", "version": "0"},
                    },
                }
            )
        elif method == "session/new":
            session_id = uuid.uuid4().hex
            self.prompts[session_id] = 0
            self.send({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": session_id}})
        elif method == "session/prompt":
            task = asyncio.get_running_loop().create_task(self.prompt(request_id, params["sessionId"]))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif request_id is not None and method is not None:
            self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": method}})

    async def prompt(self, request_id: Any, session_id: str) -> None:
        index = self.prompts[session_id]
        self.prompts[session_id] = index + 1
        write = self.writer.write
        drain = self.writer.drain
        dumps = orjson.dumps
        for step in self.turns[index]:
            message_id = uuid.uuid4().hex
            text: list[str] = []
            async for chunk in _chunks(step):
                text.append(chunk)
                write(
                    dumps(
                        {
                            "jsonrpc": "2.0",
                            "method": "session/update",
                            "params": {
                                "sessionId": session_id,
                                "update": {
                                    "sessionUpdate": "agent_message_chunk",
                                    "content": {"type": "text", "text": chunk},
                                    "messageId": message_id,
                                },
                            },
                        },
                        option=_DUMPS_OPTION,
                    )
                )
                await drain()
            if self.log is not None:
                record = {"kind": "assistant_reply", "text": "".join(text), "text_id": message_id}
                view = memoryview(dumps(record, option=_DUMPS_OPTION))
                while view:  # in pieces, as dsh-acp's log writes: one long write costs more CPU
                    view = view[os.write(self.log, view[:_LOG_PIECE]) :]
        if self.log is not None:
            os.fsync(self.log)
        self.send({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn"}})


async def main(turns: list[list[dict[str, Any]]], log: int | None) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(), sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    agent = BareAgent(turns, writer, log)
    while line := await reader.readline():
        if line.strip():
            agent.on_line(line)
    for task in list(agent.tasks):
        task.cancel()
    await writer.drain()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--script")
    parser.add_argument("--log")
    args = parser.parse_args()
    turns = []
    if args.script:
        with open(args.script, "rb") as file:
            turns = orjson.loads(file.read())["turns"]
    log = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if args.log else None
    asyncio.run(main(turns, log))
