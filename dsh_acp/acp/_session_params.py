"""Where a session works, read from ``session/new`` without pydantic.

An idle session is made on this path: the editor opens sessions it may never prompt, and loading
pydantic (its core, the models, the plugin search of the first validation: ~8 MiB and ~40 ms)
for them would cost every such agent. Params this reader does not take (MCP servers, anything
malformed) go to the pydantic model in ``wire._client_params``, which decides and words the error.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

__all__ = ["SessionPlace", "SessionWhere", "new_session_params"]


class SessionWhere(Protocol):
    """What making a session reads from its params (``SessionPlace`` or a ``wire._client_params`` model)."""

    @property
    def cwd(self) -> str: ...
    @property
    def mcp_servers(self) -> list[dict[str, Any]]: ...
    @property
    def additional_directories(self) -> list[str]: ...


class SessionPlace:
    """Plain ``session/new`` params: an absolute, normalised cwd and directories, no MCP servers."""

    __slots__ = ("additional_directories", "cwd", "mcp_servers")

    def __init__(self, cwd: str, additional_directories: list[str]) -> None:
        self.cwd = cwd
        self.mcp_servers: list[dict[str, Any]] = []
        self.additional_directories = additional_directories


def new_session_params(params: Any) -> SessionPlace | None:
    """``session/new`` params without MCP servers, checked by hand as ``NewSessionParams`` would
    (same result), else ``None``."""
    if type(params) is not dict or "mcp_servers" in params or "additional_directories" in params:
        return None
    cwd = params.get("cwd")
    if type(cwd) is not str or not os.path.isabs(cwd) or params.get("mcpServers", []) != []:
        return None
    directories = params.get("additionalDirectories", [])
    if type(directories) is not list or not all(type(d) is str and os.path.isabs(d) for d in directories):
        return None
    return SessionPlace(os.path.normpath(cwd), [os.path.normpath(d) for d in directories])
