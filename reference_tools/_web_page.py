"""What ``web_fetch`` makes of a page: its text, with HTML converted to Markdown, and the part of
it the model reads at once.

The conversion is html-to-markdown's (a Rust converter behind a Python binding, MIT), chosen
over markdownify with BeautifulSoup, trafilatura and html2text by what each made of a saved
documentation page (``fixtures/wire/web_fetch_card/site/docs``): its fenced code blocks keep
their blank lines (trafilatura drops them), its tables are pipe tables, and its "aggressive"
preprocessing drops navigation, sidebars, footers, forms, scripts and styles without a selector
per site theme; it imports and converts fastest of them, and html2text is GPL (the figures are
in bench/README.md). It is imported on the first HTML page, in a worker thread with the
conversion.
"""

from __future__ import annotations

import codecs
import functools
import re
from typing import Any

from dsh_tools import ToolError

from ._web_http import Fetched

__all__ = ["HTML_TYPES", "page_text", "shown_part", "to_markdown"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_SNIFF = 8192
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_HTML_START = re.compile(
    rb"^\s*(<!--.*?-->\s*)*<(!doctype\s+html|html|head|body)\b", re.IGNORECASE | re.DOTALL
)
_DROPPED = ["a.headerlink", "[role=dialog]", "[aria-hidden=true]"]
"""Besides what the preprocessing drops: heading permalinks (the ``¶`` of Sphinx and MkDocs),
cookie banners and dialogs, and what a page hides from screen readers (icons)."""


@functools.cache
def _options() -> Any:
    import html_to_markdown

    return html_to_markdown.ConversionOptions(
        extract_metadata=False,
        inline_data_media="drop_element",  # icons inlined as data: URLs are noise to a model
        preprocessing=html_to_markdown.PreprocessingOptions(preset="aggressive"),
        exclude_selectors=_DROPPED,
    )


def to_markdown(html: str) -> str:
    """``html`` as Markdown, without its scripts, styles, navigation and page furniture."""
    import html_to_markdown

    try:
        result = html_to_markdown.convert(html, _options())
    except Exception as error:  # the converter's own errors name no common base
        raise ToolError(f"the page could not be converted to Markdown: {error}") from None
    return str(result.content).strip() + "\n"


def _charset(fetched: Fetched, html: bool) -> str:
    name = fetched.charset
    if name is None and fetched.body.startswith((codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        name = "utf-8-sig" if fetched.body.startswith(codecs.BOM_UTF8) else "utf-16"
    if name is None and html:
        found = _META_CHARSET.search(fetched.body[:_SNIFF])
        name = found[1].decode("ascii") if found else None
    try:
        return codecs.lookup(name or "utf-8").name
    except LookupError:
        return "utf-8"  # an unknown charset label: most pages are UTF-8 whatever they say


def page_text(fetched: Fetched) -> tuple[str, bool]:
    """The page's text and whether it was converted from HTML (Markdown and plain text are
    given as they are); ``ToolError`` for a body that is not text."""
    kind, head = fetched.media_type, fetched.body[:_SNIFF]
    html = kind in HTML_TYPES
    if not kind or kind.endswith("octet-stream"):  # the server did not say: the bytes do
        if b"\0" in head and not head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            raise ToolError(
                f"{fetched.url} is binary data, not a text page: web_fetch reads HTML, Markdown and text"
            )
        html = bool(_HTML_START.match(head))
    text = fetched.body.decode(_charset(fetched, html), errors="replace")
    return (to_markdown(text), True) if html else (text, False)


def shown_part(text: str, limit: int) -> tuple[str, int]:
    """The first whole lines of ``text`` within ``limit`` UTF-8 bytes (at least one line, cut if
    it alone is longer), and how many lines that is."""
    data = text.encode()
    if len(data) <= limit:
        return text, text.count("\n") + (0 if text.endswith("\n") else 1)
    cut = data.rfind(b"\n", 0, limit) + 1
    if cut <= 0:
        return data[:limit].decode(errors="ignore"), 1
    part = data[:cut].decode()
    return part, part.count("\n")
