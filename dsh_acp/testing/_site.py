"""A scenario's web site: the files of its ``site/`` folder served over HTTP on 127.0.0.1, for
tools that fetch pages. Its address (``127.0.0.1:PORT``, a free port) is ``{{site}}`` in the
scenario's steps and model script, and in the golden."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["serve_site"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # a golden test's output is its diff, not an access log


@contextmanager
def serve_site(folder: Path | None) -> Iterator[str | None]:
    """Serve ``folder`` (if there is one) for the length of the block; yields ``host:port``."""
    if folder is None or not folder.is_dir():
        yield None
        return
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="scenario site", daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
