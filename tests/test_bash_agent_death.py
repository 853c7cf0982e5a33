"""A command's whole tree dies with the agent, even when the agent is SIGKILLed (no cleanup runs)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(sys.platform != "linux", reason="uses pidfd")]

# A minimal agent: runs one bash call and forwards its live output to stdout.
AGENT = """
import sys
import anyio
from dsh_tools import Services, SessionTasks, ToolExecution, ToolRegistry
from reference_tools.bash import bash_tools


async def main() -> None:
    registry = ToolRegistry()
    for tool in bash_tools():
        registry.register(tool)

    async def show(event):
        sys.stdout.write(event.data)
        sys.stdout.flush()

    command, cwd, mode = sys.argv[1:]
    arguments = {"command": command, "description": "spawn a tree", "run_in_background": mode == "bg"}
    async with anyio.create_task_group() as group:
        services = Services(SessionTasks(group))
        execution = ToolExecution(
            call_id="c1", name="bash", arguments=arguments, cwd=cwd, services=services, progress=show
        )
        await registry.execute(execution)
        while True:  # a background task reports through bash_output
            output = ToolExecution(
                call_id="c2", name="bash_output", arguments={"task_id": "bg-1"}, cwd=cwd, services=services
            )
            result = await registry.execute(output)
            lines = result.content[0].text.splitlines()
            sys.stdout.writelines(f"{line}\\n" for line in lines if line.isdigit())
            sys.stdout.flush()
            await anyio.sleep(0.02)


anyio.run(main)
"""
TREE = 'sleep 1000 & echo "$!"; (sleep 1000 & echo "$!"); echo "$$"; wait'


async def wait_exited(pid: int) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


@pytest.mark.parametrize("mode", ["fg", "bg"])
async def test_sigkilled_agent_takes_every_descendant_with_it(tmp_path: Path, mode: str) -> None:
    agent = await anyio.open_process([sys.executable, "-c", AGENT, TREE, str(tmp_path), mode])
    try:
        assert agent.stdout is not None
        seen = b""
        with anyio.fail_after(20):
            while seen.count(b"\n") < 3:
                seen += await agent.stdout.receive()
        pids = [int(word) for word in seen.split()[:3]]
        for pid in pids:
            os.kill(pid, 0)  # all alive before the agent dies
        agent.send_signal(signal.SIGKILL)  # no finally, no atexit: only the guards can act
        await agent.wait()
    finally:
        if agent.returncode is None:
            agent.kill()
        await agent.aclose()
    with anyio.fail_after(5):
        for pid in pids:
            await wait_exited(pid)
