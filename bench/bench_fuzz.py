"""The long fuzz run of the real agent (the suite runs a few thousand frames; this 100,000).

    .venv/bin/python bench/bench_fuzz.py [--frames 100000] [--runs 10] [--seed 1]

``--runs`` agent processes in turn (seeds ``--seed``, ``--seed + 1``…), each fed ``--frames / --runs``
seeded frames by ``dsh_acp.testing.fuzz_agent`` (valid ACP messages, mutated ones and garbage; the
agent plays the scripted turns of tests/test_fuzz.py, with tool calls, permission requests and odd
model output), every line it writes checked against the ACP schema. Prints frames, crashes, hangs,
invalid lines, "Internal error" answers and stderr bytes per MB of input. Targets: 0 crashes,
0 hangs, 0 invalid lines; exits 1 when missed. Needs the ACP schema (``ACP_SCHEMA``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_fuzz import fuzz_setup  # noqa: E402 - the same agent set-up as the suite's fuzz test

from dsh_acp.testing import AcpSchema, FuzzReport, fuzz_agent  # noqa: E402


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    schema = AcpSchema()
    total = FuzzReport()
    crashes = 0
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as folder:
            command, cwd = fuzz_setup(Path(folder))
            report = await fuzz_agent(
                command, schema=schema, cwd=cwd, frames=args.frames // args.runs, seed=args.seed + run
            )
        print(f"seed {args.seed + run}: {report.summary()}", flush=True)
        for problem in report.invalid[:5]:
            print("   ", problem[:300])
        total.frames += report.frames
        total.input_bytes += report.input_bytes
        total.output_lines += report.output_lines
        total.stderr_bytes += report.stderr_bytes
        total.internal_errors += report.internal_errors
        total.hangs += report.hangs
        total.invalid += report.invalid
        total.seconds += report.seconds
        crashes += report.crash is not None
    print(f"total: {total.summary()}; {crashes} crashed runs")
    return 0 if crashes == 0 and total.hangs == 0 and not total.invalid else 1


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
