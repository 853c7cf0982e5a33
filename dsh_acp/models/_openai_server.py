"""What a self-hosted server says about a model: its context window, and whether it sends
llama.cpp's prompt-processing progress. Asked once per base URL and model for the life of the
process, however many sessions use it.

- ``GET /models``, the OpenAI-compatible list: llama.cpp gives ``meta.n_ctx`` (the window of one
  slot, what a request gets), vLLM ``max_model_len``.
- Ollama's list says nothing of windows. Where the server looks like Ollama (its list says
  ``owned_by: library``, or it listens on Ollama's port, 11434), its native ``POST /api/show``
  does: the ``num_ctx`` of the model's parameters (what Ollama runs it with), else the model's
  own ``<architecture>.context_length``. Any other server is not asked: one request more only
  where it can answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import orjson

if TYPE_CHECKING:
    from ._http1_client import HttpClient
    from ._openai_http import Route

__all__ = ["SERVER_INFO", "ServerInfo", "ask_server", "models_info", "ollama_window"]

OLLAMA_PORT: Final = 11434


@dataclass(slots=True)
class ServerInfo:
    """What a server said about a model: its context window, and whether it sends llama.cpp's
    prompt-processing progress."""

    context_window: int | None = None
    progress: bool = False


SERVER_INFO: dict[tuple[str, str], ServerInfo] = {}
"""Per base URL and model, for the life of the process: asked once, however many sessions."""


_MAX_ANSWER: Final = 16 * 1024 * 1024
"""Bytes of a server's answer read at most: a list of models is kilobytes, even Ollama's."""


async def ask_server(http: HttpClient, route: Route, base_url: str, model: str) -> ServerInfo:
    """Ask the server what it knows of ``model`` (``ServerInfo()`` when it does not say)."""
    document = await _ask(http, route, "GET", f"{base_url}/models")
    info = models_info(document, model)
    if info.context_window is None and _looks_like_ollama(base_url, document):
        root = base_url.removesuffix("/").removesuffix("/v1")
        info.context_window = ollama_window(
            await _ask(http, route, "POST", f"{root}/api/show", orjson.dumps({"model": model}))
        )
    return info


async def _ask(http: HttpClient, route: Route, method: str, url: str, body: bytes = b"") -> Any:
    """The JSON document of a 200 answer, else None."""
    response = await http.request(
        method, url, route.headers, body, proxy=route.proxy, proxy_headers=route.proxy_headers
    )
    try:
        if response.status != 200:
            return None
        return orjson.loads(await response.read(_MAX_ANSWER))
    finally:
        response.release()


def models_info(document: Any, model: str) -> ServerInfo:
    """What ``GET /models`` says about ``model`` (or about the only model served)."""
    entry = _entry(document, model)
    if entry is None:
        return ServerInfo()
    meta = entry.get("meta")
    window: Any = None
    if isinstance(meta, dict):
        window = meta.get("n_ctx")  # llama.cpp: the window of one slot, what a request gets
    if not isinstance(window, int):
        window = entry.get("max_model_len")  # vLLM
    llama = entry.get("owned_by") == "llamacpp" or isinstance(meta, dict)
    return ServerInfo(window if isinstance(window, int) and window > 0 else None, progress=llama)


def ollama_window(document: Any) -> int | None:
    """The window in an answer of Ollama's ``/api/show``: the model's ``num_ctx`` parameter
    (``"num_ctx    8192"``, one parameter a line), else its architecture's ``context_length``."""
    if not isinstance(document, dict):
        return None
    parameters = document.get("parameters")
    if isinstance(parameters, str):
        for line in parameters.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == "num_ctx" and words[1].isdigit() and int(words[1]) > 0:
                return int(words[1])
    info = document.get("model_info")
    if not isinstance(info, dict):
        return None
    architecture = info.get("general.architecture")
    window = info.get(f"{architecture}.context_length")
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None


def _entry(document: Any, model: str) -> dict[str, Any] | None:
    entries = document.get("data") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [entry for entry in entries if isinstance(entry, dict)]
    return next((e for e in entries if e.get("id") == model), entries[0] if len(entries) == 1 else None)


def _looks_like_ollama(base_url: str, document: Any) -> bool:
    try:
        port = urlsplit(base_url).port
    except ValueError:
        port = None
    if port == OLLAMA_PORT:
        return True
    entries = document.get("data") if isinstance(document, dict) else None
    return isinstance(entries, list) and any(
        isinstance(entry, dict) and entry.get("owned_by") in ("library", "ollama") for entry in entries
    )
