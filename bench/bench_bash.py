"""bash speed and memory: ``seq 1 35000000`` (about 270 MB) through the tool.

Targets: output delivered to the progress sink at ≥ 50 MB/s; the agent's peak RSS grows
by ≤ 32 MB; the live data equals the output exactly once (length and CRC-32 compared, never stored).
The same command piped to /dev/null by ``subprocess`` runs side by side as the baseline: the command's
own speed, which bounds what the tool can deliver.

Run: python bench/bench_bash.py [count]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))

from _stats import report

from dsh_tools import Services, TerminalOutput, TextBlock, ToolExecution, ToolRegistry
from reference_tools.bash import BashSettings, bash_tools

MB = 1_000_000
RATE_TARGET_MB_S = 50.0
GROWTH_TARGET_MB = 32.0


def seq_size(count: int) -> int:
    """Bytes ``seq 1 count`` prints: every number's digits plus a newline."""
    size, digits, low = 0, 1, 1
    while low <= count:
        high = min(count, low * 10 - 1)
        size += (high - low + 1) * (digits + 1)
        digits, low = digits + 1, low * 10
    return size


def expected_crc(command: str) -> int:
    """CRC-32 of the command's output, read in chunks (nothing is kept)."""
    crc = 0
    with subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        while chunk := proc.stdout.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def reset_peak_rss() -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux ≥ 4.0), so the peak read
    # afterwards is the run's own.
    Path("/proc/self/clear_refs").write_text("5")


class Sink:
    """A progress sink that counts (and optionally checksums) what it receives."""

    def __init__(self, *, checksum: bool) -> None:
        self.bytes = self.chunks = self.crc = 0
        self.checksum = checksum

    async def __call__(self, event: TerminalOutput) -> None:
        data = event.data.encode()
        self.bytes += len(data)
        self.chunks += 1
        if self.checksum:
            self.crc = zlib.crc32(data, self.crc)


async def run_tool(command: str, sink: Sink, spill_dir: str) -> tuple[float, str]:
    registry = ToolRegistry()
    for tool in bash_tools():
        registry.register(tool)
    services = Services(BashSettings(spill_dir=spill_dir))
    execution = ToolExecution(
        call_id="bench",
        name="bash",
        arguments={"command": command, "description": "bench", "timeout_ms": 600_000},
        cwd=tempfile.gettempdir(),
        services=services,
        progress=sink,
    )
    start = time.perf_counter()
    result = await registry.execute(execution)
    elapsed = time.perf_counter() - start
    await services.aclose()
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, TextBlock)
    return elapsed, block.text


async def measure(command: str, spill: str) -> tuple[float, float, str, Sink, Sink]:
    """Run the tool twice: counting only (speed, memory), then checksumming (exactness)."""
    await run_tool("seq 1 100000", Sink(checksum=False), spill + "/warm")  # imports, the reaper
    reset_peak_rss()
    before = rss_kb("VmRSS")
    counting = Sink(checksum=False)
    elapsed, model_text = await run_tool(command, counting, spill + "/count")
    growth_mb = (rss_kb("VmHWM") - before) / 1024
    checking = Sink(checksum=True)
    await run_tool(command, checking, spill + "/check")
    return elapsed, growth_mb, model_text, counting, checking


def main(count: int) -> None:
    command = f"seq 1 {count}"
    size = seq_size(count)
    print(f"{command}: {size / MB:.1f} MB")

    start = time.perf_counter()
    subprocess.run(["bash", "-c", command], stdout=subprocess.DEVNULL, check=True)
    baseline = time.perf_counter() - start
    crc = expected_crc(command)
    with tempfile.TemporaryDirectory() as spill:
        elapsed, growth_mb, model_text, counting, checking = anyio.run(measure, command, spill)

    report("baseline: subprocess → /dev/null", size / MB / baseline, "MB/s", f"({baseline:.2f} s)")
    report(
        "bash tool → counting sink",
        counting.bytes / MB / elapsed,
        "MB/s",
        f"target ≥ {RATE_TARGET_MB_S:.0f}",
        f"({elapsed:.2f} s, {counting.chunks} chunks)",
    )
    report("peak RSS growth during the run", growth_mb, "MB", f"target ≤ {GROWTH_TARGET_MB:.0f}")
    report("text returned to the model", len(model_text.encode()) / 1024, "KiB")
    exact = counting.bytes == checking.bytes == size and checking.crc == crc
    print(f"live data == output exactly once (length {checking.bytes}, crc32 {checking.crc:08x}): {exact}")
    rate = counting.bytes / MB / elapsed
    missed = []
    if not exact:
        missed.append("the live data was not the output exactly once")
    if rate < RATE_TARGET_MB_S:
        missed.append(f"delivered {rate:.1f} MB/s, below {RATE_TARGET_MB_S:.0f}")
    if growth_mb > GROWTH_TARGET_MB:
        missed.append(f"peak RSS grew by {growth_mb:.1f} MB")
    for miss in missed:
        print(f"MISSED: {miss}")
    if missed:
        raise SystemExit(1)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 35_000_000)
