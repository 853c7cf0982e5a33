"""``bench_relay.py --where``: dsh-acp with clocks at each step of a token's way through it.

    python bench/_relay_probe.py OUT COUNT dsh-acp-arguments...

Runs ``dsh-acp`` (the CLI's ``main``) with four points wrapped, each noting ``perf_counter`` (the
clock ``bench_relay`` stamps the server's sends and the client's reads with: system-wide on
Linux): the bytes arriving from the socket (the model client's ``Connection``), the model's generator getting
them (the SSE decoder's ``feed``), the notification queued (``Output.write``) and the system call
that writes it (``FdSendStream.write_nowait``, before and after). Once COUNT notifications of
``agent_message_chunk`` have been written, their times go to OUT as JSON, one list per point. The
wrappers cost CPU of their own: the figures of a probed run are for where a chunk waits, not for
the CPU per chunk.
"""

from __future__ import annotations

import json
import sys
from time import perf_counter
from typing import Any


def main() -> int:
    out, count, arguments = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    from dsh_acp.cli._main import main as dsh_acp
    from dsh_acp.models._http1 import Connection
    from dsh_acp.models._openai_sse import SSEDecoder
    from dsh_acp.rpc._output import Output
    from dsh_acp.rpc._stdio import FdSendStream

    last = {"arrived": 0.0, "fed": 0.0, "queued": 0.0}
    points: dict[str, list[float]] = {name: [] for name in ("arrived", "fed", "queued", "write", "written")}

    def wrap(cls: Any, name: str, before: Any) -> None:
        original = getattr(cls, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            before(args)
            return original(self, *args, **kwargs)

        setattr(cls, name, wrapper)

    def arrived(args: Any) -> None:
        if args[0]:
            last["arrived"] = perf_counter()

    wrap(Connection, "data_received", arrived)
    wrap(SSEDecoder, "feed", lambda args: last.__setitem__("fed", perf_counter()))
    wrap(Output, "write", lambda args: last.__setitem__("queued", perf_counter()))
    write_nowait = FdSendStream.write_nowait

    def probed_write(self: FdSendStream, data: bytes) -> int:
        started = perf_counter()
        written = write_nowait(self, data)
        if b'"agent_message_chunk"' in data and len(points["write"]) < count:
            for name in ("arrived", "fed", "queued"):
                points[name].append(last[name])
            points["write"].append(started)
            points["written"].append(perf_counter())
            if len(points["write"]) == count:
                with open(out, "w") as file:
                    json.dump(points, file)
        return written

    FdSendStream.write_nowait = probed_write  # type: ignore[method-assign]
    return dsh_acp(arguments)


if __name__ == "__main__":
    raise SystemExit(main())
