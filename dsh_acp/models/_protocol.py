"""The model seam: what the agent loop needs of a model, and what it may offer beyond that.

Its own module, holding no dataclass: the scripted model is checked before the agent answers
``initialize``, and the conversation's message and event classes (``_model``) load after it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from dsh_acp.rpc._errors import INTERNAL_ERROR, RpcError

if TYPE_CHECKING:
    from ._model import ModelEvent, ModelRequest

__all__ = ["Model", "checked_model"]


@runtime_checkable
class Model(Protocol):
    """Streams one response per request. Cancellation of the consuming task stops the stream.

    ``name``, ``accepts_images`` and ``stream`` are what every model has. The rest are optional
    capabilities with defaults here: a model that subclasses ``Model`` inherits them and overrides
    what it offers (a class that only matches the protocol structurally must define them all)."""

    @property
    def name(self) -> str:
        """A label for logs and pickers (e.g. ``openai:deepseek-chat``)."""
        ...

    @property
    def accepts_images(self) -> bool:
        """Whether ``image`` blocks may be sent (advertised as a prompt capability)."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Yield the response's events, ending with ``Finish``."""
        ...

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, when the model knows it (the usage meter and
        compaction use it; ``None``: the last usage report's, if any)."""
        return None

    @property
    def price_ref(self) -> tuple[str, str] | None:
        """``(model, provider)`` to look the model's prices up by in the price table (``None``:
        its cost is not known)."""
        return None

    @property
    def writes_titles(self) -> bool:
        """Whether the agent asks the model for a short session title after the first turn
        (otherwise the first prompt's words are the title)."""
        return False

    async def aclose(self) -> None:
        """Release what the model holds (its connections) when its session closes."""
        return


_MEMBERS = ("name", "accepts_images", "stream", "context_window", "price_ref", "writes_titles", "aclose")


def checked_model(model: object, choice: str) -> Model:
    """``model`` as the session's model. A configuration whose model is no ``Model`` (a class that
    does not subclass ``Model`` has no defaults for the optional capabilities) is an internal error
    whose message, unlike others, the editor shows: it names what the model lacks."""
    if isinstance(model, Model):
        return model
    missing = ", ".join(name for name in _MEMBERS if not hasattr(model, name))
    raise RpcError(
        INTERNAL_ERROR,
        f"the model {choice!r} ({type(model).__name__}) is not a dsh_acp.Model: it lacks {missing}; "
        "subclass dsh_acp.Model to inherit the optional capabilities' defaults",
    )
