"""What a model request cost, from the maintained price table of the ``genai-prices`` package
(imported on the first priced request, never on the way to ``initialize``); ``None`` when the
model or its provider is not in the table."""

from __future__ import annotations

import logging
from decimal import Decimal
from functools import lru_cache

__all__ = ["request_cost"]

_log = logging.getLogger("dsh_acp.cost")


@lru_cache(maxsize=64)
def _known(model: str, provider: str) -> bool:
    """Whether the table prices ``model`` at ``provider`` (asked once per pair)."""
    return request_price(model, provider, 0, 0) is not None


def request_price(model: str, provider: str, input_tokens: int, output_tokens: int) -> Decimal | None:
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # an installation without the table: no cost, no failure
        return None
    try:
        price = calc_price(
            Usage(input_tokens=input_tokens, output_tokens=output_tokens),
            model_ref=model,
            provider_id=provider,
        )
    except LookupError:
        return None
    except Exception as error:  # a table it cannot read must never fail a turn
        _log.warning("no price for %s at %s: %s", model, provider, error)
        return None
    return Decimal(price.total_price)


def request_cost(model: str, provider: str, input_tokens: int, output_tokens: int) -> Decimal | None:
    """The price in US dollars of one request, or ``None`` when it is unknown."""
    if not _known(model, provider):
        return None
    return request_price(model, provider, input_tokens, output_tokens)
