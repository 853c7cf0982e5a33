"""web_fetch: what a documentation page costs to fetch and convert, and what reaches the model.

Serves the web_fetch golden's documentation page (a 42 KB Sphinx-like page written for the
tests, ``fixtures/wire/web_fetch_card/site/docs/connection-pools.html``) and a page of about
20 MB (its article repeated) from 127.0.0.1, and reports for each:

- the page's size and the size of its Markdown (what the model reads: all of it for the small
  page, the first 100 KiB for the large one, the rest in a saved file);
- the whole ``web_fetch`` call through ``ToolRegistry.execute`` (median of several; the first
  call, which imports the HTTP client and the converter, is reported apart);
- the conversion alone (html-to-markdown, in this process).

No target: these are the costs docs/clients.md states. Run: python bench/bench_web_fetch.py [--big]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from web_server import PAGES, serve

from dsh_tools import Services, TextBlock, ToolExecution, ToolRegistry
from reference_tools import WebFetchSettings, web_fetch_tool
from reference_tools._web_page import to_markdown


async def _fetch(
    registry: ToolRegistry, services: Services, url: str
) -> tuple[float, str, dict[str, object]]:
    start = time.perf_counter()
    result = await registry.execute(
        ToolExecution(call_id="b", name="web_fetch", arguments={"url": url}, services=services)
    )
    elapsed = (time.perf_counter() - start) * 1000
    assert not result.is_error, result.content
    text = "".join(block.text for block in result.content if isinstance(block, TextBlock))
    return elapsed, text, result.meta


async def main(big: bool, repeats: int) -> None:
    registry = ToolRegistry()
    registry.register(web_fetch_tool())
    with serve() as site, tempfile.TemporaryDirectory() as pages:
        services = Services(WebFetchSettings(pages_dir=pages))
        url = f"{site.url}/connection-pools.html"
        first, _, _ = await _fetch(registry, services, url)
        times = []
        for _ in range(repeats):
            elapsed, text, meta = await _fetch(registry, services, url)
            times.append(elapsed)
        html = (PAGES / "connection-pools.html").read_text(encoding="utf-8")
        convert = []
        for _ in range(repeats):
            start = time.perf_counter()
            markdown = to_markdown(html)
            convert.append((time.perf_counter() - start) * 1000)
        size, text_size = int(str(meta["bytes"])), int(str(meta["text_bytes"]))
        print(
            f"documentation page: {size:,} B of HTML -> {text_size:,} B of Markdown "
            f"({100 * text_size / size:.0f} %); the model reads {len(text.encode()):,} B"
        )
        print(
            f"  web_fetch call: first {first:.1f} ms (imports), then median {statistics.median(times):.1f} ms"
        )
        print(
            f"  conversion alone: median {statistics.median(convert):.1f} ms ({len(markdown):,} characters)"
        )
        if big:
            elapsed, text, meta = await _fetch(registry, services, f"{site.url}/big")
            saved = Path(str(meta["saved"]))
            rest = saved.stat().st_size  # noqa: ASYNC240 - a bench, after the timing
            print(
                f"20 MB page: {meta['bytes']:,} B of HTML -> {meta['text_bytes']:,} B of Markdown; the "
                f"model reads {len(text.encode()):,} B, the rest is in {saved.name} ({rest:,} B)"
            )
            print(f"  web_fetch call: {elapsed / 1000:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--big", action="store_true", help="also the 20 MB page (tens of seconds)")
    parser.add_argument("--repeats", type=int, default=9)
    options = parser.parse_args()
    anyio.run(main, options.big, options.repeats)
