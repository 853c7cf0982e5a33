"""Small helpers shared by the benchmarks: timing loops and median reporting."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["median_us", "report"]


def median_us(fn: Callable[[], object], *, inner: int, repeats: int = 15) -> float:
    """Median over ``repeats`` runs of the mean time of ``inner`` calls, in microseconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner * 1e6)
    return statistics.median(samples)


def report(label: str, value: float, unit: str, target: str = "", baseline: str = "") -> None:
    """Print one figure in a fixed layout so notes can quote it."""
    extra = "  ".join(part for part in (target, baseline) if part)
    print(f"{label:<58} {value:10.2f} {unit:<6} {extra}")
