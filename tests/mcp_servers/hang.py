"""A "server" that starts but never answers ``initialize``: it records its pid in the file named
by its argument, then reads its stdin until it closes (and exits then, as servers should)."""

from __future__ import annotations

import os
import sys

__all__: list[str] = []

if __name__ == "__main__":
    with open(sys.argv[1], "w") as pid_file:
        pid_file.write(str(os.getpid()))
    for _line in sys.stdin:
        pass
