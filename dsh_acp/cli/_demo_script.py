"""What ``dsh-acp demo`` plays: a tiny Python project with a bug, and the scripted model session
that fixes it.

The story is the everyday job of a coding agent, told with every card an editor draws: a plan
(``todo_write``), a directory listing and a glob (generic cards, run together), a test run that fails
(a live terminal with a red exit code), a file read, an edit (a diff card), the test run again (green),
and the plan ticked off. In the ``default`` permission mode the first command and the edit ask for
permission; the demo's editor answers "Always allow exactly" that test command, so the second test run
goes ahead without asking.

The script is built at run time because tool arguments carry absolute paths into the temporary
workspace. Its format is the scripted model's (see ``dsh_acp.models._scripted``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

__all__ = ["PERMISSION_CHOICES", "PROMPT", "WORKSPACE", "demo_script", "write_workspace"]

PROMPT = "The tests in this project fail. Find the bug and fix it."
"""What the demo's user types into the agent panel."""

PERMISSION_CHOICES = ("allow_always", "allow_once")
"""The demo's answers to the permission prompts, in the order they come: "Always allow" for the
first test run (so the re-run is not asked again), "Allow" once for the edit."""

_CALC = '''\
"""Tiny statistics helpers."""


def mean(values: list[float]) -> float:
    """The arithmetic mean of ``values``."""
    return sum(values) / (len(values) - 1)


def clamp(value: float, low: float, high: float) -> float:
    """``value`` limited to the range [low, high]."""
    return max(low, min(value, high))
'''

_TESTS = """\
import time
import unittest

from calc import clamp, mean


class CalcTest(unittest.TestCase):
    def setUp(self) -> None:
        time.sleep(0.25)  # a slow suite, so that its output visibly streams in

    def test_clamp_inside(self) -> None:
        self.assertEqual(clamp(5, 0, 10), 5)

    def test_clamp_low(self) -> None:
        self.assertEqual(clamp(-3, 0, 10), 0)

    def test_mean_of_one(self) -> None:
        self.assertEqual(mean([4]), 4)

    def test_mean_of_three(self) -> None:
        self.assertEqual(mean([1, 2, 3]), 2)


if __name__ == "__main__":
    unittest.main()
"""

WORKSPACE: dict[str, str] = {
    "README.md": "# calc\n\nTiny statistics helpers. Run the tests with `python3 -m unittest -v`.\n",
    "calc.py": _CALC,
    "test_calc.py": _TESTS,
}
"""The demo project: relative path -> content."""

_BUGGY_LINE = "    return sum(values) / (len(values) - 1)\n"
_FIXED_LINE = "    return sum(values) / len(values)\n"
_TEST_COMMAND = "python3 -m unittest -v"

_PLAN_ITEMS = (
    "Look around the project",
    "Reproduce the failing tests",
    "Fix the bug",
    "Run the tests again",
)


def write_workspace(root: Path) -> None:
    """Create the demo project in ``root`` (an existing, empty directory)."""
    for relative, content in WORKSPACE.items():
        (root / relative).write_text(content, encoding="utf-8")


def _plan(done: int) -> dict[str, Any]:
    """``todo_write`` arguments with the first ``done`` items completed and the next one in progress."""
    todos = []
    for index, content in enumerate(_PLAN_ITEMS):
        status = "completed" if index < done else "in_progress" if index == done else "pending"
        todos.append({"content": content, "status": status, "priority": "high" if index == 2 else "medium"})
    return {"todos": todos}


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def _streamed_plan(call_id: str, done: int) -> dict[str, Any]:
    """``todo_write`` as a model streams it, its arguments cut inside each item's text and paced so
    that each item shows on the plan as it comes (the agent shows one once the next has begun)."""
    text = orjson.dumps(_plan(done)).decode()
    cuts = [text.index(item) + 4 for item in _PLAN_ITEMS[1:]]
    pieces = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return {"id": call_id, "name": "todo_write", "arguments": pieces, "pause_ms": 250}


def demo_script(cwd: Path) -> dict[str, Any]:
    """The scripted model's file content for a session whose working directory is ``cwd``."""
    calc = str(cwd / "calc.py")
    # delay_ms stands in for the model's think time: the session is paced so a person can follow it.
    steps: list[dict[str, Any]] = [
        {
            "delay_ms": 300,
            "thought": "The user reports failing tests. I will make a plan, look at the files, "
            "reproduce the failure, then fix it.",
            "text": "I'll start with a short plan.",
            "tool_calls": [_streamed_plan("plan-1", 0)],
        },
        {
            "delay_ms": 300,
            "text": "Let me see what is in the project.",
            "tool_calls": [_call("ls-1", "ls", path=str(cwd)), _call("glob-1", "glob", pattern="**/*.py")],
        },
        {
            "delay_ms": 300,
            "text": "One module and its tests. Let me run them to see what fails.",
            "tool_calls": [
                _call("plan-2", "todo_write", **_plan(1)),
                _call("test-1", "bash", command=_TEST_COMMAND, description="Run the test suite"),
            ],
        },
        {
            "delay_ms": 300,
            "thought": "mean([4]) divides by zero and mean([1, 2, 3]) is 3 instead of 2: the divisor is "
            "off by one. Let me read calc.py.",
            "tool_calls": [_call("read-1", "read", file_path=calc)],
        },
        {
            "delay_ms": 300,
            "text": "`mean` divides by `len(values) - 1` (the denominator of a sample variance) instead "
            "of `len(values)`. Fixing it:",
            "tool_calls": [
                _call("plan-3", "todo_write", **_plan(2)),
                _call("edit-1", "edit", file_path=calc, old_string=_BUGGY_LINE, new_string=_FIXED_LINE),
            ],
        },
        {
            "delay_ms": 300,
            "tool_calls": [
                _call("plan-4", "todo_write", **_plan(3)),
                _call("test-2", "bash", command=_TEST_COMMAND, description="Run the tests again"),
            ],
        },
        {
            "delay_ms": 200,
            "tool_calls": [_call("plan-5", "todo_write", **_plan(4))],
        },
        {
            "text": [
                "Fixed: `mean` in `calc.py` now divides by `len(values)`. ",
                "All 4 tests pass.",
            ],
            "usage": {"input": 5200, "output": 640, "context_window": 128000},
        },
    ]
    return {"turns": [steps]}
