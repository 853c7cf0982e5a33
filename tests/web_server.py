"""A small HTTP server on 127.0.0.1 for the ``web_fetch`` tests: the saved documentation page
of the web_fetch golden's site (``fixtures/wire/web_fetch_card/site/docs``, written for the
tests), and routes that misbehave the ways real servers do (redirects, binary bodies, a 20 MB
page, silence, gzip). It records every request it gets."""

from __future__ import annotations

import gzip
import http.server
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PAGES = Path(__file__).parent.parent / "fixtures/wire/web_fetch_card/site/docs"
TLS = Path(__file__).parent / "tls"

Route = Callable[["Handler"], None]


@dataclass
class Site:
    """The running server: its base URL, its routes and the requests it got."""

    host: str
    port: int
    tls: bool = False
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    """(path, Host header) of each request, in order."""

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"


class Handler(http.server.BaseHTTPRequestHandler):
    site: Site
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.site.requests.append((self.path, self.headers.get("Host", "")))
        route = self.site.routes.get(self.path.split("?")[0])
        if route is not None:
            route(self)
            return
        page = PAGES / self.path.lstrip("/")
        if self.path.endswith(".html") and page.is_file():
            self.send_body(page.read_bytes(), "text/html; charset=utf-8")
            return
        self.send_body(b"<h1>Not here</h1>", "text/html", status=404)

    def send_body(self, body: bytes, content_type: str | None, status: int = 200, **headers: str) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def redirect(self, location: str, status: int = 302) -> None:
        self.send_body(b"", "text/html", status=status, Location=location)


def _standard_routes(site: Site) -> None:
    page = (PAGES / "connection-pools.html").read_bytes()
    routes = site.routes
    routes["/moved"] = lambda h: h.redirect("/connection-pools.html", 301)
    routes["/loop"] = lambda h: h.redirect("/loop")
    routes["/away"] = lambda h: h.redirect("https://elsewhere.example/landing")
    routes["/image.png"] = lambda h: h.send_body(b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png")
    routes["/blob"] = lambda h: h.send_body(b"\x00\x01\x02binary" * 10, None)
    routes["/gzip"] = lambda h: h.send_body(gzip.compress(page), "text/html", Content_Encoding="gzip")
    routes["/bomb"] = lambda h: h.send_body(
        gzip.compress(b"A" * (64 << 20)), "text/plain", Content_Encoding="gzip"
    )
    routes["/latin1"] = lambda h: h.send_body(
        "<p>Caf\xe9 cr\xe8me</p>".encode("latin-1"), "text/html; charset=iso-8859-1"
    )
    routes["/notes.md"] = lambda h: h.send_body(b"# Notes\n\n- one\n- two\n", "text/markdown")
    routes["/api.json"] = lambda h: h.send_body(b'{"version": "2.4"}', "application/json")
    routes["/big"] = _big_page
    routes["/silent"] = _silent


def _big_page(handler: Handler) -> None:
    """A 20 MB page: the saved page's article, repeated."""
    text = (PAGES / "connection-pools.html").read_text(encoding="utf-8")
    start, end = text.index("<article"), text.index("</article>") + len("</article>")
    article = text[start:end]
    body = (text[:start] + article * (20_000_000 // len(article)) + text[end:]).encode()
    handler.send_body(body, "text/html; charset=utf-8")


def _silent(handler: Handler) -> None:
    """Headers, then nothing for longer than a test's read timeout."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/html")
    handler.send_header("Content-Length", "100")
    handler.end_headers()
    handler.wfile.flush()
    time.sleep(3)


@contextmanager
def serve(*, tls: bool = False, host: str = "127.0.0.1") -> Iterator[Site]:
    """A server on ``host`` (a free port) in a thread, for the length of the block."""
    server = http.server.ThreadingHTTPServer((host, 0), Handler)
    site = Site(host, server.server_address[1], tls)
    _standard_routes(site)
    server.RequestHandlerClass = type("SiteHandler", (Handler,), {"site": site})
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(TLS / "localhost.pem", TLS / "localhost.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
