"""The tool catalog: ``dsh-acp tools --markdown`` and the committed ``docs/tools.md`` agree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsh_tools.sandbox import sandbox_support

DOCS = Path(__file__).parent.parent / "docs" / "tools.md"


@pytest.mark.skipif(
    not sandbox_support().available,
    reason="docs/tools.md shows the tools as a machine with the sandbox offers them",
)
def test_docs_tools_md_is_the_cli_output() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "tools", "--markdown"], capture_output=True, text=True, check=True
    ).stdout
    assert out == DOCS.read_text(encoding="utf-8"), "regenerate it: dsh-acp tools --markdown > docs/tools.md"


def test_tools_lists_each_tool_with_its_description_wrapped() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dsh_acp", "tools"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    names = [line.split()[0] for line in out if not line.startswith(" ")]  # continuations are indented
    assert names == [
        "bash",
        "bash_output",
        "bash_kill",
        "read",
        "write",
        "edit",
        "glob",
        "grep",
        "ls",
        "todo_write",
        "web_fetch",
        "task",
    ]
