"""What the agent loads before it answers ``initialize``: the editor waits for that answer, so the
path there must not import the models, the tools or pydantic (they load on the loop right after
the answer). bench/bench_agent.py measures the time; this keeps the cheap part from regressing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from dsh_acp.acp._session_params import new_session_params
from dsh_acp.wire._client_params import NewSessionParams

NOT_BEFORE_INITIALIZE = (
    "pydantic",
    "pydantic_core",
    "reference_tools",
    "aiohttp",
    "httpx",
    "httptools",
    "dsh_acp.models._http1_client",
    "mcp",
    "rich",
    "dsh_acp.models._model",
    "dsh_acp.acp._session_methods",
    "dsh_acp.models._settings",
    "dsh_acp.session._store",
    "shutil",  # argparse imports it to measure the terminal: our formatter does not
    # The full connection: the prelude answers initialize on the bare asyncio loop.
    "anyio",
    "typing_extensions",
    "dsh_acp.rpc._connection",
    "dsh_acp.rpc._output",
    "dsh_acp.rpc._requests",
    "dsh_acp.rpc._stdio",
    "dsh_acp.acp._agent",
    "dsh_acp.launch._serve",
)

PROGRAM = """
import asyncio, os, sys
import orjson
from dsh_acp import build_config, serve_stdio
from dsh_acp.acp._initialize import Handshake
from dsh_acp.rpc._prelude import answer_first_requests
from dsh_acp.rpc._protocol_fds import protocol_fds
config = build_config(sys.argv[1:])
to_agent, from_agent = os.pipe(), os.pipe()
params = {"protocolVersion": int(os.environ["ACP_VERSION"])}
request = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}) + b"\\n"
os.write(to_agent[1], request)
answer = Handshake(config).prelude_answer
asyncio.run(answer_first_requests(to_agent[0], from_agent[1], answer, max_line_bytes=1000))
assert os.read(from_agent[0], 10000).startswith(b'{"jsonrpc":"2.0","id":1,"result":')
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize("version", [1, 2])
def test_the_path_to_initialize_imports_none_of_the_heavy_parts(tmp_path: Path, version: int) -> None:
    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps({"turns": [[{"text": "hi"}]]}))
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, "--model", f"script:{script}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "ACP_VERSION": str(version)},
    )
    loaded = set(result.stdout.split())
    assert "dsh_acp.models._scripted" in loaded  # the script was checked before serving
    assert sorted(m for m in NOT_BEFORE_INITIALIZE if m in loaded) == []
    # Of the tools' package, only the sandbox probe (ctypes and a few files): initialize says it.
    tools = {m for m in loaded if m == "dsh_tools" or m.startswith("dsh_tools.")}
    assert tools <= {"dsh_tools", "dsh_tools._sandbox_support", "dsh_tools._confine"}


# -- session/new without a validator ---------------------------------------------------------

IDLE_PROGRAM = """
import os, sys
import anyio, orjson
from dsh_acp import build_config, serve
from dsh_acp.rpc._stdio import FdReceiveStream, FdSendStream

config = build_config(sys.argv[1:])
to_agent, from_agent = os.pipe(), os.pipe()

async def call(method, params, request_id):
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    os.write(to_agent[1], orjson.dumps(message) + b"\\n")
    while True:
        line = await anyio.to_thread.run_sync(reader.readline)
        if orjson.loads(line).get("id") == request_id:
            return orjson.loads(line)["result"]

async def main():
    async with anyio.create_task_group() as group:
        group.start_soon(serve, config, FdReceiveStream(to_agent[0]), FdSendStream(from_agent[1]))
        await call("initialize", {"protocolVersion": int(os.environ["ACP_VERSION"])}, 0)
        await call("session/new", {"cwd": os.getcwd(), "mcpServers": []}, 1)
        print(" ".join(sorted(sys.modules)))
        os.close(to_agent[1])

reader = os.fdopen(from_agent[0], "rb")
anyio.run(main)
"""


IDLE_NEVER = (
    "pydantic",
    "pydantic_core",
    "importlib.metadata",
    "dsh_tools._content",
    "dsh_tools._views",
    "reference_tools",
    "dsh_acp.wire._bridge",
    "dsh_acp.loop._turn",
    "dsh_acp.acp._prompt_runner",
    "dsh_acp.wire._client_params",
    "dsh_acp.session._replay",
)
"""What an idle agent (``initialize`` and a ``session/new``, the warm-up after ``initialize`` done)
has not loaded: pydantic and all that needs it (~8 MiB), the tools, the agent loop. The first
prompt loads them."""


@pytest.mark.parametrize("version", [1, 2])
def test_an_idle_session_loads_no_pydantic_and_no_tools(tmp_path: Path, version: int) -> None:
    """A session/new without MCP servers is read without pydantic and makes no tool registry:
    an editor opens sessions it never prompts, and their first prompt pays instead."""
    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps({"turns": [[{"text": "hi"}]]}))
    result = subprocess.run(
        [sys.executable, "-c", IDLE_PROGRAM, "--model", f"script:{script}", "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,
        env={**os.environ, "ACP_VERSION": str(version)},
    )
    loaded = set(result.stdout.split())
    assert "dsh_acp.acp._session_methods" in loaded  # the session was made
    assert sorted(m for m in IDLE_NEVER if m in loaded) == []


_PATHS = st.sampled_from(["/w", "/w/../x", "//w/./y/", "w", "", "./w", "/"])
_VALUES = st.one_of(st.none(), st.integers(), st.booleans(), _PATHS)
_PARAMS = st.dictionaries(
    st.sampled_from(
        ["cwd", "mcpServers", "additionalDirectories", "mcp_servers", "additional_directories", "_meta"]
    ),
    st.one_of(
        _VALUES,
        st.lists(_VALUES, max_size=3),
        st.lists(st.dictionaries(st.sampled_from(["name", "command"]), _PATHS, max_size=2), max_size=1),
    ),
)


@given(st.one_of(_PARAMS, st.none(), st.lists(_PATHS)))
def test_plain_session_new_params_are_read_as_the_model_reads_them(params: Any) -> None:
    by_hand = new_session_params(params)
    try:
        by_model = NewSessionParams.model_validate(params if params is not None else {})
    except ValidationError:
        assert by_hand is None
        return
    if by_hand is not None:
        fields = ("cwd", "mcp_servers", "additional_directories")
        assert [getattr(by_hand, f) for f in fields] == [getattr(by_model, f) for f in fields]


def test_the_plain_shapes_editors_send_take_the_light_path() -> None:
    light = new_session_params({"cwd": "/w/../x", "mcpServers": [], "additionalDirectories": ["//a/./b/"]})
    assert light is not None
    assert (light.cwd, light.mcp_servers, light.additional_directories) == ("/x", [], ["//a/b"])
    assert new_session_params({"cwd": "/w", "_meta": {"x": 1}}) is not None
    assert new_session_params({"cwd": "/w", "mcpServers": [{"name": "a", "command": "b"}]}) is None


def test_the_registry_and_plain_tools_need_no_pydantic() -> None:
    """dsh_tools loads each name from its module on first use: a registry of ``SchemaSpec`` tools
    (the reference tools' form) is made without pydantic, which only the content blocks and the
    views need (the first result loads them)."""
    program = (
        "import sys\n"
        "from dsh_tools import Services, ToolRegistry, define_tool\n"
        "async def run(args, execution):\n"
        "    return 'ok'\n"
        "registry = ToolRegistry()\n"
        "registry.register(define_tool(name='t', description='d', parameters={}, execute=run))\n"
        "Services().add(registry)\n"
        "print(registry.schemas()[0].name, 'pydantic' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["t", "False"]
