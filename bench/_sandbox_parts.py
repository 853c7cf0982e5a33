"""The sandbox's steps, each timed in a fresh fork of a process like the warden.

    python -I -S bench/_sandbox_parts.py PLAN.json RUNS

Run by ``bench_sandbox.py --parts``: a ``python -I -S`` process with the standard library and
``_confine`` loaded and prepared, as the guard is, forks a child per sample (as the guard forks a
warden) that warms up as a warden does, runs the steps before the one timed, then the one timed.
Prints one JSON object: per step, the medians of its wall time and CPU time (µs), and how much
longer the child lived than one that did nothing (its exit: the kernel tearing down what it made).
"""

from __future__ import annotations

import json
import os
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dsh_tools"))
import _confine  # the sibling package's module, by path, as the warden loads it


def sample(before: object, step: object) -> tuple[float, float, float]:
    read, write = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _confine.warm()
        before()  # type: ignore[operator]
        wall, cpu = time.perf_counter(), time.process_time()
        step()  # type: ignore[operator]
        os.write(write, struct.pack("dd", time.perf_counter() - wall, time.process_time() - cpu))
        os._exit(0)
    os.close(write)
    data = os.read(read, 16)
    os.close(read)
    os.waitpid(pid, 0)
    wall, cpu = struct.unpack("dd", data)
    return wall * 1e6, cpu * 1e6, (time.perf_counter() - start) * 1e6


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        plan = json.load(file)
    runs = int(sys.argv[2])
    _confine.prepare()
    arch = _confine.seccomp_arch()
    widened = {**plan, "network": True}

    def nothing() -> None:
        pass

    def spawn() -> None:
        os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)

    steps = {
        "the fork alone": (nothing, nothing),
        "user namespace": (nothing, lambda: _confine._enter_namespaces(mounts=False, network=True)),
        "user + mount namespaces": (nothing, lambda: _confine._enter_namespaces(mounts=True, network=True)),
        "network cut by a network namespace (user + net, loopback up)": (
            nothing,
            lambda: (_confine._enter_namespaces(mounts=False, network=False), _confine._loopback_up()),
        ),
        "network cut by seccomp alone (the filter, no_new_privs set)": (
            lambda: _confine._libc.prctl(38, 1, 0, 0, 0),
            lambda: _confine._install_seccomp(arch),
        ),
        "every mount read-only (in user + mount namespaces)": (
            lambda: _confine._enter_namespaces(mounts=True, network=True),
            _confine._read_only_everywhere,
        ),
        "ahead of the request: isolate()": (nothing, _confine.isolate),
        "on the path, after isolate(): the plan's mounts, seccomp, Landlock": (
            _confine.isolate,
            lambda: _confine.confine(plan, isolated=True),
        ),
        "on the path, widened with network: the whole confinement": (
            nothing,
            lambda: _confine.confine(widened),
        ),
        "posix_spawn and wait for /bin/true (unconfined)": (nothing, spawn),
        "posix_spawn and wait for /bin/true (confined)": (lambda: _confine.confine(plan), spawn),
    }
    found = {}
    base = statistics.median(sample(nothing, nothing)[2] for _ in range(runs))
    for label, (before, step) in steps.items():
        samples = [sample(before, step) for _ in range(runs)]
        found[label] = [statistics.median(s[i] for s in samples) for i in range(2)] + [
            statistics.median(s[2] for s in samples) - base
        ]
    print(json.dumps(found))


if __name__ == "__main__":
    main()
