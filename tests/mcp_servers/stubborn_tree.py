"""An MCP server that will not go by itself: it ignores SIGTERM, lives on after its stdin ends, and
starts a grandchild (in its process group, holding none of its pipes) that does the same. Only a
SIGKILL to the whole group stops them: what the agent's guards must deliver when it is SIGKILLed.

It speaks just enough MCP (``initialize``, ``tools/list`` with one tool) by hand, not through the
SDK: it starts fast, and no library's shutdown on end of input can make it exit. Once the grandchild
runs it writes ``<its pid> <grandchild pid>`` to the file named by its argument, before answering.
Run it as ``python stubborn_tree.py PID_FILE``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

__all__ = ["main"]

GRANDCHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method")
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": request["params"]["protocolVersion"],  # the client's: it supports it
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stubborn_tree", "version": "1"},
        }
    elif method == "tools/list":
        noop = {"name": "noop", "description": "Does nothing.", "inputSchema": {"type": "object"}}
        result = {"tools": [noop]}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"unknown method {method}"}
        return {"jsonrpc": "2.0", "id": request["id"], "error": error}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen(
        [sys.executable, "-c", GRANDCHILD],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(sys.argv[1], "w") as pid_file:
        pid_file.write(f"{os.getpid()} {grandchild.pid}")
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" in message and "method" in message:  # notifications and responses need no answer
            sys.stdout.write(json.dumps(answer(message)) + "\n")
            sys.stdout.flush()
    while True:  # a well-behaved server exits when its stdin ends; this one lingers
        time.sleep(3600)


if __name__ == "__main__":
    main()
