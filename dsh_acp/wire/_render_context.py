"""What rendering depends on besides the views: the session's cwd and the client's abilities.

Its own module, free of the views (pydantic models), because every session holds one from the
moment it is made, long before anything is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsh_tools import BOUND_BYTES

from ._client_profile import ClientProfile, TerminalKey

__all__ = ["RenderContext"]


@dataclass(frozen=True, slots=True)
class RenderContext:
    """What rendering depends on besides the views: the session cwd and the client's abilities."""

    cwd: str
    terminal_key: TerminalKey | None = None
    """The ``_meta`` key for live terminal output, or ``None`` when the client has no terminals."""
    fallback_head: int = BOUND_BYTES
    fallback_tail: int = BOUND_BYTES
    """Budget of the fenced console fallback, like the text the model sees."""
    compaction: bool = False
    """Whether the client shows compactions (``session.compaction``); else a summary is a message."""
    notices: bool = False
    """Whether the client shows ``notice`` updates (``session.notices``)."""
    option_names: bool = False
    """Whether the client is known to show permission options' names (see ``ClientProfile``)."""

    @classmethod
    def for_profile(cls, cwd: str, profile: ClientProfile) -> RenderContext:
        """Rendering for a client of this profile (see ``_client_profile``)."""
        return cls(
            cwd=cwd,
            terminal_key=profile.terminal_key,
            compaction=profile.compaction,
            notices=profile.notices,
            option_names=profile.option_names,
        )
