"""``web_fetch``: a web page as Markdown, on a ``fetch`` card titled with its URL.

The tool declares ``kind="fetch"``: the permission modes key on that kind, so a fetch asks
first in every mode but ``bypass`` (a request leaves the machine, and a URL can carry what the
model read). What one fetch may reach is ``_web_http``'s business: the approved origin only,
its name resolved once to public addresses, redirects to another origin reported rather than
followed. What the model is given is ``_web_page``'s: HTML as Markdown, other text as it is.

A page longer than ``max_shown_bytes`` (100 KiB, what one ``read`` gives) reaches the model as
its first lines, with how much there is and where all of it was saved: a file in the session's
private folder (removed with the session), which ``read`` pages through.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from dsh_tools import (
    GenericCallView,
    GenericResultView,
    ToolCallView,
    ToolDefinition,
    ToolError,
    ToolExecution,
    ToolOutput,
    ToolResult,
    ToolResultView,
    define_tool,
    fenced,
    text,
    text_of,
)

from ._web_http import Fetched, Limits, Redirected, Resolver, fetch, parse_url
from ._web_page import page_text, shown_part

__all__ = ["WebFetchSettings", "web_fetch_tool"]


@dataclass(frozen=True, slots=True)
class WebFetchSettings:
    """What a fetch may take; put one in the session's ``Services`` to change the defaults."""

    max_bytes: int = 32 * 1024 * 1024
    """Bytes of a page read (after decompression); the rest is not downloaded."""
    max_shown_bytes: int = 100 * 1024
    """Bytes of the page's text the model gets at once (the rest is saved to a file)."""
    max_redirects: int = 5
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    """Seconds the server may stay silent."""
    total_timeout: float = 120.0
    pages_dir: str | None = None
    """Where long pages are saved (``None``: a private temporary folder, made on first use)."""
    resolve: Resolver | None = None
    """How host names are looked up (``None``: the system's resolver)."""

    @property
    def limits(self) -> Limits:
        return Limits(
            self.max_bytes, self.max_redirects, self.connect_timeout, self.read_timeout, self.total_timeout
        )


class _Pages:
    """A session's saved pages: a private folder, removed when the session's services close."""

    def __init__(self, settings: WebFetchSettings) -> None:
        self._settings = settings
        self._dir: str | None = None
        self._made = False
        self._count = 0

    def save(self, host: str, content: str) -> str:
        if self._dir is None:
            if self._settings.pages_dir is None:
                import tempfile

                self._dir, self._made = tempfile.mkdtemp(prefix="dsh-fetch-"), True
            else:
                os.makedirs(self._settings.pages_dir, mode=0o700, exist_ok=True)
                self._dir = self._settings.pages_dir
        self._count += 1
        path = os.path.join(self._dir, f"{self._count}-{host.replace(':', '_')}.md")
        with open(path, "x", encoding="utf-8") as file:
            file.write(content)
        return path

    def close(self) -> None:
        if self._made and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def _redirect_output(answer: Redirected) -> ToolOutput:
    message = (
        f"{answer.url} redirects ({answer.status}) to {answer.location}, on another host. It was not "
        "followed: fetch that URL to read it (the user is asked again for the new host)."
    )
    return ToolOutput([text(message)], meta={"url": answer.url, "redirect": answer.location})


async def _fetch(args: dict[str, Any], execution: ToolExecution) -> ToolOutput:
    settings = execution.services.get(WebFetchSettings) or WebFetchSettings()
    target = parse_url(args["url"])
    answer = await fetch(target, settings.limits, settings.resolve)
    if isinstance(answer, Redirected):
        return _redirect_output(answer)
    body, converted = await anyio.to_thread.run_sync(page_text, answer)
    pages = execution.services.setdefault(_Pages, lambda: _Pages(settings))
    return _page_output(answer, body, converted, settings, pages, target.host)


def _page_output(
    page: Fetched,
    body: str,
    converted: bool,
    settings: WebFetchSettings,
    pages: _Pages,
    host: str,
) -> ToolOutput:
    size = len(body.encode())
    what = f"{page.media_type or 'untyped'}, {_size(len(page.body))}" + (
        f"; {_size(size)} as Markdown" if converted else ""
    )
    notes = []
    if page.truncated:
        notes.append(f"The page is longer than {_size(settings.max_bytes)}: only that much of it was read.")
    shown, lines = shown_part(body, settings.max_shown_bytes)
    saved = None
    if len(shown) < len(body):
        try:
            saved = pages.save(host, body)
        except OSError as error:
            raise ToolError(f"the page is {_size(size)} and could not be saved: {error}") from None
        notes.append(
            f"Showing lines 1-{lines} ({_size(len(shown.encode()))} of {_size(size)}). All of it is in "
            f"{saved}: read it with offset={lines + 1} to go on."
        )
    content = f"{page.url} ({what})\n\n{shown.rstrip()}\n" + "".join(f"\n[{note}]" for note in notes)
    meta = {"url": page.url, "redirect": None, "bytes": len(page.body), "text_bytes": size, "saved": saved}
    return ToolOutput([text(content)], meta=meta)


def _present_call(args: dict[str, Any]) -> ToolCallView:
    url = args["url"]
    try:
        # The host as it will be asked for (an internationalised name in its ASCII form).
        url = parse_url(url).url
    except ToolError:
        pass
    return GenericCallView(title=f"Fetch {url}", kind="fetch", raw_input={"url": args["url"]})


def _present_result(args: dict[str, Any], result: ToolResult) -> ToolResultView | None:
    meta = result.meta if isinstance(result.meta, dict) and not result.is_error else None
    if meta is None:
        return None
    if meta.get("redirect"):
        return GenericResultView(
            title=f"Fetch {meta['url']}: redirects to {meta['redirect']} (not followed)",
            content=(text(text_of(result.content)),),
        )
    return GenericResultView(
        title=f"Fetch {meta['url']}", content=(text(fenced(text_of(result.content), "markdown")),)
    )


def web_fetch_tool() -> ToolDefinition:
    """The ``web_fetch`` tool (a fresh definition: register it once per registry)."""
    return define_tool(
        name="web_fetch",
        # A long page's result says itself how much there is and where all of it was saved.
        description="Fetch an http(s) URL as Markdown.",
        parameters={"url": {"type": "string", "required": True}},
        execute=_fetch,
        present_call=_present_call,
        present_result=_present_result,
        kind="fetch",
        read_only=True,
    )
