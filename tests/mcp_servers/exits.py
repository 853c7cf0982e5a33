"""A "server" that exits at once, saying why on stderr (as a misconfigured server does)."""

from __future__ import annotations

import sys

__all__: list[str] = []

if __name__ == "__main__":
    sys.stderr.write("Traceback (most recent call last):\n  ...\n")
    sys.stderr.write("RuntimeError: TOOLBOX_API_KEY is not set\n")
    sys.exit(3)
