"""How a failed request is told: one line naming the API and the server's own words (kept whole up
to a bound, the middle cut, never the cause at the end), a context-size error read for the window
and the prompt's size, and the wait a server asks for before a retry."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from dsh_acp._safe_text import brief, one_line

__all__ = [
    "DETAIL_CHARS",
    "connect_reason",
    "content_type",
    "detail_line",
    "display_url",
    "error_detail",
    "http_failure",
    "overflow",
    "reason",
    "retry_after",
]

DETAIL_CHARS: Final = 1200
"""A server's error message is kept whole up to this; longer, its middle is cut (its cause, often
last, stays)."""


def http_failure(where: str, status: int, detail: str, model: str) -> str:
    said = f": {detail}" if detail else ""
    if status == 429:
        return f"the API at {where} is rate-limiting requests (HTTP 429{said})"
    if status >= 500:
        return f"the API at {where} failed (HTTP {status}{said})"
    if status == 404:
        return f"the API at {where} answered HTTP 404{said} (check the model name {model!r} and the base URL)"
    return f"the API at {where} refused the request (HTTP {status}{said})"


def error_detail(document: Any) -> str:
    """The message of an error document (``{"error": {"message": ...}}`` and its variants)."""
    if isinstance(document, dict):
        error = document.get("error", document)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail") or error.get("msg")
            if isinstance(message, str):
                return detail_line(message)
            return detail_line(brief(error, DETAIL_CHARS))
        if isinstance(error, str):
            return detail_line(error)
    return detail_line(brief(document, DETAIL_CHARS))


def detail_line(text: str) -> str:
    """A server's words on one line, the middle cut past ``DETAIL_CHARS``."""
    return one_line(text, DETAIL_CHARS, cut="middle")


_WINDOW_PATTERNS: Final = (
    # llama.cpp: "request (1045 tokens) exceeds the available context size (1024 tokens)"
    r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)",
    # OpenAI, vLLM: "maximum context length is 4096 tokens. However, you requested 5000 tokens"
    r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens",
)


def overflow(status: int, detail: str, document: Any) -> tuple[int | None, int | None] | None:
    """``(window, prompt tokens)`` when an error says the request did not fit the context."""
    error = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict) and (
        error.get("type") == "exceed_context_size_error" or error.get("code") == "context_length_exceeded"
    ):
        window, tokens = error.get("n_ctx"), error.get("n_prompt_tokens")
        if isinstance(window, int) and isinstance(tokens, int):
            return window, tokens
    if status != 400 and not error:
        return None
    llama = re.search(_WINDOW_PATTERNS[0], detail)
    if llama:
        return int(llama.group(2)), int(llama.group(1))
    openai = re.search(_WINDOW_PATTERNS[1], detail)
    if openai:
        return int(openai.group(1)), int(openai.group(2))
    if isinstance(error, dict) and error.get("type") == "exceed_context_size_error":
        return None, None
    return None


def reason(error: BaseException) -> str:
    return detail_line(str(error)) or type(error).__name__


def connect_reason(error: BaseException) -> str:
    """Why a connection could not be made, as the system says it ("connection refused", "name
    or service not known"), or TLS ("certificate verify failed: self-signed certificate"), rather
    than the HTTP client's text, which repeats the address the message already gives."""
    cause = getattr(error, "os_error", None)
    if cause is not None and hasattr(cause, "library"):  # ssl.SSLError: its errno is no reason
        verify = getattr(cause, "verify_message", None)
        if verify:
            return f"certificate verify failed: {verify}"
        said = getattr(cause, "reason", None)
        return said.lower().replace("_", " ") if isinstance(said, str) else reason(cause)
    if isinstance(cause, socket.gaierror) and cause.strerror:
        return cause.strerror.lower()
    if isinstance(cause, OSError) and cause.errno and cause.errno > 0:
        return os.strerror(cause.errno).lower()
    return reason(error)


def content_type(headers: Mapping[str, str]) -> str:
    value = headers.get("content-type", "")
    return value.split(";")[0].strip().lower()


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` in seconds or as
    an HTTP date), or ``None``."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    # Not at the top: the email package weighs on an idle agent (bench_agent's idle RSS), and a
    # date here is rare.
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def display_url(url: str) -> str:
    """The URL without credentials or query: it goes into messages the editor shows."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
