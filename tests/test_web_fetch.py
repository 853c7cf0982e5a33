"""``web_fetch`` through ``ToolRegistry.execute`` against a local server: the page as Markdown,
the limits, the errors (one line each), and the hosts it may and may not reach."""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from web_server import TLS, Site, serve

from dsh_tools import GenericCallView, GenericResultView, Services, TextBlock, ToolExecution, ToolRegistry
from reference_tools import WebFetchSettings, web_fetch_tool

pytestmark = pytest.mark.anyio

READS = "web_fetch reads HTML, Markdown and text"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with serve() as running:
        yield running


class Fetcher:
    """One session's ``web_fetch``: its registry and services."""

    def __init__(self, **settings: Any) -> None:
        self.registry = ToolRegistry()
        self.tool = web_fetch_tool()
        self.registry.register(self.tool)
        self.services = Services(WebFetchSettings(**settings))
        self.calls = 0

    async def __call__(self, url: str) -> tuple[bool, str, Any]:
        self.calls += 1
        execution = ToolExecution(
            call_id=f"f{self.calls}", name="web_fetch", arguments={"url": url}, services=self.services
        )
        result = await self.registry.execute(execution)
        body = "".join(block.text for block in result.content if isinstance(block, TextBlock))
        return result.is_error, body, result.meta

    async def ok(self, url: str) -> tuple[str, Any]:
        failed, body, meta = await self(url)
        assert not failed, body
        return body, meta

    async def error(self, url: str) -> str:
        failed, body, _ = await self(url)
        assert failed, body
        assert "\n" not in body, "errors are one line"
        return body.removeprefix("Error: ")


async def test_a_documentation_page_becomes_markdown_without_its_page_furniture(site: Site) -> None:
    body, meta = await Fetcher().ok(f"{site.url}/connection-pools.html")
    first, _, page = body.partition("\n\n")
    assert first == f"{site.url}/connection-pools.html (text/html, 41.1 KiB; 6.7 KiB as Markdown)"
    assert "# Connection pools\n" in page
    assert "## Sizing a pool\n" in page
    assert "| `max_size`" in page  # the options table is a table
    # A code block keeps its blank lines and its indentation.
    assert "```\nimport tidepool\n\npool = tidepool.Pool(\n" in page
    assert "async def main() -> None:\n    async with pool:" in page
    for furniture in ("<script", "dataLayer", "localStorage", "Toggle navigation", "Retries and back-off",
                      "svg", "¶", "cookie", "On this page", "Copyright"):  # fmt: skip
        assert furniture not in page, furniture
    assert meta == {
        "url": f"{site.url}/connection-pools.html",
        "redirect": None,
        "bytes": 42084,
        "text_bytes": len(page.encode()),
        "saved": None,
    }


async def test_the_card_is_a_fetch_card_titled_with_the_url(site: Site) -> None:
    fetcher = Fetcher()
    url = f"{site.url}/connection-pools.html"
    call = fetcher.tool.call_view({"url": url})
    assert call == GenericCallView(title=f"Fetch {url}", kind="fetch", raw_input={"url": url})
    # An internationalised name is shown as the ASCII name that is looked up.
    shown = fetcher.tool.call_view({"url": "https://bücher.example/a"})
    assert isinstance(shown, GenericCallView)
    assert shown.title == "Fetch https://xn--bcher-kva.example/a"
    execution = ToolExecution(
        call_id="c", name="web_fetch", arguments={"url": url}, services=fetcher.services
    )
    result = (await fetcher.registry.execute(execution)).as_tool_result()
    view = fetcher.tool.result_view({"url": url}, result)
    assert isinstance(view, GenericResultView)
    assert view.title == f"Fetch {url}"
    (block,) = view.content
    assert isinstance(block, TextBlock)
    assert block.text.startswith("````markdown\n")
    assert "# Connection pools" in block.text


async def test_markdown_text_and_json_are_given_as_they_are(site: Site) -> None:
    fetcher = Fetcher()
    body, _ = await fetcher.ok(f"{site.url}/notes.md")
    assert body == f"{site.url}/notes.md (text/markdown, 21 B)\n\n# Notes\n\n- one\n- two\n"
    body, _ = await fetcher.ok(f"{site.url}/api.json")
    assert body.endswith('\n\n{"version": "2.4"}\n')


async def test_a_charset_the_server_names_is_decoded(site: Site) -> None:
    body, _ = await Fetcher().ok(f"{site.url}/latin1")
    assert body.endswith("Café crème\n")


async def test_a_gzipped_page_is_decompressed(site: Site) -> None:
    body, meta = await Fetcher().ok(f"{site.url}/gzip")
    assert "# Connection pools" in body
    assert meta["bytes"] == 42084


@pytest.mark.slow
async def test_a_compressed_body_is_inflated_only_up_to_the_limit(site: Site) -> None:
    body, meta = await Fetcher(max_bytes=1 << 20).ok(f"{site.url}/bomb")
    assert meta["bytes"] == 1 << 20
    assert "[The page is longer than 1.0 MiB: only that much of it was read.]" in body


@pytest.mark.slow
async def test_a_20_mb_page_reaches_the_model_as_its_start_and_a_file(site: Site, tmp_path: Path) -> None:
    # At most 4 MiB of it are read here, to keep the test fast (the default is 32 MiB).
    fetcher = Fetcher(pages_dir=str(tmp_path / "pages"), max_bytes=4 << 20)
    body, meta = await fetcher.ok(f"{site.url}/big")
    assert meta["bytes"] == 4 << 20
    assert len(body.encode()) < 101 * 1024
    saved = Path(meta["saved"])
    assert saved.parent == tmp_path / "pages"
    head, _, rest = body.partition("\n\n")
    shown, _, notes = rest.partition("\n\n[The page is longer")
    whole = _contents(saved)
    assert meta["text_bytes"] == len(whole.encode())
    size = len(whole.encode()) / (1 << 20)
    assert head == f"{site.url}/big (text/html, 4.0 MiB; {size:.1f} MiB as Markdown)"
    # The model is shown the file's first lines, and told where to read on.
    lines = int(re.findall(r"Showing lines 1-(\d+) ", notes)[0])
    first = "".join(whole.splitlines(keepends=True)[:lines])
    assert shown == first.rstrip()
    assert lines > 2000
    assert "[The page is longer" + notes == (
        "[The page is longer than 4.0 MiB: only that much of it was read.]\n"
        f"[Showing lines 1-{lines} ({len(first.encode()) / 1024:.1f} KiB of {size:.1f} MiB). "
        f"All of it is in {saved}: read it with offset={lines + 1} to go on.]"
    )
    await fetcher.services.aclose()
    assert _contents(saved) == whole, "a folder the settings named is not removed"


def _contents(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _mode(path: str) -> int | None:
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        return None


async def test_saved_pages_go_with_the_session(site: Site) -> None:
    fetcher = Fetcher(max_shown_bytes=1024)
    _, meta = await fetcher.ok(f"{site.url}/connection-pools.html")
    folder = os.path.dirname(meta["saved"])
    assert _mode(folder) == 0o700
    await fetcher.services.aclose()
    assert _mode(folder) is None


async def test_content_that_is_not_text_is_refused_at_its_headers(site: Site) -> None:
    fetcher = Fetcher()
    assert await fetcher.error(f"{site.url}/image.png") == (
        f"{site.url}/image.png is image/png, 72 bytes, not a text page: {READS}"
    )
    assert await fetcher.error(f"{site.url}/blob") == (
        f"{site.url}/blob is binary data, not a text page: {READS}"
    )


async def test_http_errors_urls_and_refused_connections_are_one_line(site: Site) -> None:
    fetcher = Fetcher()
    assert (
        await fetcher.error(f"{site.url}/missing.html") == f"{site.url}/missing.html answered 404 Not Found"
    )
    assert await fetcher.error("ftp://example.org/x") == "only http and https URLs can be fetched, not 'ftp'"
    assert await fetcher.error("example.org/x") == "a URL needs http:// or https://"
    assert await fetcher.error("http://user:pw@example.org/") == "a URL with credentials in it is not fetched"
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    assert (await fetcher.error(f"http://127.0.0.1:{port}/")).startswith(
        f"could not connect to 127.0.0.1:{port}: "
    )


async def test_a_silent_server_times_out_in_one_line(site: Site) -> None:
    assert (
        await Fetcher(read_timeout=0.3).error(f"{site.url}/silent")
        == f"127.0.0.1:{site.port} sent nothing for 0.3 s"
    )


@pytest.mark.slow
async def test_tls_errors_are_one_line_and_a_trusted_certificate_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serve(tls=True) as secure:
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        message = await Fetcher().error(f"https://127.0.0.1:{secure.port}/connection-pools.html")
        assert (
            message
            == f"TLS error with 127.0.0.1:{secure.port}: certificate verify failed: self-signed certificate"
        )
        monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "localhost.pem"))
        body, _ = await Fetcher().ok(f"https://localhost:{secure.port}/connection-pools.html")
        assert "# Connection pools" in body
    with serve() as plain:
        message = await Fetcher().error(f"https://127.0.0.1:{plain.port}/")
        assert message == f"TLS error with 127.0.0.1:{plain.port}: wrong version number"


# -- what a fetch may reach ------------------------------------------------------------------


async def test_a_redirect_inside_the_origin_is_followed(site: Site) -> None:
    site.requests.clear()
    body, meta = await Fetcher().ok(f"{site.url}/moved")
    assert meta["url"] == f"{site.url}/connection-pools.html"
    assert "# Connection pools" in body
    assert [path for path, _ in site.requests] == ["/moved", "/connection-pools.html"]
    assert await Fetcher().error(f"{site.url}/loop") == f"{site.url}/loop redirected more than 5 times"


async def test_a_redirect_to_another_host_is_shown_and_not_followed(site: Site) -> None:
    fetcher = Fetcher()
    site.requests.clear()
    body, meta = await fetcher.ok(f"{site.url}/away")
    assert body == (
        f"{site.url}/away redirects (302) to https://elsewhere.example/landing, on another host. It was not "
        "followed: fetch that URL to read it (the user is asked again for the new host)."
    )
    assert meta == {"url": f"{site.url}/away", "redirect": "https://elsewhere.example/landing"}
    assert [path for path, _ in site.requests] == ["/away"]
    execution = ToolExecution(
        call_id="r", name="web_fetch", arguments={"url": f"{site.url}/away"}, services=fetcher.services
    )
    view = fetcher.tool.result_view({"url": ""}, (await fetcher.registry.execute(execution)).as_tool_result())
    assert isinstance(view, GenericResultView)
    assert (
        view.title == f"Fetch {site.url}/away: redirects to https://elsewhere.example/landing (not followed)"
    )


async def test_a_redirect_to_another_port_of_the_same_host_is_not_followed(site: Site) -> None:
    site.routes["/port"] = lambda h: h.redirect(f"http://127.0.0.1:{site.port + 1}/")
    _, meta = await Fetcher().ok(f"{site.url}/port")
    assert meta["redirect"] == f"http://127.0.0.1:{site.port + 1}/"


def _resolving(table: dict[str, Sequence[str]]) -> Any:
    looked_up: list[str] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        looked_up.append(host)
        return table[host]

    resolve.looked_up = looked_up  # type: ignore[attr-defined]
    return resolve


async def test_a_name_that_resolves_into_this_machine_or_its_network_is_refused(site: Site) -> None:
    for addresses in (
        ["127.0.0.1"],
        ["10.1.2.3"],
        ["169.254.169.254"],
        ["::1"],
        ["::ffff:127.0.0.1"],
        ["100.64.0.1"],
    ):
        resolve = _resolving({"docs.example.org": addresses})
        site.requests.clear()
        message = await Fetcher(resolve=resolve).error(
            f"http://docs.example.org:{site.port}/connection-pools.html"
        )
        assert message.startswith(f"docs.example.org resolves to {addresses[0]}, not a public address"), (
            message
        )
        assert site.requests == []


async def test_a_name_is_looked_up_once_and_only_its_public_addresses_are_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A rebinding name answers a public address and this machine's: only the public one is ever
    # connected to. (No packet leaves: the socket layer under the pool is replaced.)
    import httpcore2

    tried: list[str] = []

    async def connect_tcp(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        tried.append(host)
        raise httpcore2.ConnectError("Connection refused")

    monkeypatch.setattr(httpcore2.AnyIOBackend, "connect_tcp", connect_tcp)
    resolve = _resolving({"docs.example.org": ["93.184.215.14", "127.0.0.1", "2606:2800:21f:cb07::1"]})
    message = await Fetcher(resolve=resolve).error("https://docs.example.org/page")
    assert message == "could not connect to docs.example.org: Connection refused"
    assert tried == ["93.184.215.14", "2606:2800:21f:cb07::1"]
    assert resolve.looked_up == ["docs.example.org"]


async def test_addresses_and_localhost_in_the_url_are_reached_as_written(site: Site) -> None:
    resolve = _resolving({"localhost": ["127.0.0.1"]})
    body, _ = await Fetcher(resolve=resolve).ok(f"http://localhost:{site.port}/connection-pools.html")
    assert "# Connection pools" in body
    evil = _resolving({"localhost": ["10.0.0.1"]})
    assert (await Fetcher(resolve=evil).error(f"http://localhost:{site.port}/")).startswith(
        "localhost resolves to 10.0.0.1, not a public address"
    )


async def test_the_environments_proxy_carries_the_request(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    with _forwarding_proxy(site, seen) as proxy_port:
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy_port}")
        monkeypatch.setenv("no_proxy", "")
        # The name is never looked up here: the proxy resolves it (the site answers any Host).
        body, _ = await Fetcher(resolve=_resolving({})).ok(
            f"http://docs.example.org:{site.port}/connection-pools.html"
        )
    assert "# Connection pools" in body
    assert seen == [f"GET http://docs.example.org:{site.port}/connection-pools.html HTTP/1.1"]


def _forwarding_proxy(site: Site, seen: list[str]) -> Any:
    """A forwarding proxy that sends every request to ``site`` (whatever host it names)."""
    import contextlib
    import http.server
    import urllib.request

    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.requestline)
            path = self.path.split(str(site.port), 1)[1]
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(site.url + path) as answer:
                data = answer.read()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.headers["Content-Type"])
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

    @contextlib.contextmanager
    def running() -> Iterator[int]:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
            server.server_close()

    return running()
