"""What a permission check adds to a tool call.

Target: at most 1 ms per call for the whole decision a call goes through before it runs or asks —
the mode gate and the file-system policy in the real registry (a `write` inside the workspace:
a realpath and a stat), and the approver's rule check (read the line with the shell reader, match
it against the session's and the project's remembered rules, the project file read from disk as
it is before every question). The floor, run side by side, is the same registry call without any
listener. Commands range from `git status` to a 40-part compound line and a 4 KB command.

Run: python bench/bench_permission.py   (exit status 1 when a target is missed)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _stats import median_us, report

from dsh_acp.permissions._approvals import ProjectRules
from dsh_acp.permissions._modes import PermissionState, mode_gate
from dsh_acp.permissions._permission_choices import Question
from dsh_acp.permissions._rules import Rule
from dsh_tools import CommandSubject, Services, ToolExecution, ToolRegistry, define_tool
from reference_tools import register_fs_tools

TARGET_US = 1000.0
COMMANDS = {
    "simple": "git status --short",
    "compound (3 parts)": "git status && npm test -- --watch=false | tee out.txt",
    "compound (40 parts)": " && ".join(f"git log -{i} --oneline" for i in range(40)),
    "4 KB line": "echo " + " ".join(f"'word {i}'" for i in range(400)),
    "refused ($(...))": "git status $(touch x)",
}


def _rules(count: int) -> list[Rule]:
    rules = [Rule("bash", "prefix", ("git", f"sub{i}")) for i in range(count)]
    return [*rules, Rule("bash", "prefix", ("git", "log")), Rule("bash", "prefix", ("npm", "test"))]


def _rule_check(command: str, root: str, session: set[Rule], project: ProjectRules) -> None:
    allow, reject = project.load()
    question = Question.of("bash", CommandSubject(command, root), (root,))
    if question.rejected_by([*session, *reject]) is None:
        question.allowed_by([*session, *allow])


async def _noop(args: dict[str, Any], execution: ToolExecution) -> str:
    return "ok"


def _gate_costs(root: str) -> tuple[float, float]:
    """Median µs of the real registry's gate for a `write` inside the workspace, and of the
    same call through a registry without listeners (the floor)."""
    full = ToolRegistry()
    full.on_pre_execute(mode_gate(full))
    register_fs_tools(full)
    bare = ToolRegistry()
    bare.register(define_tool(name="write", description="w", parameters={}, execute=_noop))
    services = Services(PermissionState(mode="accept_edits"))
    execution = ToolExecution(
        call_id="w",
        name="write",
        arguments={"file_path": "src/new.py", "content": "x"},
        cwd=root,
        services=services,
    )

    async def timed(registry: ToolRegistry, inner: int) -> float:
        samples = []
        for _ in range(15):
            start = time.perf_counter()
            for _ in range(inner):
                await registry._gate(execution)
            samples.append((time.perf_counter() - start) / inner * 1e6)
        samples.sort()
        return samples[len(samples) // 2]

    async def both() -> tuple[float, float]:
        return await timed(full, 2000), await timed(bare, 2000)

    return asyncio.run(both())


def main() -> int:
    missed = False
    with tempfile.TemporaryDirectory() as tmp:
        root = str(Path(tmp).resolve() / "project")
        Path(root, "src").mkdir(parents=True)
        project = ProjectRules(str(Path(tmp) / "state"), root)
        project.save(_rules(20), [Rule("bash", "exact", ("rm", "-rf", "/"))])
        session = set(_rules(30))
        gate, floor = _gate_costs(root)
        report(
            "gate: mode + fs policy, write inside (floor: no listeners)", gate, "µs", f"floor {floor:.2f} µs"
        )
        for label, command in COMMANDS.items():
            cost = median_us(lambda command=command: _rule_check(command, root, session, project), inner=200)
            total = cost + gate - floor
            report(f"rule check + gate, {label}", total, "µs", f"target ≤ {TARGET_US:.0f} µs")
            missed |= total > TARGET_US
    print("MISSED" if missed else "all targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
