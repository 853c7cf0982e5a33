"""What rendering depends on besides the views: the session's cwd and the client's abilities.

Its own module, free of the views (pydantic models), because every session holds one from the
moment it is made, long before anything is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    nested_calls: bool = False
    """Whether the client shows a subagent's calls as cards under its task's card (else the
    task card lists them as its content)."""
    protocol: int = 1
    """The ACP version the client speaks: the wire shapes the same intents are drawn in."""
    as_lines: bool = False
    """A subagent's calls, drawn as lines of its task's card (a client that does not nest them)."""

    @property
    def live_output(self) -> bool:
        """Whether a command's output reaches the client as it prints (a v2 client's terminals,
        a v1 client's ``_meta`` convention), rather than once, at its end."""
        return self.terminal_key is not None or (self.protocol == 2 and not self.as_lines)

    @classmethod
    def for_profile(cls, cwd: str, profile: ClientProfile) -> RenderContext:
        """Rendering for a client of this profile (see ``_client_profile``)."""
        return cls(
            cwd=cwd,
            terminal_key=profile.terminal_key,
            compaction=profile.compaction,
            notices=profile.notices,
            option_names=profile.option_names,
            nested_calls=profile.nested_calls,
            protocol=profile.protocol,
        )

    def for_children(self) -> RenderContext:
        """How a subagent's calls are drawn: as this client's cards where it nests them, else
        without live terminals (they become lines of the task's card, never terminals); never
        as the session's compaction or notices (a subagent compacts its own conversation)."""
        terminal_key = self.terminal_key if self.nested_calls else None
        lines = not self.nested_calls
        return replace(self, terminal_key=terminal_key, compaction=False, notices=False, as_lines=lines)
