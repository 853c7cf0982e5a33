"""The sandbox's cost per command: a sandboxed spawn beside an unsandboxed one, and its parts.

    .venv/bin/python bench/bench_sandbox.py [--runs 60] [--parts]

Target: the sandbox adds ≤ 1 ms to a command's spawn (median). Both spawns are what ``bash``
does per command (``spawn_group`` to a warden the guard prepared, which ``posix_spawn``s
``/bin/true``), interleaved so that drift in the machine's load hits them alike, 20 ms apart as a
model's calls are; each is timed until the warden reports the command running, which is when the
confinement is done (the warden confines itself, then spawns):

- ``unsandboxed``: no plan (the floor);
- ``workspace-write``: the default policy for a workspace with a ``.git`` and a home with secret
  stores: user, mount and network namespaces, the mounts, the loopback, seccomp, Landlock;
- ``with network``: the same widened with ``network`` (no network namespace, no seccomp filter).

The added cost is the median of paired differences (each sandboxed spawn minus the unsandboxed
one of the same round), which a busy machine's slow moments disturb less than a difference of
medians; the 10th percentiles are printed too. Also printed: the time to the command's exit,
and (``--parts``) what each step of the confinement costs, in wall and CPU time, each timed in a
fresh fork of a warden-like process (``_sandbox_parts.py``): among them the two ways of cutting
the network that were measured against each other — a seccomp filter refusing the socket
families, and a network namespace with its loopback brought up — and what each costs when its
process exits (the kernel tears the namespace down). Exits non-zero when the added median misses
the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import report

from dsh_tools.processes import spawn_group
from dsh_tools.sandbox import CommandSandbox, Widening, sandbox_support

TARGET_MS = 1.0


async def spawn_ms(plan: dict[str, Any] | None, cwd: str) -> tuple[float, float]:
    await anyio.sleep(0.02)
    start = time.perf_counter()
    proc, out_r, err_r = spawn_group(
        ["true"], cwd=cwd, env={"PATH": os.environ["PATH"]}, stdin=subprocess.DEVNULL, sandbox=plan
    )
    await proc.started()
    running = time.perf_counter() - start
    await proc.wait()
    done = time.perf_counter() - start
    await proc.wait_gone(5)
    proc.close()
    os.close(out_r)
    os.close(err_r)
    return running * 1000, done * 1000


async def measure(
    runs: int, plans: dict[str, dict[str, Any] | None], cwd: str
) -> dict[str, list[tuple[float, float]]]:
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in plans}
    for _ in range(runs):
        for name, plan in plans.items():
            times[name].append(await spawn_ms(plan, cwd))
    return times


def parts(runs: int, plan: dict[str, Any], folder: Path) -> None:
    """Each step of the confinement, timed in forks of a warden-like process (``_sandbox_parts``)."""
    path = folder / "plan.json"
    path.write_text(json.dumps(plan))
    helper = Path(__file__).with_name("_sandbox_parts.py")
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(helper), str(path), str(runs)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    print("the confinement's steps, each in a fresh fork of a warden-like process (medians)")
    for label, (wall, cpu, life) in json.loads(out).items():
        report(f"  {label}", wall, "µs", f"CPU {cpu:.0f} µs", f"the fork's life {life:+.0f} µs")


def _p10(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[0]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--parts", action="store_true", help="also time each step of the confinement")
    args = parser.parse_args()
    support = sandbox_support()
    if not support.available:
        print(f"no sandbox here: {support.detail}")
        return 1
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "work" / ".git").mkdir(parents=True)
        for store in (".ssh", ".aws", ".gnupg", ".kube", ".config/gh"):
            (root / "home" / store).mkdir(parents=True)
        (root / "home" / ".netrc").write_text("x")
        box = CommandSandbox(support, [str(root / "work")], home=str(root / "home"))
        default, network = (
            box.policy("workspace-write"),
            box.policy("workspace-write", Widening(("network",))),
        )
        assert default is not None
        assert network is not None
        plans = {"unsandboxed": None, "workspace-write": default.plan(), "with network": network.plan()}
        anyio.run(measure, 3, plans, str(root / "work"))  # the guard's start, first forks
        times = anyio.run(measure, args.runs, plans, str(root / "work"))
        print(
            f"{support.detail}; {len(default.hidden)} secret stores hidden, {len(default.readonly)} read-only"
        )
        floor = [t[0] for t in times["unsandboxed"]]
        report(
            "  unsandboxed: spawn until running (the floor)",
            statistics.median(floor),
            "ms",
            "",
            f"p10 {_p10(floor):.2f}",
        )
        added = 0.0
        for name in ("workspace-write", "with network"):
            running = [t[0] for t in times[name]]
            # Paired: each sample beside the floor's of the same round, so a slow moment of the
            # machine hits both sides of one difference.
            more = statistics.median(a - b for a, b in zip(running, floor, strict=True))
            if name == "workspace-write":
                added = more
            report(
                f"  {name}: spawn until running",
                statistics.median(running),
                "ms",
                f"target: +{TARGET_MS} ms" if name == "workspace-write" else "",
                f"(+{more:.2f} ms, paired median; p10 {_p10(running):.2f})",
            )
        for name in plans:
            report(f"  {name}: spawn until exited", statistics.median(t[1] for t in times[name]), "ms")
        if args.parts:
            parts(max(args.runs, 40), default.plan(), root)
        box.close()
    return 0 if added <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
