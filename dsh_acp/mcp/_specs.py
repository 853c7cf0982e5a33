"""A client's MCP server configuration (ACP's ``McpServer`` objects), checked and parsed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsh_acp.wire._client_params import McpServerStdio

__all__ = ["HttpSpec", "StdioSpec", "parse_spec", "server_name"]


@dataclass(frozen=True, slots=True)
class StdioSpec:
    name: str
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class HttpSpec:
    name: str
    url: str
    headers: Mapping[str, str]


def server_name(raw: object) -> str:
    name = raw.get("name") if isinstance(raw, Mapping) else getattr(raw, "name", None)
    return name if isinstance(name, str) and name else "?"


def _pairs(raw: object, what: str) -> dict[str, str]:
    """``[{name, value}, …]`` (ACP's shape for env and headers) as a dict."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ValueError(f"{what} must be a list of {{name, value}}")
    out: dict[str, str] = {}
    for item in raw:
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise ValueError(f"{what} must be a list of {{name, value}} strings")
        out[item["name"]] = item["value"]
    return out


def parse_spec(raw: Mapping[str, Any] | McpServerStdio, *, http: bool) -> StdioSpec | HttpSpec:
    """One server's configuration, or ``ValueError`` saying what is wrong with it."""
    if isinstance(raw, McpServerStdio):
        return StdioSpec(raw.name, raw.command, tuple(raw.args), {e.name: e.value for e in raw.env})
    if not isinstance(raw, Mapping):
        raise ValueError("the configuration is not an object")
    kind = raw.get("type", "stdio")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError('"name" must be a non-empty string')
    if kind == "stdio":
        return _stdio_spec(name, raw)
    if kind == "http" and http:
        return _http_spec(name, raw)
    if kind in ("http", "sse"):
        raise ValueError(
            f"{kind} MCP servers are not supported by this agent (use stdio" + (" or http)" if http else ")")
        )
    raise ValueError(f"unknown transport type {kind!r}")


def _stdio_spec(name: str, raw: Mapping[str, Any]) -> StdioSpec:
    command = raw.get("command")
    args = raw.get("args") or []
    if not isinstance(command, str) or not command:
        raise ValueError('"command" must be a non-empty string')
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise ValueError('"args" must be a list of strings')
    return StdioSpec(name, command, tuple(args), _pairs(raw.get("env"), '"env"'))


def _http_spec(name: str, raw: Mapping[str, Any]) -> HttpSpec:
    url = raw.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError('"url" must be an http(s) URL')
    return HttpSpec(name, url, _pairs(raw.get("headers"), '"headers"'))
