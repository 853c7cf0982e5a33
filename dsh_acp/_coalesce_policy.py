"""When a running tool's output is flushed to the client (``loop._coalesce.OutputCoalescer`` does it).

Below the loop, beside the configuration, and free of anyio: the configuration's defaults come
from here, and the configuration is read before the agent answers ``initialize``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CoalescePolicy"]


@dataclass(frozen=True, slots=True)
class CoalescePolicy:
    """When to flush. ``max_delay=None`` flushes on size and at the end only, which makes the
    chunking independent of timing (the golden kit uses it)."""

    max_bytes: int = 64 * 1024
    max_delay: float | None = 0.05
