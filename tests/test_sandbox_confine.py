"""The kernel wall itself (Linux): a command started by a warden with a sandbox plan, and all it
starts, can touch what the plan allows and nothing else. Each test runs one shell script in the
sandbox and reads what it printed; the host side checks what changed."""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_tools import _confine
from dsh_tools.processes import spawn_group
from dsh_tools.sandbox import CommandSandbox, sandbox_support

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not sandbox_support().available, reason=f"no sandbox here: {sandbox_support().detail}"
    ),
]


async def run(
    script: str, plan: dict[str, Any] | None, cwd: Path, env: dict[str, str] | None = None
) -> tuple[int | None, str, str]:
    process, out_r, err_r = spawn_group(
        ["bash", "-c", script],
        cwd=str(cwd),
        env=env or dict(os.environ),
        stdin=subprocess.DEVNULL,
        sandbox=plan,
    )
    try:
        await process.started()
        with anyio.fail_after(30):
            code = await process.wait()
            await process.wait_gone(5)
        out, err = b"", b""
        while chunk := os.read(out_r, 65536):
            out += chunk
        while chunk := os.read(err_r, 65536):
            err += chunk
    finally:
        process.close()
        os.close(out_r)
        os.close(err_r)
    return code, out.decode(), err.decode()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Path, Path, Path, dict[str, Any]]]:
    """A workspace with a repository, a folder outside it, a home with secrets; the plan."""
    workspace, outside, home = tmp_path / "work", tmp_path / "outside", tmp_path / "home"
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "keep.txt").write_text("keep")
    outside.mkdir()
    (outside / "data.txt").write_text("precious")
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SECRET-KEY")
    (home / ".netrc").write_text("SECRET-NETRC")
    box = CommandSandbox(sandbox_support(), [str(workspace)], home=str(home))
    policy = box.policy("workspace-write")
    assert policy is not None
    yield workspace, outside, home, policy.plan()
    box.close()


async def test_writes_go_only_where_the_plan_says(world: tuple[Path, Path, Path, dict[str, Any]]) -> None:
    workspace, outside, _home, plan = world
    before = (outside / "data.txt").stat()
    script = f"""
    echo made > new.txt && mkdir -p sub/dir && mv new.txt sub/dir/ && echo inside-ok
    echo x > {outside}/new.txt || echo write-outside-refused
    rm -f {outside}/data.txt || echo remove-outside-refused
    mv {outside}/data.txt ./stolen || echo move-out-refused
    truncate -s 0 {outside}/data.txt || echo truncate-refused
    chmod 000 {outside}/data.txt || echo chmod-refused
    touch -d 2000-01-01 {outside}/data.txt || echo utime-refused
    echo s > run.sh && chmod +x run.sh && touch -d 2001-01-01 run.sh && echo metadata-inside-ok
    ln {outside}/data.txt ./hardlink || echo hardlink-refused
    ln -s {outside}/data.txt ./symlink && echo x >> ./symlink || echo through-symlink-refused
    echo tmp > "$TMPDIR/t" && cat "$TMPDIR/t" && echo x > /dev/null && echo devices-ok
    echo shm > /dev/shm/dsh-test && echo shm-ok
    """
    _code, out, err = await run(script, plan, workspace, {**os.environ, "TMPDIR": plan["write"][1]})
    for expected in (
        "inside-ok",
        "write-outside-refused",
        "remove-outside-refused",
        "move-out-refused",
        "truncate-refused",
        "chmod-refused",
        "utime-refused",
        "metadata-inside-ok",
        "hardlink-refused",
        "through-symlink-refused",
        "devices-ok",
        "shm-ok",
    ):
        assert expected in out, (out, err)
    assert (workspace / "sub" / "dir" / "new.txt").read_text() == "made\n"
    assert sorted(p.name for p in outside.iterdir()) == ["data.txt"]
    assert (outside / "data.txt").read_text() == "precious"
    assert (outside / "data.txt").stat().st_mode & 0o777 == before.st_mode & 0o777
    assert (outside / "data.txt").stat().st_mtime == before.st_mtime
    assert not await anyio.Path("/dev/shm/dsh-test").exists()  # its own /dev/shm


async def test_git_is_read_only_and_cannot_be_moved_away(
    world: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    workspace, _outside, _home, plan = world
    script = """
    echo '[core] fsmonitor = touch pwned' >> .git/config || echo config-refused
    echo 'touch pwned' > .git/hooks/pre-commit || echo hook-refused
    mv .git moved || echo rename-refused
    rm -rf .git 2>/dev/null; test -d .git && echo still-there
    echo changed > keep.txt && echo workspace-still-writable
    """
    _code, out, err = await run(script, plan, workspace)
    for expected in (
        "config-refused",
        "hook-refused",
        "rename-refused",
        "still-there",
        "workspace-still-writable",
    ):
        assert expected in out, (out, err)
    assert "Read-only file system" in err
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()


async def test_secret_stores_are_hidden_and_the_rest_is_readable(
    world: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    workspace, outside, home, plan = world
    script = f"""
    cat {home}/.ssh/id_ed25519; cat {home}/.netrc; ls -a {home}/.ssh
    cat /proc/self/root{home}/.ssh/id_ed25519
    echo x > {home}/.netrc; echo x > {home}/.ssh/id_ed25519 || echo key-refused
    cat {outside}/data.txt
    """
    _code, out, err = await run(script, plan, workspace)
    assert "SECRET" not in out + err
    assert "precious" in out
    assert "key-refused" in out
    # A hidden file reads as empty and takes writes nowhere (it is /dev/null, read-only).
    assert (home / ".netrc").read_text() == "SECRET-NETRC"
    assert (home / ".ssh" / "id_ed25519").read_text() == "SECRET-KEY"


async def test_no_network_but_its_own_loopback(world: tuple[Path, Path, Path, dict[str, Any]]) -> None:
    workspace, _outside, _home, plan = world
    host = socket.create_server(("127.0.0.1", 0))
    port = host.getsockname()[1]
    probe = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2); print("host-reached")
except OSError as error:
    print("host-refused", error.errno)
own = socket.create_server(("127.0.0.1", 0))
socket.create_connection(own.getsockname(), timeout=2); print("own-loopback-ok")
try:
    socket.socket(socket.AF_UNIX); print("unix-socket-made")
except OSError as error:
    print("unix-refused", error.errno)
a, b = socket.socketpair(); a.send(b"x"); print("socketpair-ok", b.recv(1))
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("io_uring", libc.syscall(425, 1, ctypes.create_string_buffer(120)), ctypes.get_errno())
"""
    accepted: list[object] = []
    threading.Thread(target=lambda: accepted.append(host.accept()), daemon=True).start()
    try:
        _code, out, err = await run(f"{sys.executable} -c '{probe}'", plan, workspace)
    finally:
        host.close()
    assert "host-refused" in out, (out, err)
    assert "host-reached" not in out
    assert "own-loopback-ok" in out
    assert "socketpair-ok" in out
    assert "unix-refused 1" in out
    assert "io_uring -1 1" in out
    assert accepted == []


async def test_widened_with_network_it_reaches_sockets_but_not_the_keyrings(
    world: tuple[Path, Path, Path, dict[str, Any]],
) -> None:
    workspace, _outside, _home, plan = world
    probe = (
        "import ctypes, socket; socket.socket(socket.AF_UNIX); print('unix-ok');"
        "libc = ctypes.CDLL(None, use_errno=True);"
        "print('add_key', libc.syscall(248, b'user', b'dsh-test', b'x', 1, -4), ctypes.get_errno())"
    )
    _code, out, err = await run(f'{sys.executable} -c "{probe}"', {**plan, "network": True}, workspace)
    assert "unix-ok" in out, (out, err)
    assert "add_key -1 1" in out


async def test_it_cannot_signal_outside_its_sandbox(world: tuple[Path, Path, Path, dict[str, Any]]) -> None:
    workspace, _outside, _home, plan = world
    if _confine.landlock_abi() < 6:
        pytest.skip("signal scoping needs Landlock ABI 6")
    victim = subprocess.Popen(["sleep", "30"])  # noqa: ASYNC220 - started, not waited for
    try:
        _code, out, err = await run(f"kill -9 {victim.pid} || echo kill-refused", plan, workspace)
        assert "kill-refused" in out, (out, err)
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


async def test_a_plan_that_cannot_be_applied_starts_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    plan = {"read": ["/"], "write": ["relative/path"], "network": False}
    with pytest.raises(OSError, match="sandbox"):
        await run(f"touch {marker}", plan, tmp_path)
    assert not marker.exists()


async def test_without_a_plan_nothing_is_confined(world: tuple[Path, Path, Path, dict[str, Any]]) -> None:
    workspace, outside, _home, _plan = world
    code, _out, _err = await run(f"echo x > {outside}/free.txt", None, workspace)
    assert code == 0
    assert (outside / "free.txt").exists()


def test_the_seccomp_filter_resolves_every_jump_forward_and_in_range() -> None:
    for arch, sockets in ((a, b) for a in ("x86_64", "aarch64", "riscv64") for b in (True, False)):
        program = _confine._bpf_program(arch, sockets)
        count = len(program) // 8
        for index in range(count):
            code, jt, jf, _k = struct.unpack_from("HBBI", program, index * 8)
            if code in (0x15, 0x35):
                assert index + 1 + max(jt, jf) < count
        last = struct.unpack_from("HBBI", program, (count - 1) * 8)
        assert last[0] == 0x06  # ends on a return


def test_the_probe_finds_landlock_and_user_namespaces() -> None:
    assert _confine.landlock_abi() >= 1
    assert _confine.namespaces_usable() is None
    assert ctypes.sizeof(ctypes.c_void_p) == 8
