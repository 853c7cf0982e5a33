"""A seeded fuzz of the real agent: thousands of frames, valid, mutated and garbage, must cause no
crash, no hang and no line the ACP schema (or a real client) would reject.

The longer run is bench/bench_fuzz.py (100,000 frames).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_acp.testing import AcpSchema, fuzz_agent

pytestmark = pytest.mark.anyio

DEEP = '{"path": ' + "[" * 300 + "]" * 300 + "}"

# What the scripted model says, turn after turn, in every session the fuzz opens.
STEPS: list[list[dict[str, Any]]] = [
    [{"tool_calls": [{"id": "b1", "name": "bash", "arguments": {"command": "touch m", "description": "M"}}]}],
    [{"tool_calls": [{"id": "r1", "name": "read", "arguments": {"file_path": "notes.txt"}}]}, {"text": "r"}],
    [
        {
            "tool_calls": [
                {"id": "l1", "name": "ls", "arguments": {"path": "."}},
                {"id": "l1", "name": "glob", "arguments": {"pattern": "*"}},
            ]
        },
        {"text": "twice"},
    ],
    [
        {
            "tool_calls": [
                {"id": "d1", "name": "read", "arguments": DEEP},
                {"id": "u1", "name": "nope", "arguments": {}},
                {"id": "w1", "name": "write", "arguments": {"file_path": "out.txt", "content": "x"}},
            ]
        },
        {"text": "odd"},
    ],
    [{"thought": "hmm", "text": ["a", "b"]}],
    [{"text": "cut", "finish": "length"}],
    [{"text": "used", "usage": {"input": 10, "output": 5, "context_window": 1000}}],
    [{"text": "hello"}],
]


def fuzz_setup(folder: Path) -> tuple[list[str], str]:
    """The agent command line and its cwd for a fuzz run in ``folder``."""
    work = folder / "work"
    work.mkdir()
    (work / "notes.txt").write_text("some notes\n")
    script = folder / "script.json"
    script.write_text(json.dumps({"turns": STEPS * 4}))
    command = [
        sys.executable,
        "-m",
        "dsh_acp",
        "--model",
        f"script:{script}",
        "--state-dir",
        str(folder / "state"),
        "--max-message-bytes",
        str(4 * 1024 * 1024),
    ]
    return command, str(work)


@pytest.mark.parametrize("seed", [1, 2])
async def test_fuzzed_frames_never_crash_hang_or_break_the_wire(
    acp_schema: AcpSchema, tmp_path: Path, seed: int
) -> None:
    command, cwd = fuzz_setup(tmp_path)
    report = await fuzz_agent(
        command, schema=acp_schema, cwd=cwd, frames=1500, seed=seed, env=dict(os.environ)
    )
    assert report.ok, report.summary() + "\n" + "\n".join(report.invalid[:5])
    assert report.output_lines > 1000
    # Logging stays bounded whatever the input (a few hundred bytes per frame at the very most).
    assert report.stderr_bytes <= 200 * report.frames, report.summary()
