"""The knobs of the agent loop, shared by the turn and its tool steps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsh_acp._coalesce_policy import CoalescePolicy
from dsh_acp._config import MAX_MODEL_REQUESTS, MAX_TASK_REQUESTS

if TYPE_CHECKING:
    from dsh_acp.session._session import Session

__all__ = ["LoopSettings"]


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """Knobs of the loop; the golden kit pins the ones that vary between runs."""

    max_model_requests: int = MAX_MODEL_REQUESTS
    max_task_requests: int = MAX_TASK_REQUESTS
    """The limit of a subagent's own turn (the ``task`` tool): its requests count apart."""
    output_head: int = 32 * 1024
    output_tail: int = 32 * 1024
    """The model sees at most this much of each result's text (head and tail, marker between)."""
    coalesce: CoalescePolicy = field(default_factory=CoalescePolicy)
    system_prompt: Callable[[Session], str] | None = None
