"""The floor for ``bench_replay.py``: the least any agent can do to replay a session log.

It answers ``initialize`` and ``session/load`` over stdio like an agent: the load reads the log
named on the command line, parses each line with orjson and writes one ``session/update`` line per
event (the event itself as the update), then the answer. No validation, no presenters, no
conversation rebuilt.
"""

from __future__ import annotations

import sys

import orjson


def main() -> None:
    path = sys.argv[1]
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        message = orjson.loads(raw)
        if message.get("method") == "session/load" and message["params"]["sessionId"] != "warm":
            with open(path, "rb") as handle:
                lines = handle.read().split(b"\n")
            for line in lines[1:]:
                if line:
                    update = {"sessionId": "s", "update": orjson.loads(line)}
                    out.write(
                        orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": update}) + b"\n"
                    )
        out.write(orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}) + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
