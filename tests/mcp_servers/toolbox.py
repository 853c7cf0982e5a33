"""A small MCP server for the tests, written with the official ``mcp`` package (lowlevel API).

Its tools cover every content kind a result can carry, an ``isError`` result, a tool that never
finishes (and records its cancellation), one that crashes the server mid-call, and names that
need sanitizing. Run it as ``python toolbox.py [--stubborn] [--http]``:

- ``--stubborn``: ignore SIGTERM and stay alive after stdin closes (only SIGKILL stops it);
- ``--http``: serve streamable HTTP on 127.0.0.1 (an ephemeral port) and print the URL on stdout.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

__all__ = ["main"]

# A 1×1 transparent PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
LONG_NAME = "a_tool_whose_name_is_far_too_long_to_fit_in_sixty_four_characters_with_its_prefix"
LIAR = "report\u202efdp.exe"

OBJECT: dict[str, Any] = {"type": "object", "properties": {}}
TOOLS = [
    types.Tool(
        name="echo",
        description="Echo the text back.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(name="image", description="A tiny image.", input_schema=OBJECT),
    types.Tool(name="audio", description="A short sound.", input_schema=OBJECT),
    types.Tool(name="resources", description="Embedded resources and a link.", input_schema=OBJECT),
    types.Tool(name="structured", description="Only structured content.", input_schema=OBJECT),
    types.Tool(name="fail", description="Always reports an error result.", input_schema=OBJECT),
    types.Tool(name="reject", description="Answers with a JSON-RPC error.", input_schema=OBJECT),
    types.Tool(name="slow", description="Never finishes; records its cancellation.", input_schema=OBJECT),
    types.Tool(
        name="slow_calls",
        description="Waits until `started` slow calls began and `cancelled` were cancelled; reports both.",
        input_schema={
            "type": "object",
            "properties": {"started": {"type": "integer"}, "cancelled": {"type": "integer"}},
        },
    ),
    types.Tool(name="pid", description="The server's process id.", input_schema=OBJECT),
    types.Tool(
        name="helper",
        description="Starts a long-lived helper process (not holding our pipes); returns its pid.",
        input_schema=OBJECT,
    ),
    types.Tool(
        name="header",
        description="The value of an HTTP request header (empty over stdio).",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
    ),
    types.Tool(name="crash", description="Kills the server in the middle of the call.", input_schema=OBJECT),
    types.Tool(name="weird.name", description="Needs sanitizing.", input_schema=OBJECT),
    types.Tool(
        name="weird_name", description="Collides with weird.name once sanitized.", input_schema=OBJECT
    ),
    types.Tool(name=LONG_NAME, description="Needs truncating.", input_schema=OBJECT),
    # A name and a description that would show something else unescaped: a right-to-left
    # override, a carriage return, an escape sequence erasing the line.
    types.Tool(name=LIAR, description="Harmless\x1b[2K\rrm -rf ~", input_schema=OBJECT),
]


class State:
    """What the tools remember between calls: how many slow calls began and were cancelled."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0
        self.changed = anyio.Event()

    def bump(self, what: str) -> None:
        setattr(self, what, getattr(self, what) + 1)
        self.changed.set()
        self.changed = anyio.Event()


STATE = State()
HELPERS: list[anyio.abc.Process] = []


def text(value: str) -> list[types.ContentBlock]:
    return [types.TextContent(text=value)]


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    arguments = params.arguments or {}
    name = params.name
    if name == "echo":
        return types.CallToolResult(
            content=[
                types.TextContent(text=str(arguments["text"]), annotations=types.Annotations(priority=0.5))
            ]
        )
    if name == "image":
        return types.CallToolResult(content=[types.ImageContent(data=PNG, mime_type="image/png")])
    if name == "audio":
        return types.CallToolResult(content=[types.AudioContent(data="UklGRg==", mime_type="audio/wav")])
    if name == "resources":
        return types.CallToolResult(
            content=[
                types.EmbeddedResource(
                    resource=types.TextResourceContents(
                        uri="file:///notes.md", mime_type="text/markdown", text="# Notes"
                    )
                ),
                types.EmbeddedResource(
                    resource=types.BlobResourceContents(
                        uri="file:///data.bin", mime_type="application/octet-stream", blob="AAEC"
                    )
                ),
                types.ResourceLink(
                    uri="file:///big.log", name="big.log", mime_type="text/plain", size=123456
                ),
            ]
        )
    if name == "structured":
        return types.CallToolResult(content=[], structured_content={"answer": 42})
    if name == "fail":
        return types.CallToolResult(content=text("the widget is broken"), is_error=True)
    if name == "reject":
        raise MCPError(code=types.INVALID_PARAMS, message="no widgets today")
    if name == "slow":
        STATE.bump("started")
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            STATE.bump("cancelled")
            raise
    if name == "slow_calls":
        started, cancelled = int(arguments.get("started", 0)), int(arguments.get("cancelled", 0))
        with anyio.fail_after(20):  # bounded: a cancellation that never comes fails the test, never hangs it
            while STATE.started < started or STATE.cancelled < cancelled:
                await STATE.changed.wait()
        return types.CallToolResult(content=text(f"started={STATE.started} cancelled={STATE.cancelled}"))
    if name == "pid":
        return types.CallToolResult(content=text(str(os.getpid())))
    if name == "helper":
        helper = await anyio.open_process(
            [sys.executable, "-c", "import time; time.sleep(3600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        HELPERS.append(helper)  # kept referenced: never collected (nor reaped) while we live
        return types.CallToolResult(content=text(str(helper.pid)))
    if name == "header":
        request = ctx.request
        headers = getattr(request, "headers", None)
        return types.CallToolResult(
            content=text("" if headers is None else headers.get(arguments["name"], ""))
        )
    if name == "crash":
        sys.stderr.write("toolbox: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(7)
    if any(tool.name == name for tool in TOOLS):
        return types.CallToolResult(content=text(f"called {name}"))
    raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {name}")


def build() -> Server[Any]:
    return Server("toolbox", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http() -> None:
    import uvicorn

    server = build()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    print(f"http://127.0.0.1:{port}/mcp", flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    if "--stubborn" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--http" in sys.argv:
        anyio.run(serve_http)
    else:
        anyio.run(serve_stdio)
    if "--stubborn" in sys.argv:
        # Outlive stdin closing: only SIGKILL gets rid of us.
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
