"""dsh_acp: an Agent Client Protocol agent that serves ``dsh_tools`` tools to editors.

What a user of the package needs is here:

- running the agent: ``serve`` (on a pair of byte streams), ``serve_stdio`` (on the process's
  stdio, as the ``dsh-acp`` command does) and ``build_config`` (the configuration that command
  builds from its arguments);
- its configuration: ``AgentConfig``, ``ModelChoice`` and ``counter_ids`` (deterministic ids);
- the model seam: the ``Model`` protocol, the ``ModelRequest`` it is sent, the messages of the
  conversation and the events a response streams, and ``ScriptedModel`` (a JSON script plays the
  model, for tests and demos);
- the errors a caller catches: ``ModelError`` and its kinds, ``ScriptError``, ``RpcError``,
  ``ConnectionClosed``;
- ``__version__``, from the installed package's metadata.

``dsh_acp.testing`` is the other public module: a client that drives the agent, schema checks and
golden wire scenarios. Everything else (the rooms ``rpc``, ``acp``, ``session`` ...) is private.

The names load on first use, each from the module that holds it: ``import dsh_acp`` imports
nothing more, so the agent's path to its ``initialize`` answer does not pay for the whole surface.
"""

from __future__ import annotations

from importlib import import_module

# Not ``typing.TYPE_CHECKING``: importing ``typing`` would be this module's only cost. Type
# checkers take any constant named ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from dsh_acp._config import AgentConfig, ModelChoice, counter_ids
    from dsh_acp.launch._flags import build_config
    from dsh_acp.launch._serve import serve
    from dsh_acp.launch._stdio import serve_stdio
    from dsh_acp.models._model import (
        ARGUMENTS_SHOWN,
        AssistantMessage,
        ContextMessage,
        ContextOverflow,
        Finish,
        FinishReason,
        Message,
        ModelAuthError,
        ModelError,
        ModelEvent,
        ModelRequest,
        ReasoningDelta,
        TextDelta,
        ToolCallArguments,
        ToolCallRequest,
        ToolCallStart,
        ToolResultMessage,
        Usage,
        UserMessage,
    )
    from dsh_acp.models._protocol import Model
    from dsh_acp.models._scripted import ScriptedModel, ScriptError, ScriptExhausted
    from dsh_acp.rpc._errors import ConnectionClosed, RpcError

    __version__: str

_HOME = {
    "AgentConfig": "dsh_acp._config",
    "ModelChoice": "dsh_acp._config",
    "counter_ids": "dsh_acp._config",
    "build_config": "dsh_acp.launch._flags",
    "serve": "dsh_acp.launch._serve",
    "serve_stdio": "dsh_acp.launch._stdio",
    "ARGUMENTS_SHOWN": "dsh_acp.models._model",
    "AssistantMessage": "dsh_acp.models._model",
    "ContextMessage": "dsh_acp.models._model",
    "ContextOverflow": "dsh_acp.models._model",
    "Finish": "dsh_acp.models._model",
    "FinishReason": "dsh_acp.models._model",
    "Message": "dsh_acp.models._model",
    "Model": "dsh_acp.models._protocol",
    "ModelAuthError": "dsh_acp.models._model",
    "ModelError": "dsh_acp.models._model",
    "ModelEvent": "dsh_acp.models._model",
    "ModelRequest": "dsh_acp.models._model",
    "ReasoningDelta": "dsh_acp.models._model",
    "TextDelta": "dsh_acp.models._model",
    "ToolCallArguments": "dsh_acp.models._model",
    "ToolCallRequest": "dsh_acp.models._model",
    "ToolCallStart": "dsh_acp.models._model",
    "ToolResultMessage": "dsh_acp.models._model",
    "Usage": "dsh_acp.models._model",
    "UserMessage": "dsh_acp.models._model",
    "ScriptError": "dsh_acp.models._scripted",
    "ScriptExhausted": "dsh_acp.models._scripted",
    "ScriptedModel": "dsh_acp.models._scripted",
    "ConnectionClosed": "dsh_acp.rpc._errors",
    "RpcError": "dsh_acp.rpc._errors",
}
"""Each public name's home: the module that holds it."""

__all__ = [
    "ARGUMENTS_SHOWN",
    "AgentConfig",
    "AssistantMessage",
    "ConnectionClosed",
    "ContextMessage",
    "ContextOverflow",
    "Finish",
    "FinishReason",
    "Message",
    "Model",
    "ModelAuthError",
    "ModelChoice",
    "ModelError",
    "ModelEvent",
    "ModelRequest",
    "ReasoningDelta",
    "RpcError",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedModel",
    "TextDelta",
    "ToolCallArguments",
    "ToolCallRequest",
    "ToolCallStart",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "build_config",
    "counter_ids",
    "serve",
    "serve_stdio",
]


def _installed_version() -> str:
    # importlib.metadata is slow to import: only a caller that asks for the version pays for it.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsh-acp")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from dsh_acp._version import VERSION

        return VERSION


if not TYPE_CHECKING:  # hidden from type checkers, which then know exactly the names above

    def __getattr__(name: str) -> Any:
        if name == "__version__":
            value = _installed_version()
        else:
            home = _HOME.get(name)
            if home is None:
                raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

            value = getattr(import_module(home), name)
        globals()[name] = value  # the next look-up is a plain one
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
