"""Confine the calling process, and everything it will start, to a sandbox plan (Linux).

Loaded by the processes that start commands — the guard's wardens (``_warden``) and the guard
that runs a command in a client's terminal (``reference_tools/_guard.py``) — each of which runs
as ``python -I -S`` with the standard library only; the agent imports it to probe what the kernel
offers. A *plan* is a plain dict (``marshal``-able) that ``dsh_tools.sandbox`` builds:

- ``read``: paths readable (and executable) with everything beneath them, normally ``["/"]``;
- ``write``: paths where everything may be done (create, write, remove, rename, change modes
  and times). Every mount is made read-only and these are bound back writable: Landlock's rights
  leave out a file's mode, times and extended attributes, which a read-only mount protects;
- ``devices``: device files that may be opened for reading and writing (``/dev/null``...);
- ``readonly``: paths inside a ``write`` path that stay read-only (``.git``): bound read-only
  over themselves in a mount namespace, so they cannot be written, removed or renamed (a mount
  point is busy), whatever the Landlock rules above them allow;
- ``hide``: the user's secret stores: an empty, read-only, unreadable file system over each
  folder, ``/dev/null`` (read-only) over each file;
- ``private``: folders that get a private, empty, writable file system (``/dev/shm``);
- ``network``: ``False`` cuts the network: a network namespace of its own (its loopback is not
  the host's: a server on the host's 127.0.0.1 is out of reach, one the command starts itself is
  not) and a seccomp filter refusing sockets of any family but IPv4, IPv6 and netlink — above
  all ``AF_UNIX``, which would reach the host's services through their socket files (the ssh
  agent, D-Bus, Docker) — and ``io_uring``, which could open them behind the filter's back.
  Whatever the plan, the filter refuses the kernel keyrings and ``TIOCSTI``, and the process
  gets an IPC namespace of its own.

The order matters: namespaces first (a user namespace gives the rights to mount in it; what
does not depend on the plan — the namespaces, the loopback, every mount read-only — can be done
ahead, ``isolate``), then the plan's mounts, then seccomp and Landlock, which forbid changing
mounts from then on and stay with every descendant, across ``exec``. The process ends up with
``no_new_privs`` (set-uid programs gain nothing) and, with Landlock ABI 6, unable to signal
processes outside its sandbox or to reach abstract Unix sockets outside it.

Why the system calls are made here with ``ctypes`` rather than through a library from PyPI:
the processes that run this are ``python -I -S`` with nothing but the standard library (they
start in milliseconds, and nothing on their path is a file a sandboxed command could write, as a
project's ``.venv`` would be); no maintained binding covers Landlock's ABI up to 7, user, mount
and network namespaces and a seccomp filter together (``landlock`` stops at ABI 5, ``pyseccomp``
needs libseccomp installed; bubblewrap is a binary to exec per command, on top of what this
costs, and applies no Landlock); and each is a handful of calls with fixed structures.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct
from collections.abc import Iterable, Mapping, Sequence

TYPE_CHECKING = False  # not typing's: importing typing would cost these processes milliseconds
if TYPE_CHECKING:
    from typing import Any

    _Op = tuple[Any, ...] | str
    """An instruction of ``_assemble``'s little language, or a label (a string)."""

__all__ = [
    "FS_READ",
    "ConfineError",
    "confine",
    "landlock_abi",
    "namespaces_usable",
    "prepare",
    "seccomp_arch",
]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)

# Landlock (include/uapi/linux/landlock.h); the system call numbers are the same on every
# architecture (they came after the numbering was unified).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
_REFER = 1 << 13
_FS_ABI1 = (1 << 13) - 1  # execute … make_sym
FS_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
"""The rights a rule on a file (not a folder) may carry."""
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1

# Namespaces and mounts (include/uapi/linux/sched.h, mount.h).
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_NEWIPC = 0x20000, 0x10000000, 0x40000000, 0x8000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC = 32, 4096, 16384
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
# statvfs's flag → the mount flag a remount in a user namespace must keep (they are locked).
_LOCKED = (
    (os.ST_NOSUID, _MS_NOSUID),
    (os.ST_NODEV, _MS_NODEV),
    (os.ST_NOEXEC, _MS_NOEXEC),
    (os.ST_NOATIME, _MS_NOATIME),
    (os.ST_NODIRATIME, _MS_NODIRATIME),
    (os.ST_RELATIME, _MS_RELATIME),
)
_ESCAPES = ((b"\\040", b" "), (b"\\011", b"\t"), (b"\\012", b"\n"), (b"\\134", b"\\"))
"""How mountinfo writes a space, a tab, a newline and a backslash in a path (the backslash last)."""
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 1

# seccomp: the architectures we know the numbers of. The compat entry is the 32-bit ABI the
# same kernel also runs (a 64-bit process can make its calls too): it gets the same filter.
_AUDIT_ARCH = {
    "x86_64": 0xC000003E,
    "aarch64": 0xC00000B7,
    "riscv64": 0xC00000F3,
}
_X32_BIT = 0x40000000
_SOCKET_CALLS = {"x86_64": 41, "aarch64": 198, "riscv64": 198}
_IO_URING = (425, 426, 427)  # setup, enter, register: the same numbers everywhere
# keyctl, add_key, request_key: the user's kernel keyrings are not namespaced.
_KEYRING_CALLS = {"x86_64": (250, 248, 249), "aarch64": (219, 217, 218), "riscv64": (219, 217, 218)}
_IOCTL_CALL = {"x86_64": 16, "aarch64": 29, "riscv64": 29}
_COMPAT: dict[str, tuple[int, int, int | None, int, tuple[int, int, int]]] = {
    "x86_64": (0x40000003, 359, 102, 54, (288, 286, 287)),
    "aarch64": (0x40000028, 281, None, 54, (311, 309, 310)),
}
"""Per 64-bit architecture, its 32-bit sibling: (arch, socket, socketcall, ioctl, keyring calls)."""
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
_ALLOWED_FAMILIES = (2, 10, 16)  # AF_INET, AF_INET6, AF_NETLINK (constants: no socket import here)


class ConfineError(OSError):
    """The plan could not be applied; the command must not run."""


def _fail(what: str, code: int | None = None) -> ConfineError:
    code = ctypes.get_errno() if code is None else code
    return ConfineError(code, f"the sandbox could not be set up: {what}: {os.strerror(code)}")


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers (0: none, or disabled)."""
    try:
        version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (AttributeError, OSError):
        return 0
    return max(int(version), 0)


def seccomp_arch() -> str | None:
    """This machine's architecture if the seccomp filter knows its numbers, else ``None``."""
    machine = os.uname().machine.lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return machine if machine in _AUDIT_ARCH else None


def namespaces_usable() -> str | None:
    """``None`` when this process can make a user namespace with mount and network namespaces
    in it and mount there; else why not. Forks a child to try (a few hundred microseconds)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            _enter_namespaces(mounts=True, network=False)
            _libc.mount(b"none", b"/", None, _MS_REC | (1 << 18), None)  # MS_PRIVATE: needs the rights
            if ctypes.get_errno() == errno.EPERM:
                code = errno.EPERM
        except OSError as error:
            code = error.errno or errno.EPERM
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return None
    return f"user namespaces are not available to this user ({os.strerror(code) if code > 0 else code})"


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _enter_namespaces(*, mounts: bool, network: bool) -> None:
    """A user namespace of our own (with a mount namespace, a network namespace), mapping our
    user and group to themselves: the command is who it was, with no more rights outside."""
    uid, gid = os.geteuid(), os.getegid()
    # An IPC namespace too: System V objects and POSIX message queues are the host's otherwise.
    flags = (
        _CLONE_NEWUSER | _CLONE_NEWIPC | (_CLONE_NEWNS if mounts else 0) | (0 if network else _CLONE_NEWNET)
    )
    if _libc.unshare(flags) != 0:
        raise _fail("unshare")
    try:
        _write("/proc/self/setgroups", b"deny")
        _write("/proc/self/uid_map", b"%d %d 1" % (uid, uid))
        _write("/proc/self/gid_map", b"%d %d 1" % (gid, gid))
    except OSError as error:
        raise _fail("user namespace map", error.errno or errno.EPERM) from None


def _loopback_up() -> None:
    """Bring up the new network namespace's own loopback: servers a command starts on
    127.0.0.1 can then be reached by the same command's other processes."""
    import _socket  # the C module: ``socket`` would import enum and selectors (milliseconds)
    import fcntl  # here, not at the top: the agent imports this module to probe, on its way to
    # answering initialize (``prepare`` loads them in the processes that confine)

    probe = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(probe.fileno(), _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe.fileno(), _SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | _IFF_UP))
    finally:
        probe.close()


def _mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    if _libc.mount(source, target, fstype, flags, data) != 0:
        raise _fail(f"mount {os.fsdecode(target)}")


def _locked_flags(target: bytes) -> int:
    found = os.statvfs(target).f_flag
    return sum(mount_flag for stat_flag, mount_flag in _LOCKED if found & stat_flag)


def _bind_read_only(source: bytes, target: bytes) -> None:
    _mount(source, target, None, _MS_BIND | _MS_REC, None)
    _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _locked_flags(target), None)


def _mount_points() -> list[bytes]:
    """Every mount point of this mount namespace (``/proc/self/mountinfo``, unescaped)."""
    with open("/proc/self/mountinfo", "rb") as info:
        lines = info.read().splitlines()
    points = []
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4:
            point = fields[4]
            for escaped, plain in _ESCAPES:
                point = point.replace(escaped, plain)
            points.append(point)
    return points


def _read_only_everywhere() -> None:
    """Remount every mount of the namespace read-only: Landlock leaves a file's mode, times and
    extended attributes out of its rights, and a read-only mount refuses changing them. A mount
    that will not be remounted (a special file system) keeps Landlock's wall alone."""
    for point in _mount_points():
        try:
            flags = _locked_flags(point)
            if not os.statvfs(point).f_flag & os.ST_RDONLY:
                _mount(None, point, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags, None)
        except OSError:
            continue


def _writable(paths: Iterable[str], private: Iterable[str]) -> None:
    """Each writable path bound over itself and made writable again (on a read-only mount)."""
    skip = {os.fsencode(path) for path in private}
    for path in paths:
        target = os.fsencode(path)
        if target in skip or not os.path.exists(target):
            continue
        _mount(target, target, None, _MS_BIND | _MS_REC, None)
        _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _locked_flags(target), None)


def _apply_mounts(plan: Mapping[str, Any]) -> None:
    _writable(plan.get("write", ()), plan.get("private", ()))
    _mount_more(plan)
    try:  # the working folder as the new mounts show it (it was found on the old ones)
        os.chdir(os.getcwd())
    except OSError:
        pass  # gone, or hidden: the command finds out for itself


def _mount_more(plan: Mapping[str, Any]) -> None:
    """The read-only folders, the hidden stores and the private folders of the plan."""
    for path in plan.get("readonly", ()):
        target = os.fsencode(path)
        if os.path.lexists(target):
            _bind_read_only(target, target)
    for path in plan.get("hide", ()):
        target = os.fsencode(path)
        if not os.path.exists(target):
            continue
        if os.path.isdir(target):
            _mount(
                b"tmpfs",
                target,
                b"tmpfs",
                _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                b"size=4k,mode=000",
            )
        else:
            _bind_read_only(b"/dev/null", target)
    for path in plan.get("private", ()):
        target = os.fsencode(path)
        if os.path.isdir(target):
            _mount(b"tmpfs", target, b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=1777")


def _checks(prefix: str, socket_nr: int | None, ioctl_nr: int, refused: Iterable[int]) -> list[_Op]:
    """One ABI's checks, the call's number loaded: refused calls, socket families (unless
    ``socket_nr`` is ``None``), ioctls."""
    ops: list[_Op] = [("jeq", nr, "deny", None) for nr in refused]
    if socket_nr is not None:
        ops.append(("jeq", socket_nr, prefix + "socket", None))
    ops += [("jeq", ioctl_nr, prefix + "ioctl", None), ("ret", "allow")]
    if socket_nr is not None:
        ops += [prefix + "socket", ("ld", 16)]  # args[0] (its low half): the family
        ops += [("jeq", int(family), "allow", None) for family in _ALLOWED_FAMILIES]
        ops.append(("ret", "deny"))
    ops += [prefix + "ioctl", ("ld", 24)]  # args[1]: the request
    ops += [("jeq", _TIOCSTI, "deny", None), ("jeq", _TIOCLINUX, "deny", None), ("ret", "allow")]
    return ops


def _bpf_program(arch: str, sockets: bool = True) -> bytes:
    """The seccomp filter: ``EPERM`` for the kernel keyrings (not namespaced) and terminal input
    injection (``TIOCSTI``) always, and, with ``sockets`` (a process without network), for
    sockets of a family other than IPv4, IPv6 and netlink and for ``io_uring`` (which could make
    them behind the filter's back); everything else is allowed. The 32-bit sibling ABI (which a
    64-bit process can call too) gets the same; an ABI the filter does not know gets ``EPERM``."""
    native = (*_KEYRING_CALLS[arch], *(_IO_URING if sockets else ()))
    ops: list[_Op] = [("ld", 4), ("jeq", _AUDIT_ARCH[arch], None, "other_abi"), ("ld", 0)]
    if arch == "x86_64":
        ops.append(("jge", _X32_BIT, "deny", None))  # the x32 ABI: the same arch, numbers above this
    ops += _checks("", _SOCKET_CALLS[arch] if sockets else None, _IOCTL_CALL[arch], native)
    ops.append("other_abi")
    compat = _COMPAT.get(arch)
    if compat is not None:
        compat_arch, socket_nr, socketcall, ioctl_nr, keyring = compat
        refused = (
            *keyring,
            *(_IO_URING if sockets else ()),
            *((socketcall,) if sockets and socketcall else ()),
        )
        ops += [
            ("jeq", compat_arch, None, "deny"),
            ("ld", 0),
            *_checks("compat_", socket_nr if sockets else None, ioctl_nr, refused),
        ]
    ops += ["deny", ("ret", "deny"), "allow", ("ret", "allow")]
    return _assemble(ops)


def _assemble(ops: Sequence[_Op]) -> bytes:
    """Classic BPF from ``("ld", offset)``, ``("jeq"|"jge", value, if_true, if_false)`` (a label,
    or ``None`` for the next instruction) and ``("ret", "allow"|"deny")``."""
    results = {"allow": 0x7FFF0000, "deny": 0x00050000 | errno.EPERM}  # SECCOMP_RET_ALLOW, _ERRNO
    labels: dict[str, int] = {}
    count = 0
    for op in ops:
        if isinstance(op, str):
            labels[op] = count
        else:
            count += 1
    code: list[bytes] = []
    for op in ops:
        if isinstance(op, str):
            continue
        here = len(code) + 1  # jumps count from the next instruction
        if op[0] == "ld":
            code.append(struct.pack("HBBI", 0x20, 0, 0, op[1]))  # BPF_LD|BPF_W|BPF_ABS
        elif op[0] == "ret":
            code.append(struct.pack("HBBI", 0x06, 0, 0, results[op[1]]))  # BPF_RET|BPF_K
        else:
            kind = 0x15 if op[0] == "jeq" else 0x35  # BPF_JMP|BPF_JEQ|BPF_K, BPF_JMP|BPF_JGE|BPF_K
            taken, not_taken = (0 if label is None else labels[label] - here for label in op[2:4])
            code.append(struct.pack("HBBI", kind, taken, not_taken, op[1]))
    return b"".join(code)


_programs: dict[tuple[str, bool], bytes] = {}


def prepare() -> None:
    """Compute ahead what every confinement uses (the seccomp filter), and make the first
    system calls: a process that forks confined children does this once, before it forks."""
    import _socket  # noqa: F401 - loaded now, so that each confinement does not
    import fcntl  # noqa: F401

    arch = seccomp_arch()
    if arch is not None:
        for sockets in (True, False):
            _programs[arch, sockets] = _bpf_program(arch, sockets)
    landlock_abi()


def _install_seccomp(arch: str, sockets: bool = True) -> None:
    program = _programs.get((arch, sockets)) or _bpf_program(arch, sockets)
    filters = ctypes.create_string_buffer(program)
    header = ctypes.create_string_buffer(
        struct.pack("HxxxxxxP", len(program) // 8, ctypes.addressof(filters))
    )
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, header, 0, 0) != 0:
        raise _fail("seccomp")


def _fs_rights(abi: int) -> int:
    rights = _FS_ABI1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def _restrict(plan: Mapping[str, Any], abi: int) -> None:
    handled = _fs_rights(abi)
    scoped = _SCOPE_SIGNAL | (0 if plan.get("network", True) else _SCOPE_ABSTRACT_UNIX)
    if abi >= 6:
        attr = struct.pack("QQQ", handled, 0, scoped)
    elif abi >= 4:
        attr = struct.pack("QQ", handled, 0)
    else:
        attr = struct.pack("Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), 0)
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        for key, rights in (
            ("read", FS_READ),
            ("write", handled),
            ("devices", _READ_FILE | _WRITE_FILE | _IOCTL_DEV),
        ):
            for path in plan.get(key, ()):
                _add_rule(ruleset, path, rights & handled)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("no_new_privs")
        if _libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)


def _add_rule(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # nothing there to allow (a root that went away): the rest still holds
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_ONLY
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        if _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0) != 0:
            raise _fail(f"landlock rule for {path}")
    finally:
        os.close(fd)


_PATH_KEYS = ("read", "write", "devices", "readonly", "hide", "private")


def _check(plan: Mapping[str, Any]) -> None:
    """Every path of the plan absolute and whole: a relative one would be read against wherever
    the confining process happens to be."""
    for key in _PATH_KEYS:
        paths = plan.get(key, ())
        if not isinstance(paths, (list, tuple)) or not all(
            isinstance(path, str) and path.startswith("/") and "\0" not in path for path in paths
        ):
            raise ConfineError(errno.EINVAL, f"the sandbox could not be set up: a malformed plan ({key})")


def isolate() -> None:
    """Enter what every plan without network starts with — a user namespace with mount and
    network namespaces in it, the loopback up — ahead of the plan: the costly part of a
    confinement (a network namespace takes a few hundred microseconds to make), which a process
    forked to confine a command later can do before that command is even asked for."""
    _enter_namespaces(mounts=True, network=False)
    try:
        _loopback_up()
    except OSError as error:
        raise _fail("loopback", error.errno or errno.EPERM) from None
    _read_only_everywhere()


def warm() -> None:
    """Run the confinement's code once without confining anything (a ruleset made and closed),
    so that a freshly forked process pays its first-touch costs before a command waits on it."""
    abi = landlock_abi()
    if abi < 1:
        return
    attr = struct.pack("Q", _fs_rights(min(abi, 3)))
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, buffer, ctypes.c_size_t(len(attr)), 0)
    if ruleset >= 0:
        try:
            _add_rule(ruleset, "/", FS_READ)
        except OSError:
            pass
        os.close(ruleset)
    os.statvfs("/")


def confine(plan: Mapping[str, Any], *, isolated: bool = False) -> None:
    """Confine this process (and all it will start) to ``plan``; ``ConfineError`` if any part
    of it could not be applied (the caller must then not start the command). ``isolated``: this
    process already ran ``isolate()`` (the plan must then be one without network)."""
    _check(plan)
    abi = landlock_abi()
    if abi < 1:
        raise ConfineError(errno.ENOSYS, "the sandbox could not be set up: Landlock is not available")
    network = bool(plan.get("network", True))
    arch = seccomp_arch()
    if arch is None:
        raise ConfineError(
            errno.ENOSYS, f"the sandbox does not know the system calls of {os.uname().machine}"
        )
    if isolated and network:
        raise ConfineError(
            errno.EINVAL, "the sandbox could not be set up: an isolated process cannot have network"
        )
    if not isolated and not network:
        isolate()
    elif not isolated:
        _enter_namespaces(mounts=True, network=True)
        _read_only_everywhere()
    _apply_mounts(plan)
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("no_new_privs")
    _install_seccomp(arch, sockets=not network)
    _restrict(plan, abi)
