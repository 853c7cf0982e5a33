"""The trickling server of ``bench_relay.py``, a process of its own: an OpenAI-compatible chat
endpoint on 127.0.0.1 that streams CHUNKS SSE chunks 5-20 ms apart (seeded by SEED), with
blocking sockets, one thread per connection.

    python bench/_trickle_server.py CHUNKS SEED

Prints its port, then, as each stream of CHUNKS ends (a title request's one chunk is not one), a
JSON list of the ``time.perf_counter`` at which each chunk left.
"""

from __future__ import annotations

import json
import random
import socket
import sys
import threading
import time


class TrickleServer:
    """The listener, and a thread per connection playing the stream to it."""

    def __init__(self, chunks: int, seed: int) -> None:
        self.chunks = chunks
        self.random = random.Random(seed)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()

    def serve(self) -> None:
        while True:
            connection, _ = self.listener.accept()
            threading.Thread(target=self._handle, args=(connection,), daemon=True).start()

    def _handle(self, connection: socket.socket) -> None:
        with connection:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            while len(body) < length:
                body += connection.recv(65536)
            if head.startswith(b"GET"):
                connection.sendall(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                return
            title = b"You name coding sessions" in body
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            )
            count = 1 if title else self.chunks
            sent: list[float] = []
            for index in range(count):
                if not title:
                    time.sleep(self.random.uniform(0.005, 0.020))
                document = {
                    "choices": [{"index": 0, "delta": {"content": f"tok{index} "}, "finish_reason": None}]
                }
                payload = b"data: " + json.dumps(document).encode() + b"\n\n"
                sent.append(time.perf_counter())
                connection.sendall(payload)
            finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            connection.sendall(b"data: " + json.dumps(finish).encode() + b"\n\ndata: [DONE]\n\n")
            if not title:
                with self._lock:  # one line, whole, per stream
                    sys.stdout.write(json.dumps(sent) + "\n")
                    sys.stdout.flush()


def main() -> None:
    server = TrickleServer(int(sys.argv[1]), int(sys.argv[2]))
    print(server.port, flush=True)
    server.serve()


if __name__ == "__main__":
    main()
