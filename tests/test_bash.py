"""The bash tools through the public API: output, limits, environment, background tasks, cards."""

from __future__ import annotations

import functools
import os
import re
import shlex
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from dsh_tools import (
    Deny,
    GenericCallView,
    GenericResultView,
    PreNext,
    PreToolDecision,
    Services,
    SessionTasks,
    TerminalCallView,
    TerminalOutput,
    TerminalResultView,
    TextBlock,
    ToolExecution,
    ToolExecutionResult,
    ToolRegistry,
)
from reference_tools.bash import BashSettings, bash_tools

pytestmark = pytest.mark.anyio

MARKER = re.compile(r"\[\.\.\. (\d+) bytes omitted; full (stdout|stderr) saved to (\S+) \.\.\.\]")


@dataclass
class Session:
    """One session: its cwd, its services and everything its bash calls reported live."""

    cwd: Path
    services: Services
    registry: ToolRegistry = field(default_factory=ToolRegistry)
    chunks: list[str] = field(default_factory=list)
    on_chunk: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        for tool in bash_tools():
            self.registry.register(tool)

    async def _sink(self, event: TerminalOutput) -> None:
        self.chunks.append(event.data)
        if self.on_chunk is not None:
            await self.on_chunk(event.data)

    async def call(self, name: str, **arguments: Any) -> ToolExecutionResult:
        if name == "bash":
            arguments.setdefault("description", "test")
        return await self.registry.execute(
            ToolExecution(
                call_id="c1",
                name=name,
                arguments=arguments,
                cwd=str(self.cwd),
                services=self.services,
                progress=self._sink,
            )
        )


def text_of(result: ToolExecutionResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextBlock))


@pytest.fixture
async def session(tmp_path: Path) -> Any:
    work = tmp_path / "work"
    work.mkdir()
    # As a host does: the session's tasks run in a group that outlives the session.
    async with anyio.create_task_group() as group:
        tasks = SessionTasks(group)
        services = Services(tasks, BashSettings(kill_grace_s=0.3, spill_dir=str(tmp_path / "spill")))
        yield Session(work, services)
        await services.aclose()
        assert len(tasks) == 0  # nothing a tool started outlives the session


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: it has exited, only nobody reaped it)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat", "rb") as status:
            return status.read().rpartition(b")")[2].split()[0] != b"Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


async def assert_gone(pids: list[int], within: float = 5.0) -> None:
    """Wait until every pid has exited, failing after ``within`` seconds."""
    with anyio.fail_after(within):
        for pid in pids:
            try:
                pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                await anyio.wait_readable(pidfd)  # readable once the process has exited
            finally:
                os.close(pidfd)


# A shell with a child, an orphaned grandchild (its parent subshell is gone) and itself: 3 pids.
SPAWN_TREE = 'sleep 1000 & echo "$!"; (sleep 1000 & echo "$!"); echo "$$"; wait'


def pids_in(output: str) -> list[int]:
    return [int(word) for word in output.split()[:3]]


def when_lines(count: int, event: anyio.Event, session: Session) -> Callable[[str], Any]:
    async def check(_: str) -> None:
        if "".join(session.chunks).count("\n") >= count:
            event.set()

    return check


# -- output and exit status -------------------------------------------------------------------


async def test_stdout_stderr_sections_and_exit_code(session: Session) -> None:
    result = await session.call("bash", command="echo out; echo err >&2; exit 2")
    assert text_of(result) == "out\n[stderr]\nerr\n[exit code 2]"
    assert result.meta == {
        "exit_code": 2,
        "signal": None,
        "cwd": str(session.cwd),
        "error": None,
        "stopped_leftovers": False,
        "output": "out\nerr\n",  # both streams as a terminal showed them
    }
    assert not result.is_error  # a failing command is a completed call


async def test_the_terminal_card_replays_the_interleaved_output(session: Session) -> None:
    result = await session.call("bash", command="echo one; echo two >&2; sleep 0.2; echo three")
    assert text_of(result) == "one\nthree\n[stderr]\ntwo\n[exit code 0]"  # the model's sections
    view = next(t for t in bash_tools() if t.name == "bash").result_view(
        {"command": "x", "description": "x"}, result.as_tool_result()
    )
    assert isinstance(view, TerminalResultView)
    assert view.output == "one\ntwo\nthree\n"  # what the live terminal showed, in its order


async def test_no_output_is_just_the_status(session: Session) -> None:
    result = await session.call("bash", command="true")
    assert text_of(result) == "[exit code 0]"


async def test_a_signal_death_is_reported_by_name(session: Session) -> None:
    result = await session.call("bash", command="echo last words; kill -KILL $$")
    assert text_of(result) == "last words\n[killed by SIGKILL]"
    assert result.meta is not None
    assert (result.meta["exit_code"], result.meta["signal"]) == (None, "SIGKILL")
    assert not result.is_error


async def test_live_chunks_are_exactly_the_output(session: Session) -> None:
    result = await session.call("bash", command="seq 1 50000")
    expected = "".join(f"{i}\n" for i in range(1, 50001))
    assert "".join(session.chunks) == expected
    assert len(session.chunks) > 1
    assert MARKER.search(text_of(result))  # longer than head + tail, so the model's copy is cut


async def test_stdout_and_stderr_stream_in_arrival_order(session: Session, tmp_path: Path) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)

    async def release(_: str) -> None:
        if len(session.chunks) == 1:  # the command waits for this before writing to stderr
            await anyio.to_thread.run_sync(fifo.write_bytes, b"\n")

    session.on_chunk = release
    await session.call("bash", command=f"echo out; read _ < {shlex.quote(str(fifo))}; echo err >&2")
    assert session.chunks == ["out\n", "err\n"]


async def test_a_character_split_between_reads_is_never_split(session: Session, tmp_path: Path) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)

    async def release(_: str) -> None:
        if len(session.chunks) == 1:
            await anyio.to_thread.run_sync(fifo.write_bytes, b"\n")

    session.on_chunk = release
    # "€" is e2 82 ac: the first two bytes arrive in one read, the last in the next.
    command = f"printf 'a\\xe2\\x82'; read _ < {shlex.quote(str(fifo))}; printf '\\xac\\n'"
    result = await session.call("bash", command=command)
    assert session.chunks == ["a", "€\n"]
    assert text_of(result) == "a€\n[exit code 0]"


async def test_invalid_bytes_are_shown_escaped(session: Session) -> None:
    # Split across reads too: an escape never stands for a byte of a character still arriving.
    result = await session.call(
        "bash", command="printf 'a\\xffb\\xe2\\x82'; sleep 0.05; printf '\\xac\\xfe\\n'"
    )
    assert text_of(result) == "a\\xffb€\\xfe\n[exit code 0]"
    assert "".join(session.chunks) == "a\\xffb€\\xfe\n"


async def test_ten_megabytes_stay_bounded_and_spill_to_a_private_file(
    session: Session, tmp_path: Path
) -> None:
    expected = b"".join(b"%d\n" % i for i in range(1, 1_500_001))
    assert len(expected) > 10_000_000
    result = await session.call("bash", command="seq 1 1500000")

    model_text = text_of(result)
    assert len(model_text.encode()) < 2 * 30 * 1024 + 200
    assert model_text.startswith("1\n2\n3\n")
    assert model_text.endswith("1499999\n1500000\n[exit code 0]")
    marker = MARKER.search(model_text)
    assert marker is not None
    dropped, stream, path = int(marker[1]), marker[2], Path(marker[3])
    assert stream == "stdout"
    assert dropped == len(expected) - 2 * 30 * 1024
    assert path == tmp_path / "spill" / "cmd-1.stdout"
    spill = anyio.Path(path)
    assert await spill.read_bytes() == expected
    assert stat.S_IMODE((await spill.stat()).st_mode) == 0o600
    assert stat.S_IMODE((await spill.parent.stat()).st_mode) == 0o700
    assert sum(len(chunk) for chunk in session.chunks) == len(expected)

    await session.services.aclose()
    assert not await spill.exists()
    assert not await spill.parent.exists()  # made by the session, so removed with it


async def test_stderr_is_bounded_and_spilled_on_its_own(session: Session) -> None:
    result = await session.call("bash", command="echo fine; seq 1 100000 >&2")
    out, _, err = text_of(result).partition("[stderr]\n")
    assert out == "fine\n"
    marker = MARKER.search(err)
    assert marker is not None
    assert marker[2] == "stderr"
    assert await anyio.Path(marker[3]).read_bytes() == b"".join(b"%d\n" % i for i in range(1, 100_001))


async def test_default_spill_dir_is_a_private_temporary_directory(tmp_path: Path) -> None:
    session = Session(tmp_path, Services())
    result = await session.call("bash", command="seq 1 100000")
    marker = MARKER.search(text_of(result))
    assert marker is not None
    spill = anyio.Path(marker[3])
    assert spill.parent.parent == anyio.Path(tempfile.gettempdir())
    assert stat.S_IMODE((await spill.parent.stat()).st_mode) == 0o700
    await session.services.aclose()
    assert not await spill.parent.exists()


# -- stopping: timeout, escalation, cancel ----------------------------------------------------


async def test_timeout_kills_the_whole_tree_and_keeps_the_output(session: Session) -> None:
    result = await session.call("bash", command=SPAWN_TREE, timeout_ms=1000)
    pids = pids_in(text_of(result))
    assert len(pids) == 3
    assert result.is_error
    assert text_of(result).endswith("\n[timed out after 1 s; killed by SIGTERM]")
    assert result.meta is not None
    assert result.meta["error"] == "timed out after 1 s"
    assert result.meta["signal"] == "SIGTERM"
    await assert_gone(pids, within=1)  # the call returned once the group was gone


async def test_sigterm_ignored_escalates_to_sigkill(session: Session) -> None:
    command = "trap '' TERM; " + SPAWN_TREE  # ignored signals stay ignored in the children
    result = await session.call("bash", command=command, timeout_ms=300)
    assert text_of(result).endswith("[timed out after 0.3 s; killed by SIGKILL]")
    await assert_gone(pids_in(text_of(result)), within=1)


async def test_cancel_mid_command_kills_the_whole_tree(session: Session) -> None:
    started = anyio.Event()
    session.on_chunk = when_lines(3, started, session)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(functools.partial(session.call, "bash", command=SPAWN_TREE))
            await started.wait()
            pids = pids_in("".join(session.chunks))
            assert all(running(pid) for pid in pids)
            group.cancel_scope.cancel()
    await assert_gone(pids, within=1)


async def test_timeouts_are_clamped_to_the_maximum(tmp_path: Path) -> None:
    session = Session(tmp_path, Services(BashSettings(max_timeout_s=0.2, kill_grace_s=0.2)))
    result = await session.call("bash", command="sleep 1000", timeout_ms=600_000)
    assert text_of(result) == "[timed out after 0.2 s; killed by SIGTERM]"
    await session.services.aclose()


async def test_a_non_positive_timeout_is_refused(session: Session) -> None:
    result = await session.call("bash", command="true", timeout_ms=0)
    assert result.is_error
    assert text_of(result) == "Error: timeout_ms must be positive, not 0"


# -- where and with what it runs ----------------------------------------------------------------


async def test_workdir_resolves_against_the_session_cwd(session: Session) -> None:
    (session.cwd / "a" / "b").mkdir(parents=True)
    assert str(session.cwd) != os.getcwd()
    default = await session.call("bash", command="pwd")
    relative = await session.call("bash", command="pwd", workdir="a/b")
    absolute = await session.call("bash", command="pwd", workdir=str(session.cwd / "a"))
    assert text_of(default) == f"{session.cwd}\n[exit code 0]"
    assert text_of(relative) == f"{session.cwd}/a/b\n[exit code 0]"
    assert text_of(absolute) == f"{session.cwd}/a\n[exit code 0]"
    assert relative.meta is not None
    assert relative.meta["cwd"] == f"{session.cwd}/a/b"


async def test_a_missing_workdir_is_a_clear_error_with_a_terminal_result(session: Session) -> None:
    result = await session.call("bash", command="true", workdir="nowhere")
    missing = f"{session.cwd}/nowhere"
    assert result.is_error
    assert text_of(result) == f"Error: the working directory {missing} does not exist"
    view = bash_definition().result_view({"command": "true", "description": "d"}, result.as_tool_result())
    assert view == TerminalResultView(output=None, error=f"the working directory {missing} does not exist")


async def test_without_a_session_cwd_relative_workdirs_are_refused(session: Session) -> None:
    execution = ToolExecution(
        call_id="c1", name="bash", arguments={"command": "pwd", "description": "d"}, services=session.services
    )
    result = await session.registry.execute(execution)
    assert result.is_error
    assert "pass an absolute workdir" in text_of(result)


async def test_secret_looking_variables_are_removed(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MY_API_KEY", "GH_TOKEN", "DB_PASSWORD", "client_secret", "PLAIN_SETTING"):
        monkeypatch.setenv(name, "value")
    monkeypatch.setenv("PAGER", "less")
    result = await session.call("bash", command="env")
    names = {line.partition("=")[0]: line.partition("=")[2] for line in text_of(result).splitlines()}
    assert not {"MY_API_KEY", "GH_TOKEN", "DB_PASSWORD", "client_secret"} & names.keys()
    assert names["PLAIN_SETTING"] == "value"
    assert (names["NO_COLOR"], names["TERM"], names["PAGER"], names["GIT_PAGER"]) == (
        "1",
        "dumb",
        "cat",
        "cat",
    )


@pytest.mark.parametrize(
    ("settings", "kept"),
    [
        (BashSettings(keep_env=frozenset({"GH_TOKEN"})), {"GH_TOKEN"}),
        (BashSettings(scrub_secret_env=False), {"GH_TOKEN", "MY_API_KEY"}),
    ],
)
async def test_secret_scrubbing_is_configurable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: BashSettings, kept: set[str]
) -> None:
    monkeypatch.setenv("GH_TOKEN", "t")
    monkeypatch.setenv("MY_API_KEY", "k")
    session = Session(tmp_path, Services(settings))
    result = await session.call("bash", command="env")
    names = {line.partition("=")[0] for line in text_of(result).splitlines()}
    assert names & {"GH_TOKEN", "MY_API_KEY"} == kept
    await session.services.aclose()


async def test_commands_read_no_stdin(session: Session) -> None:
    result = await session.call("bash", command="cat; echo after")
    assert text_of(result) == "after\n[exit code 0]"


async def test_processes_that_left_the_group_are_stopped_when_the_command_ends(session: Session) -> None:
    # A new session, and a double fork: neither is in the command's group any more.
    command = 'setsid sleep 1000 & echo "$!"; ( (sleep 1000 & echo "$!") & ); sleep 0.2'
    result = await session.call("bash", command=command)
    pids = [int(word) for word in text_of(result).split()[:2]]
    assert "stopped the processes it left running" in text_of(result)
    await assert_gone(pids, within=1)


async def test_processes_left_behind_are_stopped_when_the_command_ends(session: Session) -> None:
    result = await session.call("bash", command='sleep 1000 & echo "$!"')
    pid = int(text_of(result).split()[0])
    assert text_of(result) == (
        f"{pid}\n[exit code 0; stopped the processes it left running; use run_in_background to keep them]"
    )
    assert result.meta is not None
    assert result.meta["stopped_leftovers"] is True
    await assert_gone([pid], within=1)


# -- background tasks ---------------------------------------------------------------------------


async def read_until(session: Session, task_id: str, done: Callable[[str], bool]) -> str:
    """Poll ``bash_output`` until what it returned so far satisfies ``done``; return that, less
    the lines that only say nothing happened yet."""
    seen = ""
    with anyio.fail_after(10):
        while True:
            result = await session.call("bash_output", task_id=task_id)
            assert not result.is_error, text_of(result)
            for line in text_of(result).splitlines():
                if line not in ("(no new output)", "[still running]"):
                    seen += line + "\n"
            if done(seen):
                return seen
            await anyio.sleep(0.01)


async def test_background_task_lifecycle(session: Session, tmp_path: Path) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    command = f"echo one; read _ < {shlex.quote(str(fifo))}; echo two; echo oops >&2; exit 3"
    started = await session.call("bash", command=command, run_in_background=True)
    assert text_of(started).startswith(f"Started background task bg-1 in {session.cwd}.")
    assert started.meta == {"task_id": "bg-1", "cwd": str(session.cwd)}

    assert await read_until(session, "bg-1", lambda seen: "one" in seen) == "one\n"
    idle = await session.call("bash_output", task_id="bg-1")
    assert text_of(idle) == "(no new output)\n[still running]"
    assert idle.meta is not None
    assert idle.meta["running"] is True

    await anyio.to_thread.run_sync(fifo.write_bytes, b"\n")
    rest = await read_until(session, "bg-1", lambda seen: "exit code" in seen)
    assert rest.endswith("two\n[stderr]\noops\n[exit code 3]\n")
    assert "one" not in rest  # only what is new since the last read
    again = await session.call("bash_output", task_id="bg-1")
    assert text_of(again) == "(no new output)\n[exit code 3]"
    late_kill = await session.call("bash_kill", task_id="bg-1")
    assert text_of(late_kill) == "Task bg-1 had already ended [exit code 3]."


async def test_bash_kill_stops_the_whole_tree(session: Session) -> None:
    await session.call("bash", command=SPAWN_TREE, run_in_background=True)
    pids = pids_in(await read_until(session, "bg-1", lambda seen: seen.count("\n") >= 3))
    killed = await session.call("bash_kill", task_id="bg-1")
    assert text_of(killed) == "Stopped task bg-1 [killed by SIGTERM]."
    assert killed.meta is not None
    assert (killed.meta["running"], killed.meta["signal"]) == (False, "SIGTERM")
    await assert_gone(pids, within=1)
    after = await session.call("bash_output", task_id="bg-1")
    assert text_of(after) == "(no new output)\n[killed by SIGTERM]"


async def test_task_ids_are_per_session(session: Session, tmp_path: Path) -> None:
    await session.call("bash", command="sleep 1000", run_in_background=True)
    second = await session.call("bash", command="sleep 1000", run_in_background=True)
    assert second.meta is not None
    assert second.meta["task_id"] == "bg-2"
    other = Session(tmp_path, Services())
    for tool in ("bash_output", "bash_kill"):
        result = await other.call(tool, task_id="bg-1")
        assert result.is_error
        assert text_of(result) == "Error: no background task bg-1 in this session"
    unknown = await session.call("bash_output", task_id="bg-9")
    assert text_of(unknown) == "Error: no background task bg-9 in this session"
    await other.services.aclose()


async def test_background_tasks_die_with_their_session(session: Session) -> None:
    await session.call("bash", command=SPAWN_TREE, run_in_background=True)
    pids = pids_in(await read_until(session, "bg-1", lambda seen: seen.count("\n") >= 3))
    assert all(running(pid) for pid in pids)
    await session.services.aclose()
    await assert_gone(pids, within=1)


async def test_a_background_job_is_a_session_task_not_a_thread(session: Session) -> None:
    import threading

    tasks = session.services.get(SessionTasks)
    assert tasks is not None
    threads = threading.active_count()
    await session.call("bash", command="sleep 1000", run_in_background=True)
    assert len(tasks) == 1  # its output is pumped by a task of the session, on the session's loop
    assert threading.active_count() == threads
    await session.call("bash_kill", task_id="bg-1")  # returns once the job is finished
    assert len(tasks) == 0  # its task ended with it


async def test_a_session_that_closes_cancels_its_tasks_even_if_the_tool_does_not(tmp_path: Path) -> None:
    # The shell's own close stops its jobs first; a session's tasks are cancelled anyway.
    async with anyio.create_task_group() as group:
        tasks = SessionTasks(group)
        ended: list[str] = []

        async def forever() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                ended.append("cancelled")

        async def fails() -> None:
            raise RuntimeError("a bug in a task")

        tasks.start_soon(forever)
        tasks.start_soon(fails)  # logged; the group and the other task go on
        await anyio.sleep(0.01)
        assert len(tasks) == 1
        await tasks.aclose()
        assert ended == ["cancelled"]
        with pytest.raises(RuntimeError, match="closed"):
            tasks.start_soon(forever)


async def test_without_session_tasks_background_commands_are_refused(tmp_path: Path) -> None:
    session = Session(tmp_path, Services())
    result = await session.call("bash", command="sleep 1000", run_in_background=True)
    assert result.is_error
    assert text_of(result) == (
        "Error: this host keeps no session tasks: run the command without run_in_background"
    )
    await session.services.aclose()


async def test_background_output_is_bounded_and_spilled(session: Session, tmp_path: Path) -> None:
    await session.call("bash", command="seq 1 100000", run_in_background=True)
    seen = await read_until(session, "bg-1", lambda seen: "exit code" in seen)
    marker = MARKER.search(seen)
    assert marker is not None
    assert Path(marker[3]) == tmp_path / "spill" / "bg-1.stdout"
    assert len(seen.encode()) < 3 * 60 * 1024  # a few reads, each at most head + tail
    assert await anyio.Path(marker[3]).read_bytes() == b"".join(b"%d\n" % i for i in range(1, 100_001))


async def test_a_background_timeout_applies_when_asked(session: Session) -> None:
    await session.call("bash", command="sleep 1000", run_in_background=True, timeout_ms=200)
    seen = await read_until(session, "bg-1", lambda seen: "killed" in seen)
    assert seen.endswith("[timed out after 0.2 s; killed by SIGTERM]\n")


# -- definitions and presentation -------------------------------------------------------------


def bash_definition(name: str = "bash") -> Any:
    return next(tool for tool in bash_tools() if tool.name == name)


def test_definitions() -> None:
    tools = {tool.name: tool for tool in bash_tools()}
    assert list(tools) == ["bash", "bash_output", "bash_kill"]
    assert all(tool.kind == "execute" and not tool.read_only for tool in tools.values())
    assert [tool.parallel_safe for tool in tools.values()] == [False, True, False]
    assert tools["bash"].parameters["required"] == ["command", "description"]
    assert tools["bash_output"].parameters["required"] == ["task_id"]


def test_call_cards() -> None:
    bash = bash_definition()
    args = {"command": "make test", "description": "Run the tests"}
    assert bash.call_view(args) == TerminalCallView(title="make test", description="Run the tests")
    assert bash.call_view({**args, "workdir": "/abs/dir"}).cwd == "/abs/dir"
    assert bash.call_view({**args, "workdir": "rel"}).cwd == "rel"  # the bridge resolves it
    assert bash.call_view({**args, "run_in_background": True}) == GenericCallView(
        title="make test (background)",
        kind="execute",
        raw_input={"command": "make test", "description": "Run the tests", "run_in_background": True},
    )
    assert bash.call_view({"description": "no command"}) is None  # malformed: the generic card
    assert bash_definition("bash_output").call_view({"task_id": "bg-1"}) == GenericCallView(
        title="Output of bg-1", kind="execute", raw_input={"task_id": "bg-1"}
    )
    assert bash_definition("bash_kill").call_view({"task_id": "bg-1"}) == GenericCallView(
        title="Stop bg-1", kind="execute", raw_input={"task_id": "bg-1"}
    )


@pytest.mark.parametrize(
    ("command", "arguments", "expected"),
    [
        ("echo hi; exit 4", {}, TerminalResultView(output="hi\n", exit_code=4)),
        ("kill -TERM $$", {}, TerminalResultView(output="", signal="SIGTERM")),
        (
            "echo partial; sleep 1000",
            {"timeout_ms": 200},
            TerminalResultView(output="partial\n", signal="SIGTERM", error="timed out after 0.2 s"),
        ),
    ],
)
async def test_result_cards_replay_from_the_logged_result(
    session: Session, command: str, arguments: dict[str, Any], expected: TerminalResultView
) -> None:
    args = {"command": command, "description": "d", **arguments}
    result = await session.call("bash", **args)
    live = bash_definition().result_view(args, result.as_tool_result())
    assert live == expected
    # What a session log keeps: JSON of the content and meta; the card must come out the same.
    logged = orjson.loads(
        orjson.dumps({"content": [b.model_dump() for b in result.content], "meta": result.meta})
    )
    replayed = ToolExecutionResult(
        call_id="c1",
        content=tuple(TextBlock(**b) for b in logged["content"]),
        is_error=result.is_error,
        meta=logged["meta"],
    )
    assert bash_definition().result_view(args, replayed.as_tool_result()) == live


async def test_errors_without_meta_are_fenced(session: Session) -> None:
    async def refuse(execution: ToolExecution, proceed: PreNext) -> PreToolDecision:
        return Deny("no ```shell``` today")

    session.registry.on_pre_execute(refuse)
    args = {"command": "true", "description": "d"}
    result = await session.call("bash", **args)
    view = bash_definition().result_view(args, result.as_tool_result())
    assert view == GenericResultView(
        content=(TextBlock(text="````console\nError: no ```shell``` today\n````"),)
    )


async def test_task_results_are_fenced(session: Session) -> None:
    await session.call("bash", command="echo '# not a heading'", run_in_background=True)
    seen = await read_until(session, "bg-1", lambda seen: "exit code" in seen)
    assert "# not a heading" in seen
    result = await session.call("bash_output", task_id="bg-1")
    view = bash_definition("bash_output").result_view({"task_id": "bg-1"}, result.as_tool_result())
    assert view == GenericResultView(
        content=(TextBlock(text="```console\n(no new output)\n[exit code 0]\n```"),)
    )
