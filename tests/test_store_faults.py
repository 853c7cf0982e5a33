"""The session store under faults: torn lines, two agents, descriptors, a full or read-only disk.

What the editor must see in each case: a one-line JSON-RPC error naming the cause and the path, the
turn closed consistently (every card it was shown closed; the conversation what a reload rebuilds),
and every other session still working.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_acp import RpcError
from dsh_acp.session import _store
from dsh_acp.session._event_lines import event_json
from dsh_acp.session._events import ModeChanged, TurnStopped, UserPrompt
from dsh_acp.session._store import SessionBusy, SessionStore
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import define_tool
from helpers import recorded

pytestmark = pytest.mark.anyio


async def _note(args: dict[str, Any], execution: Any) -> str:
    return "noted " + "n" * 2000


note = define_tool(
    name="note",
    description="Note.",
    parameters={"path": {"type": "string", "required": True}},
    execute=_note,
    kind="read",
    read_only=True,
)

TOOL_TURN = [
    {"tool_calls": [{"id": "n1", "name": "note", "arguments": {"path": "/a"}}]},
    {"text": "Done."},
]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- torn lines and what a load reports ---------------------------------------------------------


def test_an_append_never_lands_on_a_torn_line(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T")
    log = store.create("s1", "/w", [])
    log.append(UserPrompt(()))
    log.close()
    with open(log.path, "ab") as handle:
        handle.write(b'{"type": "assistant", "te')  # the agent died mid-write
    assert store.load("s1").skipped == ["line 3 (the last, torn by a crash?)"]
    again = store.open("s1")
    again.append(TurnStopped("end_turn"))
    again.close()
    loaded = store.load("s1")
    assert [event_json(e)["type"] for e in loaded.events] == ["user", "stop"]  # the next event survived
    assert loaded.skipped == ["line 3"]  # fenced: no longer the last line
    store.close()


async def test_a_load_tells_the_editor_which_lines_it_skipped(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, _ = recorded([[{"text": "hi"}]], state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "hello")
    path = tmp_path / "state" / "sessions" / f"{sid}.jsonl"
    _append_torn(path)
    config, _ = recorded([[{"text": "hi"}]], state_dir=tmp_path / "state")
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        await client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        await client.wait_for(lambda _: "could not be read" in _texts(client, sid))
        assert "skipped: line 6 (the last, torn by a crash?)" in _texts(client, sid)
    client.assert_valid()


def _append_torn(path: Path) -> None:
    with open(path, "ab") as handle:
        handle.write(b'{"type": "user", "cont')


def _texts(client: AcpClient, sid: str) -> str:
    return "".join(u["content"]["text"] for u in client.updates(sid, ("agent_message_chunk",)))


# -- claims: two agents never write one session ------------------------------------------------


def test_two_stores_never_open_one_session(tmp_path: Path) -> None:
    first = SessionStore(tmp_path, clock=lambda: "T")
    second = SessionStore(tmp_path, clock=lambda: "T")
    log = first.create("s1", "/w", [])
    with pytest.raises(SessionBusy, match="open in another dsh-acp process"):
        second.open("s1")
    with pytest.raises(SessionBusy):
        first.open("s1")  # nor twice in one store
    log.close()
    second.open("s1").close()
    first.close()
    second.close()


_RACER = """
import sys, time
from pathlib import Path
from dsh_acp.session._events import ModeChanged
from dsh_acp.session._store import SessionBusy, SessionStore
store = SessionStore(Path(sys.argv[1]), clock=lambda: "T")
deadline = float(sys.argv[2])
while time.time() < deadline:
    pass
try:
    log = store.open("s1")
except SessionBusy:
    print("busy", flush=True)
else:
    log.append(ModeChanged("plan"))
    print("won", flush=True)
    sys.stdin.read()  # hold it until told to go
"""


def test_two_agents_racing_for_one_session_one_wins(tmp_path: Path) -> None:
    import time

    SessionStore(tmp_path, clock=lambda: "T").create("s1", "/w", []).close()
    for _ in range(5):
        start = str(time.time() + 0.5)
        racers = [
            subprocess.Popen(
                [sys.executable, "-c", _RACER, str(tmp_path), start],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outcomes = sorted(racer.stdout.readline().strip() for racer in racers if racer.stdout)
        for racer in racers:
            racer.communicate("", timeout=10)
        assert outcomes == ["busy", "won"]


async def test_a_session_open_in_one_agent_is_busy_in_another(acp_schema: AcpSchema, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"text": "hi"}]] * 3}))
    args = ["--model", f"script:{script}", "--state-dir", str(tmp_path / "state")]
    async with (
        AcpClient.subprocess(args, schema=acp_schema) as first,
        AcpClient.subprocess(args, schema=acp_schema) as second,
    ):
        await first.initialize()
        await second.initialize()
        sid = await first.new_session(str(tmp_path))
        load = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        with pytest.raises(RpcError, match="open in another dsh-acp process"):
            await second.request("session/load", load)
        await first.request("session/close", {"sessionId": sid})
        await second.request("session/load", load)
        assert (await second.prompt(sid, "hello"))["stopReason"] == "end_turn"
    first.assert_valid()
    second.assert_valid()


# -- descriptors and memory ---------------------------------------------------------------------


def test_idle_sessions_hold_no_descriptor(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, clock=lambda: "T")
    before = _open_fds()
    logs = [store.create(f"s{i}", "/w", []) for i in range(2000)]
    for log in logs[::7]:
        log.append(ModeChanged("plan"))
    assert _open_fds() - before <= _store._OPEN_LOGS + 1  # the cache and the lock file
    for log in logs:
        log.close()
    store.close()
    assert _open_fds() == before


def test_thousands_of_sessions_through_the_real_process(tmp_path: Path) -> None:
    """Descriptors and memory of idle sessions, measured on the agent process itself (the bench
    bench/bench_sessions.py measures 10,000 against the targets)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"text": "hi"}]]}))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    command = [sys.executable, "-m", "dsh_acp", "--model", f"script:{script}"]
    agent = subprocess.Popen(
        [*command, "--state-dir", str(tmp_path / "state")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        # ulimit -n 1024: sessions used to fail from the 1,014th on, and then the open ones too.
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)),
    )
    assert agent.stdin is not None
    assert agent.stdout is not None

    def ask(request_id: int, method: str, params: Any) -> Any:
        assert agent.stdin is not None
        assert agent.stdout is not None
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        agent.stdin.write(json.dumps(message).encode() + b"\n")
        agent.stdin.flush()
        while True:
            answer = json.loads(agent.stdout.readline())
            if answer.get("id") == request_id:
                return answer

    def measure() -> tuple[int, int]:
        status = Path(f"/proc/{agent.pid}/status").read_text()
        rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        return rss, len(os.listdir(f"/proc/{agent.pid}/fd"))

    try:
        ask(0, "initialize", {"protocolVersion": 1})
        for i in range(50):  # warm up: imports, caches
            ask(100_000 + i, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        rss_before, _ = measure()
        sessions = []
        for i in range(3000):
            answer = ask(i + 1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
            sessions.append(answer["result"]["sessionId"])
        rss_after, fds = measure()
        for n, sid in enumerate((sessions[0], sessions[-1])):
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
            assert ask(10_000 + n, "session/prompt", prompt)["result"] == {"stopReason": "end_turn"}
        assert fds <= 64, f"{fds} descriptors open after 3,000 sessions"
        per_session = (rss_after - rss_before) * 1024 / 3000
        assert per_session < 4096, f"{per_session:.0f} bytes per idle session"
    finally:
        agent.stdin.close()
        agent.wait(timeout=10)
        agent.stdout.close()


# -- a full disk, a read-only one, no descriptor left ---------------------------------------------


@contextlib.contextmanager
def _failing_writes(error: int, after: int = 0) -> Iterator[list[int]]:
    """Make writes to session logs fail with ``error`` after ``after`` more have succeeded, the way
    a disk that fills up does (the seam is the store's ``os.write``)."""
    real = os.write
    seen = [0]

    def write(fd: int, data: Any) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl"):
            seen[0] += 1
            if seen[0] > after:
                raise OSError(error, os.strerror(error))
        return real(fd, data)

    patch = pytest.MonkeyPatch()
    patch.setattr(_store.os, "write", write)
    try:
        yield seen
    finally:
        patch.undo()


async def test_a_full_disk_mid_turn_fails_the_prompt_and_keeps_the_turn_consistent(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    config, _ = recorded([TOOL_TURN, [{"text": "Again."}], [{"text": "Third."}]], [note])
    config.state_dir = tmp_path / "state"
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        other = await client.new_session(str(tmp_path))
        # user, assistant and tool_call get written; the tool's result finds the disk full.
        with _failing_writes(errno.ENOSPC, after=3), pytest.raises(RpcError) as info:
            await client.prompt(sid, "go")
        path = tmp_path / "state" / "sessions" / f"{sid}.jsonl"
        assert info.value.code == -32603
        assert info.value.message == f"the session log could not be written: no space left on device ({path})"
        cards = client.updates(sid, ("tool_call", "tool_call_update"))
        assert cards[0]["sessionUpdate"] == "tool_call"
        assert [u.get("status") for u in cards[1:]] == ["failed"]  # shown, and closed
        # The other session never noticed; and once there is room again, so does this one.
        assert (await client.prompt(other, "hi"))["stopReason"] == "end_turn"
        assert (await client.prompt(sid, "again"))["stopReason"] == "end_turn"
    client.assert_valid()
    # The log holds what the editor saw: the call opened and never finished, replayed as failed.
    reloaded = SessionStore(tmp_path / "state", clock=lambda: "T").load(sid)
    assert [event_json(e)["type"] for e in reloaded.events] == [
        "user",
        "assistant",
        "tool_call",
        "user",
        "assistant",
        "stop",
        "title",
    ]
    assert reloaded.skipped == []


async def test_a_state_folder_that_fails_names_the_cause(acp_schema: AcpSchema, tmp_path: Path) -> None:
    config, _ = recorded([[{"text": "hi"}]] * 3)
    config.state_dir = tmp_path / "state"
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        for code, words in [(errno.EROFS, "read-only file system"), (errno.EACCES, "permission denied")]:
            with _failing_writes(code), pytest.raises(RpcError) as info:
                await client.new_session(str(tmp_path))
            assert info.value.message.startswith(f"the session log could not be written: {words} (")
            with _failing_writes(code), pytest.raises(RpcError) as info:
                await client.request("session/set_mode", {"sessionId": sid, "modeId": "plan"})
            assert info.value.message.startswith(f"the session log could not be written: {words} (")
        assert (await client.prompt(sid, "still here"))["stopReason"] == "end_turn"
    client.assert_valid()
    # A session that could not start leaves no log behind.
    assert sorted(p.name for p in (tmp_path / "state" / "sessions").iterdir()) == [
        ".locks",
        f"{sid}.jsonl",
        f"{sid}.listing.json",
    ]


async def test_no_descriptor_left_fails_only_the_request_that_needed_one(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    config, _ = recorded([[{"text": "hi"}]] * 3)
    config.state_dir = tmp_path / "state"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    async with AcpClient.in_memory(config, schema=acp_schema) as client:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        assert (await client.prompt(sid, "first"))["stopReason"] == "end_turn"
        hogs: list[int] = []
        resource.setrlimit(resource.RLIMIT_NOFILE, (_open_fds() + 8, hard))
        try:
            with contextlib.suppress(OSError):
                while True:
                    hogs.append(os.open(os.devnull, os.O_RDONLY))
            with pytest.raises(RpcError) as info:
                await client.new_session(str(tmp_path))
            assert "too many open files, the agent's limit (ulimit -n)" in info.value.message
            # The open session writes through the descriptor it already has.
            assert (await client.prompt(sid, "second"))["stopReason"] == "end_turn"
        finally:
            for fd in hogs:
                os.close(fd)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        await client.new_session(str(tmp_path))
    client.assert_valid()


# -- the same through the real process, on a real small or read-only disk ----------------------


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]
    mounted = subprocess.run(command, capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _remount_read_only(disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)


async def test_a_real_full_disk_and_a_read_only_one(acp_schema: AcpSchema, tmp_path: Path) -> None:
    big = "x" * 40_000
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"text": big}], [{"text": "small"}], [{"text": "ok"}]]}))
    with _tmpfs(tmp_path / "disk", "64k") as disk:
        filler = disk / "filler"
        filler.write_bytes(b"f" * 40_000)
        args = ["--model", f"script:{script}", "--state-dir", str(disk / "state")]
        async with AcpClient.subprocess(args, schema=acp_schema) as client:
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            with pytest.raises(RpcError) as info:
                await client.prompt(sid, "say a lot")
            assert "the session log could not be written: no space left on device (" in info.value.message
            assert "\n" not in info.value.message
            filler.unlink()
            assert (await client.prompt(sid, "say less"))["stopReason"] == "end_turn"
            assert client.exit_code is None
        client.assert_valid()
        loaded = SessionStore(disk / "state", clock=lambda: "T").load(sid)
        kinds = [event_json(e)["type"] for e in loaded.events]
        assert kinds[-4:] == ["user", "assistant", "stop", "title"]  # the next turn survived
        assert loaded.skipped == ["line 3"]  # the event the full disk tore, fenced off
        # A read-only disk (remounting needs no agent writing to it).
        _remount_read_only(disk)
        async with AcpClient.subprocess(args, schema=acp_schema) as client:
            await client.initialize()
            with pytest.raises(RpcError) as info:
                await client.new_session(str(tmp_path))
            read_only = "read-only file system ("
            assert info.value.message.startswith("the session log could not be created: " + read_only)
            # A stored session still loads, to be viewed: the editor is told it cannot be continued,
            # and a write fails with one line naming the cause and the log.
            load = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
            await client.request("session/load", load)
            log = disk / "state" / "sessions" / f"{sid}.jsonl"
            assert "small" in _texts(client, sid)  # the conversation was replayed
            note = f"Read-only session: read-only file system ({log}): it can be viewed, but a prompt"
            assert note in _texts(client, sid)
            for method, params in [
                ("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "more"}]}),
                ("session/set_mode", {"sessionId": sid, "modeId": "plan"}),
            ]:
                with pytest.raises(RpcError) as info:
                    await client.request(method, params)
                assert (
                    info.value.message
                    == f"the session log could not be written: read-only file system ({log})"
                )
            assert (await client.request("session/list", {}))["sessions"][0]["sessionId"] == sid
            assert client.exit_code is None
        client.assert_valid()
