"""Which ACP version's shapes a session draws in: ``dialect_of`` its ``RenderContext``."""

from __future__ import annotations

from ._dialect import Dialect
from ._render_context import RenderContext
from .v2._dialect import V2Dialect

__all__ = ["dialect_of"]

_DIALECTS: dict[int, Dialect] = {1: Dialect()}


def dialect_of(ctx: RenderContext) -> Dialect:
    """The shapes a session rendering with ``ctx`` sends (v2's load with its first session)."""
    found = _DIALECTS.get(ctx.protocol)
    if found is None:
        found = _DIALECTS[ctx.protocol] = V2Dialect()
    return found
