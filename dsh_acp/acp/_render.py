"""What rendering depends on besides the views: the session's cwd and the client's abilities.

Its own module, free of the views (pydantic models), because every session holds one from the
moment it is made, long before anything is rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._client_profile import ClientProfile, TerminalKey, client_profile

__all__ = ["RenderContext"]


@dataclass(frozen=True, slots=True)
class RenderContext:
    """What rendering depends on besides the views: the session cwd and the client's abilities."""

    cwd: str
    terminal_key: TerminalKey | None = None
    """The ``_meta`` key for live terminal output, or ``None`` when the client has no terminals."""
    fallback_head: int = 30 * 1024
    fallback_tail: int = 30 * 1024
    """Budget of the fenced console fallback, like the text the model sees."""
    compaction: bool = False
    """Whether the client shows compactions (``session.compaction``); else a summary is a message."""
    notices: bool = False
    """Whether the client shows ``notice`` updates (``session.notices``)."""

    @classmethod
    def for_profile(cls, cwd: str, profile: ClientProfile) -> RenderContext:
        """Rendering for a client of this profile (see ``_client_profile``)."""
        return cls(
            cwd=cwd, terminal_key=profile.terminal_key, compaction=profile.compaction, notices=profile.notices
        )

    @classmethod
    def for_client(
        cls,
        cwd: str,
        client_capabilities: Mapping[str, Any] | None,
        client_info: Mapping[str, Any] | None = None,
    ) -> RenderContext:
        """Rendering for a client from what it sent in ``initialize``."""
        return cls.for_profile(cwd, client_profile(client_capabilities, client_info))
