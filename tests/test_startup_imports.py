"""What the agent loads before it answers ``initialize``: the editor waits for that answer, so the
path there must not import the models, the tools or pydantic (they load on the loop right after
the answer). bench/bench_agent.py measures the time; this keeps the cheap part from regressing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

NOT_BEFORE_INITIALIZE = (
    "pydantic",
    "pydantic_core",
    "dsh_tools",
    "reference_tools",
    "httpx",
    "mcp",
    "rich",
    "dsh_acp._model",
    "dsh_acp._protocol",
    "dsh_acp._settings",
    "dsh_acp._store",
)

PROGRAM = """
import sys
from dsh_acp._cli import build_config
from dsh_acp._serve import serve_stdio
from dsh_acp._stdio import protocol_stdio
build_config(sys.argv[1:])
print(" ".join(sorted(sys.modules)))
"""


def test_the_path_to_initialize_imports_none_of_the_heavy_parts(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_bytes(orjson.dumps({"turns": [[{"text": "hi"}]]}))
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, "--model", f"script:{script}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = set(result.stdout.split())
    assert "dsh_acp._scripted" in loaded  # the script was checked before serving
    assert sorted(m for m in NOT_BEFORE_INITIALIZE if m in loaded) == []
